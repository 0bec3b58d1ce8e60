#include "server/informer_service/informer_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/index.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Counts the informer's notifications so a test can wait until the cache
// has applied a mutation (the indexer is updated before handlers hear).
class EventCounter : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr&, bool) override { Bump(); }
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr&) override {
    Bump();
  }
  void OnDelete(const informer::ObjectPtr&, bool) override { Bump(); }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return count_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }

 private:
  void Bump() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

class InformerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // configmaps' source is never listed before the test starts it; "slow"
    // is a resource whose informer is never started (never synced).
    ListerWatcherFactory factory = [this](const ResourceConfig& config)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      auto source = std::make_unique<informer::FakeSource>();
      sources_[config.resource] = source.get();
      return source;
    };
    auto registry = InformerRegistry::Create(
        {{.resource = "pods", .label_indexes = {"app"}},
         {.resource = "configmaps"}},
        factory);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    auto unsynced = InformerRegistry::Create({{.resource = "pods"}}, factory);
    ASSERT_TRUE(unsynced.ok());
    unsynced_registry_ = *std::move(unsynced);
    // The factory above overwrote "pods": keep the started registry's.
    sources_["pods"] = static_cast<informer::FakeSource*>(
        (*registry_->Find("pods"))->source.get());
  }

  // Seeds pods, starts the registry and the gRPC server.
  void StartAll() {
    ASSERT_TRUE(registry_->Start().ok());
    InformerEntry* pods = *registry_->Find("pods");
    ASSERT_TRUE(pods->informer->AddEventHandler(&counter_).ok());
    for (const auto& entry : registry_->entries()) {
      ASSERT_TRUE(entry->informer->WaitForSync(absl::Seconds(30)));
    }
    service_ = std::make_unique<InformerService>(
        registry_.get(), InformerService::Options{}, &clock_);
    unsynced_service_ = std::make_unique<InformerService>(
        unsynced_registry_.get(), InformerService::Options{}, &clock_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    grpc::ServerBuilder builder2;
    builder2.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                              &unsynced_port_);
    builder2.RegisterService(unsynced_service_.get());
    unsynced_server_ = builder2.BuildAndStart();
    ASSERT_NE(unsynced_server_, nullptr);
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
    unsynced_stub_ = v1::Informer::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", unsynced_port_),
                            grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (unsynced_server_) unsynced_server_->Shutdown();
    registry_->Stop();
  }

  informer::FakeSource& pods() { return *sources_["pods"]; }

  // Adds pods ns-<i%2>/pod-<i> with app=web|api labels before StartAll.
  void SeedPods(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(pods()
                      .Add(absl::StrCat("ns-", i % 2),
                           absl::StrCat("pod-", 10000 + i),
                           {{"app", i % 3 == 0 ? "web" : "api"}})
                      .ok());
    }
  }

  grpc::Status List(const v1::ListRequest& req, v1::ListResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->List(&ctx, req, resp);
  }

  // Pages through a whole list; returns the names in order.
  std::vector<std::string> ListAll(v1::ListRequest req, int* pages) {
    std::vector<std::string> names;
    *pages = 0;
    while (true) {
      v1::ListResponse resp;
      grpc::Status st = List(req, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok()) break;
      ++*pages;
      for (const v1::Object& obj : resp.objects()) {
        auto parsed = informer::Object::Parse(obj.json());
        EXPECT_TRUE(parsed.ok());
        if (parsed.ok()) names.push_back((*parsed)->Key());
      }
      if (resp.continue_token().empty()) break;
      req.set_continue_token(resp.continue_token());
    }
    return names;
  }

  informer::FakeClock clock_;
  std::map<std::string, informer::FakeSource*> sources_;
  std::unique_ptr<InformerRegistry> registry_;
  std::unique_ptr<InformerRegistry> unsynced_registry_;
  EventCounter counter_;
  std::unique_ptr<InformerService> service_;
  std::unique_ptr<InformerService> unsynced_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> unsynced_server_;
  int port_ = 0;
  int unsynced_port_ = 0;
  std::unique_ptr<v1::Informer::Stub> stub_;
  std::unique_ptr<v1::Informer::Stub> unsynced_stub_;
};

TEST_F(InformerServiceTest, GetReturnsTheCachedObjectAsJson) {
  SeedPods(3);
  StartAll();
  grpc::ClientContext ctx;
  v1::GetRequest req;
  req.set_resource("pods");
  req.set_namespace_("ns-1");
  req.set_name("pod-10001");
  v1::GetResponse resp;
  grpc::Status st = stub_->Get(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(resp.object().has_json());
  auto obj = informer::Object::Parse(resp.object().json());
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ((*obj)->Key(), "ns-1/pod-10001");
  EXPECT_EQ(*(*obj)->Label("app"), "api");
}

TEST_F(InformerServiceTest, UnknownEncodingIsInvalidArgumentNotTheDefault) {
  SeedPods(1);
  StartAll();
  grpc::ClientContext ctx;
  v1::GetRequest req;
  req.set_resource("pods");
  req.set_namespace_("ns-0");
  req.set_name("pod-10000");
  // A value a newer client might send.
  req.set_encoding(static_cast<v1::Encoding>(7));
  v1::GetResponse resp;
  grpc::Status st = stub_->Get(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), ::testing::HasSubstr("encoding"));
}

TEST_F(InformerServiceTest, GetWithStructEncodingReturnsAStruct) {
  SeedPods(1);
  StartAll();
  grpc::ClientContext ctx;
  v1::GetRequest req;
  req.set_resource("pods");
  req.set_namespace_("ns-0");
  req.set_name("pod-10000");
  req.set_encoding(v1::ENCODING_STRUCT);
  v1::GetResponse resp;
  ASSERT_TRUE(stub_->Get(&ctx, req, &resp).ok());
  ASSERT_TRUE(resp.object().has_struct_());
  const auto& metadata =
      resp.object().struct_().fields().at("metadata").struct_value();
  EXPECT_EQ(metadata.fields().at("name").string_value(), "pod-10000");
  EXPECT_EQ(metadata.fields()
                .at("labels")
                .struct_value()
                .fields()
                .at("app")
                .string_value(),
            "web");
}

TEST_F(InformerServiceTest, GetMissingObjectIsNotFound) {
  StartAll();
  grpc::ClientContext ctx;
  v1::GetRequest req;
  req.set_resource("pods");
  req.set_namespace_("ns-0");
  req.set_name("nope");
  v1::GetResponse resp;
  grpc::Status st = stub_->Get(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("ns-0/nope"));
}

TEST_F(InformerServiceTest, UnknownResourceIsNotFoundNamingTheAvailable) {
  StartAll();
  grpc::ClientContext ctx;
  v1::GetRequest req;
  req.set_resource("secrets");
  req.set_name("x");
  v1::GetResponse resp;
  grpc::Status st = stub_->Get(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("available: configmaps, pods"));
}

TEST_F(InformerServiceTest, QueriesBeforeSyncAreUnavailableUnlessStaleAllowed) {
  StartAll();
  grpc::ClientContext ctx;
  v1::ListRequest req;
  req.set_resource("pods");
  v1::ListResponse resp;
  grpc::Status st = unsynced_stub_->List(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(st.error_message(), HasSubstr("not synced"));

  grpc::ClientContext ctx2;
  req.set_allow_stale(true);
  st = unsynced_stub_->List(&ctx2, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.objects_size(), 0);
}

TEST_F(InformerServiceTest, BadLabelSelectorIsInvalidArgument) {
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_label_selector("app in (web");
  v1::ListResponse resp;
  grpc::Status st = List(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("missing ')'"));
}

TEST_F(InformerServiceTest, ListFiltersByNamespaceAndLabelSelector) {
  SeedPods(9);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_namespace_("ns-0");
  req.set_label_selector("app=web");
  int pages = 0;
  // i in {0, 3, 6} have app=web; of those, 0 and 6 are in ns-0.
  EXPECT_THAT(ListAll(req, &pages),
              ElementsAre("ns-0/pod-10000", "ns-0/pod-10006"));
  EXPECT_EQ(pages, 1);
}

TEST_F(InformerServiceTest, ListDefaultsToPagesOf500InKeyOrder) {
  SeedPods(1203);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  v1::ListResponse first;
  ASSERT_TRUE(List(req, &first).ok());
  EXPECT_EQ(first.objects_size(), 500);
  EXPECT_EQ(first.remaining_item_count(), 703);
  EXPECT_FALSE(first.continue_token().empty());
  EXPECT_FALSE(first.resource_version().empty());

  int pages = 0;
  std::vector<std::string> names = ListAll(req, &pages);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(names.size(), 1203u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 1203u);
}

TEST_F(InformerServiceTest, PagingReadsAConsistentSnapshotUnderChurn) {
  SeedPods(10);
  StartAll();
  const int seen = counter_.count();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_limit(4);
  v1::ListResponse first;
  ASSERT_TRUE(List(req, &first).ok());
  ASSERT_EQ(first.objects_size(), 4);

  // Change the cache under the paged list: delete a later object, add one,
  // modify one.
  ASSERT_TRUE(pods().Delete("ns-1", "pod-10009").ok());
  ASSERT_TRUE(pods().Add("ns-1", "pod-10010").ok());
  ASSERT_TRUE(pods().Modify("ns-0", "pod-10008", {{"app", "changed"}}).ok());
  ASSERT_TRUE(counter_.WaitFor(seen + 3));
  ASSERT_EQ((*registry_->Find("pods"))->informer->GetIndexer().Size(), 10u);

  std::vector<std::string> names;
  v1::ListResponse page = first;
  while (true) {
    for (const v1::Object& obj : page.objects()) {
      auto parsed = informer::Object::Parse(obj.json());
      ASSERT_TRUE(parsed.ok());
      names.push_back((*parsed)->Key());
      if ((*parsed)->name() == "pod-10008") {
        EXPECT_EQ(*(*parsed)->Label("app"), "api") << "snapshot changed";
      }
      EXPECT_EQ(page.resource_version(), first.resource_version());
    }
    if (page.continue_token().empty()) break;
    req.set_continue_token(page.continue_token());
    page.Clear();
    grpc::Status st = List(req, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(names.size(), 10u);
  EXPECT_THAT(names, ::testing::Contains("ns-1/pod-10009"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("ns-1/pod-10010")));

  // A new list sees the new state.
  req.clear_continue_token();
  int pages = 0;
  std::vector<std::string> fresh = ListAll(req, &pages);
  EXPECT_THAT(fresh, ::testing::Contains("ns-1/pod-10010"));
  EXPECT_THAT(fresh, ::testing::Not(::testing::Contains("ns-1/pod-10009")));
}

TEST_F(InformerServiceTest, PagesStayUnderTheByteCap) {
  SeedPods(50);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_max_page_bytes(4000);
  int pages = 0;
  size_t total = 0;
  while (true) {
    v1::ListResponse resp;
    ASSERT_TRUE(List(req, &resp).ok());
    ++pages;
    EXPECT_LE(resp.ByteSizeLong(), 4000u);
    EXPECT_GT(resp.objects_size(), 0);
    total += resp.objects_size();
    if (resp.continue_token().empty()) break;
    req.set_continue_token(resp.continue_token());
  }
  EXPECT_EQ(total, 50u);
  EXPECT_GT(pages, 2);
}

TEST_F(InformerServiceTest, ContinueTokenMustKeepTheFilters) {
  SeedPods(10);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_limit(2);
  v1::ListResponse first;
  ASSERT_TRUE(List(req, &first).ok());
  req.set_continue_token(first.continue_token());
  req.set_namespace_("ns-1");
  v1::ListResponse resp;
  grpc::Status st = List(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("filters"));

  req.set_continue_token("not a token!");
  st = List(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("malformed continue_token"));
}

TEST_F(InformerServiceTest, ContinueTokenOfAnotherRunIsRejected) {
  SeedPods(10);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_limit(2);
  v1::ListResponse first;
  ASSERT_TRUE(List(req, &first).ok());
  // Another service instance stands for a restarted sidecar.
  InformerService other(registry_.get(), InformerService::Options{}, &clock_);
  req.set_continue_token(first.continue_token());
  grpc::ServerContext ctx;
  v1::ListResponse resp;
  grpc::Status st = other.List(&ctx, &req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("earlier run"));
}

TEST_F(InformerServiceTest, ContinueTokenExpiresAfterTheSnapshotTtl) {
  SeedPods(10);
  StartAll();
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_limit(2);
  v1::ListResponse first;
  ASSERT_TRUE(List(req, &first).ok());
  req.set_continue_token(first.continue_token());
  v1::ListResponse second;
  clock_.Advance(absl::Minutes(4));
  ASSERT_TRUE(List(req, &second).ok()) << "used within the TTL";
  req.set_continue_token(second.continue_token());
  clock_.Advance(absl::Minutes(5));
  v1::ListResponse third;
  grpc::Status st = List(req, &third);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("expired"));
}

TEST_F(InformerServiceTest, ByIndexAndListIndexValues) {
  SeedPods(6);
  StartAll();
  grpc::ClientContext ctx;
  v1::ByIndexRequest req;
  req.set_resource("pods");
  req.set_index_name(informer::LabelIndexName("app"));
  req.set_index_value("web");
  v1::ByIndexResponse resp;
  ASSERT_TRUE(stub_->ByIndex(&ctx, req, &resp).ok());
  std::vector<std::string> names;
  for (const v1::Object& obj : resp.objects()) {
    names.push_back((*informer::Object::Parse(obj.json()))->Key());
  }
  EXPECT_THAT(names, ElementsAre("ns-0/pod-10000", "ns-1/pod-10003"));

  grpc::ClientContext ctx2;
  v1::ListIndexValuesRequest values_req;
  values_req.set_resource("pods");
  values_req.set_index_name("namespace");
  v1::ListIndexValuesResponse values;
  ASSERT_TRUE(stub_->ListIndexValues(&ctx2, values_req, &values).ok());
  EXPECT_THAT(values.values(), ElementsAre("ns-0", "ns-1"));
}

TEST_F(InformerServiceTest, UnknownIndexIsInvalidArgumentListingIndexes) {
  StartAll();
  grpc::ClientContext ctx;
  v1::ByIndexRequest req;
  req.set_resource("pods");
  req.set_index_name("label:tier");
  v1::ByIndexResponse resp;
  grpc::Status st = stub_->ByIndex(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              HasSubstr("no index \"label:tier\"; available: label:app, "
                        "namespace, ownerUid"));

  grpc::ClientContext ctx2;
  v1::ListIndexValuesRequest values_req;
  values_req.set_resource("pods");
  values_req.set_index_name("bogus");
  v1::ListIndexValuesResponse values;
  st = stub_->ListIndexValues(&ctx2, values_req, &values);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(InformerServiceTest, ListResourcesReportsEveryInformer) {
  SeedPods(4);
  StartAll();
  grpc::ClientContext ctx;
  v1::ListResourcesResponse resp;
  ASSERT_TRUE(
      stub_->ListResources(&ctx, v1::ListResourcesRequest(), &resp).ok());
  ASSERT_EQ(resp.resources_size(), 2);
  const v1::ResourceStatus& cms = resp.resources(0);
  const v1::ResourceStatus& pods = resp.resources(1);
  EXPECT_EQ(cms.resource(), "configmaps");
  EXPECT_TRUE(cms.synced());
  EXPECT_EQ(cms.object_count(), 0);
  EXPECT_EQ(pods.resource(), "pods");
  EXPECT_TRUE(pods.synced());
  EXPECT_EQ(pods.object_count(), 4);
  EXPECT_EQ(pods.last_resource_version(),
            (*registry_->Find("pods"))->informer->LastSyncResourceVersion());
  EXPECT_FALSE(pods.last_resource_version().empty());
  EXPECT_EQ(pods.last_error(), "");
  EXPECT_EQ(pods.streams(), 0);
  EXPECT_THAT(pods.indexes(),
              ElementsAre("label:app", "namespace", "ownerUid"));
}

// A source of fixed objects whose watch stays quiet until stopped.
class StaticSource : public informer::ListerWatcher {
 public:
  explicit StaticSource(std::vector<informer::ObjectPtr> objects)
      : objects_(std::move(objects)) {}
  absl::StatusOr<informer::ObjectList> List(
      const informer::ListOptions&) override {
    informer::ObjectList list;
    list.items = objects_;
    list.resource_version = "100";
    return list;
  }
  absl::StatusOr<std::unique_ptr<informer::WatchStream>> Watch(
      const informer::WatchOptions&) override {
    return std::make_unique<QuietStream>();
  }

 private:
  class QuietStream : public informer::WatchStream {
   public:
    absl::Status Next(informer::WatchEvent*) override {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&stopped_));
      return absl::CancelledError("stopped");
    }
    void Stop() override {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
    }

   private:
    absl::Mutex mu_;
    bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  };
  const std::vector<informer::ObjectPtr> objects_;
};

TEST(InformerServiceLargeObjectsTest, DefaultPagesStayUnderFourMiB) {
  // 24 objects of ~600 KiB: 14 MiB in all, so the 500-object default limit
  // alone would produce a page no default gRPC client can receive.
  std::vector<informer::ObjectPtr> objects;
  const std::string blob(600 << 10, 'x');
  for (int i = 0; i < 24; ++i) {
    auto obj = informer::Object::Parse(absl::StrCat(
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-)",
        100 + i, R"(","namespace":"big","resourceVersion":"5"},"data":{"b":")",
        blob, R"("}})"));
    ASSERT_TRUE(obj.ok()) << obj.status();
    objects.push_back(*std::move(obj));
  }
  auto registry = InformerRegistry::Create(
      {{.resource = "configmaps"}},
      [&objects](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        return std::make_unique<StaticSource>(objects);
      });
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE((*registry)->Start().ok());
  ASSERT_TRUE(
      (*registry)->entries()[0]->informer->WaitForSync(absl::Seconds(30)));
  InformerService service(registry->get(), {});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  // A client with gRPC's default 4 MiB receive limit.
  auto stub = v1::Informer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  v1::ListRequest req;
  req.set_resource("configmaps");
  int pages = 0;
  int total = 0;
  while (true) {
    grpc::ClientContext ctx;
    v1::ListResponse resp;
    grpc::Status st = stub->List(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ++pages;
    EXPECT_LE(resp.ByteSizeLong(), size_t{4} << 20);
    total += resp.objects_size();
    if (resp.continue_token().empty()) break;
    req.set_continue_token(resp.continue_token());
  }
  EXPECT_EQ(total, 24);
  EXPECT_GE(pages, 4);

  // Raising the cap (and the client's limit) gets everything in one page.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto big_stub = v1::Informer::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                grpc::InsecureChannelCredentials(), args));
  req.clear_continue_token();
  req.set_max_page_bytes(32 << 20);
  grpc::ClientContext ctx;
  v1::ListResponse all;
  ASSERT_TRUE(big_stub->List(&ctx, req, &all).ok());
  EXPECT_EQ(all.objects_size(), 24);
  EXPECT_TRUE(all.continue_token().empty());
  server->Shutdown();
  (*registry)->Stop();
}

// The server's page cap (--max_list_page_bytes) bounds what a request may
// ask for.
TEST(InformerServiceLargeObjectsTest, ServerCapBoundsRequestedPageBytes) {
  std::vector<informer::ObjectPtr> objects;
  const std::string blob(600 << 10, 'x');
  for (int i = 0; i < 8; ++i) {
    auto obj = informer::Object::Parse(absl::StrCat(
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-)",
        100 + i, R"(","namespace":"big","resourceVersion":"5"},"data":{"b":")",
        blob, R"("}})"));
    ASSERT_TRUE(obj.ok()) << obj.status();
    objects.push_back(*std::move(obj));
  }
  auto registry = InformerRegistry::Create(
      {{.resource = "configmaps"}},
      [&objects](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        return std::make_unique<StaticSource>(objects);
      });
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE((*registry)->Start().ok());
  ASSERT_TRUE(
      (*registry)->entries()[0]->informer->WaitForSync(absl::Seconds(30)));
  InformerService::Options options;
  options.max_page_bytes = 2 << 20;
  InformerService service(registry->get(), options);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Informer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  v1::ListRequest req;
  req.set_resource("configmaps");
  req.set_max_page_bytes(32 << 20);
  int pages = 0;
  int total = 0;
  while (true) {
    grpc::ClientContext ctx;
    v1::ListResponse resp;
    grpc::Status st = stub->List(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ++pages;
    EXPECT_LE(resp.ByteSizeLong(), size_t{2} << 20);
    total += resp.objects_size();
    if (resp.continue_token().empty()) break;
    req.set_continue_token(resp.continue_token());
  }
  EXPECT_EQ(total, 8);
  EXPECT_GE(pages, 3);
  server->Shutdown();
  (*registry)->Stop();
}

TEST_F(InformerServiceTest, WatchBeforeSyncWaitsThenSendsInitialState) {
  StartAll();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchRequest req;
  req.set_resource("pods");
  auto reader = unsynced_stub_->Watch(&ctx, req);
  // The call is accepted and parked until the informer syncs (unary
  // queries meanwhile stay UNAVAILABLE).
  unsynced_service_->watch_hub().WaitForWaitingStreams(1);
  {
    grpc::ClientContext get_ctx;
    v1::GetRequest get;
    get.set_resource("pods");
    get.set_name("x");
    v1::GetResponse resp;
    EXPECT_EQ(unsynced_stub_->Get(&get_ctx, get, &resp).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  informer::FakeSource* source = static_cast<informer::FakeSource*>(
      (*unsynced_registry_->Find("pods"))->source.get());
  ASSERT_TRUE(source->Add("default", "late", {{"app", "web"}}).ok());
  ASSERT_TRUE(unsynced_registry_->Start().ok());
  v1::WatchResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  ASSERT_EQ(resp.events_size(), 2);
  EXPECT_EQ(resp.events(0).type(), v1::EVENT_TYPE_ADDED);
  EXPECT_TRUE(resp.events(0).initial());
  EXPECT_THAT(resp.events(0).object().json(), HasSubstr("\"late\""));
  EXPECT_EQ(resp.events(1).type(), v1::EVENT_TYPE_INITIAL_STATE_DONE);
  unsynced_service_->watch_hub().WaitForWaitingStreams(0);
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  unsynced_registry_->Stop();
}

}  // namespace
}  // namespace server

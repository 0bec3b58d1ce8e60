// The stale state end to end inside the sidecar's services: an informer
// started from a snapshot while its source fails (the API server cannot be
// reached) is served at once, marked stale, and turns fresh, with the
// changes since the snapshot as ordinary events, once the source answers.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "server/informer_service/informer_service.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Polls `cond` until true or 30 s of real time passed.
template <typename Cond>
bool Eventually(Cond cond) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

class StaleStateTest : public ::testing::Test {
 protected:
  // Seeds the source with ns/a..ns/d, keeps that state as the snapshot,
  // then changes the source behind it: b modified, d deleted, e added.
  void SetUpRegistry(bool serve_stale) {
    ListerWatcherFactory factory = [this](const ResourceConfig&)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      auto source = std::make_unique<informer::FakeSource>();
      source_ = source.get();
      return source;
    };
    InformerRegistry::Options options;
    options.serve_stale_on_start = serve_stale;
    auto registry = InformerRegistry::Create({{.resource = "configmaps"}},
                                             factory, std::move(options));
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    for (const char* name : {"a", "b", "c", "d"}) {
      ASSERT_TRUE(source_->Add("ns", name).ok());
    }
    std::vector<informer::ObjectPtr> snapshot;
    for (const auto& [key, obj] : source_->Snapshot()) snapshot.push_back(obj);
    const std::string rv = source_->CurrentResourceVersion();
    ASSERT_TRUE(source_->Modify("ns", "b", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_->Delete("ns", "d").ok());
    ASSERT_TRUE(source_->Add("ns", "e").ok());
    entry_ = *registry_->Find("configmaps");
    ASSERT_TRUE(entry_->informer->SetInitialState(snapshot, rv).ok());
    // What the snapshot loader says (the seam): written an hour ago.
    entry_->stale.MarkLoadedFromSnapshot(clock_.Now() - absl::Hours(1));
    // The API server cannot be reached.
    source_->FailLists(1000000, absl::UnavailableError("connection refused"));
    source_->FailWatches(1000000, absl::UnavailableError("connection refused"));
    ASSERT_TRUE(registry_->Start().ok());
    service_ = std::make_unique<InformerService>(
        registry_.get(), InformerService::Options{}, &clock_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    // Failed at least once: the informer has tried the API server.
    ASSERT_TRUE(Eventually(
        [&] { return entry_->informer->GetReflectorCounters().errors > 0; }));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (registry_) registry_->Stop();
  }

  void Heal() {
    source_->FailLists(0, absl::OkStatus());
    source_->FailWatches(0, absl::OkStatus());
  }

  v1::ResourceStatus Status() {
    grpc::ClientContext ctx;
    v1::ListResourcesResponse resp;
    EXPECT_TRUE(
        stub_->ListResources(&ctx, v1::ListResourcesRequest(), &resp).ok());
    return resp.resources_size() == 1 ? resp.resources(0)
                                      : v1::ResourceStatus();
  }

  grpc::StatusCode GetCode(const std::string& name) {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_resource("configmaps");
    req.set_namespace_("ns");
    req.set_name(name);
    v1::GetResponse resp;
    return stub_->Get(&ctx, req, &resp).error_code();
  }

  informer::FakeClock clock_;
  informer::FakeSource* source_ = nullptr;
  std::unique_ptr<InformerRegistry> registry_;
  InformerRef entry_;
  std::unique_ptr<InformerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

// "TYPE key" or "TYPE" for a marker, with " initial" / " stale".
std::string Describe(const v1::Event& e) {
  std::string out = v1::EventType_Name(e.type()).substr(11);
  if (e.has_object()) {
    auto obj = informer::Object::Parse(e.object().json());
    if (obj.ok()) absl::StrAppend(&out, " ", (*obj)->Key());
  }
  if (e.initial()) absl::StrAppend(&out, " initial");
  if (e.stale()) absl::StrAppend(&out, " stale");
  return out;
}

TEST_F(StaleStateTest, ServedStaleThenFreshWithTheChangesAsEvents) {
  SetUpRegistry(/*serve_stale=*/true);
  ASSERT_TRUE(Eventually([&] { return ObserveStale(*entry_).stale; }));
  v1::ResourceStatus status = Status();
  EXPECT_TRUE(status.stale());
  EXPECT_FALSE(status.synced());
  EXPECT_EQ(status.object_count(), 4);
  EXPECT_EQ(status.stale_age().seconds(), 3600);
  // Queries answer from the snapshot without allow_stale.
  EXPECT_EQ(GetCode("d"), grpc::StatusCode::OK);

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchRequest req;
  req.set_resource("configmaps");
  auto reader = stub_->Watch(&ctx, req);
  std::vector<std::string> got;
  v1::WatchResponse resp;
  while (got.empty() || got.back().rfind("INITIAL_STATE_DONE", 0) != 0) {
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) got.push_back(Describe(e));
  }
  EXPECT_THAT(got, ElementsAre("ADDED ns/a initial", "ADDED ns/b initial",
                               "ADDED ns/c initial", "ADDED ns/d initial",
                               "INITIAL_STATE_DONE stale"));

  Heal();
  got.clear();
  std::string last_token;
  while (got.empty() || got.back() != "FRESH") {
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_BOOKMARK) continue;
      got.push_back(Describe(e));
      EXPECT_FALSE(e.resume_token().empty());
      last_token = e.resume_token();
    }
  }
  // The changes since the snapshot as ordinary events, then FRESH.
  EXPECT_THAT(
      got, ElementsAre("MODIFIED ns/b", "DELETED ns/d", "ADDED ns/e", "FRESH"));
  status = Status();
  EXPECT_FALSE(status.stale());
  EXPECT_TRUE(status.synced());
  EXPECT_FALSE(status.has_stale_age());
  EXPECT_EQ(GetCode("d"), grpc::StatusCode::NOT_FOUND);
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }

  // A stream resuming after the turn hears FRESH again (it may have
  // missed it), with nothing else.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(60));
  req.set_resume_token(last_token);
  auto resumed = stub_->Watch(&ctx2, req);
  ASSERT_TRUE(resumed->Read(&resp));
  ASSERT_GE(resp.events_size(), 1);
  EXPECT_EQ(Describe(resp.events(0)), "FRESH");
  ctx2.TryCancel();
  while (resumed->Read(&resp)) {
  }
}

TEST_F(StaleStateTest, WithoutServeStaleTheSameOutageWaitsForTheSync) {
  SetUpRegistry(/*serve_stale=*/false);
  EXPECT_FALSE(ObserveStale(*entry_).stale);
  v1::ResourceStatus status = Status();
  EXPECT_FALSE(status.stale());
  EXPECT_FALSE(status.synced());
  EXPECT_EQ(GetCode("a"), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchRequest req;
  req.set_resource("configmaps");
  auto reader = stub_->Watch(&ctx, req);
  service_->watch_hub().WaitForWaitingStreams(1);
  Heal();
  std::vector<std::string> got;
  v1::WatchResponse resp;
  while (got.empty() || got.back().rfind("INITIAL_STATE_DONE", 0) != 0) {
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) got.push_back(Describe(e));
  }
  // Today's behaviour: the caught-up state, never stale, no FRESH.
  EXPECT_THAT(got, ElementsAre("ADDED ns/a initial", "ADDED ns/b initial",
                               "ADDED ns/c initial", "ADDED ns/e initial",
                               "INITIAL_STATE_DONE"));
  EXPECT_TRUE(Status().synced());
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
}

TEST_F(StaleStateTest, AStreamWaitingBeforeTheFailureIsServedStale) {
  // Not stale before an error: streams wait as for any sync.
  ListerWatcherFactory factory = [this](const ResourceConfig&)
      -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
    auto source = std::make_unique<informer::FakeSource>();
    source_ = source.get();
    return source;
  };
  InformerRegistry::Options options;
  options.serve_stale_on_start = true;
  auto registry = InformerRegistry::Create({{.resource = "configmaps"}},
                                           factory, std::move(options));
  ASSERT_TRUE(registry.ok());
  registry_ = *std::move(registry);
  ASSERT_TRUE(source_->Add("ns", "a").ok());
  entry_ = *registry_->Find("configmaps");
  ASSERT_TRUE(entry_->informer
                  ->SetInitialState({source_->Snapshot().begin()->second},
                                    source_->CurrentResourceVersion())
                  .ok());
  entry_->stale.MarkLoadedFromSnapshot(clock_.Now());
  EXPECT_FALSE(ObserveStale(*entry_).stale);
  service_ = std::make_unique<InformerService>(
      registry_.get(), InformerService::Options{}, &clock_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  stub_ = v1::Informer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchRequest req;
  req.set_resource("configmaps");
  auto reader = stub_->Watch(&ctx, req);
  service_->watch_hub().WaitForWaitingStreams(1);
  // Now the API server is down: the waiting stream gets the snapshot.
  source_->FailLists(1000000, absl::UnavailableError("connection refused"));
  source_->FailWatches(1000000, absl::UnavailableError("connection refused"));
  ASSERT_TRUE(registry_->Start().ok());
  std::vector<std::string> got;
  v1::WatchResponse resp;
  while (got.empty() || got.back().rfind("INITIAL_STATE_DONE", 0) != 0) {
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) got.push_back(Describe(e));
  }
  EXPECT_THAT(got,
              ElementsAre("ADDED ns/a initial", "INITIAL_STATE_DONE stale"));
  Heal();
  got.clear();
  while (got.empty() || got.back() != "FRESH") {
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() != v1::EVENT_TYPE_BOOKMARK) got.push_back(Describe(e));
    }
  }
  EXPECT_THAT(got, ElementsAre("FRESH"));
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
}

}  // namespace
}  // namespace server

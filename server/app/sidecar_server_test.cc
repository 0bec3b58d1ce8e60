#include "server/app/sidecar_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/testing/fake_source.h"
#include "server/ops/heap_releaser.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

// grpc.health.v1.HealthCheckResponse.ServingStatus values.
constexpr int kServing = 1;
constexpr int kNotServing = 2;

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.TrySingleSlice(&slice).ok() ||
              buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
}

// A length-delimited protobuf string field (`field` < 16, short values).
std::string StringField(int field, const std::string& value) {
  return std::string(1, static_cast<char>(field << 3 | 2)) +
         std::string(1, static_cast<char>(value.size())) + value;
}

// Our own minimal clients of grpc.health.v1 and server reflection: the
// protos are not installed, so messages are hand-encoded (the wire format of
// these few fields is small and stable).
class RawClient {
 public:
  explicit RawClient(int port)
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        stub_(channel_) {}

  // Health/Check: returns the status enum, or -code for an RPC error.
  int HealthCheck(const std::string& service) {
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        stub_.PrepareUnaryCall(
            &ctx, "/grpc.health.v1.Health/Check",
            ToBuffer(service.empty() ? "" : StringField(1, service)), &cq);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    if (!status.ok()) return -static_cast<int>(status.error_code());
    const std::string bytes = FromBuffer(response);
    // HealthCheckResponse { ServingStatus status = 1; }: 0x08 <varint>.
    if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
    return 0;  // UNKNOWN (the default, encoded as nothing)
  }

  // ServerReflectionInfo with list_services: the raw response bytes.
  std::string ListServices() {
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub_.PrepareCall(
            &ctx,
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    EXPECT_TRUE(cq.Next(&tag, &ok) && ok);
    // ServerReflectionRequest { string list_services = 7; }.
    call->Write(ToBuffer(StringField(7, "*")), reinterpret_cast<void*>(2));
    EXPECT_TRUE(cq.Next(&tag, &ok) && ok);
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(3));
    EXPECT_TRUE(cq.Next(&tag, &ok) && ok);
    call->WritesDone(reinterpret_cast<void*>(4));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(5));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(status.ok()) << status.error_message();
    return FromBuffer(response);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
};

class SidecarServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = InformerRegistry::Create(
        {{.resource = "pods"}, {.resource = "configmaps"}},
        [](const ResourceConfig&)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          return std::make_unique<informer::FakeSource>();
        });
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    auto sidecar = SidecarServer::Start(registry_.get(), "127.0.0.1:0");
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    ASSERT_GT(sidecar_->port(), 0);
  }
  void TearDown() override {
    sidecar_.reset();
    registry_->Stop();
  }

  std::unique_ptr<InformerRegistry> registry_;
  std::unique_ptr<SidecarServer> sidecar_;
};

TEST_F(SidecarServerTest, HealthIsNotServingUntilEveryInformerSynced) {
  RawClient client(sidecar_->port());
  EXPECT_EQ(client.HealthCheck(""), kNotServing);
  EXPECT_EQ(client.HealthCheck("pods"), kNotServing);
  EXPECT_EQ(client.HealthCheck("configmaps"), kNotServing);
  EXPECT_EQ(client.HealthCheck("secrets"),
            -static_cast<int>(grpc::StatusCode::NOT_FOUND));

  ASSERT_TRUE(registry_->Start().ok());
  ASSERT_TRUE(sidecar_->WaitUntilServing(absl::Seconds(30)));
  EXPECT_EQ(client.HealthCheck(""), kServing);
  EXPECT_EQ(client.HealthCheck("pods"), kServing);
  EXPECT_EQ(client.HealthCheck("configmaps"), kServing);
}

TEST_F(SidecarServerTest, ReflectionListsTheServices) {
  RawClient client(sidecar_->port());
  const std::string response = client.ListServices();
  EXPECT_NE(response.find("informer.v1.Informer"), std::string::npos);
  EXPECT_NE(response.find("grpc.health.v1.Health"), std::string::npos);
}

TEST_F(SidecarServerTest, ShutdownEndsWait) {
  sidecar_->Shutdown(absl::ZeroDuration());
  sidecar_->Wait();
  RawClient client(sidecar_->port());
  EXPECT_LT(client.HealthCheck(""), 0) << "no longer answering";
}

TEST_F(SidecarServerTest, AnAddressGrpcCannotBindIsAnErrorNotACrash) {
  // gRPC refuses a unix socket path longer than sockaddr_un holds only in
  // BuildAndStart; the half-built server must be destroyed cleanly.
  const std::string listen = "unix:/tmp/" + std::string(200, 's');
  auto failed = SidecarServer::Start(registry_.get(), listen);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(),
            absl::StrCat("cannot listen on \"", listen, "\""));
}

// Stands in for malloc_trim: counts the server's heap releases, records
// the thread they run on, and can hold them at a gate.
class Releases {
 public:
  std::function<bool()> Fn() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++count_;
      thread_ = std::this_thread::get_id();
      auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_; };
      mu_.AwaitWithTimeout(absl::Condition(&open), absl::Minutes(1));
      return true;
    };
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  std::thread::id thread() {
    absl::MutexLock lock(&mu_);
    return thread_;
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits (up to a minute) for `n` releases to have started.
  bool AwaitCount(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return count_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  std::thread::id thread_ ABSL_GUARDED_BY(mu_);
};

// The registry's relists as its observers see them, after the server's
// (observers are called in the order they were added).
class Relists {
 public:
  explicit Relists(InformerRegistry* registry) : registry_(registry) {
    InformerRegistry::Observer observer;
    observer.on_relist_applied = [this](InformerEntry*) {
      absl::MutexLock lock(&mu_);
      ++count_;
      thread_ = std::this_thread::get_id();
    };
    id_ = registry->AddObserver(std::move(observer));
  }
  ~Relists() { registry_->RemoveObserver(id_); }
  std::thread::id thread() {
    absl::MutexLock lock(&mu_);
    return thread_;
  }
  bool AwaitCount(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return count_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }

 private:
  InformerRegistry* const registry_;
  int id_ = -1;
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id thread_ ABSL_GUARDED_BY(mu_);
};

// One relist of `pods`: its watch cut while the history it would resume
// from is compacted away (410), with `name` added meanwhile.
void ForceRelist(informer::FakeSource* pods, const std::string& name) {
  pods->WaitForWatches(1);
  pods->BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(pods->Add("ns", name).ok());
  pods->CompactHistory();
}

// The informer's notifications as a handler sees them: how many objects
// it holds after them.
class Delivered : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr&, bool) override { Change(1); }
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr&) override {}
  void OnDelete(const informer::ObjectPtr&, bool) override { Change(-1); }
  // Waits (up to a minute) until the handler saw `n` objects.
  bool AwaitSize(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return size_ == n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }

 private:
  void Change(int d) {
    absl::MutexLock lock(&mu_);
    size_ += d;
  }
  absl::Mutex mu_;
  int size_ ABSL_GUARDED_BY(mu_) = 0;
};

// A registry of pods, configmaps and secrets over FakeSources (an "a" each)
// with a SidecarServer in front. Relists of different resources, each its
// first: a resource's repeated 410s grow its reflector's back-off.
class SidecarServerMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = InformerRegistry::Create(
        {{.resource = "pods"},
         {.resource = "configmaps"},
         {.resource = "secrets"}},
        [this](const ResourceConfig& config)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          auto source = std::make_unique<informer::FakeSource>();
          sources_[config.resource] = source.get();
          return source;
        });
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    pods_ = sources_["pods"];
    // A relist into an empty cache is a first list, not reported.
    for (const auto& [resource, source] : sources_) {
      ASSERT_TRUE(source->Add("ns", "a").ok());
    }
  }
  void TearDown() override {
    relists_.reset();
    if (registration_ != nullptr) {
      EXPECT_TRUE(informer().RemoveEventHandler(registration_).ok());
    }
    if (registry_ != nullptr) registry_->Stop();
  }
  // Starts the server (then the registry), waits for SERVING and the
  // post-sync release.
  void Start(SidecarServer::Options options) {
    auto sidecar = SidecarServer::Start(registry_.get(), "127.0.0.1:0",
                                        std::move(options));
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    relists_ = std::make_unique<Relists>(registry_.get());
    registration_ = *informer().AddEventHandler(&delivered_);
    ASSERT_TRUE(registry_->Start().ok());
    ASSERT_TRUE(sidecar_->WaitUntilServing(absl::Seconds(30)));
    // SERVING comes after the post-sync release, not before.
    EXPECT_EQ(releases_.count(), 1);
  }
  informer::SharedIndexInformer& informer() {
    return *(*registry_->Find("pods"))->informer;
  }
  const informer::Indexer& cache() { return informer().GetIndexer(); }

  std::map<std::string, informer::FakeSource*> sources_;
  informer::FakeSource* pods_ = nullptr;
  std::unique_ptr<InformerRegistry> registry_;
  Releases releases_;
  Delivered delivered_;
  informer::HandlerRegistration* registration_ = nullptr;
  std::unique_ptr<SidecarServer> sidecar_;
  std::unique_ptr<Relists> relists_;
};

TEST_F(SidecarServerMemoryTest, ReleasesFreeHeapOnceSyncedAndAfterEachRelist) {
  SidecarServer::Options options;
  options.release_free_heap = releases_.Fn();
  Start(std::move(options));
  InformerEntry* entry = *registry_->Find("pods");

  // Watch events are no relist: no release.
  pods_->WaitForWatches(1);
  ASSERT_TRUE(pods_->Add("ns", "b").ok());
  ASSERT_TRUE(delivered_.AwaitSize(2));

  // One relist, one release once it is in the cache, on the releaser's
  // thread, not the informer's.
  ForceRelist(pods_, "c");
  ASSERT_TRUE(releases_.AwaitCount(2));
  ASSERT_TRUE(relists_->AwaitCount(1));
  EXPECT_EQ(cache().Size(), 3u);
  EXPECT_EQ(entry->informer->GetReflectorCounters().relists, 1);
  EXPECT_NE(releases_.thread(), relists_->thread());
  EXPECT_NE(releases_.thread(), std::this_thread::get_id());

  // A later event: still two.
  pods_->WaitForWatches(1);
  ASSERT_TRUE(pods_->Delete("ns", "a").ok());
  ASSERT_TRUE(delivered_.AwaitSize(2));
  EXPECT_EQ(releases_.count(), 2);
}

TEST_F(SidecarServerMemoryTest,
       ARunningReleaseStallsNoEventsAndRelistsCoalesce) {
  HeapReleaser::Options releaser_options;
  releaser_options.release = releases_.Fn();
  HeapReleaser releaser(std::move(releaser_options));
  SidecarServer::Options options;
  options.heap_releaser = &releaser;
  Start(std::move(options));

  // A relist whose release takes as long as the test likes.
  releases_.Hold();
  ForceRelist(pods_, "b");
  ASSERT_TRUE(releases_.AwaitCount(2));
  // Meanwhile the informer delivers events, and two more relists come.
  pods_->WaitForWatches(1);
  ASSERT_TRUE(pods_->Add("ns", "c").ok());
  ASSERT_TRUE(delivered_.AwaitSize(3));
  EXPECT_EQ(cache().Size(), 3u);
  ForceRelist(sources_["configmaps"], "x");
  ForceRelist(sources_["secrets"], "x");
  ASSERT_TRUE(relists_->AwaitCount(3));
  EXPECT_EQ(releases_.count(), 2);
  // The two relists asked while one release ran: one release after it. A
  // request once that one started is a fourth, not part of it.
  releases_.Open();
  ASSERT_TRUE(releases_.AwaitCount(3));
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(releases_.count(), 4);
  sidecar_.reset();
}

TEST_F(SidecarServerMemoryTest, ShutsDownWithAReleaseRunningAndOnePending) {
  SidecarServer::Options options;
  options.release_free_heap = releases_.Fn();
  Start(std::move(options));
  releases_.Hold();
  ForceRelist(pods_, "b");
  ASSERT_TRUE(releases_.AwaitCount(2));
  ForceRelist(sources_["configmaps"], "x");
  ASSERT_TRUE(relists_->AwaitCount(2));
  // The server's releaser finishes the running release, drops or runs the
  // pending one (whether its stop came first), and is joined.
  std::thread destroy([this] { sidecar_.reset(); });
  releases_.Open();
  destroy.join();
  const int released = releases_.count();
  EXPECT_GE(released, 2);
  EXPECT_LE(released, 3);
  // Relists after the server is gone ask nobody.
  ForceRelist(sources_["secrets"], "x");
  ASSERT_TRUE(relists_->AwaitCount(3));
  EXPECT_EQ(releases_.count(), released);
}

}  // namespace
}  // namespace server

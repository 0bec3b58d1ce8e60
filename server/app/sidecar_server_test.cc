#include "server/app/sidecar_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/testing/fake_source.h"
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

// Counts the server's heap releases.
class Releases {
 public:
  std::function<bool()> Fn() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++count_;
      return true;
    };
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  // Waits (up to a minute) for `n` releases.
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
};

TEST(SidecarServerMemoryTest, ReleasesFreeHeapOnceSyncedAndAfterEachRelist) {
  informer::FakeSource* pods = nullptr;
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&pods](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto source = std::make_unique<informer::FakeSource>();
        pods = source.get();
        return source;
      });
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE(pods->Add("ns", "a").ok());
  Releases releases;
  SidecarServer::Options options;
  options.release_free_heap = releases.Fn();
  auto sidecar =
      SidecarServer::Start(registry->get(), "127.0.0.1:0", std::move(options));
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  ASSERT_TRUE((*registry)->Start().ok());
  ASSERT_TRUE((*sidecar)->WaitUntilServing(absl::Seconds(30)));
  // Once the syncs are done.
  ASSERT_TRUE(releases.AwaitCount(1));
  EXPECT_EQ(releases.count(), 1);
  InformerEntry* entry = *(*registry)->Find("pods");
  const informer::Indexer& cache = entry->informer->GetIndexer();

  // Watch events are no relist: no release. Polled: the cache has it.
  pods->WaitForWatches(1);
  ASSERT_TRUE(pods->Add("ns", "b").ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (cache.Size() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(cache.Size(), 2u);

  // A cut watch whose resourceVersion is gone meanwhile: one relist, one
  // release once it is in the cache.
  pods->BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(pods->Add("ns", "c").ok());
  pods->CompactHistory();
  ASSERT_TRUE(releases.AwaitCount(2));
  EXPECT_EQ(cache.Size(), 3u);
  EXPECT_EQ(entry->informer->GetReflectorCounters().relists, 1);

  // A later event: still two.
  pods->WaitForWatches(1);
  ASSERT_TRUE(pods->Delete("ns", "a").ok());
  while (cache.Size() > 2 && absl::Now() < deadline + absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(cache.Size(), 2u);
  EXPECT_EQ(releases.count(), 2);
  sidecar->reset();
  (*registry)->Stop();
}

}  // namespace
}  // namespace server

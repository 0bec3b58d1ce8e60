// The C++ SDK receives an initial state of more than 30 MB over a channel
// made with gRPC's defaults (4 MiB receive limit): the real informer_sidecar
// binary in front of the API server emulator (a separate process, real
// HTTP) seeded with 10000 Pods. It passes only when the sidecar splits a
// large initial state into messages under the client's limit; a sidecar
// that sends it as one message makes every attempt fail with
// RESOURCE_EXHAUSTED, which OnError reports and this test names.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/remote_informer.h"
#include "gtest/gtest.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace client_sdk {
namespace {

namespace v1 = ::informer::v1;
using integration::EmulatorProcess;
using integration::SidecarProcess;

// About 33 MB of JSON as the sidecar serves them (~3.4 KB each).
constexpr int kPods = 10000;
constexpr int64_t kMinInitialBytes = int64_t{30} * 1000 * 1000;
// Failsafe for waits: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(120);

class CollectErrors final : public StreamErrorHandler {
 public:
  void OnError(const StreamError& e) override {
    absl::MutexLock lock(&mu_);
    errors_.push_back(e.status.ToString());
  }
  std::vector<std::string> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// Bytes of object JSON the sidecar serves for `resource`, over paged List
// calls (each page is capped, so this works whatever the Watch does).
int64_t ListedJsonBytes(grpc::Channel* channel, const std::string& resource,
                        int* count) {
  auto stub = v1::Informer::NewStub(
      std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  int64_t bytes = 0;
  std::string token;
  *count = 0;
  do {
    grpc::ClientContext ctx;
    v1::ListRequest request;
    request.set_resource(resource);
    request.set_continue_token(token);
    v1::ListResponse response;
    grpc::Status st = stub->List(&ctx, request, &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) return bytes;
    for (const v1::Object& o : response.objects()) bytes += o.json().size();
    *count += response.objects_size();
    token = response.continue_token();
  } while (!token.empty());
  return bytes;
}

TEST(LargeInitialStateTest, ReceivedWithDefaultChannel) {
  absl::StatusOr<std::string> emulator_binary =
      integration::FindEmulatorBinary("");
  ASSERT_TRUE(emulator_binary.ok()) << emulator_binary.status();
  absl::StatusOr<std::unique_ptr<EmulatorProcess>> emulator =
      EmulatorProcess::Start(*emulator_binary,
                             {absl::StrCat("--seed_pods=", kPods)},
                             /*quiet=*/true);
  ASSERT_TRUE(emulator.ok()) << emulator.status();

  absl::StatusOr<std::string> binary =
      integration::FindRunfile("server/informer_sidecar");
  ASSERT_TRUE(binary.ok()) << binary.status();
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::string> kubeconfig = integration::WriteKubeconfig(
      tmp != nullptr ? tmp : "/tmp", (*emulator)->url());
  ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
  SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + *kubeconfig, "--resources=pods",
                   "--http_listen=127.0.0.1:0", "--print_events=false"};
  options.quiet = true;
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();

  // What applications do: a channel with every option at gRPC's default.
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      (*sidecar)->address(), grpc::InsecureChannelCredentials());

  // The premise: the initial state is larger than 30 MB.
  int listed = 0;
  const int64_t bytes = ListedJsonBytes(channel.get(), "pods", &listed);
  ASSERT_EQ(listed, kPods);
  ASSERT_GE(bytes, kMinInitialBytes);

  CollectErrors errors;
  RemoteInformer::Options informer_options;
  informer_options.resource = "pods";
  informer_options.error_handler = &errors;
  RemoteInformer pods(channel, informer_options);
  ASSERT_TRUE(pods.Start().ok());
  ASSERT_TRUE(pods.WaitForSync(kWait))
      << "no sync of " << bytes << " bytes in " << kWait
      << "; stream errors: " << absl::StrJoin(errors.errors(), " | ");
  EXPECT_EQ(pods.List().size(), static_cast<size_t>(kPods));
  EXPECT_EQ(pods.sync_generation(), 1);
  EXPECT_EQ(pods.resets(), 0);
  pods.Stop();
  // A cut in the middle of the initial state would be resumed (the token
  // contract) and reported; with the sidecar up the whole time there is none.
  EXPECT_TRUE(errors.errors().empty()) << absl::StrJoin(errors.errors(), " | ");
}

}  // namespace
}  // namespace client_sdk

// Informer.Watch with clients in DEFAULT settings, end to end: the real
// //server:informer_sidecar binary against the real //emulator:kube_emulator
// binary, both child processes. gRPC clients receive at most 4 MiB per
// message unless they raise the limit; an initial state of tens of
// megabytes must still reach them (the sidecar splits it, see
// --watch_max_message_bytes). The Python client's twin of this test is
// watch_default_python_client_test.py.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "rapidjson/document.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;

// ~3.4 KB each as the sidecar caches them (the emulator seeds ~6 KiB Pods
// in namespace "benchpods"; the transform drops managedFields): 32 MB.
constexpr int kSeedPods = 9500;
constexpr size_t kMinTotalBytes = 30u * 1000 * 1000;
constexpr size_t kDefaultReceiveLimit = 4u << 20;

std::string TestTmpDir() {
  const char* v = std::getenv("TEST_TMPDIR");
  return v == nullptr ? "/tmp" : v;
}

std::string NameOf(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("metadata")) {
    return "";
  }
  return doc["metadata"]["name"].GetString();
}

TEST(SidecarWatchDefaultClientsE2eTest,
     ThirtyMegabyteInitialStateReachesADefaultCppChannel) {
  absl::StatusOr<std::string> emulator_binary = FindEmulatorBinary("");
  ASSERT_TRUE(emulator_binary.ok()) << emulator_binary.status();
  absl::StatusOr<std::unique_ptr<EmulatorProcess>> emulator =
      EmulatorProcess::Start(*emulator_binary,
                             {absl::StrCat("--seed_pods=", kSeedPods)},
                             /*quiet=*/true);
  ASSERT_TRUE(emulator.ok()) << emulator.status();
  absl::StatusOr<std::string> kubeconfig =
      WriteKubeconfig(TestTmpDir(), (*emulator)->url());
  ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
  absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
  ASSERT_TRUE(binary.ok()) << binary.status();
  SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + *kubeconfig, "--resources=pods"};
  options.quiet = true;
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();

  // A default channel: no raised receive limit.
  auto stub = v1::Informer::NewStub(grpc::CreateChannel(
      (*sidecar)->address(), grpc::InsecureChannelCredentials()));
  v1::WatchRequest req;
  req.set_resource("pods");
  req.set_namespace_("benchpods");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(120));
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
      stub->Watch(&ctx, req);
  std::set<std::string> names;
  size_t total = 0;
  size_t largest = 0;
  int messages = 0;
  bool done = false;
  v1::WatchResponse resp;
  while (!done && reader->Read(&resp)) {
    ++messages;
    largest = std::max(largest, resp.ByteSizeLong());
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
        done = true;
        break;
      }
      ASSERT_EQ(e.type(), v1::EVENT_TYPE_ADDED);
      EXPECT_TRUE(e.initial());
      EXPECT_FALSE(e.resume_token().empty());
      total += e.object().json().size();
      names.insert(NameOf(e.object().json()));
    }
  }
  ctx.TryCancel();
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(done) << "the stream ended before INITIAL_STATE_DONE: "
                    << status.error_code() << " " << status.error_message();
  EXPECT_EQ(names.size(), static_cast<size_t>(kSeedPods));
  EXPECT_GE(total, kMinTotalBytes);
  EXPECT_GT(messages, 1);
  EXPECT_LE(largest, kDefaultReceiveLimit);
}

}  // namespace
}  // namespace integration

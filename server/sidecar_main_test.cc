// Runs the real informer_sidecar binary in demo mode and talks to it over
// gRPC on a unix socket: health turns SERVING, every default resource is
// served, and SIGTERM shuts it down cleanly.

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/informer/v1/informer.grpc.pb.h"

extern char** environ;

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

class SidecarProcess {
 public:
  explicit SidecarProcess(const std::vector<std::string>& flags) {
    // Port 0 for the metrics/probes port: tests run in parallel.
    std::vector<std::string> args = {"server/informer_sidecar",
                                     "--http_listen=127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    spawned_ = posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(),
                           environ) == 0;
  }
  ~SidecarProcess() {
    if (spawned_ && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool spawned() const { return spawned_; }
  // The process's initial environment block as its current image got it
  // (/proc/PID/environ: NUL-separated; exec replaces it).
  std::string RawEnvironment() const {
    std::ifstream f(absl::StrCat("/proc/", pid_, "/environ"));
    return std::string((std::istreambuf_iterator<char>(f)),
                       std::istreambuf_iterator<char>());
  }
  // Sends SIGTERM and returns the exit status (-1 if it did not exit
  // normally).
  int Terminate() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = 0;
  bool spawned_ = false;
  bool reaped_ = false;
};

// Follows grpc.health.v1.Health/Watch for the overall status until it
// reports SERVING (1); false if the stream ends first. Messages are
// hand-encoded: HealthCheckRequest{} is empty, HealthCheckResponse is
// 0x08 <status>.
bool WaitForServing(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  auto call = stub.PrepareCall(&ctx, "/grpc.health.v1.Health/Watch", &cq);
  void* tag;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  if (!cq.Next(&tag, &ok) || !ok) return false;
  grpc::Slice empty("");
  call->Write(grpc::ByteBuffer(&empty, 1), reinterpret_cast<void*>(2));
  if (!cq.Next(&tag, &ok) || !ok) return false;
  call->WritesDone(reinterpret_cast<void*>(3));
  if (!cq.Next(&tag, &ok) || !ok) return false;
  bool serving = false;
  while (!serving) {
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(4));
    if (!cq.Next(&tag, &ok) || !ok) break;
    grpc::Slice slice;
    if (!response.DumpToSingleSlice(&slice).ok()) break;
    serving =
        slice.size() == 2 && slice.begin()[0] == 0x08 && slice.begin()[1] == 1;
  }
  ctx.TryCancel();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  return serving;
}

TEST(SidecarMainTest, DemoModeServesTheDefaultResourcesAndStopsOnSigterm) {
  // Unix socket paths are limited to 107 characters: TEST_TMPDIR is
  // often longer.
  char dir[] = "/tmp/sidecar_main_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string socket_path = absl::StrCat(dir, "/grpc.sock");
  const std::string address = absl::StrCat("unix:", socket_path);
  unsetenv("GLIBC_TUNABLES");  // the sidecar picks its own (checked below)
  SidecarProcess sidecar({"--demo", "--grpc_listen=" + address});
  ASSERT_TRUE(sidecar.spawned());

  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(In(60)));
  ASSERT_TRUE(WaitForServing(channel));
  // Serving, so past main's first line: it re-executed itself (same pid)
  // with the malloc tunables, as its environment had no GLIBC_TUNABLES.
  // (glibc cuts the value in place at each ':' while parsing it, so only
  // its first tunable reads as part of the variable here.)
  EXPECT_TRUE(absl::StrContains(sidecar.RawEnvironment(),
                                "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"));

  auto stub = v1::Informer::NewStub(channel);
  grpc::ClientContext ctx;
  v1::ListResourcesResponse resources;
  ASSERT_TRUE(
      stub->ListResources(&ctx, v1::ListResourcesRequest(), &resources).ok());
  std::vector<std::string> names;
  for (const v1::ResourceStatus& r : resources.resources()) {
    names.push_back(r.resource());
    EXPECT_TRUE(r.synced()) << r.resource();
    EXPECT_GT(r.object_count(), 0) << r.resource() << " seeded";
  }
  EXPECT_THAT(names, ElementsAre("configmaps", "deployments.apps", "pods"));

  grpc::ClientContext list_ctx;
  v1::ListRequest list;
  list.set_resource("pods");
  v1::ListResponse pods;
  ASSERT_TRUE(stub->List(&list_ctx, list, &pods).ok());
  EXPECT_GT(pods.objects_size(), 0);

  // Watch in demo mode: the initial state, its marker, then live changes
  // (the demo cluster changes objects every second).
  {
    grpc::ClientContext watch_ctx;
    watch_ctx.set_deadline(In(60));
    v1::WatchRequest req;
    req.set_resource("configmaps");
    auto reader = stub->Watch(&watch_ctx, req);
    int initial = 0;
    bool done = false;
    bool live = false;
    v1::WatchResponse resp;
    while (!live && reader->Read(&resp)) {
      for (const v1::Event& e : resp.events()) {
        if (!done && e.type() == v1::EVENT_TYPE_ADDED) {
          EXPECT_TRUE(e.initial());
          ++initial;
        } else if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
          done = true;
        } else if (done && e.type() != v1::EVENT_TYPE_BOOKMARK) {
          EXPECT_FALSE(e.resume_token().empty());
          live = true;
        }
      }
    }
    EXPECT_GT(initial, 0);
    EXPECT_TRUE(done);
    EXPECT_TRUE(live) << "no live event from the demo churn";
    watch_ctx.TryCancel();
    reader->Finish();
  }

  EXPECT_EQ(sidecar.Terminate(), 0);
  unlink(socket_path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace server

// Runs the real informer_sidecar binary in demo mode and talks to it over
// gRPC on a unix socket: health turns SERVING, every default resource is
// served, and SIGTERM shuts it down cleanly. Also: its process name, its
// first log line, --help, and an error exit (not a crash) on a gRPC
// address it cannot bind.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/informer/v1/informer.grpc.pb.h"

extern char** environ;

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string TempPath(const std::string& name) {
  const char* dir = getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

class SidecarProcess {
 public:
  // `output`: a file for the child's stdout and stderr (empty: inherited).
  explicit SidecarProcess(const std::vector<std::string>& flags,
                          const std::string& output = "") {
    // Port 0 for the metrics/probes port: tests run in parallel.
    std::vector<std::string> args = {"server/informer_sidecar",
                                     "--http_listen=127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!output.empty()) {
      posix_spawn_file_actions_addopen(&actions, 1, output.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
    }
    spawned_ = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(),
                           environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
  }
  pid_t pid() const { return pid_; }
  // Waits for the exit; the exit code (-1 if killed).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  const std::string log = TempPath("demo.log");
  SidecarProcess sidecar(
      {"--demo", "--print_events=false", "--grpc_listen=" + address}, log);
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
  // It kept its name through the re-exec (ps, top and ss show comm, at
  // most 15 characters), not "exe".
  EXPECT_EQ(ReadAll(absl::StrCat("/proc/", sidecar.pid(), "/comm")),
            "informer_sideca\n");
  // The first log line says it is the demo, before anything else.
  const std::string logs = ReadAll(log);
  const std::string first_line = logs.substr(0, logs.find('\n'));
  EXPECT_TRUE(absl::StrContains(first_line, "DEMO MODE (--demo)"))
      << "first lines:\n"
      << logs.substr(0, 1000);

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

// The flags `--helpfull` lists from our own source files (informer/,
// server/, emulator/).
std::set<std::string> OurFlagsInHelpfull(const std::string& helpfull) {
  std::set<std::string> flags;
  bool ours = false;
  for (absl::string_view line : absl::StrSplit(helpfull, '\n')) {
    if (absl::StartsWith(line, "  Flags from ")) {
      absl::string_view file = line.substr(strlen("  Flags from "));
      ours = absl::StartsWith(file, "informer/") ||
             absl::StartsWith(file, "server/") ||
             absl::StartsWith(file, "emulator/");
    } else if (ours && absl::StartsWith(line, "    --")) {
      absl::string_view rest = line.substr(strlen("    --"));
      flags.insert(std::string(rest.substr(0, rest.find(' '))));
    }
  }
  return flags;
}

TEST(SidecarMainTest, UnixSocketPathTooLongExitsWithAnErrorNotACrash) {
  const std::string path = "/tmp/" + std::string(120, 's') + ".sock";
  const std::string log = TempPath("long_socket.log");
  SidecarProcess sidecar({"--demo", "--grpc_listen=unix:" + path}, log);
  ASSERT_TRUE(sidecar.spawned());
  EXPECT_EQ(sidecar.Wait(), 2) << ReadAll(log);  // bad configuration
  EXPECT_THAT(ReadAll(log), HasSubstr(absl::StrCat(
                                "--grpc_listen: the unix socket path \"", path,
                                "\" is 130 characters long; the "
                                "limit is 107")));
}

TEST(SidecarMainTest, AGrpcAddressInUseExitsWithAnErrorNotACrash) {
  // Held without SO_REUSEPORT, so gRPC's bind (which sets it) fails.
  const int busy = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(busy, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  ASSERT_EQ(getsockname(busy, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const std::string in_use =
      absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  const std::string log = TempPath("busy_port.log");
  SidecarProcess sidecar(
      {"--demo", "--print_events=false", "--grpc_listen=" + in_use}, log);
  ASSERT_TRUE(sidecar.spawned());
  EXPECT_EQ(sidecar.Wait(), 1) << ReadAll(log);
  EXPECT_THAT(ReadAll(log),
              HasSubstr(absl::StrCat("cannot listen on \"", in_use, "\"")));
  close(busy);
}

TEST(SidecarMainTest, HelpExitsZeroAndListsEveryFlagOfOursInGroups) {
  const std::string help_path = TempPath("help.txt");
  SidecarProcess help({"--help"}, help_path);
  ASSERT_TRUE(help.spawned());
  EXPECT_EQ(help.Wait(), 0);
  const std::string text = ReadAll(help_path);
  const std::string first_line = text.substr(0, text.find('\n'));
  EXPECT_TRUE(absl::StartsWith(first_line, "informer_sidecar: Kubernetes"))
      << first_line;
  EXPECT_FALSE(
      absl::StrContains(first_line, "informer_sidecar: informer_sidecar"));
  for (const char* group :
       {"\nCluster: ", "\nServing: ", "\nWatch streams ",
        "\nSecurity: ", "\nOperations: ", "\nDemo:", "\nLogging:"}) {
    EXPECT_TRUE(absl::StrContains(text, group)) << group;
  }
  // The demo group holds --demo.
  EXPECT_LT(text.find("\nDemo:"), text.find("\n  --demo "));

  // --helpfull stays (deploy_test reads it) and every flag of ours it
  // lists is in --help too.
  const std::string full_path = TempPath("helpfull.txt");
  SidecarProcess full({"--helpfull"}, full_path);
  ASSERT_TRUE(full.spawned());
  full.Wait();
  const std::set<std::string> ours = OurFlagsInHelpfull(ReadAll(full_path));
  EXPECT_GE(ours.size(), 35u);
  EXPECT_EQ(ours.count("grpc_listen"), 1u);
  EXPECT_EQ(ours.count("v"), 1u);
  for (const std::string& flag : ours) {
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat("\n  --", flag, " (")))
        << "--help does not list --" << flag;
  }
}

}  // namespace
}  // namespace server

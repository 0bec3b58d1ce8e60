// The stale state of the real informer_sidecar binary against the
// kube_emulator binary over HTTP: a sidecar whose informers cannot reach
// their API server at start (here the --cache_upstream it lists and watches
// through is down; discovery and the cluster identity still answer) serves
// its --cache_dir snapshot at once with --serve_stale_on_start, marked
// stale (ListResources, the stale gauge, /readyz, INITIAL_STATE_DONE); once
// the upstream answers, the changes made meanwhile reach a Watch as
// ordinary events, vanished objects as DELETED, then FRESH, and the cache
// equals the server. Without the flag the same outage gives today's
// behaviour: nothing served until the sync.

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulated_cluster.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/testing/watch_call.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;

constexpr int kObjects = 50;
constexpr absl::Duration kConverge = absl::Seconds(90);
constexpr char kStale[] = "informer_sidecar_informer_stale";

std::string TestTmpDir() {
  const char* v = std::getenv("TEST_TMPDIR");
  return v == nullptr ? "/tmp" : v;
}

// A loopback port nothing listens on (bound, then released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Forwards the TCP connections made to 127.0.0.1:`from` to
// 127.0.0.1:`to`, two threads per connection: an API server that comes up
// on a port that refused connections until then (the same cluster, its
// state kept, as after an outage). The destructor ends every connection.
class PortForwarder {
 public:
  PortForwarder(int from, int to) : to_(to) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = Loopback(from);
    ok_ = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
              0 &&
          listen(listen_fd_, 64) == 0;
    if (ok_) acceptor_ = std::thread([this] { Accept(); });
  }
  ~PortForwarder() {
    shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    if (acceptor_.joinable()) acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
  }
  // Bound and listening.
  bool ok() const { return ok_; }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return addr;
  }
  static void Pump(int in, int out) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(in, buf, sizeof(buf));
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(out, buf + done, n - done);
        if (w <= 0) return;
        done += w;
      }
    }
    shutdown(out, SHUT_WR);
  }
  void Accept() {
    for (;;) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr = Loopback(to_);
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0) {
        close(server);
        close(client);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([client, server] { Pump(client, server); });
      pumps_.emplace_back([client, server] { Pump(server, client); });
    }
  }

  const int to_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What changed while no sidecar ran (SnapshotThenChange), sorted, then
// the marker.
const std::vector<std::string> kChangesThenFresh = {
    "ADDED benchcms/new-a", "DELETED benchcms/cm-000007",
    "MODIFIED benchcms/cm-000003", "FRESH"};

// The Watch events up to FRESH, bookmarks left out, FRESH last and the
// others sorted; what came when the stream ended first.
std::vector<std::string> SortedUntilFresh(server::WatchCall* watch) {
  absl::StatusOr<server::WatchEvents> got =
      watch->ReadUntil(v1::EVENT_TYPE_FRESH);
  if (!got.ok()) return {std::string(got.status().message())};
  std::sort(got->events.begin(), got->events.end() - 1);
  return got->events;
}

class StaleStartE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = absl::StrCat(
        TestTmpDir(), "/",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    absl::StatusOr<EmulatedCluster> cluster = StartEmulatedCluster(
        {.emulator_flags = {absl::StrCat("--seed_configmaps=", kObjects)},
         .dir = work_,
         .kube_system = true});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sidecar_bin_ = cluster->sidecar_bin;
    kubeconfig_ = cluster->kubeconfig;
    emulator_ = std::move(cluster->emulator);
  }

  httplib::Client Emulator() {
    httplib::Client cli("127.0.0.1", emulator_->port());
    cli.set_read_timeout(60, 0);
    return cli;
  }

  std::vector<std::string> Flags() {
    return {"--kubeconfig=" + kubeconfig_, "--resources=configmaps",
            "--cache_dir=" + work_ + "/cache", "--cache_snapshot_interval=0",
            "--http_listen=127.0.0.1:0"};
  }

  // A kubeconfig for an API server on `port` of loopback.
  std::string KubeconfigFor(int port) {
    const std::string dir = absl::StrCat(work_, "/down-", port);
    std::filesystem::create_directories(dir);
    absl::StatusOr<std::string> k =
        WriteKubeconfig(dir, absl::StrCat("http://127.0.0.1:", port));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *k : std::string();
  }

  // The sidecar's flags with `kubeconfig` instead of the emulator's.
  std::vector<std::string> FlagsFor(const std::string& kubeconfig) {
    std::vector<std::string> flags = Flags();
    flags[0] = "--kubeconfig=" + kubeconfig;
    return flags;
  }

  // A first run that lists everything and writes its snapshot at SIGTERM,
  // then changes made while no sidecar runs.
  void SnapshotThenChange() {
    absl::StatusOr<PortedSidecar> a = StartPortedSidecar(
        sidecar_bin_, Flags(), work_ + "/first.log", /*quiet=*/false);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<ObjectVersions> want =
        GetEmulatorState(emulator_->port(), "configmaps");
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(WaitForConvergence(a->process->NewChannel(), "configmaps",
                                   *want, kConverge)
                    .ok());
    EXPECT_EQ(a->process->Terminate(), 0);
    httplib::Result p = Emulator().Patch(
        "/api/v1/namespaces/benchcms/configmaps/cm-000003",
        R"({"data":{"changed":"yes"}})", "application/merge-patch+json");
    ASSERT_TRUE(p);
    ASSERT_EQ(p->status, 200) << p->body;
    httplib::Result d =
        Emulator().Delete("/api/v1/namespaces/benchcms/configmaps/cm-000007");
    ASSERT_TRUE(d);
    ASSERT_EQ(d->status, 200) << d->body;
    httplib::Result c = Emulator().Post(
        "/api/v1/namespaces/benchcms/configmaps",
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new-a"},"data":{"k":"v"}})",
        "application/json");
    ASSERT_TRUE(c);
    ASSERT_EQ(c->status, 201) << c->body;
  }

  // Starts a sidecar whose informers list and watch through an upstream
  // that is down (port `upstream`), without waiting for SERVING; its HTTP
  // port in *http.
  std::unique_ptr<SidecarProcess> StartCutOff(int upstream, bool serve_stale,
                                              int* http) {
    std::vector<std::string> flags = Flags();
    flags.push_back(
        absl::StrCat("--cache_upstream=http://127.0.0.1:", upstream));
    if (serve_stale) flags.push_back("--serve_stale_on_start");
    return StartUnsynced(std::move(flags), http);
  }

  // Starts a sidecar with `flags` without waiting for SERVING; its HTTP
  // port in *http.
  std::unique_ptr<SidecarProcess> StartUnsynced(std::vector<std::string> flags,
                                                int* http) {
    const std::string ports = work_ + "/ports";
    flags.push_back("--ports_file=" + ports);
    flags.push_back("--print_events=false");
    SidecarProcess::Options options;
    options.flags = std::move(flags);
    options.wait_serving = false;
    options.stderr_file = work_ + "/second.log";
    absl::StatusOr<std::unique_ptr<SidecarProcess>> s =
        SidecarProcess::Start(sidecar_bin_, std::move(options));
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    absl::StatusOr<std::string> written = WaitForFile(
        ports,
        [](const std::string& c) { return absl::StrContains(c, "http="); },
        absl::Seconds(60));
    EXPECT_TRUE(written.ok()) << written.status();
    if (!written.ok()) return nullptr;
    *http = static_cast<int>(ParseKeyValues(*written).at("http"));
    return *std::move(s);
  }

  // Polls the metric until it is `value` (a deadline, no fixed sleep).
  bool MetricBecomes(int http, const std::string& name, double value) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      absl::StatusOr<double> v = GetMetricSum(http, name);
      if (v.ok() && *v == value) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  httplib::Result Readyz(int http) {
    httplib::Client cli("127.0.0.1", http);
    return cli.Get("/readyz");
  }

  // Expects the sidecar behind `stub` to serve the snapshot of kObjects
  // stale: in ListResources and on a Watch, which it returns, read up to
  // INITIAL_STATE_DONE.
  std::unique_ptr<server::WatchCall> ExpectServedStale(
      v1::Informer::Stub* stub) {
    grpc::ClientContext ctx;
    v1::ListResourcesResponse resp;
    EXPECT_TRUE(
        stub->ListResources(&ctx, v1::ListResourcesRequest(), &resp).ok());
    EXPECT_EQ(resp.resources_size(), 1);
    if (resp.resources_size() == 1) {
      EXPECT_EQ(resp.resources(0).resource(), "configmaps");
      EXPECT_TRUE(resp.resources(0).stale());
      EXPECT_FALSE(resp.resources(0).synced());
      EXPECT_TRUE(resp.resources(0).has_stale_age());
      EXPECT_EQ(resp.resources(0).object_count(), kObjects);
    }
    v1::WatchRequest req;
    req.set_resource("configmaps");
    auto watch =
        std::make_unique<server::WatchCall>(stub, req, absl::Seconds(120));
    absl::StatusOr<server::WatchEvents> got =
        watch->ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
    EXPECT_TRUE(got.ok()) << got.status();
    if (got.ok()) {
      // The snapshot: cm-000007 still in it.
      EXPECT_EQ(std::count_if(got->events.begin(), got->events.end(),
                              [](const std::string& e) {
                                return absl::EndsWith(e, " initial");
                              }),
                kObjects);
      EXPECT_EQ(got->events.back(), "INITIAL_STATE_DONE stale");
    }
    return watch;
  }

  std::string sidecar_bin_;
  std::unique_ptr<EmulatorProcess> emulator_;
  std::string work_;
  std::string kubeconfig_;
};

TEST_F(StaleStartE2eTest, ServedStaleThenFreshOnceTheApiServerAnswers) {
  ASSERT_NO_FATAL_FAILURE(SnapshotThenChange());
  const int upstream = FreePort();
  int http = 0;
  std::unique_ptr<SidecarProcess> b =
      StartCutOff(upstream, /*serve_stale=*/true, &http);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(MetricBecomes(http, kStale, 1));
  httplib::Result ready = Readyz(http);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_TRUE(absl::StrContains(ready->body, "configmaps (stale)"))
      << ready->body;

  auto stub = v1::Informer::NewStub(b->NewChannel());
  std::unique_ptr<server::WatchCall> watch = ExpectServedStale(stub.get());

  // The API server comes back: a node sidecar serves the upstream facade
  // on that port.
  absl::StatusOr<PortedSidecar> node = StartPortedSidecar(
      sidecar_bin_,
      {"--kubeconfig=" + kubeconfig_, "--resources=configmaps",
       "--http_listen=127.0.0.1:0",
       absl::StrCat("--kube_api_listen=127.0.0.1:", upstream)},
      work_ + "/node.log", /*quiet=*/false);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(SortedUntilFresh(watch.get()), kChangesThenFresh);
  EXPECT_TRUE(MetricBecomes(http, kStale, 0));
  ready = Readyz(http);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  absl::StatusOr<ObjectVersions> want =
      GetEmulatorState(emulator_->port(), "configmaps");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(
      WaitForConvergence(b->NewChannel(), "configmaps", *want, kConverge).ok());
  watch.reset();
  EXPECT_EQ(b->Terminate(), 0);
}

TEST_F(StaleStartE2eTest, WithoutServeStaleTheOutageServesNothing) {
  ASSERT_NO_FATAL_FAILURE(SnapshotThenChange());
  int http = 0;
  std::unique_ptr<SidecarProcess> b =
      StartCutOff(FreePort(), /*serve_stale=*/false, &http);
  ASSERT_NE(b, nullptr);
  // The informer has tried and failed.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    absl::StatusOr<double> errors =
        GetMetricSum(http, "informer_sidecar_informer_errors_total");
    if (errors.ok() && *errors > 0) break;
    ASSERT_LT(absl::Now(), deadline) << "the informer never failed";
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::StatusOr<double> stale = GetMetricSum(http, kStale);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, 0);
  httplib::Result ready = Readyz(http);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_FALSE(absl::StrContains(ready->body, "stale")) << ready->body;
  auto stub = v1::Informer::NewStub(b->NewChannel());
  grpc::ClientContext ctx;
  v1::GetRequest get;
  get.set_resource("configmaps");
  get.set_namespace_("benchcms");
  get.set_name("cm-000001");
  v1::GetResponse resp;
  EXPECT_EQ(stub->Get(&ctx, get, &resp).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext lctx;
  v1::ListResourcesResponse lr;
  ASSERT_TRUE(stub->ListResources(&lctx, v1::ListResourcesRequest(), &lr).ok());
  ASSERT_EQ(lr.resources_size(), 1);
  EXPECT_FALSE(lr.resources(0).stale());
  EXPECT_FALSE(lr.resources(0).synced());
  EXPECT_EQ(b->Terminate(), 0);
}

TEST_F(StaleStartE2eTest, ServedStaleWithTheApiServerDownFromTheStart) {
  ASSERT_NO_FATAL_FAILURE(SnapshotThenChange());
  // Discovery and the cluster identity fail too: nothing listens there.
  const int port = FreePort();
  std::vector<std::string> flags = FlagsFor(KubeconfigFor(port));
  flags.push_back("--serve_stale_on_start");
  int http = 0;
  std::unique_ptr<SidecarProcess> b = StartUnsynced(std::move(flags), &http);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(MetricBecomes(http, kStale, 1));
  auto stub = v1::Informer::NewStub(b->NewChannel());
  std::unique_ptr<server::WatchCall> watch = ExpectServedStale(stub.get());

  // The API server comes up on that port (the same cluster, changed).
  PortForwarder up(port, emulator_->port());
  ASSERT_TRUE(up.ok()) << "port " << port << " was taken meanwhile";
  EXPECT_EQ(SortedUntilFresh(watch.get()), kChangesThenFresh);
  EXPECT_TRUE(MetricBecomes(http, kStale, 0));
  absl::StatusOr<ObjectVersions> want =
      GetEmulatorState(emulator_->port(), "configmaps");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(
      WaitForConvergence(b->NewChannel(), "configmaps", *want, kConverge).ok());
  watch.reset();
  EXPECT_EQ(b->Terminate(), 0);
  const std::string log = ReadFile(work_ + "/second.log");
  EXPECT_TRUE(absl::StrContains(log,
                                "using the group and version of its "
                                "snapshot, v1"))
      << log;
  EXPECT_TRUE(absl::StrContains(log,
                                "trusts the snapshots' own cluster "
                                "identity, uid:"))
      << log;
}

TEST_F(StaleStartE2eTest, AnotherClusterOnThatPortEndsItForAColdStart) {
  ASSERT_NO_FATAL_FAILURE(SnapshotThenChange());
  const int port = FreePort();
  const std::string kubeconfig = KubeconfigFor(port);
  std::vector<std::string> flags = FlagsFor(kubeconfig);
  flags.push_back("--serve_stale_on_start");
  int http = 0;
  std::unique_ptr<SidecarProcess> b = StartUnsynced(flags, &http);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(MetricBecomes(http, kStale, 1));

  // Another cluster (its own kube-system uid) comes up on that port.
  absl::StatusOr<EmulatedCluster> other =
      StartEmulatedCluster({.emulator_flags = {"--seed_configmaps=5"},
                            .dir = work_ + "/other",
                            .kube_system = true});
  ASSERT_TRUE(other.ok()) << other.status();
  PortForwarder up(port, other->emulator->port());
  ASSERT_TRUE(up.ok()) << "port " << port << " was taken meanwhile";
  absl::StatusOr<std::string> said = WaitForFile(
      work_ + "/second.log",
      [](const std::string& c) {
        return absl::StrContains(c, "is another cluster");
      },
      absl::Seconds(60));
  ASSERT_TRUE(said.ok()) << said.status();
  // It shuts down by itself, in order; its stale informer never synced
  // with the other cluster. Only reaped: a SIGTERM from here could arrive
  // while it exits (slow under ASan) and count as a second signal.
  said = WaitForFile(
      work_ + "/second.log",
      [](const std::string& c) {
        return absl::StrContains(c, "informer_sidecar: stopped");
      },
      absl::Seconds(60));
  ASSERT_TRUE(said.ok()) << said.status();
  EXPECT_EQ(b->Wait(), 0);

  // The next start reads that cluster's identity and lists it cold.
  absl::StatusOr<PortedSidecar> c = StartPortedSidecar(
      sidecar_bin_, FlagsFor(kubeconfig), work_ + "/third.log",
      /*quiet=*/false);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ObjectVersions> want =
      GetEmulatorState(other->emulator->port(), "configmaps");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(WaitForConvergence(c->process->NewChannel(), "configmaps", *want,
                                 kConverge)
                  .ok());
  EXPECT_EQ(c->process->Terminate(), 0);
  const std::string log = ReadFile(work_ + "/third.log");
  EXPECT_TRUE(absl::StrContains(log, "snapshot not used")) << log;
}

TEST_F(StaleStartE2eTest, WithoutServeStaleAnUnreachableApiServerIsFatal) {
  ASSERT_NO_FATAL_FAILURE(SnapshotThenChange());
  const int port = FreePort();
  std::vector<std::string> args = {sidecar_bin_};
  for (const std::string& f : FlagsFor(KubeconfigFor(port))) args.push_back(f);
  args.push_back("--grpc_listen=127.0.0.1:0");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = work_ + "/off.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, sidecar_bin_.c_str(), &actions, nullptr,
                        argv.data(), environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "the sidecar kept running: " << ReadFile(log);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::string text = ReadFile(log);
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("The connection to the server 127.0.0.1:", port,
                         " was refused")))
      << text;
}

}  // namespace
}  // namespace integration

// End-to-end tests of the sidecar's operations surface with the real
// binary: /healthz, /readyz, /metrics, many concurrent Watch streams,
// reclaiming the streams of dead clients (killed, or frozen so that only
// keepalive notices), and shutdown on signals.
//
// Clients that must die abruptly run as child processes: this test binary
// re-executed in "watch client" mode (see main()).

#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

extern char** environ;

namespace integration {
namespace {

namespace v1 = informer::v1;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kChildAddressEnv[] = "OPS_E2E_WATCH_CLIENT_ADDRESS";
constexpr char kChildStreamsEnv[] = "OPS_E2E_WATCH_CLIENT_STREAMS";

std::string Argv0() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// --- Watch streams (callback API: no thread per stream here either) ---

// Counts what a set of Watch streams went through.
class StreamTracker {
 public:
  void InitialDone() {
    absl::MutexLock lock(&mu_);
    ++initial_done_;
  }
  void LiveEvents(int n) {
    absl::MutexLock lock(&mu_);
    live_events_ += n;
  }
  void Done(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    ++done_;
    ++codes_[status.error_code()];
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      last_unavailable_message_ = status.error_message();
    }
  }
  // Waits until `n` streams delivered their initial state.
  bool WaitInitialDone(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto cond = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return initial_done_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  bool WaitLiveEvents(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto cond = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return live_events_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  bool WaitDone(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto cond = [this, n]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  int code_count(grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    return codes_[code];
  }
  std::string last_unavailable_message() {
    absl::MutexLock lock(&mu_);
    return last_unavailable_message_;
  }

 private:
  absl::Mutex mu_;
  int initial_done_ ABSL_GUARDED_BY(mu_) = 0;
  int live_events_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<grpc::StatusCode, int> codes_ ABSL_GUARDED_BY(mu_);
  std::string last_unavailable_message_ ABSL_GUARDED_BY(mu_);
};

class WatchStream : public grpc::ClientReadReactor<v1::WatchResponse> {
 public:
  WatchStream(v1::Informer::Stub* stub, const std::string& resource,
              StreamTracker* tracker)
      : tracker_(tracker) {
    request_.set_resource(resource);
    stub->async()->Watch(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    int live = 0;
    for (const v1::Event& e : response_.events()) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
        tracker_->InitialDone();
      } else if (!e.initial() && e.type() != v1::EVENT_TYPE_BOOKMARK) {
        ++live;
      }
    }
    if (live > 0) tracker_->LiveEvents(live);
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { tracker_->Done(status); }
  void Cancel() { context_.TryCancel(); }

 private:
  StreamTracker* const tracker_;
  grpc::ClientContext context_;
  v1::WatchRequest request_;
  v1::WatchResponse response_;
};

// `n` Watch streams on `resource` spread over `channels` connections.
class StreamSet {
 public:
  StreamSet(const std::string& address, int n, int channels,
            const std::string& resource = "pods") {
    for (int c = 0; c < channels; ++c) {
      grpc::ChannelArguments args;
      // Distinct arguments: a connection of its own per channel.
      args.SetInt("ops_e2e.channel", c);
      stubs_.push_back(v1::Informer::NewStub(grpc::CreateCustomChannel(
          address, grpc::InsecureChannelCredentials(), args)));
    }
    for (int i = 0; i < n; ++i) {
      streams_.push_back(std::make_unique<WatchStream>(
          stubs_[i % channels].get(), resource, &tracker_));
    }
  }
  ~StreamSet() {
    CancelAll();
    tracker_.WaitDone(static_cast<int>(streams_.size()), absl::Seconds(30));
  }
  void CancelAll() {
    for (auto& s : streams_) s->Cancel();
  }
  StreamTracker& tracker() { return tracker_; }
  int size() const { return static_cast<int>(streams_.size()); }

 private:
  std::vector<std::unique_ptr<v1::Informer::Stub>> stubs_;
  StreamTracker tracker_;
  std::vector<std::unique_ptr<WatchStream>> streams_;
};

// --- The sidecar's HTTP side ---

struct Ports {
  int grpc = 0;
  int http = 0;
};

absl::StatusOr<Ports> ReadPorts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no ports file ", path));
  Ports ports;
  std::string line;
  while (std::getline(in, line)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, '=');
    int v = 0;
    if (!absl::SimpleAtoi(kv.second, &v)) continue;
    if (kv.first == "grpc") ports.grpc = v;
    if (kv.first == "http") ports.http = v;
  }
  if (ports.http == 0) {
    return absl::InvalidArgumentError(absl::StrCat("no http port in ", path));
  }
  return ports;
}

struct HttpAnswer {
  int status = 0;  // 0: no answer
  std::string body;
};

HttpAnswer HttpGet(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(10, 0);
  httplib::Result res = cli.Get(path.c_str());
  if (!res) return {};
  return {res->status, res->body};
}

// The sum of the samples of `name` whose labels contain every one of
// `labels` (e.g. {"resource=\"pods\""}); -1 when there is none.
double MetricSum(const std::string& text, const std::string& name,
                 const std::vector<std::string>& labels = {}) {
  double sum = 0;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (!absl::StartsWith(line, name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    const size_t space = line.rfind(' ');
    const absl::string_view series = line.substr(0, space);
    bool all = true;
    for (const std::string& l : labels) {
      if (!absl::StrContains(series, l)) all = false;
    }
    if (!all) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &v)) {
      sum += v;
      found = true;
    }
  }
  return found ? sum : -1;
}

double Metric(int http_port, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  return MetricSum(HttpGet(http_port, "/metrics").body, name, labels);
}

// Scrapes until the metric satisfies `pred` or `timeout` passes. The
// sidecar has no push channel for these values, so this is a bounded poll
// of its observable state.
bool WaitForMetric(int http_port, const std::string& name,
                   const std::vector<std::string>& labels,
                   const std::function<bool(double)>& pred,
                   absl::Duration timeout, double* last = nullptr) {
  const absl::Time deadline = absl::Now() + timeout;
  double v = -1;
  while (true) {
    v = Metric(http_port, name, labels);
    if (last != nullptr) *last = v;
    if (pred(v)) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

struct ProcStatus {
  int threads = 0;
  int64_t rss_kib = 0;
};

ProcStatus ReadProcStatus(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  ProcStatus s;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l(line);
    if (absl::ConsumePrefix(&l, "Threads:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(l), &s.threads);
    } else if (absl::ConsumePrefix(&l, "VmRSS:")) {
      l = absl::StripAsciiWhitespace(l);
      (void)absl::ConsumeSuffix(&l, " kB");
      (void)absl::SimpleAtoi(l, &s.rss_kib);
    }
  }
  return s;
}

// A fresh short temporary directory (for the ports file and kubeconfigs).
std::string TempDir() {
  char tmpl[] = "/tmp/opse2e.XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d != nullptr ? d : "/tmp";
}

class OpsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> bin = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(bin.ok()) << bin.status();
    binary_ = *bin;
    dir_ = TempDir();
    ports_file_ = dir_ + "/ports";
  }

  // Starts the sidecar with the operations flags plus `flags`, and reads
  // its ports once `health_service` ("" = all informers) is SERVING (the
  // ports file is written before the informers start).
  void StartSidecar(std::vector<std::string> flags,
                    const std::string& health_service = "",
                    bool quiet = false) {
    SidecarProcess::Options options;
    options.flags = {"--http_listen=127.0.0.1:0", "--ports_file=" + ports_file_,
                     "--print_events=false"};
    options.flags.insert(options.flags.end(), flags.begin(), flags.end());
    options.wait_serving = false;
    options.quiet = quiet;
    absl::StatusOr<std::unique_ptr<SidecarProcess>> s =
        SidecarProcess::Start(binary_, options);
    ASSERT_TRUE(s.ok()) << s.status();
    sidecar_ = *std::move(s);
    channel_ = sidecar_->NewChannel();
    absl::Status serving = WaitForHealthServing(channel_, health_service);
    ASSERT_TRUE(serving.ok()) << serving;
    absl::StatusOr<Ports> ports = ReadPorts(ports_file_);
    ASSERT_TRUE(ports.ok()) << ports.status();
    http_port_ = ports->http;
  }

  // Starts a demo emulator whose lists of `resource` fail with HTTP `code`
  // until faults are cleared (ClearFaults), and writes a kubeconfig for it
  // into kubeconfig_. Its sidecars run with --watch_list=off: the fault
  // hits LISTs, and a WatchList is a watch.
  void StartEmulatorFailingLists(const std::string& resource, int code) {
    absl::StatusOr<std::string> emulator_bin =
        FindRunfile("emulator/kube_emulator");
    ASSERT_TRUE(emulator_bin.ok()) << emulator_bin.status();
    absl::StatusOr<std::unique_ptr<EmulatorProcess>> emulator =
        EmulatorProcess::Start(*emulator_bin, {"--demo"}, /*quiet=*/true);
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = *std::move(emulator);
    httplib::Client control("127.0.0.1", emulator_->port());
    httplib::Result armed = control.Post(
        absl::StrCat("/_emulator/fail?verb=list&resource=", resource,
                     "&code=", code, "&count=-1"),
        "", "text/plain");
    ASSERT_TRUE(armed);
    ASSERT_EQ(armed->status, 200);
    absl::StatusOr<std::string> kubeconfig =
        WriteKubeconfig(dir_, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    kubeconfig_ = *kubeconfig;
  }

  void ClearFaults() {
    httplib::Client control("127.0.0.1", emulator_->port());
    httplib::Result cleared =
        control.Post("/_emulator/clear_faults", "", "text/plain");
    ASSERT_TRUE(cleared);
    ASSERT_EQ(cleared->status, 200);
  }

  std::string binary_;
  std::string dir_;
  std::string ports_file_;
  std::unique_ptr<EmulatorProcess> emulator_;
  std::string kubeconfig_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::shared_ptr<grpc::Channel> channel_;
  int http_port_ = 0;
};

// /readyz is 503 naming the informer that has not synced (its lists fail),
// the failures show in informer_errors_total, and once the API server
// answers again /readyz turns 200. /healthz is 200 throughout.
TEST_F(OpsE2eTest, ReadyzFollowsInformerSync) {
  StartEmulatorFailingLists("services", 500);
  // pods syncs; services cannot. (Health turns SERVING per resource in
  // name order, so the resource that syncs comes first.)
  StartSidecar({"--kubeconfig=" + kubeconfig_, "--watch_list=off",
                "--resources=pods,services"},
               "pods");
  HttpAnswer ready = HttpGet(http_port_, "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_THAT(ready.body, HasSubstr("services"));
  EXPECT_THAT(ready.body, Not(HasSubstr("pods")));
  EXPECT_EQ(HttpGet(http_port_, "/healthz").status, 200);
  EXPECT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_informer_errors_total",
      {"resource=\"services\"", "kind=\"http_500\""},
      [](double v) { return v >= 1; }, absl::Seconds(30)));
  EXPECT_EQ(Metric(http_port_, "informer_sidecar_informer_synced",
                   {"resource=\"services\""}),
            0);
  EXPECT_EQ(Metric(http_port_, "informer_sidecar_informer_synced",
                   {"resource=\"pods\""}),
            1);
  // The failed lists were API requests with code 500.
  EXPECT_GE(
      Metric(http_port_, "informer_sidecar_api_request_duration_seconds_count",
             {"verb=\"GET\"", "code=\"500\""}),
      1);

  ClearFaults();
  absl::Status serving = WaitForHealthServing(channel_, "");
  ASSERT_TRUE(serving.ok()) << serving;
  ready = HttpGet(http_port_, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok\n");
  EXPECT_EQ(sidecar_->Terminate(SIGTERM), 0);
}

// The API server forbids the sidecar to list a resource (RBAC without
// list): a Watch on it ends at once with the reason instead of waiting in
// silence, a Get names the last error, and once the API server allows the
// list the same Watch works.
TEST_F(OpsE2eTest, WatchOnAResourceTheApiServerForbidsEndsWithTheReason) {
  StartEmulatorFailingLists("services", 403);
  StartSidecar({"--kubeconfig=" + kubeconfig_, "--watch_list=off",
                "--resources=pods,services"},
               "pods");
  std::unique_ptr<v1::Informer::Stub> stub = v1::Informer::NewStub(channel_);
  v1::WatchRequest watch;
  watch.set_resource("services");
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub->Watch(&ctx, watch);
    v1::WatchResponse resp;
    EXPECT_FALSE(reader->Read(&resp)) << resp.DebugString();
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE)
        << st.error_message();
    EXPECT_THAT(st.error_message(),
                HasSubstr("the informer of \"services\" cannot sync: 403 "
                          "GET /api/v1/services"));
  }
  {
    grpc::ClientContext ctx;
    v1::GetRequest get;
    get.set_resource("services");
    get.set_namespace_("demo");
    get.set_name("web");
    v1::GetResponse resp;
    const grpc::Status st = stub->Get(&ctx, get, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(st.error_message(), HasSubstr("(last error: 403 GET"));
  }

  ClearFaults();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
      stub->Watch(&ctx, watch);
  bool initial_done = false;
  v1::WatchResponse resp;
  while (!initial_done && reader->Read(&resp)) {
    for (const v1::Event& e : resp.events()) {
      initial_done |= e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE;
    }
  }
  EXPECT_TRUE(initial_done) << reader->Finish().error_message();
  ctx.TryCancel();
  reader->Finish();
  EXPECT_EQ(sidecar_->Terminate(SIGTERM), 0);
}

// Under the demo cluster's churn the informer and Watch counters grow, and
// gRPC calls are counted by method; nothing in /metrics is object data.
TEST_F(OpsE2eTest, MetricsGrowUnderChurn) {
  StartSidecar({"--demo"});
  const std::string before = HttpGet(http_port_, "/metrics").body;
  const double events_before = MetricSum(
      before, "informer_sidecar_informer_events_total", {"resource=\"pods\""});
  ASSERT_GE(events_before, 0);
  const double bytes_before =
      MetricSum(before, "informer_sidecar_informer_bytes_received_total",
                {"resource=\"pods\""});
  ASSERT_GT(bytes_before, 0);
  EXPECT_EQ(MetricSum(before, "informer_sidecar_informer_synced",
                      {"resource=\"pods\""}),
            1);
  EXPECT_GT(MetricSum(before, "informer_sidecar_informer_objects",
                      {"resource=\"pods\""}),
            0);

  // A live event on a Watch stream has passed the reflector and the
  // fan-out, so it is counted by both.
  StreamSet streams(sidecar_->address(), 1, 1);
  ASSERT_TRUE(streams.tracker().WaitInitialDone(1, absl::Seconds(30)));
  ASSERT_TRUE(streams.tracker().WaitLiveEvents(1, absl::Seconds(30)));
  const std::string after = HttpGet(http_port_, "/metrics").body;
  EXPECT_GT(MetricSum(after, "informer_sidecar_informer_events_total",
                      {"resource=\"pods\""}),
            events_before);
  EXPECT_GT(MetricSum(after, "informer_sidecar_informer_bytes_received_total",
                      {"resource=\"pods\""}),
            bytes_before);
  EXPECT_GE(MetricSum(after, "informer_sidecar_watch_events_out_total",
                      {"type=\"INITIAL_STATE_DONE\""}),
            1);
  EXPECT_GT(MetricSum(after, "informer_sidecar_watch_events_out_total",
                      {"type=\"ADDED\""}),
            0);
  EXPECT_GT(MetricSum(after, "informer_sidecar_watch_events_in_total"), 0);
  EXPECT_EQ(MetricSum(after, "informer_sidecar_watch_streams_open",
                      {"resource=\"pods\""}),
            1);
  EXPECT_EQ(MetricSum(after, "informer_sidecar_grpc_server_started_total",
                      {"method=\"/informer.v1.Informer/Watch\""}),
            1);
  // The health checks of the test harness were counted too. The harness
  // cancels its health Watch and moves on; the server counts the call as
  // handled when it sees the cancellation, which may come a little later.
  EXPECT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_grpc_server_handled_total",
      {"method=\"/grpc.health.v1.Health/Watch\""},
      [](double v) { return v >= 1; }, absl::Seconds(30)));
  EXPECT_GT(
      MetricSum(after, "informer_sidecar_api_request_duration_seconds_count",
                {"verb=\"WATCH\"", "code=\"200\""}),
      0);
  // Metrics never carry object data (names, labels, JSON).
  EXPECT_THAT(after, Not(HasSubstr("\"metadata\"")));
  EXPECT_THAT(after, Not(HasSubstr("demo/")));
  EXPECT_THAT(after, HasSubstr("# TYPE informer_sidecar_informer_events_total "
                               "counter\n"));
}

// 1000 concurrent Watch streams on one sidecar: the thread count does not
// grow with them and memory stays small per stream; all are reclaimed when
// the client cancels.
TEST_F(OpsE2eTest, ThousandConcurrentWatchStreams) {
  constexpr int kStreams = 1000;
  StartSidecar({"--demo"}, "", /*quiet=*/true);
  {
    // Warm-up: gRPC's own pools reach their working size.
    StreamSet warm(sidecar_->address(), 20, 4);
    ASSERT_TRUE(warm.tracker().WaitInitialDone(20, absl::Seconds(30)));
  }
  ASSERT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_watch_streams_open", {},
      [](double v) { return v == 0; }, absl::Seconds(30)));
  const ProcStatus base = ReadProcStatus(sidecar_->pid());
  ASSERT_GT(base.threads, 0);

  StreamSet streams(sidecar_->address(), kStreams, 8);
  ASSERT_TRUE(streams.tracker().WaitInitialDone(kStreams, absl::Seconds(120)));
  EXPECT_EQ(Metric(http_port_, "informer_sidecar_watch_streams_open"),
            kStreams);
  // The streams keep flowing under churn.
  ASSERT_TRUE(streams.tracker().WaitLiveEvents(kStreams, absl::Seconds(60)));
  const ProcStatus loaded = ReadProcStatus(sidecar_->pid());
  const double rss_per_stream_kib =
      double(loaded.rss_kib - base.rss_kib) / kStreams;
  std::printf(
      "sidecar with %d Watch streams: threads %d -> %d, RSS %lld -> "
      "%lld KiB (%.1f KiB per stream)\n",
      kStreams, base.threads, loaded.threads,
      static_cast<long long>(base.rss_kib),
      static_cast<long long>(loaded.rss_kib), rss_per_stream_kib);
  // No thread per stream: a handful of pool threads at most.
  EXPECT_LE(loaded.threads, base.threads + 8);
  // Flat memory: well under 64 KiB per stream.
  EXPECT_LT(rss_per_stream_kib, 64);

  streams.CancelAll();
  ASSERT_TRUE(streams.tracker().WaitDone(kStreams, absl::Seconds(60)));
  EXPECT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_watch_streams_open", {},
      [](double v) { return v == 0; }, absl::Seconds(30)));
  EXPECT_LE(ReadProcStatus(sidecar_->pid()).threads, base.threads + 8);
}

// A watch client in a child process (this binary in client mode); Start
// returns once all its streams delivered their initial state.
class ChildClient {
 public:
  static std::unique_ptr<ChildClient> Start(const std::string& address,
                                            int streams) {
    int out[2];
    if (pipe(out) != 0) return nullptr;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const std::string self = Argv0();
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
    env_strings.push_back(absl::StrCat(kChildAddressEnv, "=", address));
    env_strings.push_back(absl::StrCat(kChildStreamsEnv, "=", streams));
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<char*> argv = {const_cast<char*>(self.c_str()), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr,
                               argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc != 0) {
      close(out[0]);
      return nullptr;
    }
    auto child = std::unique_ptr<ChildClient>(new ChildClient(pid));
    // Blocks until the child says "ready" (or dies: EOF).
    std::string got;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') got.push_back(c);
    close(out[0]);
    if (got != "ready") return nullptr;
    return child;
  }
  ~ChildClient() { Kill(); }
  pid_t pid() const { return pid_; }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  explicit ChildClient(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// A client killed mid-stream (its connection closed by the kernel) and a
// client frozen with SIGSTOP (connection open, nobody answering: only the
// server's keepalive notices) both get their streams reclaimed.
TEST_F(OpsE2eTest, DeadClientsStreamsAreReclaimed) {
  StartSidecar(
      {"--demo", "--grpc_keepalive_time=1s", "--grpc_keepalive_timeout=1s"});
  std::unique_ptr<ChildClient> killed =
      ChildClient::Start(sidecar_->address(), 5);
  ASSERT_NE(killed, nullptr);
  std::unique_ptr<ChildClient> frozen =
      ChildClient::Start(sidecar_->address(), 7);
  ASSERT_NE(frozen, nullptr);
  EXPECT_EQ(Metric(http_port_, "informer_sidecar_watch_streams_open"), 12);

  killed->Kill();
  double open = -1;
  EXPECT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_watch_streams_open", {},
      [](double v) { return v == 7; }, absl::Seconds(20), &open))
      << "streams open: " << open;
  const absl::Time frozen_at = absl::Now();
  ASSERT_EQ(kill(frozen->pid(), SIGSTOP), 0);
  EXPECT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_watch_streams_open", {},
      [](double v) { return v == 0; }, absl::Seconds(30), &open))
      << "streams open: " << open;
  std::printf("frozen client's streams reclaimed after %s\n",
              absl::FormatDuration(absl::Now() - frozen_at).c_str());
  EXPECT_GE(
      Metric(http_port_, "informer_sidecar_grpc_server_handled_total",
             {"method=\"/informer.v1.Informer/Watch\"", "code=\"CANCELLED\""}),
      12);
  frozen->Kill();
  EXPECT_EQ(sidecar_->Terminate(SIGTERM), 0);
}

// SIGTERM with streams open: every stream ends UNAVAILABLE with a message
// saying why, /readyz says so first, and the process exits 0 promptly.
TEST_F(OpsE2eTest, SigtermWithStreamsOpenExitsZero) {
  StartSidecar({"--demo"});
  StreamSet streams(sidecar_->address(), 50, 2);
  ASSERT_TRUE(streams.tracker().WaitInitialDone(50, absl::Seconds(30)));
  const absl::Time start = absl::Now();
  const int code = sidecar_->Terminate(SIGTERM);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(code, 0);
  EXPECT_LT(took, absl::Seconds(3)) << took;
  ASSERT_TRUE(streams.tracker().WaitDone(50, absl::Seconds(30)));
  EXPECT_EQ(streams.tracker().code_count(grpc::StatusCode::UNAVAILABLE), 50);
  EXPECT_THAT(streams.tracker().last_unavailable_message(),
              HasSubstr("shutting down"));
  std::printf("SIGTERM with 50 streams open: exit %d after %s\n", code,
              absl::FormatDuration(took).c_str());
}

// A second signal during a slow shutdown exits at once with 128+SIGTERM.
// The shutdown is held up by a unary call waiting for a lazily started
// informer whose lists fail (the server gives running calls their grace).
TEST_F(OpsE2eTest, SecondSignalExitsAtOnce) {
  StartEmulatorFailingLists("services", 500);
  // Lazy mode (no resources configured): informers start on first request.
  StartSidecar({"--kubeconfig=" + kubeconfig_, "--watch_list=off",
                "--shutdown_grace=30s"});
  // A Get on services starts its informer, which cannot sync: the call
  // waits for it (a few seconds) on the server.
  auto stub = v1::Informer::NewStub(channel_);
  grpc::ClientContext get_context;
  v1::GetRequest get;
  get.set_resource("services");
  get.set_namespace_("default");
  get.set_name("kubernetes");
  v1::GetResponse got;
  absl::Mutex mu;
  bool get_done = false;
  stub->async()->Get(&get_context, &get, &got, [&](grpc::Status) {
    absl::MutexLock lock(&mu);
    get_done = true;
  });
  ASSERT_TRUE(WaitForMetric(
      http_port_, "informer_sidecar_informer_synced", {"resource=\"services\""},
      [](double v) { return v == 0; }, absl::Seconds(30)));
  // First signal: the orderly shutdown starts (readyz says so) and waits
  // for the Get.
  ASSERT_EQ(kill(sidecar_->pid(), SIGTERM), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  HttpAnswer ready;
  do {
    ready = HttpGet(http_port_, "/readyz");
    if (ready.body == "shutting down\n") break;
    absl::SleepFor(absl::Milliseconds(5));
  } while (absl::Now() < deadline);
  ASSERT_EQ(ready.body, "shutting down\n");
  {
    absl::MutexLock lock(&mu);
    ASSERT_FALSE(get_done) << "the shutdown is no longer held up";
  }
  const absl::Time start = absl::Now();
  const int code = sidecar_->Terminate(SIGTERM);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_LT(took, absl::Seconds(1)) << took;
  get_context.TryCancel();
  absl::MutexLock lock(&mu);
  auto done = [&get_done]() { return get_done; };
  mu.Await(absl::Condition(&done));
}

}  // namespace
}  // namespace integration

// Child mode: open N Watch streams on pods, print "ready" once all have
// their initial state, then wait to be killed.
int RunWatchClient(const char* address, int n) {
  integration::StreamSet streams(address, n, 1);
  if (!streams.tracker().WaitInitialDone(n, absl::Seconds(60))) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) pause();
}

int main(int argc, char** argv) {
  if (const char* address = std::getenv(integration::kChildAddressEnv)) {
    int n = 1;
    if (const char* s = std::getenv(integration::kChildStreamsEnv)) {
      n = std::atoi(s);
    }
    return RunWatchClient(address, n);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

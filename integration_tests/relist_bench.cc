// What a relist costs: the real informer_sidecar caching N ConfigMaps
// (1 KiB of data each) from the kube_emulator binary, made to relist them
// all while a few changed, as after an API server restart with etcd
// compacted.
//
//   bazel run -c opt //integration_tests:relist_bench --
//       [--objects=50000 --changed=20 --runs=1 --watch_list=auto,off
//        --baseline_sidecar=/path/to/other/informer_sidecar]
//   (one command line)
//
// Per run, sidecar (alternating with --baseline_sidecar) and --watch_list
// mode (auto: the initial list and the relist are WatchLists, as against
// a v1.37 API server; off: LISTs):
//   1. start the sidecar on the seeded ConfigMaps, open one gRPC Watch on
//      them and wait for its initial state; the initial sync's time, from
//      the informer's start to "cache synced" (its log lines) and the
//      sidecar's CPU time so far; RSS "before" (VmRSS);
//   2. reset the peak (VmHWM, via /proc/PID/clear_refs), stall the
//      sidecar's watch (the emulator sends it nothing), change --changed
//      ConfigMaps (the last ones in list order), compact and restart the
//      emulator's watch window: the sidecar's re-watch gets 410 Expired
//      and it relists everything;
//   3. once the Watch stream has received every change and the sidecar's
//      CPU time has stopped growing: the peak (VmHWM) and RSS "after";
//      the events the stream received after its initial state; the relist
//      time, from the sidecar's "relisting" log line to the last change
//      reaching the stream (the changed objects come last in the list, so
//      this covers applying the whole list; a build that logs no
//      "relisting" for a WatchList shows -1), and the sidecar's CPU time
//      since step 1.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(int, objects, 50000, "ConfigMaps to seed and cache.");
ABSL_FLAG(int, data_bytes, 1024, "Bytes of data per ConfigMap.");
ABSL_FLAG(int, changed, 20, "ConfigMaps changed while the watch is down.");
ABSL_FLAG(int, runs, 1, "Runs per sidecar (medians).");
ABSL_FLAG(std::vector<std::string>, watch_list, {"auto"},
          "The sidecar's --watch_list modes to measure, each in turn.");
ABSL_FLAG(std::string, baseline_sidecar, "",
          "Another informer_sidecar binary (e.g. one built from main) to "
          "measure alternately with this build's.");

namespace {

namespace v1 = ::informer::v1;
constexpr char kNamespace[] = "bench";

std::string Name(int i) { return absl::StrCat("cm-", i); }

std::string ConfigMapJson(int i) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", Name(i),
      R"(","namespace":")", kNamespace, R"("},"data":{"payload":")",
      std::string(static_cast<size_t>(absl::GetFlag(FLAGS_data_bytes)), 'x'),
      R"("}})");
}

bool Seed(int port, int n) {
  httplib::Client ns_cli("127.0.0.1", port);
  auto ns = ns_cli.Post("/api/v1/namespaces",
                        absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)"
                                     R"("metadata":{"name":")",
                                     kNamespace, R"("}})"),
                        "application/json");
  if (!ns || (ns->status != 201 && ns->status != 409)) return false;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      const std::string path =
          absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps");
      for (int i = t; i < n; i += 4) {
        auto res = cli.Post(path.c_str(), ConfigMapJson(i), "application/json");
        if (!res || res->status != 201) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failed.load() == 0;
}

bool Control(int port, const std::string& op) {
  httplib::Client cli("127.0.0.1", port);
  auto res =
      cli.Post(absl::StrCat("/_emulator/", op, "?resource=configmaps").c_str(),
               "", "application/json");
  return res && res->status == 200;
}

// Bytes of a "Name:  123 kB" line of /proc/PID/status.
double StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, field + ":")) continue;
    std::vector<std::string> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    double kb = 0;
    if (f.size() >= 2 && absl::SimpleAtod(f[1], &kb)) return kb * 1024;
  }
  return 0;
}

// utime + stime of a process, in clock ticks.
long CpuTicks(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> f =
      absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
  long u = 0, s = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &u) ||
      !absl::SimpleAtoi(f[12], &s)) {
    return 0;
  }
  return u + s;
}

// Seconds since midnight of a glog line ("I1203 12:50:01.123456 ...").
double GlogSeconds(const std::string& line) {
  std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (f.size() < 2) return -1;
  std::vector<std::string> hms = absl::StrSplit(f[1], ':');
  double h = 0, m = 0, s = 0;
  if (hms.size() != 3 || !absl::SimpleAtod(hms[0], &h) ||
      !absl::SimpleAtod(hms[1], &m) || !absl::SimpleAtod(hms[2], &s)) {
    return -1;
  }
  return h * 3600 + m * 60 + s;
}

double SecondsOfDay(absl::Time t) {
  const absl::CivilSecond cs = absl::ToCivilSecond(t, absl::LocalTimeZone());
  const double frac =
      absl::ToDoubleSeconds(t - absl::FromCivil(cs, absl::LocalTimeZone()));
  return cs.hour() * 3600 + cs.minute() * 60 + cs.second() + frac;
}

// Reads one Watch stream, counting what follows its initial state.
class StreamCounter {
 public:
  StreamCounter(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::Informer::NewStub(std::move(channel))) {
    v1::WatchRequest req;
    req.set_resource("configmaps");
    reader_ = stub_->Watch(&ctx_, req);
    thread_ = std::thread([this] { Loop(); });
  }
  ~StreamCounter() {
    ctx_.TryCancel();
    thread_.join();
  }
  bool WaitFor(int live, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return initial_done_ && live_ >= live;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  int live() {
    absl::MutexLock lock(&mu_);
    return live_;
  }
  std::map<int, int> by_type() {
    absl::MutexLock lock(&mu_);
    return by_type_;
  }
  absl::Time last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  void Loop() {
    v1::WatchResponse resp;
    while (reader_->Read(&resp)) {
      absl::MutexLock lock(&mu_);
      for (const v1::Event& e : resp.events()) {
        if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
          initial_done_ = true;
        } else if (initial_done_ && e.type() != v1::EVENT_TYPE_BOOKMARK) {
          ++live_;
          ++by_type_[e.type()];
          last_ = absl::Now();
        }
      }
    }
  }

  std::unique_ptr<v1::Informer::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader_;
  absl::Mutex mu_;
  bool initial_done_ ABSL_GUARDED_BY(mu_) = false;
  int live_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, int> by_type_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

struct Result {
  double before = 0, peak = 0, after = 0, relist_s = 0, sync_s = 0;
  // The sidecar's CPU time (user + system) until its initial sync was
  // done, and during the relist: less at the mercy of a busy machine than
  // wall times, and measured alike for every build.
  double sync_cpu_s = 0, relist_cpu_s = 0;
  int live = 0;
  std::string types;
};

// Waits (polling, with a deadline) until `pid` used no CPU for a while.
void WaitQuiet(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  long last = CpuTicks(pid);
  int still = 0;
  while (still < 5 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    const long now = CpuTicks(pid);
    still = now == last ? still + 1 : 0;
    last = now;
  }
}

// Seconds from the first log line containing `from` to the first after
// it containing `to` (-1 when either is missing).
double LoggedSeconds(const std::string& log, const std::string& from,
                     const std::string& to) {
  std::ifstream in(log);
  std::string line;
  double start = -1;
  while (std::getline(in, line)) {
    if (start < 0 && absl::StrContains(line, from)) {
      start = GlogSeconds(line);
    } else if (start >= 0 && absl::StrContains(line, to)) {
      return GlogSeconds(line) - start;
    }
  }
  return -1;
}

absl::StatusOr<Result> RunOnce(const std::string& binary,
                               const std::string& watch_list,
                               const std::string& kubeconfig,
                               const std::string& dir, int emu_port,
                               const std::vector<int>& to_change, int round) {
  const std::string config = absl::StrCat(dir, "/config.yaml");
  std::ofstream(config) << "resources:\n- resource: configmaps\n  namespace: "
                        << kNamespace << "\n";
  const std::string log = absl::StrCat(dir, "/sidecar-", round, ".log");
  integration::SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + kubeconfig, "--config=" + config,
                   "--print_events=false", "--http_listen=127.0.0.1:0",
                   "--watch_list=" + watch_list};
  options.stderr_file = log;
  options.start_timeout = absl::Minutes(5);
  absl::StatusOr<std::unique_ptr<integration::SidecarProcess>> sidecar =
      integration::SidecarProcess::Start(binary, std::move(options));
  if (!sidecar.ok()) return sidecar.status();
  const pid_t pid = (*sidecar)->pid();
  StreamCounter stream((*sidecar)->NewChannel());
  if (!stream.WaitFor(0, absl::Minutes(5))) {
    return absl::DeadlineExceededError("no initial state on the stream");
  }
  WaitQuiet(pid);
  Result r;
  r.sync_s = LoggedSeconds(log, "configmaps: informer started",
                           "configmaps: cache synced");
  r.before = StatusBytes(pid, "VmRSS");
  const long ticks_before = CpuTicks(pid);
  const double tick_s = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  r.sync_cpu_s = ticks_before * tick_s;
  std::ofstream(absl::StrCat("/proc/", pid, "/clear_refs")) << "5";
  if (!Control(emu_port, "stall_watches")) {
    return absl::InternalError("stall_watches failed");
  }
  httplib::Client cli("127.0.0.1", emu_port);
  for (int i : to_change) {
    auto res = cli.Patch(
        absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps/", Name(i))
            .c_str(),
        absl::StrCat(R"({"data":{"round":")", round, R"("}})"),
        "application/merge-patch+json");
    if (!res || res->status != 200) {
      return absl::InternalError(absl::StrCat("patch ", Name(i), " failed"));
    }
  }
  if (!Control(emu_port, "compact") || !Control(emu_port, "restart")) {
    return absl::InternalError("compact/restart failed");
  }
  const int n = static_cast<int>(to_change.size());
  if (!stream.WaitFor(n, absl::Minutes(5))) {
    return absl::DeadlineExceededError(
        absl::StrCat("the stream got ", stream.live(), " changes of ", n));
  }
  WaitQuiet(pid);
  r.relist_cpu_s = (CpuTicks(pid) - ticks_before) * tick_s;
  r.peak = StatusBytes(pid, "VmHWM");
  r.after = StatusBytes(pid, "VmRSS");
  r.live = stream.live();
  for (const auto& [type, count] : stream.by_type()) {
    absl::StrAppend(&r.types, r.types.empty() ? "" : " ",
                    v1::EventType_Name(static_cast<v1::EventType>(type)), "=",
                    count);
  }
  std::ifstream in(log);
  std::string line;
  double relisting = -1;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, "configmaps: relisting")) {
      relisting = GlogSeconds(line);
    }
  }
  r.relist_s = relisting < 0 ? -1 : SecondsOfDay(stream.last()) - relisting;
  (*sidecar)->Terminate();
  return r;
}

void PrintRow(const std::string& label, const std::string& mode,
              const Result& r) {
  std::printf(
      "| %s | %s | %.2f s (%.2f s) | %.1f MB | %.1f MB | %.1f MB | %.2fx | "
      "%.2fx | %.2f s (%.2f s) | %d (%s) |\n",
      label.c_str(), mode.c_str(), r.sync_s, r.sync_cpu_s, r.before / 1e6,
      r.peak / 1e6, r.after / 1e6, r.peak / r.before, r.after / r.before,
      r.relist_s, r.relist_cpu_s, r.live, r.types.c_str());
  std::fflush(stdout);
}

int Run(const char* argv0) {
  absl::StatusOr<std::string> emu_bin =
      integration::FindRunfile("emulator/kube_emulator", argv0);
  absl::StatusOr<std::string> sidecar_bin =
      integration::FindRunfile("server/informer_sidecar", argv0);
  if (!emu_bin.ok() || !sidecar_bin.ok()) return 1;
  char dir[] = "/tmp/relist_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  absl::StatusOr<std::unique_ptr<integration::EmulatorProcess>> emu =
      integration::EmulatorProcess::Start(*emu_bin, {}, /*quiet=*/true);
  if (!emu.ok()) return 1;
  const int n = absl::GetFlag(FLAGS_objects);
  if (!Seed((*emu)->port(), n)) return 1;
  absl::StatusOr<std::string> kubeconfig =
      integration::WriteKubeconfig(dir, (*emu)->url());
  if (!kubeconfig.ok()) return 1;
  // The last names in list (key) order.
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(Name(i));
  std::sort(names.begin(), names.end());
  std::vector<int> to_change;
  for (int k = 0; k < absl::GetFlag(FLAGS_changed); ++k) {
    int i = 0;
    absl::SimpleAtoi(names[names.size() - 1 - k].substr(3), &i);
    to_change.push_back(i);
  }
  std::vector<std::pair<std::string, std::string>> binaries = {
      {"this build", *sidecar_bin}};
  if (!absl::GetFlag(FLAGS_baseline_sidecar).empty()) {
    binaries.emplace_back("baseline", absl::GetFlag(FLAGS_baseline_sidecar));
  }
  std::printf(
      "| sidecar | --watch_list | initial sync (CPU) | RSS before | peak "
      "during relist | RSS after | peak/before | after/before | relist time "
      "(CPU) | stream events after its initial state |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  int round = 0;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    for (const std::string& mode : absl::GetFlag(FLAGS_watch_list)) {
      for (const auto& [label, binary] : binaries) {
        absl::StatusOr<Result> r = RunOnce(binary, mode, *kubeconfig, dir,
                                           (*emu)->port(), to_change, ++round);
        if (!r.ok()) {
          std::fprintf(stderr, "%s: %s\n", label.c_str(),
                       r.status().ToString().c_str());
          return 1;
        }
        PrintRow(label, mode, *r);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run(argv[0]);
}

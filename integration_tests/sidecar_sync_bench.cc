// End-to-end initial sync of the REAL sidecar against its floor:
//
//   bazel run -c opt //integration_tests:sidecar_sync_bench -- --runs=3
//
// For each case (a resource and a count: 50k ConfigMaps with 1 KiB of data,
// 10k realistic Pods) and each emulator pacing (--rates, bytes of JSON per
// second per list response; 0 = unpaced), one kube_emulator process is
// seeded, and then, alternating within each round:
//   curl      `curl -s -o /dev/null` of the very list the reflector asks for
//             (resourceVersion=0&limit=500, which the watch cache serves
//             whole), no compression: the floor
//   curl gz   the same with --compressed (what a gzip client waits for)
//   sidecar   //server:informer_sidecar started fresh with a kubeconfig for
//             the emulator and --resources=<the one resource>, once per
//             --api_compression value; its time is from posix_spawn to the
//             moment the gRPC health Watch (overall service) says SERVING
//   client-go kube-informer-bench (client-go v0.37's shared informer) with
//             its defaults and with managedFields stripped, when
//             --client_go_bench names it (default: $REALKUBE_BIN/
//             kube-informer-bench if that exists); its own sync time
// Medians over --runs rounds; ratio = sidecar / curl (plain). A case
// "pods:150000:100" spreads the Pods over 100 namespaces
// (--seed_pod_namespaces) and 5,000 node names.
//
// Where the sidecar's time goes comes from its own log lines (glog
// timestamps, microseconds): process start (spawn -> first log line: exec,
// the malloc re-exec, flag parsing), setup (-> the reflector's "listing":
// cluster config, discovery, the HTTP and gRPC servers), list (-> "listed
// N objects ... (Replace X ms)": download and decode, which overlap, minus
// Replace), Replace, pops (-> "cache synced": the DeltaFIFO pops into the
// indexer and the handlers), serving (-> the health Watch's SERVING).
//
// A plain binary (not Google Benchmark): each measurement is a fresh
// process. This binary does not apply the sidecar's malloc tunables to
// itself, so the sidecar re-executes itself exactly as in production.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/side_by_side.h"
#include "integration_tests/sidecar_process.h"

extern char** environ;

ABSL_FLAG(std::vector<std::string>, cases,
          std::vector<std::string>({"configmaps:50000", "pods:10000"}),
          "RESOURCE:COUNT[:NAMESPACES] (configmaps or pods; NAMESPACES "
          "spreads Pods) to seed and sync.");
ABSL_FLAG(bool, watch_list, false,
          "Let the sidecar and client-go take the initial state as a "
          "WatchList watch (their default on v1.37), which the emulator "
          "paces at --watch_list_rate_fraction of each rate. false: "
          "--watch_list=off and client-go's WatchListClient gate off, so "
          "both LIST at --rates, as curl does.");
ABSL_FLAG(double, watch_list_rate_fraction, 1.0,
          "The emulator's pace of a WatchList's initial events as a fraction "
          "of each --rates value (1: the list pace). kube-apiserver v1.37.2 "
          "streams a JSON WatchList at about half its JSON LIST rate: 0.5.");
ABSL_FLAG(std::string, client_go_bench, "",
          "kube-informer-bench to run side by side (with its defaults and "
          "with --strip-managed-fields); default: "
          "$REALKUBE_BIN/kube-informer-bench if it exists.");
ABSL_FLAG(std::vector<std::string>, rates,
          std::vector<std::string>({"75e6", "155e6", "0"}),
          "Emulator list pacing, bytes per second (0: unpaced).");
ABSL_FLAG(std::vector<std::string>, compressions,
          std::vector<std::string>({"none", "gzip"}),
          "--api_compression values to run the sidecar with.");
ABSL_FLAG(int, runs, 3, "Rounds per case and rate (medians are reported).");
ABSL_FLAG(bool, verbose, false, "Print every run's total.");
ABSL_FLAG(std::vector<std::string>, sidecars, {},
          "Sidecar binaries to alternate (e.g. a baseline build and this "
          "one); default: the //server:informer_sidecar in the runfiles.");

namespace {

// The stages of one sidecar start, in seconds.
struct SidecarRun {
  double total = 0;    // spawn -> SERVING seen by the health Watch
  double start = 0;    // spawn -> first log line
  double setup = 0;    // -> "listing"
  double list = 0;     // -> "listed" minus Replace
  double replace = 0;  // Replace, as the reflector logged it
  double pops = 0;     // "listed" -> "cache synced"
  double serving = 0;  // "cache synced" -> SERVING
  double rss_mb = 0;   // VmRSS once SERVING
};

// A glog line's time ("I20261201 19:05:24.711112 ..."), local time.
bool LogLineTime(const std::string& line, absl::Time* t) {
  if (line.size() < 25 ||
      std::string("IWEF").find(line[0]) == std::string::npos) {
    return false;
  }
  std::string err;
  return absl::ParseTime("%E4Y%m%d %H:%M:%E*S", line.substr(1, 24),
                         absl::LocalTimeZone(), t, &err);
}

// Reads the child's stderr to its end, keeping the lines.
class LogReader {
 public:
  explicit LogReader(int fd) : fd_(fd), thread_([this] { Run(); }) {}
  ~LogReader() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  void Run() {
    std::string buf;
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd_, chunk, sizeof(chunk))) > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        absl::MutexLock lock(&mu_);
        lines_.push_back(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
    }
    close(fd_);
  }
  const int fd_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

double RssMb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      double kb = 0;
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() >= 2 && absl::SimpleAtod(f[1], &kb)) return kb / 1024;
    }
  }
  return 0;
}

// Fills the stages from the log, relative to `spawned`.
absl::Status StagesFromLog(const std::vector<std::string>& lines,
                           absl::Time spawned, absl::Time serving,
                           SidecarRun* run) {
  absl::Time first = absl::InfinitePast(), listing = first, listed = first,
             synced = first;
  for (const std::string& line : lines) {
    absl::Time t;
    if (!LogLineTime(line, &t)) continue;
    if (first == absl::InfinitePast()) first = t;
    if (absl::StrContains(line, ": listing") &&
        listing == absl::InfinitePast()) {
      listing = t;
    }
    const size_t at = line.find("(Replace ");
    if (absl::StrContains(line, ": listed ") && at != std::string::npos &&
        listed == absl::InfinitePast()) {
      listed = t;
      double ms = 0;
      const std::string rest = line.substr(at + 9);
      if (!absl::SimpleAtod(rest.substr(0, rest.find(' ')), &ms)) {
        return absl::InternalError("bad Replace time: " + line);
      }
      run->replace = ms / 1000;
    }
    if (absl::StrContains(line, ": cache synced") &&
        synced == absl::InfinitePast()) {
      synced = t;
    }
  }
  if (synced == absl::InfinitePast() || listed == absl::InfinitePast() ||
      listing == absl::InfinitePast()) {
    return absl::InternalError(absl::StrCat(
        "sidecar log lacks the sync lines:\n", absl::StrJoin(lines, "\n")));
  }
  auto s = [](absl::Duration d) { return absl::ToDoubleSeconds(d); };
  run->total = s(serving - spawned);
  run->start = s(first - spawned);
  run->setup = s(listing - first);
  run->list = s(listed - listing) - run->replace;
  run->pops = s(synced - listed);
  run->serving = s(serving - synced);
  return absl::OkStatus();
}

// One fresh sidecar: spawn, wait for SERVING on the health Watch, stop.
absl::StatusOr<SidecarRun> RunSidecar(const std::string& binary,
                                      const std::string& dir,
                                      const std::string& kubeconfig,
                                      const std::string& resource,
                                      const std::string& compression) {
  const std::string socket = absl::StrCat(dir, "/grpc.sock");
  unlink(socket.c_str());
  std::vector<std::string> args = {
      binary,
      "--kubeconfig=" + kubeconfig,
      "--resources=" + resource,
      "--api_compression=" + compression,
      "--grpc_listen=unix:" + socket,
      "--http_listen=127.0.0.1:0",
      "--print_events=false",
  };
  if (!absl::GetFlag(FLAGS_watch_list)) args.push_back("--watch_list=off");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
  pid_t pid = 0;
  const absl::Time spawned = absl::Now();
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    return absl::InternalError(absl::StrCat("posix_spawn: ", rc));
  }
  LogReader log(pipefd[0]);
  // Reconnect quickly while the socket does not exist yet (gRPC's default
  // first back-off is a second, which would swamp the measurement); the
  // SERVING notice itself is pushed by the health Watch, no polling.
  grpc::ChannelArguments ch;
  ch.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5);
  ch.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5);
  ch.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 20);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      "unix:" + socket, grpc::InsecureChannelCredentials(), ch);
  absl::Status st;
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::minutes(5))) {
    st = absl::UnavailableError("the sidecar never accepted connections");
  } else {
    st = integration::WaitForHealthServing(channel, "", absl::Minutes(10));
  }
  const absl::Time serving = absl::Now();
  SidecarRun run;
  run.rss_mb = RssMb(pid);
  // SIGKILL: its orderly shutdown is not measured, and takes a second.
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  log.Join();
  if (!st.ok()) return st;
  if (absl::Status s = StagesFromLog(log.Lines(), spawned, serving, &run);
      !s.ok()) {
    return s;
  }
  return run;
}

struct CurlResult {
  double seconds = 0;
  double bytes = 0;
};

absl::StatusOr<CurlResult> Curl(const std::string& url, bool compressed) {
  const std::string cmd =
      absl::StrCat("curl -s -o /dev/null ", compressed ? "--compressed " : "",
                   "-w '%{size_download} %{time_total}' '", url, "'");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen curl");
  char buf[256];
  const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  buf[n] = '\0';
  if (pclose(p) != 0) return absl::InternalError("curl failed: " + cmd);
  std::vector<std::string> f = absl::StrSplit(buf, ' ');
  CurlResult r;
  if (f.size() != 2 || !absl::SimpleAtod(f[0], &r.bytes) ||
      !absl::SimpleAtod(f[1], &r.seconds)) {
    return absl::InternalError(absl::StrCat("bad curl output: ", buf));
  }
  return r;
}

template <typename T, typename F>
double Median(const std::vector<T>& xs, F f) {
  std::vector<double> v;
  for (const T& x : xs) v.push_back(f(x));
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string RunsOf(const std::vector<double>& xs) {
  return absl::StrJoin(xs, " ", [](std::string* out, double x) {
    absl::StrAppend(out, absl::StrFormat("%.2f", x));
  });
}

struct Case {
  std::string resource;
  int count = 0;
  int namespaces = 0;  // pods: spread over this many (0: one)
};

absl::StatusOr<Case> ParseCase(const std::string& spec) {
  std::vector<std::string> f = absl::StrSplit(spec, ':');
  Case c;
  if ((f.size() != 2 && f.size() != 3) || !absl::SimpleAtoi(f[1], &c.count) ||
      (f.size() == 3 && !absl::SimpleAtoi(f[2], &c.namespaces)) ||
      (f[0] != "configmaps" && f[0] != "pods")) {
    return absl::InvalidArgumentError("bad --cases entry: " + spec);
  }
  c.resource = f[0];
  return c;
}

using SidecarRuns =
    std::map<std::pair<size_t, std::string>, std::vector<SidecarRun>>;

std::vector<double> Seconds(const std::vector<CurlResult>& rs) {
  std::vector<double> v;
  for (const CurlResult& r : rs) v.push_back(r.seconds);
  return v;
}

// One line for the floor, one per sidecar binary and compression.
void PrintCase(const Case& c, double rate, const std::vector<CurlResult>& plain,
               const std::vector<CurlResult>& gz, const SidecarRuns& runs) {
  const double floor =
      Median(plain, [](const CurlResult& r) { return r.seconds; });
  const double gz_s = Median(gz, [](const CurlResult& r) { return r.seconds; });
  const double bytes =
      Median(plain, [](const CurlResult& r) { return r.bytes; });
  const std::string rate_s =
      rate > 0 ? absl::StrFormat("%.0f MB/s", rate / 1e6) : "unpaced";
  std::printf(
      "%s %d (%.1f MB), emulator %s: curl %.3f s (%.0f MB/s; runs %s), "
      "curl --compressed %.3f s (runs %s)\n",
      c.resource.c_str(), c.count, bytes / 1e6, rate_s.c_str(), floor,
      bytes / floor / 1e6, RunsOf(Seconds(plain)).c_str(), gz_s,
      RunsOf(Seconds(gz)).c_str());
  for (const auto& entry : runs) {
    const std::pair<size_t, std::string>& which = entry.first;
    const std::vector<SidecarRun>& rs = entry.second;
    auto med = [&rs](double SidecarRun::*f) {
      return Median(rs, [f](const SidecarRun& r) { return r.*f; });
    };
    std::vector<double> totals;
    for (const SidecarRun& r : rs) totals.push_back(r.total);
    std::printf(
        "  sidecar %zu --api_compression=%-4s: %.3f s = %.2fx curl | start "
        "%.3f setup %.3f list %.3f Replace %.3f pops %.3f serving %.3f | RSS "
        "%.0f MB | runs %s\n",
        which.first, which.second.c_str(), med(&SidecarRun::total),
        med(&SidecarRun::total) / floor, med(&SidecarRun::start),
        med(&SidecarRun::setup), med(&SidecarRun::list),
        med(&SidecarRun::replace), med(&SidecarRun::pops),
        med(&SidecarRun::serving), med(&SidecarRun::rss_mb),
        RunsOf(totals).c_str());
  }
}

// client-go's runs: [0] with its defaults, [1] managedFields stripped.
using ClientGoRuns = std::vector<integration::SyncResult>[2];

std::string ClientGoBinary() {
  std::string b = absl::GetFlag(FLAGS_client_go_bench);
  if (!b.empty()) return b;
  const char* dir = std::getenv("REALKUBE_BIN");
  if (dir == nullptr) return "";
  b = absl::StrCat(dir, "/kube-informer-bench");
  return access(b.c_str(), X_OK) == 0 ? b : "";
}

// One round of client-go, both ways (nothing without its binary).
absl::Status RunClientGo(const std::string& kubeconfig, const Case& c,
                         ClientGoRuns* go) {
  const std::string binary = ClientGoBinary();
  if (binary.empty()) return absl::OkStatus();
  for (int strip = 0; strip < 2; ++strip) {
    absl::StatusOr<integration::SyncResult> r = integration::RunClientGo(
        binary, kubeconfig, absl::StrCat("v1/", c.resource), "", strip == 1,
        absl::GetFlag(FLAGS_watch_list), absl::Minutes(20));
    if (!r.ok()) return r.status();
    (*go)[strip].push_back(*r);
  }
  return absl::OkStatus();
}

void PrintClientGo(const ClientGoRuns& go, double floor) {
  for (int strip = 0; strip < 2; ++strip) {
    const std::vector<integration::SyncResult>& rs = go[strip];
    if (rs.empty()) continue;
    std::vector<double> totals;
    for (const integration::SyncResult& r : rs)
      totals.push_back(r.sync_seconds);
    const double sync = Median(
        rs, [](const integration::SyncResult& r) { return r.sync_seconds; });
    std::printf(
        "  client-go %-26s: %.3f s = %.2fx curl | RSS %.0f MB | peak %.0f MB "
        "| runs %s\n",
        strip ? "(managedFields stripped)" : "(defaults)", sync, sync / floor,
        Median(rs,
               [](const integration::SyncResult& r) { return r.rss_bytes; }) /
            1e6,
        Median(rs,
               [](const integration::SyncResult& r) { return r.peak_bytes; }) /
            1e6,
        RunsOf(totals).c_str());
  }
  std::fflush(stdout);
}

// One case at one rate: alternating rounds, then a table row per setting.
absl::Status RunCase(const std::string& emulator,
                     const std::vector<std::string>& sidecars, const Case& c,
                     double rate) {
  std::vector<std::string> flags = {
      absl::StrCat(c.resource == "pods" ? "--seed_pods=" : "--seed_configmaps=",
                   c.count),
      absl::StrCat("--serve_bytes_per_sec=", rate),
      absl::StrCat("--serve_watch_list_bytes_per_sec=",
                   rate * absl::GetFlag(FLAGS_watch_list_rate_fraction))};
  if (c.namespaces > 0) {
    flags.push_back(absl::StrCat("--seed_pod_namespaces=", c.namespaces));
  }
  absl::StatusOr<std::unique_ptr<integration::EmulatorProcess>> emu =
      integration::EmulatorProcess::Start(emulator, flags, /*quiet=*/true);
  if (!emu.ok()) return emu.status();
  char tmpl[] = "/tmp/sidecar_sync_bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp");
  const std::string dir = tmpl;
  absl::StatusOr<std::string> kubeconfig =
      integration::WriteKubeconfig(dir, (*emu)->url());
  if (!kubeconfig.ok()) return kubeconfig.status();
  // The reflector's own request: the watch cache serves it whole.
  const std::string url = absl::StrCat((*emu)->url(), "/api/v1/", c.resource,
                                       "?resourceVersion=0&limit=500");
  if (!Curl(url, false).ok()) return absl::InternalError("warm-up failed");
  const std::vector<std::string> compressions =
      absl::GetFlag(FLAGS_compressions);
  std::vector<CurlResult> plain, gz;
  SidecarRuns runs;  // by (binary index, compression)
  ClientGoRuns go;
  for (int i = 0; i < absl::GetFlag(FLAGS_runs); ++i) {
    absl::StatusOr<CurlResult> p = Curl(url, false);
    if (!p.ok()) return p.status();
    plain.push_back(*p);
    for (const std::string& comp : compressions) {
      for (size_t b = 0; b < sidecars.size(); ++b) {
        absl::StatusOr<SidecarRun> r =
            RunSidecar(sidecars[b], dir, *kubeconfig, c.resource, comp);
        if (!r.ok()) return r.status();
        runs[{b, comp}].push_back(*r);
        if (absl::GetFlag(FLAGS_verbose)) {
          std::printf("  run %d sidecar %zu %s: %.3f s\n", i, b, comp.c_str(),
                      r->total);
        }
      }
    }
    absl::StatusOr<CurlResult> g = Curl(url, true);
    if (!g.ok()) return g.status();
    gz.push_back(*g);
    if (absl::Status st = RunClientGo(*kubeconfig, c, &go); !st.ok()) {
      return st;
    }
  }
  PrintCase(c, rate, plain, gz, runs);
  PrintClientGo(go,
                Median(plain, [](const CurlResult& r) { return r.seconds; }));
  std::fflush(stdout);
  std::remove(kubeconfig->c_str());
  rmdir(dir.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  absl::StatusOr<std::string> emulator =
      integration::FindEmulatorBinary(argv[0]);
  std::vector<std::string> sidecars = absl::GetFlag(FLAGS_sidecars);
  if (sidecars.empty()) {
    absl::StatusOr<std::string> sidecar =
        integration::FindRunfile("server/informer_sidecar", argv[0]);
    if (!sidecar.ok()) {
      LOG(ERROR) << sidecar.status();
      return 1;
    }
    sidecars.push_back(*sidecar);
  }
  if (!emulator.ok()) {
    LOG(ERROR) << emulator.status();
    return 1;
  }
  for (size_t b = 0; b < sidecars.size(); ++b) {
    std::printf("sidecar %zu: %s\n", b, sidecars[b].c_str());
  }
  for (const std::string& spec : absl::GetFlag(FLAGS_cases)) {
    absl::StatusOr<Case> c = ParseCase(spec);
    if (!c.ok()) {
      LOG(ERROR) << c.status();
      return 1;
    }
    for (const std::string& rate_s : absl::GetFlag(FLAGS_rates)) {
      double rate = 0;
      if (!absl::SimpleAtod(rate_s, &rate) || rate < 0) {
        LOG(ERROR) << "bad --rates entry: " << rate_s;
        return 1;
      }
      if (absl::Status st = RunCase(*emulator, sidecars, *c, rate); !st.ok()) {
        LOG(ERROR) << st;
        return 1;
      }
    }
  }
  return 0;
}

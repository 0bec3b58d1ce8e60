// What a warm restart saves: the real informer_sidecar caching N ConfigMaps
// (1 KiB of data each) from the kube_emulator binary paced as a real API
// server serves lists, restarted cold (empty --cache_dir) and warm (from
// the snapshot its previous run wrote at shutdown), in the same run.
//
//   bazel run -c opt //integration_tests:warm_restart_bench --
//       [--objects=50000 --serve_bytes_per_sec=7.5e7
//        --serve_watch_list_bytes_per_sec=3.75e7 --runs=3 --latency_runs=5]
//   (one command line)
//
// The cold start is the sidecar's default one: a WatchList (a watch with
// sendInitialEvents=true, --watch_list=auto), whose initial events the
// emulator paces at --serve_watch_list_bytes_per_sec (default: the list
// pace). kube-apiserver v1.37.2 streams a JSON WatchList at about half its
// JSON LIST rate (docs/perf-log/2026-12-03-watchlist-parallel-decode.md), so
// half of --serve_bytes_per_sec gives the real server's cold start.
//
// Per run: a cold start (empty directory) and two warm ones, from the
// sidecar's first log line to its "health SERVING" one:
//   - warm quiet: nothing changed in the cluster since the snapshot (the
//     server's resourceVersion is the snapshot's: caught up at once);
//   - warm busy: another resource changed since (a Namespace created), so
//     the server's resourceVersion is past every ConfigMap event and the
//     informer is caught up by the watch's bookmark, which the API server
//     sends 2 s before the watch's end (the resumed watch asks for 3 s).
// Bytes received from the API server (informer_bytes_received_total) warm
// vs the cold start's full list; the snapshot's load time (its log line)
// vs the cold start's time to SERVING; its size on disk vs the objects'
// JSON (the write's log line).
//
// Then the write-to-consumer latency (a ConfigMap's write stamp, by the
// emulator's /_emulator/load, to its receipt on a gRPC Watch stream) at
// --rate updates/s, with the sidecar writing its snapshot of the N objects
// every second (--cache_snapshot_interval=1s) vs without --cache_dir,
// alternated --latency_runs times; p99 of each, and the ratio of medians.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(int, objects, 50000, "ConfigMaps to seed and cache.");
ABSL_FLAG(double, serve_bytes_per_sec, 7.5e7,
          "The emulator's list pacing (a real API server: 75-155 MB/s).");
ABSL_FLAG(std::optional<double>, serve_watch_list_bytes_per_sec, std::nullopt,
          "The emulator's pacing of a WatchList's initial events (the cold "
          "start's); default: --serve_bytes_per_sec. kube-apiserver v1.37.2 "
          "streams a JSON WatchList at about half its JSON LIST rate.");
ABSL_FLAG(int, runs, 3, "Cold/warm restart rounds (medians).");
ABSL_FLAG(int, latency_runs, 5,
          "Latency runs per mode (with and without snapshots, alternated).");
ABSL_FLAG(int, rate, 1000, "Updates/s during a latency run.");
ABSL_FLAG(bool, keep_logs, false,
          "Keep the sidecars' logs (their directory is printed).");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5),
          "Length of a latency run's load.");
ABSL_FLAG(std::string, sidecar_bin, "",
          "The informer_sidecar binary to measure (default: the one built "
          "with this benchmark), e.g. an earlier build side by side.");

namespace {

namespace v1 = ::informer::v1;
using integration::PortedSidecar;

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// The first number captured by `re` in the log at `path` (-1: none).
double FromLog(const std::string& path, const std::string& re) {
  std::smatch m;
  const std::string log = ReadWholeFile(path);
  if (!std::regex_search(log, m, std::regex(re)) || m.size() < 2) return -1;
  double v = -1;
  return absl::SimpleAtod(m[1].str(), &v) ? v : -1;
}

// Seconds from the sidecar's first log line to its "health SERVING" line
// (glog's local-time stamps): the sidecar's own time, without the
// harness's gRPC connection back-off.
double ServingSeconds(const std::string& path) {
  const std::string log = ReadWholeFile(path);
  const auto stamp = [&log](size_t at) {
    absl::Time t;
    std::string err;
    // "I20261203 15:44:23.883963": %Y would take all eight digits.
    if (at == std::string::npos || at + 25 > log.size()) {
      return absl::InfinitePast();
    }
    const std::string text =
        absl::StrCat(log.substr(at + 1, 4), "-", log.substr(at + 5, 2), "-",
                     log.substr(at + 7, 2), " ", log.substr(at + 10, 15));
    if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S", text, absl::LocalTimeZone(), &t,
                         &err)) {
      return absl::InfinitePast();
    }
    return t;
  };
  const size_t serving = log.find("health SERVING");
  const absl::Time end = stamp(
      serving == std::string::npos ? serving : log.rfind('\n', serving) + 1);
  const absl::Time begin = stamp(0);
  if (end == absl::InfinitePast() || begin == absl::InfinitePast()) return -1;
  return absl::ToDoubleSeconds(end - begin);
}

std::string HttpPost(int port, const std::string& path,
                     const std::string& body = "") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(3600);
  auto res = cli.Post(path.c_str(), body, "application/json");
  return res ? res->body : std::string();
}

void CreateNamespace(int port, const std::string& name) {
  HttpPost(port, "/api/v1/namespaces",
           absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)",
                        R"("metadata":{"name":")", name, R"("}})"));
}

// The sidecar's resident memory, in MB: VmRSS, or RssAnon (its heap,
// without the mapped binary), from /proc/PID/status.
double RssMb(const PortedSidecar& s, const std::string& field) {
  const std::string status =
      ReadWholeFile(absl::StrCat("/proc/", s.process->pid(), "/status"));
  const size_t at = status.find(field + ":");
  if (at == std::string::npos) return -1;
  double kb = -1;
  const size_t begin = at + field.size() + 1;
  const size_t end = status.find(" kB", begin);
  if (!absl::SimpleAtod(status.substr(begin, end - begin), &kb)) return -1;
  return kb / 1024;
}

double Metric(const PortedSidecar& s, const std::string& name) {
  absl::StatusOr<double> v =
      integration::GetMetricSum(s.ports.at("http"), name);
  return v.ok() ? *v : -1;
}

// One Watch stream of namespace "bench": latencies of stamped MODIFIED
// events, and the fence object's ADDED.
class Subscriber {
 public:
  explicit Subscriber(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(v1::Informer::NewStub(channel)) {
    v1::WatchRequest req;
    req.set_resource("configmaps");
    req.set_namespace_("bench");
    reader_ = stub_->Watch(&ctx_, req);
    thread_ = std::thread([this] { Read(); });
  }
  ~Subscriber() {
    ctx_.TryCancel();
    thread_.join();
  }
  bool AwaitSynced() { return Await(&synced_); }
  void Record(const std::string& fence) {
    absl::MutexLock lock(&mu_);
    recording_ = true;
    fence_ = absl::StrCat("\"name\":\"", fence, "\"");
  }
  bool AwaitFence() { return Await(&fenced_); }
  std::vector<int32_t> Latencies() {
    absl::MutexLock lock(&mu_);
    return latencies_us_;
  }

 private:
  bool Await(bool* flag) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return *flag || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(120));
    return *flag;
  }
  void Read() {
    v1::WatchResponse r;
    while (reader_->Read(&r)) {
      const int64_t now = integration::MonotonicNanos();
      absl::MutexLock lock(&mu_);
      for (const v1::Event& e : r.events()) {
        if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) synced_ = true;
        const std::string& json = e.object().json();
        if (!fence_.empty() && e.type() == v1::EVENT_TYPE_ADDED &&
            json.find(fence_) != std::string::npos) {
          fenced_ = true;
        }
        if (!recording_ || e.type() != v1::EVENT_TYPE_MODIFIED) continue;
        const size_t at = json.find("\"sent\":\"");
        if (at == std::string::npos) continue;
        int64_t sent = 0;
        const size_t begin = at + 8;
        if (absl::SimpleAtoi(absl::string_view(json).substr(
                                 begin, json.find('"', begin) - begin),
                             &sent)) {
          latencies_us_.push_back(static_cast<int32_t>((now - sent) / 1000));
        }
      }
    }
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  std::unique_ptr<v1::Informer::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader_;
  std::thread thread_;
  absl::Mutex mu_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool recording_ ABSL_GUARDED_BY(mu_) = false;
  std::string fence_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> latencies_us_ ABSL_GUARDED_BY(mu_);
};

struct Bench {
  std::string sidecar_bin;
  std::string kubeconfig;
  std::string work;
  int emu_port = 0;
  int started = 0;

  // Starts a sidecar; *seconds: from its start to SERVING.
  PortedSidecar Start(const std::vector<std::string>& extra,
                      const std::string& log, double* seconds) {
    std::vector<std::string> flags = {"--kubeconfig=" + kubeconfig,
                                      "--resources=configmaps",
                                      "--http_listen=127.0.0.1:0"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    const absl::Time t0 = absl::Now();
    absl::StatusOr<PortedSidecar> s = integration::StartPortedSidecar(
        sidecar_bin, flags, log, /*quiet=*/false, absl::Minutes(5));
    if (!s.ok()) {
      std::fprintf(stderr, "sidecar: %s\n%s\n", s.status().ToString().c_str(),
                   ReadWholeFile(log).c_str());
      std::exit(1);
    }
    if (seconds != nullptr) *seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    return *std::move(s);
  }

  std::string Log(const std::string& what) {
    return absl::StrCat(work, "/", ++started, "-", what, ".log");
  }
};

struct RestartFigures {
  std::vector<double> cold_s, warm_quiet_s, warm_busy_s, load_ms;
  std::vector<double> full_bytes, warm_bytes, file_bytes, json_bytes, write_ms;
  // The load's read and decode (its log line), and memory once SERVING.
  std::vector<double> read_ms;
  std::vector<double> cold_rss, warm_rss, cold_anon, warm_anon;
};

void RestartRound(Bench& b, int round, RestartFigures* f) {
  const std::string dir = absl::StrCat(b.work, "/cache-", round);
  const std::vector<std::string> flags = {"--cache_dir=" + dir,
                                          "--cache_snapshot_interval=0"};
  double t = 0;
  std::string log = b.Log("cold");
  PortedSidecar cold = b.Start(flags, log, &t);
  f->full_bytes.push_back(
      Metric(cold, "informer_sidecar_informer_bytes_received_total"));
  f->cold_rss.push_back(RssMb(cold, "VmRSS"));
  f->cold_anon.push_back(RssMb(cold, "RssAnon"));
  cold.process->Terminate();
  // Read once the process is gone: its log is complete.
  f->cold_s.push_back(ServingSeconds(log));
  f->file_bytes.push_back(FromLog(log, R"(written to \S+ \((\d+) bytes)"));
  f->json_bytes.push_back(FromLog(log, R"(objects' JSON (\d+)\))"));
  f->write_ms.push_back(FromLog(log, R"(objects' JSON \d+\) in ([\d.]+) ms)"));

  log = b.Log("warm-quiet");
  PortedSidecar quiet = b.Start(flags, log, &t);
  f->warm_bytes.push_back(
      Metric(quiet, "informer_sidecar_informer_bytes_received_total"));
  f->warm_rss.push_back(RssMb(quiet, "VmRSS"));
  f->warm_anon.push_back(RssMb(quiet, "RssAnon"));
  if (Metric(quiet, "informer_sidecar_informer_lists_total") != 0) {
    std::fprintf(stderr, "the warm start listed: %s\n", log.c_str());
    std::exit(1);
  }
  quiet.process->Terminate();
  f->warm_quiet_s.push_back(ServingSeconds(log));
  f->load_ms.push_back(FromLog(
      log, R"(bytes\) at resourceVersion \d+ from \S+ in ([\d.]+) ms)"));
  f->read_ms.push_back(FromLog(log, R"(read and decoded ([\d.]+) ms)"));

  // While it is down, 20 ConfigMaps are added, then another resource is
  // written (as Leases are every few seconds): etcd's resourceVersion is
  // past the ConfigMaps' last change.
  for (int i = 0; i < 20; ++i) {
    HttpPost(
        b.emu_port, "/api/v1/namespaces/bench/configmaps",
        absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                     R"("metadata":{"name":"down-)", round, "-", i, R"("}})"));
  }
  CreateNamespace(b.emu_port, absl::StrCat("elsewhere-", round));
  log = b.Log("warm-busy");
  PortedSidecar busy = b.Start(flags, log, &t);
  busy.process->Terminate();
  f->warm_busy_s.push_back(ServingSeconds(log));
}

// One latency run: p99 (ms) and the snapshot writes during it.
std::pair<double, double> LatencyRun(Bench& b, bool snapshots, int run) {
  std::vector<std::string> flags;
  if (snapshots) {
    flags = {absl::StrCat("--cache_dir=", b.work, "/latency-cache"),
             "--cache_snapshot_interval=1s"};
  }
  PortedSidecar s =
      b.Start(flags, b.Log(snapshots ? "lat-snap" : "lat"), nullptr);
  Subscriber sub(s.process->NewChannel());
  if (!sub.AwaitSynced()) {
    std::fprintf(stderr, "the stream did not sync\n");
    std::exit(1);
  }
  const std::string fence = absl::StrCat("fence-", run, snapshots ? "s" : "");
  sub.Record(fence);
  const double writes0 = Metric(s, "informer_sidecar_snapshot_writes_total");
  HttpPost(
      b.emu_port,
      absl::StrCat("/_emulator/load?namespace=bench&objects=1000&bytes="
                   "1024&rate=",
                   absl::GetFlag(FLAGS_rate), "&millis=",
                   absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_duration))));
  HttpPost(b.emu_port, "/api/v1/namespaces/bench/configmaps",
           absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                        R"("metadata":{"name":")", fence, R"("}})"));
  if (!sub.AwaitFence()) {
    std::fprintf(stderr, "the stream missed the fence\n");
    std::exit(1);
  }
  const double writes =
      Metric(s, "informer_sidecar_snapshot_writes_total") - writes0;
  std::vector<int32_t> lat = sub.Latencies();
  const double p99 = integration::PercentileMs(lat, 99);
  s.process->Terminate();
  return {p99, writes};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Bench b;
  absl::StatusOr<std::string> sidecar =
      integration::FindRunfile("server/informer_sidecar", argv[0]);
  absl::StatusOr<std::string> emulator =
      integration::FindEmulatorBinary(argv[0]);
  if (!sidecar.ok() || !emulator.ok()) {
    std::fprintf(stderr, "binaries not found\n");
    return 1;
  }
  b.sidecar_bin = absl::GetFlag(FLAGS_sidecar_bin).empty()
                      ? *sidecar
                      : absl::GetFlag(FLAGS_sidecar_bin);
  char tmpl[] = "/tmp/warm_restart_bench_XXXXXX";
  b.work = mkdtemp(tmpl);
  const int n = absl::GetFlag(FLAGS_objects);
  const double list_rate = absl::GetFlag(FLAGS_serve_bytes_per_sec);
  const double watch_list_rate =
      absl::GetFlag(FLAGS_serve_watch_list_bytes_per_sec).value_or(list_rate);
  auto emu = integration::EmulatorProcess::Start(
      *emulator,
      {absl::StrCat("--seed_configmaps=", n),
       absl::StrCat("--serve_bytes_per_sec=", list_rate),
       absl::StrCat("--serve_watch_list_bytes_per_sec=", watch_list_rate),
       "--history=1000000"},
      /*quiet=*/true);
  if (!emu.ok()) {
    std::fprintf(stderr, "emulator: %s\n", emu.status().ToString().c_str());
    return 1;
  }
  b.emu_port = (*emu)->port();
  CreateNamespace(b.emu_port, "kube-system");
  b.kubeconfig = *integration::WriteKubeconfig(b.work, (*emu)->url());

  RestartFigures f;
  for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) RestartRound(b, r, &f);
  using integration::Median;
  const double cold = Median(f.cold_s);
  std::printf(
      "warm_restart_bench: %d ConfigMaps, lists paced at %.0f MB/s, "
      "WatchLists (the cold start) at %.0f MB/s, %d rounds (medians)\n",
      n, list_rate / 1e6, watch_list_rate / 1e6, absl::GetFlag(FLAGS_runs));
  std::printf("| measure | value | goal |\n| --- | --- | --- |\n");
  std::printf("| time to SERVING cold | %.2f s | |\n", cold);
  std::printf(
      "| time to SERVING warm, nothing changed | %.2f s (%.2fx) | "
      "<= 0.5x |\n",
      Median(f.warm_quiet_s), Median(f.warm_quiet_s) / cold);
  std::printf(
      "| time to SERVING warm, 20 ConfigMaps added, then another resource "
      "written | %.2f s "
      "(%.2fx) | <= 0.5x |\n",
      Median(f.warm_busy_s), Median(f.warm_busy_s) / cold);
  std::printf(
      "| bytes received warm vs full list | %.0f vs %.0f (%.3f%%) "
      "| <= 1%% |\n",
      Median(f.warm_bytes), Median(f.full_bytes),
      100 * Median(f.warm_bytes) / Median(f.full_bytes));
  std::printf("| snapshot load vs cold start | %.0f ms (%.2fx) | <= 0.3x |\n",
              Median(f.load_ms), Median(f.load_ms) / 1000 / cold);
  std::printf("| load: read and decode | %.0f ms | |\n", Median(f.read_ms));
  std::printf(
      "| RSS once SERVING, warm vs cold | %.0f vs %.0f MB (%.3fx); "
      "anon %.0f vs %.0f MB (%.3fx) | ~1x |\n",
      Median(f.warm_rss), Median(f.cold_rss),
      Median(f.warm_rss) / Median(f.cold_rss), Median(f.warm_anon),
      Median(f.cold_anon), Median(f.warm_anon) / Median(f.cold_anon));
  std::printf(
      "| snapshot on disk vs objects' JSON | %.1f MB vs %.1f MB "
      "(%.2fx) | <= 1.2x |\n",
      Median(f.file_bytes) / 1e6, Median(f.json_bytes) / 1e6,
      Median(f.file_bytes) / Median(f.json_bytes));
  std::printf("| snapshot write (at shutdown) | %.0f ms | |\n",
              Median(f.write_ms));
  std::fflush(stdout);

  std::vector<double> with, without, writes;
  for (int r = 0; r < absl::GetFlag(FLAGS_latency_runs); ++r) {
    without.push_back(LatencyRun(b, false, r).first);
    auto [p99, w] = LatencyRun(b, true, r);
    with.push_back(p99);
    writes.push_back(w);
  }
  std::printf(
      "| p99 write-to-consumer, snapshots every 1s vs none | %.2f ms "
      "vs %.2f ms (%.2fx; %.0f snapshots per run) | <= 1.1x |\n",
      Median(with), Median(without), Median(with) / Median(without),
      Median(writes));
  for (size_t i = 0; i < with.size(); ++i) {
    std::printf("  latency run %zu: p99 %.2f ms with, %.2f ms without\n", i,
                with[i], without[i]);
  }
  if (absl::GetFlag(FLAGS_keep_logs)) {
    std::printf("logs: %s\n", b.work.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(b.work, ec);
  }
  return 0;
}

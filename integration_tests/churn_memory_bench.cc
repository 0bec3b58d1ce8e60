// Memory under churn with a stalled Watch stream: the real informer_sidecar
// against the API server emulator, one gRPC Watch client that opens a
// stream and then reads nothing, and bursts of updates at full emulator
// speed to a fixed set of ConfigMaps.
//
//   bazel run -c opt //integration_tests:churn_memory_bench --
//       --rounds=3 --objects=1000 --bursts=30000,30000
//   (one command line)
//
// Per scenario (a fresh emulator and sidecar each; scenarios alternate
// within each round so that the machine's load hits them alike):
//   1. seed --objects ConfigMaps of about --object_bytes of JSON, start the
//      sidecar on them and wait for SERVING;
//   2. (with a stream) open one Watch on a channel whose receive window is
//      small (64 KiB, no BDP probing) and never call Read; wait until the
//      sidecar counts it;
//   3. RSS "after sync";
//   4. each burst: the emulator applies N updates as fast as it can
//      (round-robin over the objects); once the sidecar's Watch fan-out has
//      handled them all, RSS and the sidecar's memory metrics.
// RSS is VmRSS and RssAnon from /proc/PID/status. The breakdown comes from
// the sidecar's metrics: watch_history_bytes (what the resumable history
// keeps alive), watch_pending_bytes (object states the stalled stream's
// coalesced queue references; mostly shared with the history and the
// cache), watch_inflight_bytes (the write gRPC holds for the stream).

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(int, rounds, 3, "Rounds; each runs every scenario once.");
ABSL_FLAG(int, objects, 1000, "ConfigMaps the updates cycle over.");
ABSL_FLAG(int, object_bytes, 1024, "Approximate JSON size of each object.");
ABSL_FLAG(std::string, bursts, "30000,30000",
          "Comma-separated update counts, applied one after the other; RSS "
          "is measured after each (cumulative: 30k, then 60k).");
ABSL_FLAG(std::string, scenarios,
          "default+stalled,history_off+stalled,default+no_stream,"
          "events_only+stalled",
          "Comma-separated scenarios: HISTORY+STREAM, HISTORY one of "
          "default (--watch_history_bytes at its default), history_off "
          "(--watch_history_bytes=0), events_only (no byte bound: only "
          "--watch_history's 10000 events, as before the byte bound); "
          "STREAM one of stalled, no_stream.");
ABSL_FLAG(int, rate, 0,
          "Updates per second (0: as fast as the emulator applies them).");
ABSL_FLAG(bool, quiet, true, "Hide the sidecar's and emulator's logs.");
ABSL_FLAG(bool, probe_trim, false,
          "After each measurement, make the sidecar call malloc_trim(0) "
          "(through gdb, which must be installed) and measure again: the "
          "difference is freed memory the allocator had kept.");

namespace {

namespace v1 = ::informer::v1;

std::string HttpPost(int port, const std::string& path,
                     const std::string& body = "") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(3600);
  auto res = cli.Post(path.c_str(), body, "application/json");
  return res ? res->body : std::string();
}

std::string HttpGet(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60);
  auto res = cli.Get(path.c_str());
  return res ? res->body : std::string();
}

// Sum of the samples of metric `name` (informer_sidecar_ prefix added)
// whose labels contain every one of `labels`; -1 if none.
double Metric(const std::string& text, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  const std::string full = absl::StrCat("informer_sidecar_", name);
  double sum = 0;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#' || !absl::StartsWith(line, full)) {
      continue;
    }
    const char next = line.size() > full.size() ? line[full.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    const size_t space = line.rfind(' ');
    bool all = true;
    for (const std::string& l : labels) {
      if (!absl::StrContains(line.substr(0, space), l)) all = false;
    }
    double v = 0;
    if (all && absl::SimpleAtod(line.substr(space + 1), &v)) {
      sum += v;
      found = true;
    }
  }
  return found ? sum : -1;
}

struct Rss {
  double rss_mib = 0;
  double anon_mib = 0;
  double peak_mib = 0;  // VmHWM: the largest VmRSS so far
};

Rss ReadRss(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  Rss r;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l(line);
    double* out = nullptr;
    if (absl::ConsumePrefix(&l, "VmRSS:")) out = &r.rss_mib;
    if (absl::ConsumePrefix(&l, "RssAnon:")) out = &r.anon_mib;
    if (absl::ConsumePrefix(&l, "VmHWM:")) out = &r.peak_mib;
    if (out == nullptr) continue;
    l = absl::StripAsciiWhitespace(l);
    (void)absl::ConsumeSuffix(&l, " kB");
    int64_t kib = 0;
    (void)absl::SimpleAtoi(l, &kib);
    *out = kib / 1024.0;
  }
  return r;
}

int HttpPortFrom(const std::string& ports_file) {
  std::ifstream in(ports_file);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> kv = absl::StrSplit(line, '=');
    int v = 0;
    if (kv.size() == 2 && kv[0] == "http" && absl::SimpleAtoi(kv[1], &v)) {
      return v;
    }
  }
  return 0;
}

// Scrapes until `pred` holds for the metric (a benchmark: the sidecar has
// no push channel for these values). False after `timeout`.
template <typename Pred>
bool WaitForMetric(int http_port, const std::string& name,
                   const std::vector<std::string>& labels, Pred pred,
                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred(Metric(HttpGet(http_port, "/metrics"), name, labels))) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

struct Sample {
  Rss rss;
  // VmRSS after malloc_trim(0) (--probe_trim; else 0).
  double trimmed_mib = 0;
  double history_bytes = 0;
  double history_events = 0;
  double pending_events = 0;
  double pending_bytes = 0;
  double inflight_bytes = 0;
  double coalesced = 0;
};

// Makes `pid` call malloc_trim(0), through gdb.
void TrimThroughGdb(pid_t pid) {
  const std::string cmd =
      absl::StrCat("gdb -p ", pid,
                   " -batch -ex 'call (int) malloc_trim(0)' >/dev/null 2>&1");
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "gdb failed: %s\n", cmd.c_str());
  }
}

Sample Measure(pid_t pid, int http_port, bool metrics) {
  Sample s;
  s.rss = ReadRss(pid);
  if (absl::GetFlag(FLAGS_probe_trim)) {
    TrimThroughGdb(pid);
    s.trimmed_mib = ReadRss(pid).rss_mib;
  }
  if (!metrics) return s;
  const std::string text = HttpGet(http_port, "/metrics");
  const std::vector<std::string> cm = {"resource=\"configmaps\""};
  s.history_bytes = Metric(text, "watch_history_bytes", cm);
  s.history_events = Metric(text, "watch_history_events", cm);
  s.pending_bytes = Metric(text, "watch_pending_bytes", cm);
  s.inflight_bytes = Metric(text, "watch_inflight_bytes", cm);
  s.pending_events = Metric(text, "watch_queue_depth_max");
  s.coalesced = Metric(text, "watch_coalesced_events_total");
  return s;
}

struct Scenario {
  std::string name;
  std::vector<std::string> flags;
  bool stalled = false;
};

absl::StatusOr<Scenario> ParseScenario(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, '+');
  if (parts.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad scenario \"", text, "\" (want HISTORY+STREAM)"));
  }
  Scenario sc;
  sc.name = std::string(text);
  if (parts[0] == "history_off") {
    sc.flags.push_back("--watch_history_bytes=0");
  } else if (parts[0] == "events_only") {
    sc.flags.push_back("--watch_history_bytes=1000000000000");
  } else if (parts[0] != "default") {
    return absl::InvalidArgumentError(
        absl::StrCat("bad history \"", parts[0], "\""));
  }
  if (parts[1] == "stalled") {
    sc.stalled = true;
  } else if (parts[1] != "no_stream") {
    return absl::InvalidArgumentError(
        absl::StrCat("bad stream \"", parts[1], "\""));
  }
  return sc;
}

// One row per measurement point of one run.
struct Row {
  std::string scenario;
  std::string point;
  Sample sample;
};

// Has the emulator apply `n` updates round-robin over the objects: at
// --rate, or as fast as it can (rate x millis updates at n per ms).
void RunBurst(int emu_port, int objects, int bytes, int n) {
  const int rate = absl::GetFlag(FLAGS_rate);
  const int64_t millis =
      rate > 0 ? std::max<int64_t>(1, int64_t{n} * 1000 / rate) : 1;
  const std::string report = HttpPost(
      emu_port,
      absl::StrCat("/_emulator/load?namespace=bench&objects=", objects,
                   "&bytes=", bytes, "&rate=", rate > 0 ? rate : n * 1000,
                   "&millis=", millis));
  if (!absl::StrContains(report, absl::StrCat("\"updates\":", n))) {
    std::fprintf(stderr, "load: %s\n", report.c_str());
    std::exit(1);
  }
}

std::vector<Row> RunScenario(const Scenario& sc, const std::string& emu_bin,
                             const std::string& sidecar_bin,
                             const std::string& dir,
                             const std::vector<int>& bursts) {
  std::vector<Row> rows;
  auto emu = integration::EmulatorProcess::Start(emu_bin, {"--history=500000"},
                                                 absl::GetFlag(FLAGS_quiet));
  if (!emu.ok()) {
    std::fprintf(stderr, "emulator: %s\n", emu.status().ToString().c_str());
    std::exit(1);
  }
  const int objects = absl::GetFlag(FLAGS_objects);
  const int bytes = absl::GetFlag(FLAGS_object_bytes);
  HttpPost((*emu)->port(),
           absl::StrCat("/_emulator/load?namespace=bench&millis=0&objects=",
                        objects, "&bytes=", bytes));
  auto kubeconfig = integration::WriteKubeconfig(dir, (*emu)->url());
  const std::string config = absl::StrCat(dir, "/config.yaml");
  std::ofstream(config)
      << "resources:\n- resource: configmaps\n  namespace: bench\n";
  const std::string ports = absl::StrCat(dir, "/ports");
  unlink(ports.c_str());
  integration::SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + *kubeconfig, "--config=" + config,
                   "--print_events=false", "--http_listen=127.0.0.1:0",
                   "--ports_file=" + ports};
  for (const std::string& f : sc.flags) options.flags.push_back(f);
  options.quiet = absl::GetFlag(FLAGS_quiet);
  auto sidecar =
      integration::SidecarProcess::Start(sidecar_bin, std::move(options));
  if (!sidecar.ok()) {
    std::fprintf(stderr, "sidecar: %s\n", sidecar.status().ToString().c_str());
    std::exit(1);
  }
  const pid_t pid = (*sidecar)->pid();
  const int http_port = HttpPortFrom(ports);
  if (http_port == 0) {
    std::fprintf(stderr, "no http port in %s\n", ports.c_str());
    std::exit(1);
  }
  rows.push_back({sc.name, "synced, no stream", Measure(pid, http_port, true)});

  // The stalled client: a small receive window and no BDP probing, so its
  // own transport takes little; it never reads.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      (*sidecar)->address(), grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1::Informer::Stub> stub = v1::Informer::NewStub(channel);
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader;
  if (sc.stalled) {
    v1::WatchRequest req;
    req.set_resource("configmaps");
    reader = stub->Watch(&ctx, req);
    if (!WaitForMetric(
            http_port, "watch_streams_open", {"resource=\"configmaps\""},
            [](double v) { return v >= 1; }, absl::Seconds(60))) {
      std::fprintf(stderr, "the stream never opened\n");
      std::exit(1);
    }
    rows.push_back(
        {sc.name, "synced, stream open", Measure(pid, http_port, true)});
  }

  // Every update reaches the fan-out (each changes the resourceVersion):
  // the burst is through once it handled them all, so no backlog in the
  // informer's queue is mistaken for what stays.
  double seen = Metric(HttpGet(http_port, "/metrics"), "watch_events_in_total");
  seen = std::max(seen, 0.0);
  int total = 0;
  const int emu_port = (*emu)->port();
  for (int n : bursts) {
    total += n;
    seen += n;
    RunBurst(emu_port, objects, bytes, n);
    if (!WaitForMetric(
            http_port, "watch_events_in_total", {},
            [seen](double v) { return v >= seen; }, absl::Minutes(5))) {
      std::fprintf(stderr, "the sidecar did not handle %d updates\n", total);
      std::exit(1);
    }
    rows.push_back({sc.name, absl::StrCat("after ", total / 1000, "k"),
                    Measure(pid, http_port, true)});
  }
  if (sc.stalled) {
    ctx.TryCancel();
    reader.reset();
  }
  (*sidecar)->Terminate();
  return rows;
}

using SampleKey = std::pair<std::string, std::string>;

// The medians per (scenario, point), in `order`.
void PrintTable(const std::vector<SampleKey>& order,
                std::map<SampleKey, std::vector<Sample>>& samples) {
  std::printf(
      "| scenario | point | VmRSS MiB | RssAnon MiB | history events | "
      "history MiB | stream queue events | queue MiB (shared) | gRPC in "
      "flight MiB |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  for (const auto& key : order) {
    const std::vector<Sample>& s = samples[key];
    auto med = [&s](auto field) {
      std::vector<double> v;
      for (const Sample& x : s) v.push_back(field(x));
      return integration::Median(v);
    };
    std::printf(
        "| %s | %s | %.1f | %.1f | %.0f | %.1f | %.0f | %.1f | %.2f |\n",
        key.first.c_str(), key.second.c_str(),
        med([](const Sample& x) { return x.rss.rss_mib; }),
        med([](const Sample& x) { return x.rss.anon_mib; }),
        med([](const Sample& x) { return x.history_events; }),
        med([](const Sample& x) { return x.history_bytes / (1 << 20); }),
        med([](const Sample& x) { return x.pending_events; }),
        med([](const Sample& x) { return x.pending_bytes / (1 << 20); }),
        med([](const Sample& x) { return x.inflight_bytes / (1 << 20); }));
  }
}

int Main(const char* argv0) {
  absl::StatusOr<std::string> emu_bin =
      integration::FindRunfile("emulator/kube_emulator", argv0);
  absl::StatusOr<std::string> sidecar_bin =
      integration::FindRunfile("server/informer_sidecar", argv0);
  if (!emu_bin.ok() || !sidecar_bin.ok()) {
    std::fprintf(stderr, "binaries not found: %s %s\n",
                 emu_bin.status().ToString().c_str(),
                 sidecar_bin.status().ToString().c_str());
    return 1;
  }
  std::vector<Scenario> scenarios;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty())) {
    absl::StatusOr<Scenario> sc = ParseScenario(s);
    if (!sc.ok()) {
      std::fprintf(stderr, "%s\n", sc.status().ToString().c_str());
      return 1;
    }
    scenarios.push_back(*sc);
  }
  std::vector<int> bursts;
  for (absl::string_view b :
       absl::StrSplit(absl::GetFlag(FLAGS_bursts), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(b, &n) || n <= 0) {
      std::fprintf(stderr, "bad burst \"%s\"\n", std::string(b).c_str());
      return 1;
    }
    bursts.push_back(n);
  }
  // Absolute: the runfiles path may be relative to the working directory.
  for (std::string* bin : {&*emu_bin, &*sidecar_bin}) {
    char* real = realpath(bin->c_str(), nullptr);
    if (real != nullptr) {
      *bin = real;
      free(real);
    }
  }
  char dir[] = "/tmp/churn_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;

  // (scenario, point) -> samples over the rounds, in first-seen order.
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<Sample>> samples;
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int r = 0; r < rounds; ++r) {
    for (const Scenario& sc : scenarios) {
      for (Row& row : RunScenario(sc, *emu_bin, *sidecar_bin, dir, bursts)) {
        std::fprintf(stderr,
                     "round %d %s %s: RSS %.1f MiB (anon %.1f, peak %.1f), "
                     "history %.0f events %.1f MiB, queue %.0f events %.1f "
                     "MiB, in flight %.2f MiB%s\n",
                     r + 1, row.scenario.c_str(), row.point.c_str(),
                     row.sample.rss.rss_mib, row.sample.rss.anon_mib,
                     row.sample.rss.peak_mib, row.sample.history_events,
                     row.sample.history_bytes / (1 << 20),
                     row.sample.pending_events,
                     row.sample.pending_bytes / (1 << 20),
                     row.sample.inflight_bytes / (1 << 20),
                     absl::GetFlag(FLAGS_probe_trim)
                         ? absl::StrFormat(", after malloc_trim %.1f MiB",
                                           row.sample.trimmed_mib)
                               .c_str()
                         : "");
        auto key = std::make_pair(row.scenario, row.point);
        if (samples.count(key) == 0) order.push_back(key);
        samples[key].push_back(row.sample);
      }
    }
  }
  PrintTable(order, samples);
  std::printf("\n(medians of %d rounds)\n", rounds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Main(argv[0]);
}

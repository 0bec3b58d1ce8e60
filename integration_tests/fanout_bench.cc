// End-to-end fan-out benchmark: latency from an API server write to
// its receipt by gRPC Watch subscribers of the real sidecar, and the
// sidecar's CPU, side by side with gRPC's own floor; then Get and ByIndex
// latency and throughput over gRPC on a large cache.
//
//   bazel run -c opt //integration_tests:fanout_bench --
//       --scenarios=1000x1,1000x10,1000x100,10000x1,10000x10,2500x100
//   (one command line)
//
// The floor (--backends=sidecar,floor, --repeats=N alternates them) is
// fanout_floor_server: a bare gRPC callback server that generates the same
// events itself and writes the same messages (each event serialized once,
// shared by every stream; one write in flight per stream; the sidecar's
// batching rule) to the same number of streams at the same rate. The same
// subscribers measure both; the table gives each run's CPU per million
// deliveries, and a summary the medians and the sidecar/floor ratio.
//
// Three processes share the machine: the API server emulator (the writer:
// /_emulator/load stamps each ConfigMap with its CLOCK_MONOTONIC write time),
// the informer_sidecar (list+watch through libcurl, fan-out to the gRPC
// streams) and this binary (the subscribers, on gRPC's callback API). A
// scenario "RATExSTREAMS" writes RATE updates/s of ~1 KiB ConfigMaps
// (round-robin over --objects) for --duration to STREAMS Watch streams.
// Latency = receipt time - the object's write stamp, over every MODIFIED event
// every stream received. "delivered" is received / (updates x streams):
// below 100% when slow streams coalesced updates of the same object (by
// design: memory stays bounded by objects, not events).

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(std::string, scenarios,
          "1000x1,1000x10,1000x100,10000x1,10000x10,2500x100",
          "Comma-separated RATExSTREAMS fan-out scenarios (empty: none).");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "How long each fan-out scenario writes.");
ABSL_FLAG(int, objects, 1000, "Distinct objects the writes cycle over.");
ABSL_FLAG(int, object_bytes, 1024, "Approximate JSON size of each object.");
ABSL_FLAG(int, get_objects, 100000,
          "Objects cached for the Get/ByIndex benchmark (0: skip it).");
ABSL_FLAG(absl::Duration, get_duration, absl::Seconds(5),
          "How long each Get/ByIndex measurement runs.");
ABSL_FLAG(bool, quiet, true, "Hide the sidecar's and emulator's logs.");
ABSL_FLAG(bool, timeline, false,
          "Also print latency percentiles per 500 ms of write time (to "
          "stderr).");
ABSL_FLAG(bool, per_stream, false,
          "Also print each stream's latency percentiles (to stderr).");
ABSL_FLAG(std::string, backends, "sidecar,floor",
          "Comma-separated Watch servers to measure, alternated per "
          "repetition: sidecar (the real informer_sidecar fed by the "
          "emulator), floor (fanout_floor_server: bare gRPC, same messages), "
          "NAME=PATH (another informer_sidecar binary, e.g. the build "
          "before a change, with its own emulator).");
ABSL_FLAG(int, repeats, 1,
          "Runs per scenario and backend (alternated); the summary gives "
          "their medians.");
ABSL_FLAG(std::string, sidecar_flags, "",
          "Extra flags for informer_sidecar, space separated.");
ABSL_FLAG(std::string, sidecar_env, "",
          "Extra environment for informer_sidecar (NAME=value, space "
          "separated), e.g. GLIBC_TUNABLES= to run it with glibc's malloc "
          "defaults.");

namespace {

namespace v1 = ::informer::v1;

google::protobuf::ArenaOptions ArenaOptionsFor(char* block) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = 1 << 20;
  return options;
}

// Reads one Watch stream on the callback API; records the latency of every
// stamped MODIFIED event and notices the fence object.
class Subscriber : public grpc::ClientReadReactor<v1::WatchResponse> {
 public:
  Subscriber(v1::Informer::Stub* stub, const std::string& ns) {
    v1::WatchRequest req;
    req.set_resource("configmaps");
    req.set_namespace_(ns);
    stub->async()->Watch(&ctx_, &req, this);
    StartRead(response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t now = integration::MonotonicNanos();
    {
      absl::MutexLock lock(&mu_);
      if (recording_) {
        ++messages_;
        events_ += response_->events_size();
        bytes_ += static_cast<int64_t>(response_->ByteSizeLong());
      }
      for (const v1::Event& e : response_->events()) {
        if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) synced_ = true;
        if (e.type() == v1::EVENT_TYPE_RESET) ++resets_;
        const std::string& json = e.object().json();
        if (e.type() == v1::EVENT_TYPE_ADDED &&
            json.find(fence_) != std::string::npos && !fence_.empty()) {
          fenced_ = true;
        }
        if (e.type() != v1::EVENT_TYPE_MODIFIED || !recording_) continue;
        const size_t at = json.find("\"sent\":\"");
        if (at == std::string::npos) continue;
        int64_t sent = 0;
        const size_t begin = at + 8;
        if (!absl::SimpleAtoi(absl::string_view(json).substr(
                                  begin, json.find('"', begin) - begin),
                              &sent)) {
          continue;
        }
        latencies_us_.push_back(static_cast<int32_t>((now - sent) / 1000));
        sent_ms_.push_back(static_cast<int32_t>(sent / 1000000));
      }
    }
    // Each message is parsed into a fresh arena: a subscriber that keeps
    // up with 250k events/s cannot afford a malloc and free per string.
    arena_.Reset();
    response_ =
        google::protobuf::Arena::CreateMessage<v1::WatchResponse>(&arena_);
    StartRead(response_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = s;
  }

  bool AwaitSynced(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
               absl::Condition(this, &Subscriber::SyncedOrDone), timeout) &&
           synced_;
  }
  // Starts recording, with room for `expected` events reserved first: grown
  // on demand, every subscriber's vectors would reallocate at the same
  // count, all at once (100 streams: 100 MB touched at 65k events each),
  // and that stall of the measuring process would show as the server's
  // latency.
  void Record(bool on, size_t expected = 0) {
    absl::MutexLock lock(&mu_);
    latencies_us_.reserve(expected);
    sent_ms_.reserve(expected);
    recording_ = on;
  }
  void SetFence(const std::string& fence_name) {
    absl::MutexLock lock(&mu_);
    fence_ = absl::StrCat("\"name\":\"", fence_name, "\"");
    fenced_ = false;
  }
  bool AwaitFence(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
               absl::Condition(this, &Subscriber::FencedOrDone), timeout) &&
           fenced_;
  }
  std::vector<int32_t> TakeLatencies() {
    absl::MutexLock lock(&mu_);
    return std::move(latencies_us_);
  }
  std::vector<int32_t> TakeSentMs() {
    absl::MutexLock lock(&mu_);
    return std::move(sent_ms_);
  }
  // Messages and events received while recording.
  std::pair<int64_t, int64_t> Counts() {
    absl::MutexLock lock(&mu_);
    return {messages_, events_};
  }
  // Serialized bytes of the messages received while recording.
  int64_t Bytes() {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }
  void Cancel() { ctx_.TryCancel(); }
  bool AwaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return true;
  }
  std::string Status() {
    absl::MutexLock lock(&mu_);
    return done_ ? absl::StrCat(status_.error_code(), " ",
                                status_.error_message())
                 : "open";
  }

 private:
  bool SyncedOrDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return synced_ || done_;
  }
  bool FencedOrDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return fenced_ || done_;
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<char[]> arena_block_{new char[1 << 20]};
  google::protobuf::Arena arena_{ArenaOptionsFor(arena_block_.get())};
  v1::WatchResponse* response_ =
      google::protobuf::Arena::CreateMessage<v1::WatchResponse>(&arena_);
  absl::Mutex mu_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool recording_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  int resets_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t messages_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t events_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fence_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> latencies_us_ ABSL_GUARDED_BY(mu_);
  // When each measured event was written (CLOCK_MONOTONIC ms).
  std::vector<int32_t> sent_ms_ ABSL_GUARDED_BY(mu_);
};

// POSTs to the emulator (control endpoints and its Kubernetes API).
std::string HttpPost(int port, const std::string& path,
                     const std::string& body = "") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(3600);
  auto res = cli.Post(path.c_str(), body, "application/json");
  return res ? res->body : std::string();
}

struct Scenario {
  int rate = 0;
  int streams = 0;
};

// What serves the Watch streams in a run: the sidecar (fed by the
// emulator) or the floor server (which generates the events itself). Both
// take the emulator's /_emulator/load and fence requests on `control_port`.
struct Backend {
  std::string name;
  pid_t pid = 0;
  int control_port = 0;
  // The emulator feeding the sidecar (0: none, the floor).
  pid_t source_pid = 0;
  std::function<std::shared_ptr<grpc::Channel>()> new_channel;
};

// One run's figures (latencies in ms, CPU in cores).
struct RunResult {
  double deliveries_per_s = 0;
  double p50 = 0, p99 = 0, p999 = 0;
  double delivered_pct = 0;
  double events_per_message = 0;
  double bytes_per_event = 0;
  double server_cpu = 0;
  // Server CPU seconds per million deliveries.
  double cpu_per_million = 0;
  double subscribers_cpu = 0;
  double source_cpu = 0;
};

RunResult RunFanout(const Scenario& sc, const Backend& backend,
                    int scenario_index) {
  const int per_channel = 50;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::Informer::Stub>> stubs;
  std::vector<std::unique_ptr<Subscriber>> subs;
  for (int i = 0; i < sc.streams; ++i) {
    if (i % per_channel == 0) {
      channels.push_back(backend.new_channel());
      stubs.push_back(v1::Informer::NewStub(channels.back()));
    }
    subs.push_back(std::make_unique<Subscriber>(stubs.back().get(), "bench"));
  }
  for (auto& s : subs) {
    if (!s->AwaitSynced(absl::Seconds(60))) {
      std::fprintf(stderr, "stream did not sync: %s\n", s->Status().c_str());
      std::exit(1);
    }
    // Every update once, plus a tenth for the pacing's catch-up.
    const double expected =
        1.1 * sc.rate * absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration));
    s->Record(true, static_cast<size_t>(expected) + 1024);
  }
  const std::string fence = absl::StrCat("fence-", scenario_index);
  for (auto& s : subs) s->SetFence(fence);
  const double cpu0 = integration::ProcessCpuSeconds(backend.pid);
  const double self0 = integration::ProcessCpuSeconds(getpid());
  const double src0 = backend.source_pid > 0
                          ? integration::ProcessCpuSeconds(backend.source_pid)
                          : 0;
  const absl::Time t0 = absl::Now();
  const std::string report = HttpPost(
      backend.control_port,
      absl::StrCat("/_emulator/load?namespace=bench&objects=",
                   absl::GetFlag(FLAGS_objects),
                   "&bytes=", absl::GetFlag(FLAGS_object_bytes),
                   "&rate=", sc.rate, "&millis=",
                   absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_duration))));
  // The fence: an object created after the last update; once every stream
  // has it, every stream has had every update it will get.
  HttpPost(backend.control_port, "/api/v1/namespaces/bench/configmaps",
           absl::StrCat("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                        "\"metadata\":{\"name\":\"",
                        fence, "\"}}"));
  for (auto& s : subs) {
    if (!s->AwaitFence(absl::Seconds(120))) {
      std::fprintf(stderr, "stream missed the fence: %s\n",
                   s->Status().c_str());
      std::exit(1);
    }
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = integration::ProcessCpuSeconds(backend.pid) - cpu0;
  const double self_cpu = integration::ProcessCpuSeconds(getpid()) - self0;
  const double src_cpu =
      backend.source_pid > 0
          ? integration::ProcessCpuSeconds(backend.source_pid) - src0
          : 0;
  std::vector<int32_t> all;
  int64_t messages = 0, events = 0, bytes = 0;
  const bool per_stream = absl::GetFlag(FLAGS_per_stream);
  // Per 500 ms of write time (--timeline): latencies of the events written
  // then, to tell a steady tail from one stall.
  std::map<int32_t, std::vector<int32_t>> timeline;
  for (size_t i = 0; i < subs.size(); ++i) {
    auto& s = subs[i];
    std::vector<int32_t> l = s->TakeLatencies();
    if (absl::GetFlag(FLAGS_timeline)) {
      const std::vector<int32_t> sent = s->TakeSentMs();
      for (size_t k = 0; k < sent.size() && k < l.size(); ++k) {
        timeline[sent[k] / 500].push_back(l[k]);
      }
    }
    if (per_stream) {
      std::vector<int32_t> copy = l;
      const auto [m, e] = s->Counts();
      std::fprintf(stderr,
                   "stream %zu: %zu events, p50 %.2f ms, p99 %.2f ms, %.1f "
                   "events/message\n",
                   i, copy.size(), integration::PercentileMs(copy, 0.5),
                   integration::PercentileMs(copy, 0.99),
                   m > 0 ? static_cast<double>(e) / m : 0.0);
    }
    all.insert(all.end(), l.begin(), l.end());
    const auto [m, e] = s->Counts();
    messages += m;
    events += e;
    bytes += s->Bytes();
  }
  if (!timeline.empty()) {
    const int32_t first = timeline.begin()->first;
    for (auto& [slot, lat] : timeline) {
      std::fprintf(stderr, "t=%.1fs: %zu events, p50 %.2f ms, p99 %.2f ms\n",
                   (slot - first) * 0.5, lat.size(),
                   integration::PercentileMs(lat, 0.5),
                   integration::PercentileMs(lat, 0.99));
    }
  }
  int64_t updates = 0;
  {
    const size_t at = report.find("\"updates\":");
    if (at != std::string::npos) {
      absl::SimpleAtoi(
          report.substr(at + 10, report.find_first_of(",}", at) - at - 10),
          &updates);
    }
  }
  RunResult r;
  const double secs = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration));
  r.deliveries_per_s = static_cast<double>(all.size()) / secs;
  // RATEx0 (no stream) measures the sidecar's ingest alone.
  r.delivered_pct = updates > 0 && sc.streams > 0
                        ? 100.0 * all.size() / (updates * sc.streams)
                        : 0;
  r.p50 = integration::PercentileMs(all, 0.5);
  r.p99 = integration::PercentileMs(all, 0.99);
  r.p999 = integration::PercentileMs(all, 0.999);
  r.events_per_message =
      messages > 0 ? static_cast<double>(events) / messages : 0.0;
  r.bytes_per_event = events > 0 ? static_cast<double>(bytes) / events : 0.0;
  r.server_cpu = cpu / wall;
  r.cpu_per_million = all.empty() ? 0 : cpu / (all.size() / 1e6);
  r.subscribers_cpu = self_cpu / wall;
  r.source_cpu = src_cpu / wall;
  std::printf(
      "| %s | %d/s | %d | %.0f/s | %.2f ms | %.2f ms | %.2f ms | %.1f%% | %.1f "
      "| %.0f | %.0f%% | %.3f s | %.0f%% | %s |\n",
      backend.name.c_str(), sc.rate, sc.streams, r.deliveries_per_s, r.p50,
      r.p99, r.p999, r.delivered_pct, r.events_per_message, r.bytes_per_event,
      100.0 * r.server_cpu, r.cpu_per_million, 100.0 * r.subscribers_cpu,
      backend.source_pid > 0
          ? absl::StrFormat("%.0f%%", 100.0 * r.source_cpu).c_str()
          : "-");
  std::fflush(stdout);
  for (auto& s : subs) s->Cancel();
  for (auto& s : subs) s->AwaitDone();
  return r;
}

// Medians per scenario and backend, and the sidecar/floor CPU ratio.
void PrintSummary(
    const std::vector<Scenario>& scenarios,
    const std::vector<std::string>& backends,
    const std::vector<std::vector<std::vector<RunResult>>>& runs) {
  std::printf(
      "\nMedians of %d run(s) per row:\n\n| write rate | streams | backend | "
      "deliveries | p50 | p99 | events/message | server CPU | CPU per "
      "million deliveries | subscribers' CPU | CPU ratio to the floor |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
      absl::GetFlag(FLAGS_repeats));
  for (size_t i = 0; i < scenarios.size(); ++i) {
    double floor_cpm = 0;
    for (size_t b = 0; b < backends.size(); ++b) {
      if (backends[b] != "floor") continue;
      std::vector<double> cpm;
      for (const RunResult& r : runs[i][b]) cpm.push_back(r.cpu_per_million);
      floor_cpm = integration::Median(cpm);
    }
    for (size_t b = 0; b < backends.size(); ++b) {
      auto median = [&](double RunResult::*field) {
        std::vector<double> v;
        for (const RunResult& r : runs[i][b]) v.push_back(r.*field);
        return integration::Median(v);
      };
      const double cpm = median(&RunResult::cpu_per_million);
      std::printf(
          "| %d/s | %d | %s | %.0f/s | %.2f ms | %.2f ms | %.1f | %.0f%% | "
          "%.3f s | %.0f%% | %s |\n",
          scenarios[i].rate, scenarios[i].streams, backends[b].c_str(),
          median(&RunResult::deliveries_per_s), median(&RunResult::p50),
          median(&RunResult::p99), median(&RunResult::events_per_message),
          100.0 * median(&RunResult::server_cpu), cpm,
          100.0 * median(&RunResult::subscribers_cpu),
          floor_cpm > 0 ? absl::StrFormat("%.2fx", cpm / floor_cpm).c_str()
                        : "-");
    }
  }
  std::fflush(stdout);
}

template <typename Call>
void MeasureUnary(const char* name, int threads, Call call) {
  const absl::Duration d = absl::GetFlag(FLAGS_get_duration);
  std::vector<std::vector<int32_t>> lat(threads);
  std::vector<std::thread> workers;
  std::atomic<int64_t> errors{0};
  const absl::Time end = absl::Now() + d;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(t);
      while (absl::Now() < end) {
        const int64_t start = integration::MonotonicNanos();
        if (!call(rng)) errors.fetch_add(1);
        lat[t].push_back(static_cast<int32_t>(
            (integration::MonotonicNanos() - start) / 1000));
      }
    });
  }
  for (auto& w : workers) w.join();
  std::vector<int32_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::printf("| %s | %d | %.0f/s | %.3f ms | %.3f ms | %lld |\n", name,
              threads, all.size() / absl::ToDoubleSeconds(d),
              integration::PercentileMs(all, 0.5),
              integration::PercentileMs(all, 0.99),
              static_cast<long long>(errors.load()));
  std::fflush(stdout);
}

std::vector<std::string> SidecarFlags(const std::string& kubeconfig,
                                      const std::string& ns,
                                      const std::string& dir) {
  // ConfigMaps of one namespace with a label index on "group" (ten objects
  // per value) for ByIndex.
  const std::string config = absl::StrCat(dir, "/config-", ns, ".yaml");
  std::ofstream(config) << "resources:\n- resource: configmaps\n  namespace: "
                        << ns << "\n  indexes:\n  - label: group\n";
  std::vector<std::string> flags = {
      "--kubeconfig=" + kubeconfig,
      "--config=" + config,
      "--print_events=false",
      "--http_listen=127.0.0.1:0",
  };
  for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_sidecar_flags),
                                            ' ', absl::SkipEmpty())) {
    flags.emplace_back(f);
  }
  return flags;
}

std::vector<std::string> SidecarEnv() {
  return absl::StrSplit(absl::GetFlag(FLAGS_sidecar_env), ' ',
                        absl::SkipEmpty());
}

// Starts the backends asked for, then runs every scenario --repeats times,
// alternating the backends, and prints each run and the medians.
int RunFanoutScenarios(const std::vector<Scenario>& scenarios,
                       const std::string& emu_bin,
                       const std::string& sidecar_bin,
                       const std::string& floor_bin, const std::string& dir) {
  std::vector<std::string> names =
      absl::StrSplit(absl::GetFlag(FLAGS_backends), ',', absl::SkipEmpty());
  std::vector<std::unique_ptr<integration::EmulatorProcess>> emus;
  std::unique_ptr<integration::EmulatorProcess> floor;
  std::vector<std::unique_ptr<integration::SidecarProcess>> sidecars;
  std::vector<Backend> backends;
  for (std::string& name : names) {
    Backend b;
    // NAME=PATH: a sidecar built elsewhere, shown as NAME.
    std::string binary = sidecar_bin;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      binary = name.substr(eq + 1);
      name.resize(eq);
    }
    b.name = name;
    if (eq != std::string::npos || name == "sidecar") {
      auto e = integration::EmulatorProcess::Start(
          emu_bin, {"--history=100000"}, /*quiet=*/true);
      if (!e.ok()) {
        std::fprintf(stderr, "%s\n", e.status().ToString().c_str());
        return 1;
      }
      emus.push_back(*std::move(e));
      integration::EmulatorProcess* emu = emus.back().get();
      HttpPost(emu->port(),
               absl::StrCat("/_emulator/load?namespace=bench&millis=0&objects=",
                            absl::GetFlag(FLAGS_objects),
                            "&bytes=", absl::GetFlag(FLAGS_object_bytes)));
      // Each sidecar its own kubeconfig and config (its own emulator).
      const std::string own_dir = absl::StrCat(dir, "/", sidecars.size());
      std::filesystem::create_directories(own_dir);
      auto kubeconfig = integration::WriteKubeconfig(own_dir, emu->url());
      integration::SidecarProcess::Options options;
      options.flags = SidecarFlags(*kubeconfig, "bench", own_dir);
      options.env = SidecarEnv();
      options.quiet = absl::GetFlag(FLAGS_quiet);
      auto s = integration::SidecarProcess::Start(binary, std::move(options));
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
        return 1;
      }
      sidecars.push_back(*std::move(s));
      integration::SidecarProcess* sidecar = sidecars.back().get();
      b.pid = sidecar->pid();
      b.control_port = emu->port();
      b.source_pid = emu->pid();
      b.new_channel = [sidecar] { return sidecar->NewChannel(); };
    } else if (name == "floor") {
      const std::string address = absl::StrCat("unix:", dir, "/floor.sock");
      auto f = integration::EmulatorProcess::Start(
          floor_bin, {"--grpc_listen=" + address}, absl::GetFlag(FLAGS_quiet));
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
        return 1;
      }
      floor = *std::move(f);
      b.pid = floor->pid();
      b.control_port = floor->port();
      b.new_channel = [address] {
        grpc::ChannelArguments args;
        // A connection per channel, as SidecarProcess::NewChannel.
        args.SetInt("grpc.use_local_subchannel_pool", 1);
        return grpc::CreateCustomChannel(
            address, grpc::InsecureChannelCredentials(), args);
      };
    } else {
      std::fprintf(stderr, "unknown backend %s (sidecar, floor, NAME=PATH)\n",
                   name.c_str());
      return 1;
    }
    backends.push_back(std::move(b));
  }
  std::printf(
      "| backend | write rate | streams | deliveries | p50 | p99 | p99.9 | "
      "delivered | events/message | bytes/event | server CPU | CPU per "
      "million deliveries | subscribers' CPU | emulator CPU |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
      "--- | --- | --- |\n");
  // runs[scenario][backend]: one result per repetition.
  std::vector<std::vector<std::vector<RunResult>>> runs(
      scenarios.size(), std::vector<std::vector<RunResult>>(backends.size()));
  int index = 0;
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  for (size_t i = 0; i < scenarios.size(); ++i) {
    for (int rep = 0; rep < repeats; ++rep) {
      for (size_t b = 0; b < backends.size(); ++b) {
        runs[i][b].push_back(RunFanout(scenarios[i], backends[b], index++));
      }
    }
  }
  PrintSummary(scenarios, names, runs);
  return 0;
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
  char dir[] = "/tmp/fanout_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;

  std::vector<Scenario> scenarios;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(s, 'x');
    Scenario sc;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &sc.rate) ||
        !absl::SimpleAtoi(parts[1], &sc.streams)) {
      std::fprintf(stderr, "bad scenario %s (want RATExSTREAMS)\n",
                   std::string(s).c_str());
      return 1;
    }
    scenarios.push_back(sc);
  }

  if (!scenarios.empty()) {
    absl::StatusOr<std::string> floor_bin = integration::FindRunfile(
        "integration_tests/fanout_floor_server", argv0);
    if (!floor_bin.ok()) {
      std::fprintf(stderr, "%s\n", floor_bin.status().ToString().c_str());
      return 1;
    }
    const int rc =
        RunFanoutScenarios(scenarios, *emu_bin, *sidecar_bin, *floor_bin, dir);
    if (rc != 0) return rc;
  }

  const int get_objects = absl::GetFlag(FLAGS_get_objects);
  if (get_objects > 0) {
    auto emu = integration::EmulatorProcess::Start(*emu_bin, {},
                                                   /*quiet=*/true);
    if (!emu.ok()) return 1;
    HttpPost((*emu)->port(),
             absl::StrCat("/_emulator/load?namespace=big&millis=0&objects=",
                          get_objects, "&bytes=1024"));
    auto kubeconfig = integration::WriteKubeconfig(dir, (*emu)->url());
    integration::SidecarProcess::Options options;
    options.flags = SidecarFlags(*kubeconfig, "big", dir);
    options.env = SidecarEnv();
    options.quiet = absl::GetFlag(FLAGS_quiet);
    options.start_timeout = absl::Minutes(5);
    auto sidecar =
        integration::SidecarProcess::Start(*sidecar_bin, std::move(options));
    if (!sidecar.ok()) {
      std::fprintf(stderr, "%s\n", sidecar.status().ToString().c_str());
      return 1;
    }
    auto channel = (*sidecar)->NewChannel();
    auto stub = v1::Informer::NewStub(channel);
    std::printf(
        "\n%d cached objects:\n\n| call | client threads | "
        "throughput | p50 | p99 | errors |\n| --- | --- | --- | --- | "
        "--- | --- |\n",
        get_objects);
    auto get = [&](std::mt19937& rng) {
      grpc::ClientContext ctx;
      v1::GetRequest req;
      req.set_resource("configmaps");
      req.set_namespace_("big");
      req.set_name(absl::StrFormat(
          "load-%05d",
          std::uniform_int_distribution<int>(0, get_objects - 1)(rng)));
      v1::GetResponse resp;
      return stub->Get(&ctx, req, &resp).ok();
    };
    auto by_index = [&](std::mt19937& rng) {
      grpc::ClientContext ctx;
      v1::ByIndexRequest req;
      req.set_resource("configmaps");
      req.set_index_name("label:group");
      req.set_index_value(absl::StrFormat(
          "g-%05d",
          std::uniform_int_distribution<int>(0, get_objects / 10 - 1)(rng)));
      v1::ByIndexResponse resp;
      return stub->ByIndex(&ctx, req, &resp).ok() && resp.objects_size() == 10;
    };
    MeasureUnary("Get", 1, get);
    MeasureUnary("Get", 4, get);
    MeasureUnary("ByIndex (10 objects)", 1, by_index);
    MeasureUnary("ByIndex (10 objects)", 4, by_index);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil records every lock order for deadlock detection: a
  // measurable cost in the subscribers' hot path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Main(argv[0]);
}

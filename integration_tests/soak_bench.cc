// A soak under faults: the real informer_sidecar against the kube_emulator
// binary for --duration (30 minutes by default), with steady churn and the
// faults an informer meets in production, checking at every checkpoint
// that nothing was lost and nothing grows. Run by hand, not in CI:
//
//   bazel build -c opt //integration_tests:soak_bench
//   bazel-bin/integration_tests/soak_bench [--duration=5m]
//
// Churn: --churn_per_s changes a second (updates, and deletes followed by
// re-creates under the same name) over --objects ConfigMaps.
// Faults, each on its own period: cut watches (dropped connections),
// stalled watches held for --stall_for (stuck connections; the sidecar's
// idle timeout must notice), etcd compactions, API server restarts (new
// watch window: re-watches after a compaction get 410 and relist).
// Consumers: three gRPC Watch streams, each keeping a mirror (key ->
// resourceVersion) and resuming with its last resume token whenever its
// stream ends: one reads at once, one slowly (--slow_delay per message),
// one stalls between checkpoints (reads nothing until the checkpoint).
// Checkpoint, every --checkpoint_every: churn and faults pause; then,
// polling with a deadline, the sidecar's cache (gRPC List) must equal the
// emulator's state object by object (key and resourceVersion), and so
// must every consumer's mirror. Reported per checkpoint: faults so far,
// relists and the 410s that force them (the sidecar's /metrics: a LIST or
// a WatchList after the first; at most one per compaction or restart is
// forced), the time the cache took to catch up (cache staleness) and the
// consumers, VmRSS, the main heap's resident size, the heap in use and the
// Watch history's bytes (the sidecar's /metrics: heap RSS above the heap
// in use is freed memory the allocator keeps) and thread count.
//
// Flat: the judgement compares checkpoints after warm-up. The Watch
// history is a buffer bounded by --history_cap_bytes and
// --history_cap_events (passed to the sidecar): while it fills, RSS grows
// by design. And each relist leaves its transient allocations' high-water
// mark resident until the next release: a checkpoint before the first
// relist has none of it. So warm-up ends at the first checkpoint where the
// history holds at least --warmup_history_fill of either cap and at least
// --warmup_relists relists were applied, both read from the sidecar's
// /metrics; that checkpoint is the baseline. Every checkpoint is reported,
// those before it marked warm-up, and the spreads are printed over all
// checkpoints and after warm-up; the run is flat when VmRSS and threads
// stay within --flat_within of each other from the baseline on. Exit
// status: 2 when a checkpoint did not converge, else 3 when VmRSS or
// threads were not flat after warm-up or warm-up never ended.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(absl::Duration, duration, absl::Minutes(30), "How long to soak.");
ABSL_FLAG(absl::Duration, checkpoint_every, absl::Minutes(2),
          "Time between checkpoints.");
ABSL_FLAG(int, objects, 2000, "ConfigMaps churned.");
ABSL_FLAG(int, churn_per_s, 50, "Changes per second.");
ABSL_FLAG(absl::Duration, cut_every, absl::Seconds(45),
          "Period of dropped watch connections.");
ABSL_FLAG(absl::Duration, stall_every, absl::Minutes(7),
          "Period of stuck watch connections.");
ABSL_FLAG(absl::Duration, stall_for, absl::Seconds(90),
          "How long a stuck connection stays stuck (then it resumes).");
ABSL_FLAG(absl::Duration, compact_every, absl::Minutes(2),
          "Period of etcd compactions.");
ABSL_FLAG(absl::Duration, restart_every, absl::Minutes(4),
          "Period of API server restarts.");
ABSL_FLAG(std::string, sidecar, "",
          "An informer_sidecar binary to soak instead of this build's.");
ABSL_FLAG(absl::Duration, slow_delay, absl::Milliseconds(20),
          "The slow consumer's pause after each message.");
ABSL_FLAG(int64_t, history_cap_bytes, int64_t{16} << 20,
          "The sidecar's --watch_history_bytes (its default): the Watch "
          "history's byte cap, which warm-up waits for.");
ABSL_FLAG(int64_t, history_cap_events, 10000,
          "The sidecar's --watch_history (its default): the Watch history's "
          "event cap, which warm-up waits for.");
ABSL_FLAG(double, warmup_history_fill, 0.99,
          "Warm-up lasts until the Watch history holds at least this "
          "fraction of --history_cap_bytes or of --history_cap_events (a "
          "full history stays within an event of its cap). 0: do not wait "
          "for it.");
ABSL_FLAG(int, warmup_relists, 1,
          "Warm-up lasts until at least this many relists were applied, so "
          "that a relist's transient is in the baseline. 0: do not wait for "
          "one.");
ABSL_FLAG(double, flat_within, 10,
          "Percent: VmRSS and threads are flat when their checkpoints after "
          "warm-up stay within this of each other (max/min - 1).");

namespace {

namespace v1 = ::informer::v1;
using Mirror = std::map<std::string, std::string>;  // key -> resourceVersion
constexpr char kNamespace[] = "soak";

std::string Name(int i) { return absl::StrCat("cm-", i); }

std::string ConfigMapJson(int i, int gen) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", Name(i),
      R"(","namespace":")", kNamespace, R"("},"data":{"gen":")", gen,
      R"(","payload":")", std::string(512, 'x'), R"("}})");
}

class Emulator {
 public:
  explicit Emulator(int port) : port_(port) {}
  bool Post(const std::string& path, const std::string& body) {
    httplib::Client cli("127.0.0.1", port_);
    auto res = cli.Post(path.c_str(), body, "application/json");
    return res && (res->status == 200 || res->status == 201);
  }
  bool Control(const std::string& op) {
    return Post(absl::StrCat("/_emulator/", op, "?resource=configmaps"), "");
  }
  std::string Collection() const {
    return absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps");
  }
  // The emulator's state of the namespace: key -> resourceVersion.
  absl::StatusOr<Mirror> State() {
    httplib::Client cli("127.0.0.1", port_);
    auto res = cli.Get("/_emulator/state?resource=configmaps");
    if (!res || res->status != 200) {
      return absl::UnavailableError("emulator state");
    }
    Mirror m;
    const std::string key_tag = "{\"key\":\"";
    const std::string rv_tag = "\",\"resourceVersion\":\"";
    const std::string& b = res->body;
    for (size_t at = b.find(key_tag); at != std::string::npos;
         at = b.find(key_tag, at + 1)) {
      const size_t k = at + key_tag.size();
      const size_t rv = b.find(rv_tag, k);
      const size_t end = b.find('"', rv + rv_tag.size());
      if (rv == std::string::npos || end == std::string::npos) break;
      std::string key = b.substr(k, rv - k);
      if (!absl::StartsWith(key, absl::StrCat(kNamespace, "/"))) continue;
      m[key] = b.substr(rv + rv_tag.size(), end - rv - rv_tag.size());
    }
    return m;
  }

 private:
  const int port_;
};

// The key and resourceVersion of an object's JSON.
bool KeyRv(const v1::Object& o, std::string* key, std::string* rv) {
  absl::StatusOr<informer::ObjectPtr> obj = informer::Object::Parse(o.json());
  if (!obj.ok()) return false;
  *key = (*obj)->Key();
  *rv = std::string((*obj)->resource_version());
  return true;
}

// One Watch consumer keeping a mirror; resumes with its last token.
class Consumer {
 public:
  enum class Mode { kPrompt, kSlow, kStalling };
  Consumer(std::string name, std::shared_ptr<grpc::Channel> channel, Mode mode)
      : name_(std::move(name)),
        stub_(v1::Informer::NewStub(std::move(channel))),
        mode_(mode) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Consumer() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
    thread_.join();
  }
  const std::string& name() const { return name_; }
  // The stalling consumer reads only while open.
  void SetOpen(bool open) {
    absl::MutexLock lock(&mu_);
    open_ = open;
  }
  Mirror mirror() {
    absl::MutexLock lock(&mu_);
    return mirror_;
  }
  int reconnects() {
    absl::MutexLock lock(&mu_);
    return reconnects_;
  }

 private:
  void Loop() {
    for (;;) {
      grpc::ClientContext ctx;
      v1::WatchRequest req;
      req.set_resource("configmaps");
      req.set_namespace_(kNamespace);
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
        ctx_ = &ctx;
        req.set_resume_token(token_);
      }
      std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
          stub_->Watch(&ctx, req);
      v1::WatchResponse resp;
      for (;;) {
        if (mode_ == Mode::kStalling) {
          absl::MutexLock lock(&mu_);
          auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return open_ || stop_;
          };
          mu_.Await(absl::Condition(&go));
        }
        if (!reader->Read(&resp)) break;
        Apply(resp);
        // The slow consumer's deliberate pace (the fault), not a wait.
        if (mode_ == Mode::kSlow)
          absl::SleepFor(absl::GetFlag(FLAGS_slow_delay));
      }
      reader->Finish();
      absl::MutexLock lock(&mu_);
      ctx_ = nullptr;
      if (stop_) return;
      ++reconnects_;
    }
  }

  void Apply(const v1::WatchResponse& resp) {
    absl::MutexLock lock(&mu_);
    for (const v1::Event& e : resp.events()) {
      std::string key, rv;
      switch (e.type()) {
        case v1::EVENT_TYPE_RESET:
          mirror_.clear();
          break;
        case v1::EVENT_TYPE_ADDED:
        case v1::EVENT_TYPE_MODIFIED:
          if (KeyRv(e.object(), &key, &rv)) mirror_[key] = rv;
          break;
        case v1::EVENT_TYPE_DELETED:
          if (KeyRv(e.object(), &key, &rv)) mirror_.erase(key);
          break;
        default:
          break;
      }
      if (!e.resume_token().empty()) token_ = e.resume_token();
    }
  }

  const std::string name_;
  std::unique_ptr<v1::Informer::Stub> stub_;
  const Mode mode_;
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  std::string token_ ABSL_GUARDED_BY(mu_);
  Mirror mirror_ ABSL_GUARDED_BY(mu_);
  int reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// The sidecar's cache of the namespace, through gRPC List.
absl::StatusOr<Mirror> SidecarCache(v1::Informer::Stub* stub) {
  Mirror m;
  std::string token;
  do {
    grpc::ClientContext ctx;
    v1::ListRequest req;
    req.set_resource("configmaps");
    req.set_namespace_(kNamespace);
    req.set_limit(5000);
    req.set_continue_token(token);
    v1::ListResponse resp;
    grpc::Status st = stub->List(&ctx, req, &resp);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    for (const v1::Object& o : resp.objects()) {
      std::string key, rv;
      if (KeyRv(o, &key, &rv)) m[key] = rv;
    }
    token = resp.continue_token();
  } while (!token.empty());
  return m;
}

double StatusValue(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, field + ":")) continue;
    std::vector<std::string> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    double v = 0;
    if (f.size() >= 2 && absl::SimpleAtod(f[1], &v)) return v;
  }
  return 0;
}

// The resident kB of `pid`'s main heap (glibc's sbrk arena: the [heap]
// mappings, several when parts are advised huge pages): the heap in use
// plus the freed memory glibc keeps resident.
double HeapRssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/smaps"));
  std::string line;
  bool heap = false;
  double kb = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && absl::ascii_isxdigit(line[0]) &&
        line.find('-') != std::string::npos) {
      heap = absl::EndsWith(line, "[heap]");  // a mapping's first line
    } else if (heap && absl::StartsWith(line, "Rss:")) {
      std::vector<std::string> f =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      double v = 0;
      if (f.size() >= 2 && absl::SimpleAtod(f[1], &v)) kb += v;
    }
  }
  return kb;
}

// One series of the sidecar's /metrics, e.g.
// `informer_sidecar_informer_relists_total{resource="configmaps"}`; -1
// when it cannot be read.
double MetricValue(int http_port, const std::string& series) {
  httplib::Client cli("127.0.0.1", http_port);
  auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return -1;
  for (absl::string_view line : absl::StrSplit(res->body, '\n')) {
    if (!absl::ConsumePrefix(&line, series + " ")) continue;
    double v = 0;
    return absl::SimpleAtod(line, &v) ? v : -1;
  }
  return 0;  // a counter not yet incremented is not exported
}

int Metric(int http_port, const std::string& series) {
  return static_cast<int>(MetricValue(http_port, series));
}

constexpr char kRelists[] =
    "informer_sidecar_informer_relists_total{resource=\"configmaps\"}";
constexpr char kHeap[] = "informer_sidecar_heap_in_use_bytes";
constexpr char kHeapAge[] = "informer_sidecar_heap_in_use_age_seconds";
constexpr char kHistory[] =
    "informer_sidecar_watch_history_bytes{resource=\"configmaps\"}";
constexpr char kHistoryEvents[] =
    "informer_sidecar_watch_history_events{resource=\"configmaps\"}";
constexpr char kExpired[] =
    "informer_sidecar_informer_errors_total{resource=\"configmaps\","
    "kind=\"http_410\"}";

// The heap in use, measured at most 10 s before: the sidecar measures it
// off the scrape path, after a scrape that finds its value older (which
// still gets the old one), so wait for that measurement.
double FreshHeapInUse(int http_port) {
  for (int i = 0; i < 50; ++i) {
    const double age = MetricValue(http_port, kHeapAge);
    if (age >= 0 && age < 10) break;
    absl::SleepFor(absl::Milliseconds(100));  // NOLINT: no event to wait on
  }
  return MetricValue(http_port, kHeap);
}

// The sidecar's HTTP port from its --ports_file ("grpc=... http=N").
int HttpPort(const std::string& ports_file) {
  std::ifstream in(ports_file);
  std::string word;
  int port = 0;
  while (in >> word) {
    absl::string_view w = word;
    if (absl::ConsumePrefix(&w, "http=") && absl::SimpleAtoi(w, &port)) {
      return port;
    }
  }
  return 0;
}

// Churn and faults, paused while `gate` is held by a checkpoint.
struct Load {
  Emulator* emu;
  int objects;
  absl::Mutex gate;
  std::atomic<bool> done{false};
  std::atomic<int> changes{0}, cuts{0}, stalls{0}, compactions{0}, restarts{0};

  void Churn() {
    std::mt19937 rng(7);
    int gen = 0;
    const absl::Duration tick =
        absl::Seconds(1) / std::max(1, absl::GetFlag(FLAGS_churn_per_s));
    absl::Time next = absl::Now();
    while (!done.load()) {
      {
        absl::MutexLock lock(&gate);
        const int i = static_cast<int>(rng() % objects);
        const std::string path = absl::StrCat(emu->Collection(), "/", Name(i));
        httplib::Client c("127.0.0.1", Port());
        if (rng() % 10 == 0) {
          // Deleted and created again under the same name (a new uid).
          c.Delete(path.c_str());
          emu->Post(emu->Collection(), ConfigMapJson(i, ++gen));
        } else {
          c.Patch(path.c_str(),
                  absl::StrCat(R"({"data":{"gen":")", ++gen, R"("}})"),
                  "application/merge-patch+json");
        }
        changes.fetch_add(1);
      }
      // The churn's pace (the load), not a wait for a condition.
      next += tick;
      absl::SleepFor(next - absl::Now());  // NOLINT
    }
  }

  void Faults() {
    const absl::Time start = absl::Now();
    absl::Time cut = start + absl::GetFlag(FLAGS_cut_every);
    absl::Time stall = start + absl::GetFlag(FLAGS_stall_every);
    absl::Time compact = start + absl::GetFlag(FLAGS_compact_every);
    absl::Time restart = start + absl::GetFlag(FLAGS_restart_every);
    while (!done.load()) {
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&gate);
      if (now >= cut) {
        emu->Control("cut_watches");
        cuts.fetch_add(1);
        cut += absl::GetFlag(FLAGS_cut_every);
      }
      if (now >= compact) {
        emu->Control("compact");
        compactions.fetch_add(1);
        compact += absl::GetFlag(FLAGS_compact_every);
      }
      if (now >= restart) {
        emu->Control("restart");
        restarts.fetch_add(1);
        restart += absl::GetFlag(FLAGS_restart_every);
      }
      if (now >= stall) {
        emu->Control("stall_watches");
        stalls.fetch_add(1);
        stall += absl::GetFlag(FLAGS_stall_every);
        // Stuck for a while (churn goes on meanwhile), then flowing again.
        gate.Unlock();
        absl::SleepFor(absl::GetFlag(FLAGS_stall_for));  // the fault itself
        gate.Lock();
        emu->Control("resume_watches");
      }
      gate.Unlock();
      absl::SleepFor(absl::Milliseconds(200));  // the faults' clock
      gate.Lock();
    }
  }

  int port = 0;
  int Port() const { return port; }
};

// The emulator (seeded) and the sidecar on it, logging to `log`.
struct Setup {
  std::unique_ptr<integration::EmulatorProcess> emulator;
  std::unique_ptr<integration::SidecarProcess> sidecar;
  std::string log;
  int http_port = 0;  // its /metrics
};

absl::StatusOr<Setup> StartAll(const char* argv0) {
  absl::StatusOr<std::string> emu_bin =
      integration::FindRunfile("emulator/kube_emulator", argv0);
  absl::StatusOr<std::string> sidecar_bin =
      integration::FindRunfile("server/informer_sidecar", argv0);
  if (!absl::GetFlag(FLAGS_sidecar).empty()) {
    sidecar_bin = absl::GetFlag(FLAGS_sidecar);
  }
  if (!emu_bin.ok()) return emu_bin.status();
  if (!sidecar_bin.ok()) return sidecar_bin.status();
  char dir[] = "/tmp/soak_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp");
  Setup setup;
  absl::StatusOr<std::unique_ptr<integration::EmulatorProcess>> emu_proc =
      integration::EmulatorProcess::Start(*emu_bin, {}, /*quiet=*/true);
  if (!emu_proc.ok()) return emu_proc.status();
  setup.emulator = *std::move(emu_proc);
  Emulator emu(setup.emulator->port());
  emu.Post("/api/v1/namespaces",
           absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)"
                        R"("metadata":{"name":")",
                        kNamespace, R"("}})"));
  for (int i = 0; i < absl::GetFlag(FLAGS_objects); ++i) {
    emu.Post(emu.Collection(), ConfigMapJson(i, 0));
  }
  absl::StatusOr<std::string> kubeconfig =
      integration::WriteKubeconfig(dir, setup.emulator->url());
  if (!kubeconfig.ok()) return kubeconfig.status();
  const std::string config = absl::StrCat(dir, "/config.yaml");
  std::ofstream(config) << "resources:\n- resource: configmaps\n  namespace: "
                        << kNamespace << "\n";
  setup.log = absl::StrCat(dir, "/sidecar.log");
  integration::SidecarProcess::Options options;
  const std::string ports = absl::StrCat(dir, "/ports");
  options.flags = {"--kubeconfig=" + *kubeconfig,
                   "--config=" + config,
                   "--print_events=false",
                   "--http_listen=127.0.0.1:0",
                   "--ports_file=" + ports,
                   absl::StrCat("--watch_history_bytes=",
                                absl::GetFlag(FLAGS_history_cap_bytes)),
                   absl::StrCat("--watch_history=",
                                absl::GetFlag(FLAGS_history_cap_events))};
  options.stderr_file = setup.log;
  options.start_timeout = absl::Minutes(5);
  absl::StatusOr<std::unique_ptr<integration::SidecarProcess>> sidecar =
      integration::SidecarProcess::Start(*sidecar_bin, std::move(options));
  if (!sidecar.ok()) return sidecar.status();
  setup.sidecar = *std::move(sidecar);
  setup.http_port = HttpPort(ports);
  if (setup.http_port == 0) return absl::InternalError("no http= in " + ports);
  return setup;
}

// Whether the Watch history reached --warmup_history_fill of either cap.
bool HistoryFull(double bytes, double events) {
  const double fill = absl::GetFlag(FLAGS_warmup_history_fill);
  if (fill <= 0) return true;
  return bytes >= fill * absl::GetFlag(FLAGS_history_cap_bytes) ||
         events >= fill * absl::GetFlag(FLAGS_history_cap_events);
}

// min-max and spread (max/min - 1) of v[from..], e.g. "53.0-58.0 MB
// (9.4%)".
std::string Spread(const char* fmt, const std::vector<double>& v, size_t from) {
  if (from >= v.size()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin() + from, v.end());
  char lo_text[48], hi_text[48], pct[32];
  std::snprintf(lo_text, sizeof(lo_text), fmt, *lo);
  std::snprintf(hi_text, sizeof(hi_text), fmt, *hi);
  std::snprintf(pct, sizeof(pct), "%.1f%%", (*hi / *lo - 1) * 100);
  return absl::StrCat(lo_text, " - ", hi_text, " (", pct, ")");
}

// Prints `what`'s spread over all checkpoints and after warm-up (from the
// baseline; none while it is v.size() or more), and against the baseline,
// with the verdict when `judged`; returns whether it is flat after warm-up
// (false when warm-up never ended: flatness is then not shown).
bool ReportFlatness(const char* what, const char* fmt,
                    const std::vector<double>& v, size_t baseline,
                    bool judged = true) {
  std::printf("%s: over all %zu checkpoints %s", what, v.size(),
              Spread(fmt, v, 0).c_str());
  if (baseline >= v.size()) {
    std::printf("; no checkpoint after warm-up\n");
    return false;
  }
  const auto [lo, hi] = std::minmax_element(v.begin() + baseline, v.end());
  const double base = v[baseline];
  const bool flat = (*hi / *lo - 1) * 100 <= absl::GetFlag(FLAGS_flat_within);
  std::printf(
      "; after warm-up (%zu checkpoints) %s, against the baseline %+.1f%% to "
      "%+.1f%%",
      v.size() - baseline, Spread(fmt, v, baseline).c_str(),
      (*lo / base - 1) * 100, (*hi / base - 1) * 100);
  if (judged) {
    std::printf(": %s within %g%%", flat ? "flat" : "NOT flat",
                absl::GetFlag(FLAGS_flat_within));
  }
  std::printf("\n");
  return flat;
}

// One checkpoint's catching up, churn and faults paused.
struct CatchUp {
  bool cache_ok = false;
  int mirrors_ok = 0;
  absl::Duration cache_stale = absl::InfiniteDuration();  // cache = server
  absl::Duration all_stale;  // cache and every mirror = server
};

CatchUp AwaitCatchUp(Emulator* emu, v1::Informer::Stub* stub,
                     const std::vector<std::unique_ptr<Consumer>>& consumers) {
  CatchUp r;
  for (auto& c : consumers) c->SetOpen(true);
  const absl::Time t0 = absl::Now();
  absl::StatusOr<Mirror> truth = emu->State();
  // Polled with a deadline: the sidecar and the consumers catch up.
  const absl::Time deadline = t0 + absl::Minutes(3);
  while (truth.ok() && absl::Now() < deadline) {
    absl::StatusOr<Mirror> cache = SidecarCache(stub);
    r.cache_ok = cache.ok() && *cache == *truth;
    if (r.cache_ok && r.cache_stale == absl::InfiniteDuration()) {
      r.cache_stale = absl::Now() - t0;
    }
    r.mirrors_ok = 0;
    for (auto& c : consumers) r.mirrors_ok += c->mirror() == *truth ? 1 : 0;
    if (r.cache_ok && r.mirrors_ok == static_cast<int>(consumers.size())) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  r.all_stale = absl::Now() - t0;
  for (auto& c : consumers) c->SetOpen(false);
  return r;
}

int Run(const char* argv0) {
  absl::StatusOr<Setup> setup = StartAll(argv0);
  if (!setup.ok()) {
    std::fprintf(stderr, "%s\n", setup.status().ToString().c_str());
    return 1;
  }
  integration::SidecarProcess* sidecar = setup->sidecar.get();
  const pid_t pid = sidecar->pid();
  Emulator emu(setup->emulator->port());
  std::unique_ptr<v1::Informer::Stub> stub =
      v1::Informer::NewStub(sidecar->NewChannel());
  std::vector<std::unique_ptr<Consumer>> consumers;
  consumers.push_back(std::make_unique<Consumer>(
      "prompt", sidecar->NewChannel(), Consumer::Mode::kPrompt));
  consumers.push_back(std::make_unique<Consumer>("slow", sidecar->NewChannel(),
                                                 Consumer::Mode::kSlow));
  consumers.push_back(std::make_unique<Consumer>(
      "stalled", sidecar->NewChannel(), Consumer::Mode::kStalling));
  Load load;
  load.emu = &emu;
  load.objects = absl::GetFlag(FLAGS_objects);
  load.port = setup->emulator->port();
  std::thread churn([&load] { load.Churn(); });
  std::thread faults([&load] { load.Faults(); });
  std::printf(
      "| elapsed | phase | changes | cuts | stalls | compactions | restarts | "
      "410s | relists | cache staleness | consumers caught up | cache = "
      "server | mirrors = server | VmRSS | heap RSS | heap in use | history "
      "| history events | threads |\n| --- | --- | --- | --- | --- | --- | "
      "--- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "| --- |\n");
  const int http = setup->http_port;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::GetFlag(FLAGS_duration);
  std::vector<double> rss, heap, threads, minutes;
  // The baseline's index in those: the first checkpoint after warm-up;
  // none (their size) while warm-up lasts.
  size_t baseline = SIZE_MAX;
  absl::Duration max_stale;
  int failures = 0;
  for (absl::Time next = start + absl::GetFlag(FLAGS_checkpoint_every);
       next <= end; next += absl::GetFlag(FLAGS_checkpoint_every)) {
    absl::SleepFor(next - absl::Now());  // NOLINT: the soak's schedule
    absl::MutexLock pause(&load.gate);
    const CatchUp c = AwaitCatchUp(&emu, stub.get(), consumers);
    max_stale = std::max(max_stale, c.cache_stale);
    rss.push_back(StatusValue(pid, "VmRSS") / 1024);
    const double heap_rss = HeapRssKb(pid) / 1024;
    heap.push_back(FreshHeapInUse(http) / 1e6);
    const double history = MetricValue(http, kHistory);
    const double history_events = MetricValue(http, kHistoryEvents);
    const int relists = Metric(http, kRelists);
    threads.push_back(StatusValue(pid, "Threads"));
    minutes.push_back(absl::ToDoubleMinutes(absl::Now() - start));
    if (baseline == SIZE_MAX && HistoryFull(history, history_events) &&
        relists >= absl::GetFlag(FLAGS_warmup_relists)) {
      baseline = rss.size() - 1;
    }
    const bool ok =
        c.cache_ok && c.mirrors_ok == static_cast<int>(consumers.size());
    failures += ok ? 0 : 1;
    std::printf(
        "| %.1f min | %s | %d | %d | %d | %d | %d | %d | %d | %.2f s | %.2f s "
        "| %s | %d/%zu | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.0f | %.0f "
        "|\n",
        minutes.back(),
        baseline == SIZE_MAX             ? "warm-up"
        : baseline == minutes.size() - 1 ? "baseline"
                                         : "after warm-up",
        load.changes.load(), load.cuts.load(), load.stalls.load(),
        load.compactions.load(), load.restarts.load(), Metric(http, kExpired),
        relists, absl::ToDoubleSeconds(c.cache_stale),
        absl::ToDoubleSeconds(c.all_stale), c.cache_ok ? "yes" : "NO",
        c.mirrors_ok, consumers.size(), rss.back(), heap_rss, heap.back(),
        history / 1e6, history_events, threads.back());
    std::fflush(stdout);
  }
  load.done.store(true);
  churn.join();
  faults.join();
  std::printf(
      "\nmax cache staleness %.2f s; relists %d for %d 410s (%d compactions "
      "+ %d restarts); consumer reconnects:",
      absl::ToDoubleSeconds(max_stale), Metric(http, kRelists),
      Metric(http, kExpired), load.compactions.load(), load.restarts.load());
  for (auto& c : consumers) {
    std::printf(" %s %d", c->name().c_str(), c->reconnects());
  }
  std::printf("; checkpoints failed: %d\n", failures);
  if (baseline == SIZE_MAX) {
    std::printf(
        "warm-up did not end in %zu checkpoints (see --warmup_history_fill, "
        "--warmup_relists): no checkpoint to judge flatness on\n",
        rss.size());
  } else {
    std::printf(
        "warm-up: %zu checkpoint(s); baseline the checkpoint at %.1f min "
        "(history at least %.0f%% of a cap, %d+ relists)\n",
        baseline, minutes[baseline],
        absl::GetFlag(FLAGS_warmup_history_fill) * 100,
        absl::GetFlag(FLAGS_warmup_relists));
  }
  const bool rss_flat = ReportFlatness("VmRSS", "%.1f MB", rss, baseline);
  const bool threads_flat =
      ReportFlatness("threads", "%.0f", threads, baseline);
  // Not judged: a checkpoint samples it at any point of a relist's
  // transient.
  ReportFlatness("heap in use", "%.1f MB", heap, baseline, /*judged=*/false);
  consumers.clear();
  sidecar->Terminate();
  if (failures != 0) return 2;
  return rss_flat && threads_flat ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run(argv[0]);
}

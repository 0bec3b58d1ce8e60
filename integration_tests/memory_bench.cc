// Memory per cached object: the real informer_sidecar syncing N ConfigMaps
// (1 KiB of data each, about 1.5 KB of JSON as served, with managedFields)
// from the kube_emulator binary, seeded through its API (POST).
//
//   bazel run -c opt //integration_tests:memory_bench -- --runs=3
//       [--baseline_sidecar=/path/to/other/informer_sidecar
//        --baseline_bench=/path/to/other/memory_bench]
//
// Part 1, the sidecar as users run it: for each malloc setting
// (--tunables; "default" is the sidecar's own, see server/ops/
// malloc_tuning.h) and each run, a fresh sidecar process is started with
// N objects and with none (the baseline), alternating (and alternating with
// --baseline_sidecar), and read once health says SERVING: VmRSS and RssAnon
// from /proc/PID/status, AnonHugePages from /proc/PID/smaps_rollup. Per
// object = (RSS with N - RSS with none) / N. Medians over the runs.
//
// Part 2, where the bytes go: a fresh child process of this binary
// (--child; and of --baseline_bench, a memory_bench built elsewhere) syncs the
// same list into a SharedIndexInformer configured as the sidecar configures it
// (namespace index), under the same malloc settings, and accounts the heap with
// mallinfo2 (bytes in use) and Object::MemoryUsage():
//   JSON        the cached JSON text (Object::json())
//   metadata    the rest of each Object: its struct, parsed fields, labels,
//               shared_ptr control block
//   keys        the key strings (Object::Key(); one per object)
//   store       the store's map: nodes and table (a fresh Indexer without
//               indexes, built from the cached objects, mallinfo2 delta)
//   index       the namespace and owner-UID indexes (the same with the
//               indexes, minus store)
//   other heap  heap in use after the sync not in the above (the
//               informer's queues, handler state, the malloc chunks'
//               headers and rounding)
//   free/RSS    RSS after the sync minus heap in use: memory freed during
//               the sync that glibc keeps (before and after malloc_trim)
// The watch history is kept by a Watch fan-out, which exists only once a
// Watch stream opened: it is not part of a sync (see docs/benchmarks.md).
//
// A plain binary (not Google Benchmark): process-level, one-shot figures.

#include <malloc.h>
#include <sys/wait.h>
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
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "httplib.h"
#include "informer/cache/indexer.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/object/object.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "server/ops/malloc_tuning.h"

ABSL_FLAG(int, objects, 50000, "ConfigMaps to seed and sync.");
ABSL_FLAG(int, data_bytes, 1024, "Bytes of data per ConfigMap.");
ABSL_FLAG(int, runs, 3, "Sidecar runs per malloc setting (medians).");
ABSL_FLAG(std::vector<std::string>, tunables,
          std::vector<std::string>({"default", "nohuge", "glibc"}),
          "Malloc settings to measure: default (the sidecar's own), nohuge "
          "(arena_max=1 without huge pages), glibc (glibc's defaults).");
ABSL_FLAG(std::string, baseline_sidecar, "",
          "Another informer_sidecar binary (e.g. one built from main) to "
          "measure alternately with this build's, in the same run.");
ABSL_FLAG(std::string, baseline_bench, "",
          "A memory_bench built from other sources, for part 2's breakdown "
          "of the same list with that code.");
ABSL_FLAG(std::string, dump_smaps, "",
          "Write the synced sidecar's /proc/PID/smaps to this file (the last "
          "run's), to see which mappings hold the memory.");
ABSL_FLAG(absl::Duration, settle, absl::ZeroDuration(),
          "Measure the sidecar this long after SERVING rather than at once.");
ABSL_FLAG(bool, breakdown, true, "Run part 2 (the in-process breakdown).");
// Child mode (internal).
ABSL_FLAG(bool, child, false, "internal: run the breakdown and print it");
ABSL_FLAG(std::string, server, "", "internal: API server URL");

namespace {

constexpr char kNamespace[] = "bench";

// A ConfigMap as `kubectl create configmap` makes it on a v1.24 API server:
// 1 KiB of data and the managedFields entry the server adds (which the
// emulator keeps as posted; the sidecar drops it when caching, as
// client-go's informers are usually told to).
std::string ConfigMapJson(int i) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-)", i,
      R"(","namespace":")", kNamespace,
      R"(","managedFields":[{"manager":"kubectl-create","operation":"Update",)"
      R"("apiVersion":"v1","time":"2026-12-01T19:00:00Z","fieldsType":)"
      R"("FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}}}}]},)"
      R"("data":{"payload":")",
      std::string(static_cast<size_t>(absl::GetFlag(FLAGS_data_bytes)), 'x'),
      R"("}})");
}

// Creates the namespace and N ConfigMaps over the emulator's API (POST), on
// a few connections at once.
bool Seed(int port, int n) {
  {
    httplib::Client cli("127.0.0.1", port);
    auto ns =
        cli.Post("/api/v1/namespaces",
                 absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)",
                              R"("metadata":{"name":")", kNamespace, R"("}})"),
                 "application/json");
    if (!ns || (ns->status != 201 && ns->status != 409)) return false;
  }
  constexpr int kThreads = 4;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      // Headers and body go out as two writes: without this, Nagle's
      // algorithm and delayed ACKs make every request take 40 ms.
      cli.set_tcp_nodelay(true);
      const std::string path =
          absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps");
      for (int i = t; i < n; i += kThreads) {
        auto res = cli.Post(path.c_str(), ConfigMapJson(i), "application/json");
        if (!res || res->status != 201) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failed.load() == 0;
}

std::string TunablesEnv(const std::string& name) {
  if (name == "nohuge") return "GLIBC_TUNABLES=glibc.malloc.arena_max=1";
  if (name == "glibc") return "GLIBC_TUNABLES=";
  return absl::StrCat("GLIBC_TUNABLES=", server::kMallocTunables);
}

// "VmRSS:  1234 kB" style fields of a /proc file, in bytes.
std::map<std::string, int64_t> ProcKb(const std::string& path) {
  std::map<std::string, int64_t> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() == 3 && f[2] == "kB" && !f[0].empty() && f[0].back() == ':') {
      int64_t kb = 0;
      if (absl::SimpleAtoi(f[1], &kb)) {
        out[f[0].substr(0, f[0].size() - 1)] = kb * 1024;
      }
    }
  }
  return out;
}

struct SidecarMem {
  double rss = 0;
  double anon = 0;
  double file = 0;
  double huge = 0;
};

absl::StatusOr<SidecarMem> MeasureSidecar(const std::string& binary,
                                          const std::string& kubeconfig,
                                          const std::string& dir,
                                          const std::string& ns,
                                          const std::string& tunables) {
  const std::string config = absl::StrCat(dir, "/config-", ns, ".yaml");
  std::ofstream(config) << "resources:\n- resource: configmaps\n  namespace: "
                        << ns << "\n";
  integration::SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + kubeconfig, "--config=" + config,
                   "--print_events=false", "--http_listen=127.0.0.1:0"};
  options.env = {TunablesEnv(tunables)};
  options.quiet = true;
  options.start_timeout = absl::Minutes(5);
  absl::StatusOr<std::unique_ptr<integration::SidecarProcess>> sidecar =
      integration::SidecarProcess::Start(binary, std::move(options));
  if (!sidecar.ok()) return sidecar.status();
  // Wall-clock wait on purpose: what the kernel does to the footprint
  // afterwards (khugepaged collapsing huge pages) takes time, not events.
  absl::SleepFor(absl::GetFlag(FLAGS_settle));
  const std::string proc = absl::StrCat("/proc/", (*sidecar)->pid());
  std::map<std::string, int64_t> status = ProcKb(proc + "/status");
  std::map<std::string, int64_t> rollup = ProcKb(proc + "/smaps_rollup");
  SidecarMem m;
  m.rss = static_cast<double>(status["VmRSS"]);
  m.anon = static_cast<double>(status["RssAnon"]);
  m.file = static_cast<double>(status["RssFile"] + status["RssShmem"]);
  m.huge = static_cast<double>(rollup["AnonHugePages"]);
  const std::string dump = absl::GetFlag(FLAGS_dump_smaps);
  if (!dump.empty() && ns == kNamespace) {
    std::ifstream in(proc + "/smaps");
    std::ofstream(dump) << in.rdbuf();
  }
  (*sidecar)->Terminate();
  return m;
}

int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

int64_t Rss() { return ProcKb("/proc/self/status")["VmRSS"]; }

// Part 2, in this (fresh) process. Prints "name bytes" lines.
int RunChild() {
  informer::client::RestConfig config;
  config.server = absl::GetFlag(FLAGS_server);
  config.request_timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(config);
  if (!kube.ok()) return 1;
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> cms =
      (*kube)->ForResource("configmaps", kNamespace);
  if (!cms.ok()) return 1;
  informer::SharedIndexInformer::Options options;
  options.name = "bench-configmaps";
  // The sidecar's indexes (server/registry/informer_registry.cc); the
  // namespace index is always there.
  options.indexers[std::string(informer::kOwnerUidIndex)] =
      informer::OwnerUidIndexFunc;
  const int64_t heap0 = HeapInUse();
  const int64_t rss0 = Rss();
  informer::SharedIndexInformer inf(cms->get(), options);
  if (!inf.Start().ok()) return 1;
  if (!inf.WaitForSync(absl::Minutes(10))) {
    LOG(ERROR) << "no sync: " << inf.LastError();
    return 1;
  }
  const int64_t heap1 = HeapInUse();
  const int64_t rss1 = Rss();
  malloc_trim(0);
  const int64_t rss1t = Rss();
  std::vector<informer::ObjectPtr> objs = inf.GetIndexer().List();
  int64_t json = 0, keys = 0, meta = 0;
  for (const informer::ObjectPtr& o : objs) {
    // Heap chunks, as MemoryUsage counts them (capacity + 1).
    const int64_t j = static_cast<int64_t>(o->json().size()) + 1;
    const int64_t k = o->Key().capacity() > 15
                          ? static_cast<int64_t>(o->Key().capacity()) + 1
                          : 0;
    json += j;
    keys += k;
    meta += static_cast<int64_t>(o->MemoryUsage()) - j - k;
  }
  int64_t store = 0, store_index = 0;
  {
    const int64_t h = HeapInUse();
    informer::Indexer plain;
    plain.Replace(objs, "");
    store = HeapInUse() - h;
  }
  {
    const int64_t h = HeapInUse();
    informer::Indexer indexed(inf.GetIndexer().GetIndexers());
    indexed.Replace(objs, "");
    store_index = HeapInUse() - h;
  }
  const int64_t n = static_cast<int64_t>(objs.size());
  const int64_t heap = heap1 - heap0;
  std::printf("objects %lld\n", static_cast<long long>(n));
  std::printf("json %lld\nmetadata %lld\nkeys %lld\n",
              static_cast<long long>(json), static_cast<long long>(meta),
              static_cast<long long>(keys));
  std::printf("store %lld\nindex %lld\n", static_cast<long long>(store),
              static_cast<long long>(store_index - store));
  std::printf("other_heap %lld\n",
              static_cast<long long>(heap - json - meta - keys - store_index));
  std::printf("heap %lld\nrss %lld\nrss_trimmed %lld\n",
              static_cast<long long>(heap), static_cast<long long>(rss1 - rss0),
              static_cast<long long>(rss1t - rss0));
  inf.Stop();
  return 0;
}

int RunBreakdown(const std::string& label, const std::string& self,
                 const std::string& url, const std::string& tunables) {
  const std::string cmd =
      absl::StrCat("env ", TunablesEnv(tunables), " ", self,
                   " --child --server=", url, " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 1;
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "breakdown child failed: %s\n", cmd.c_str());
    return 1;
  }
  std::map<std::string, double> v;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    double x = 0;
    if (f.size() == 2 && absl::SimpleAtod(f[1], &x)) v[f[0]] = x;
  }
  const double n = v["objects"];
  if (n <= 0) return 1;
  std::printf(
      "\nbreakdown, %s (%s malloc settings, in-process informer, "
      "%.0f objects)\n| part | bytes/object | MB |\n| --- | --- | "
      "--- |\n",
      label.c_str(), tunables.c_str(), n);
  const double free_kept = v["rss"] - v["heap"];
  const double free_trimmed = v["rss_trimmed"] - v["heap"];
  for (const auto& [name, val] : std::vector<std::pair<std::string, double>>{
           {"JSON", v["json"]},
           {"metadata", v["metadata"]},
           {"keys", v["keys"]},
           {"store", v["store"]},
           {"indexes", v["index"]},
           {"other heap", v["other_heap"]},
           {"= heap in use", v["heap"]},
           {"free kept (before trim)", free_kept},
           {"free kept (after malloc_trim)", free_trimmed},
           {"= RSS growth (before trim)", v["rss"]},
           {"= RSS growth (after malloc_trim)", v["rss_trimmed"]}}) {
    std::printf("| %s | %.0f | %.1f |\n", name.c_str(), val / n, val / 1e6);
  }
  return 0;
}

int RunParent(const std::string& self, const char* argv0) {
  absl::StatusOr<std::string> emu_bin =
      integration::FindRunfile("emulator/kube_emulator", argv0);
  absl::StatusOr<std::string> sidecar_bin =
      integration::FindRunfile("server/informer_sidecar", argv0);
  if (!emu_bin.ok() || !sidecar_bin.ok()) {
    std::fprintf(stderr, "binaries not found\n");
    return 1;
  }
  char dir[] = "/tmp/memory_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  absl::StatusOr<std::unique_ptr<integration::EmulatorProcess>> emu =
      integration::EmulatorProcess::Start(*emu_bin, {}, /*quiet=*/true);
  if (!emu.ok()) {
    std::fprintf(stderr, "%s\n", emu.status().ToString().c_str());
    return 1;
  }
  const int n = absl::GetFlag(FLAGS_objects);
  const absl::Time seed_start = absl::Now();
  if (!Seed((*emu)->port(), n)) {
    std::fprintf(stderr, "seeding failed\n");
    return 1;
  }
  std::fprintf(stderr, "seeded %d ConfigMaps in %s\n", n,
               absl::FormatDuration(absl::Now() - seed_start).c_str());
  httplib::Client cli("127.0.0.1", (*emu)->port());
  cli.set_read_timeout(3600);
  auto list = cli.Get(absl::StrCat("/api/v1/namespaces/", kNamespace,
                                   "/configmaps?resourceVersion=0")
                          .c_str());
  if (!list || list->status != 200) return 1;
  std::printf(
      "%d ConfigMaps (%d B of data each), list %.1f MB, %.0f B of JSON per "
      "object as served\n",
      n, absl::GetFlag(FLAGS_data_bytes), list->body.size() / 1e6,
      static_cast<double>(list->body.size()) / n);
  absl::StatusOr<std::string> kubeconfig =
      integration::WriteKubeconfig(dir, (*emu)->url());
  if (!kubeconfig.ok()) return 1;
  // The binaries compared, run alternately.
  std::vector<std::pair<std::string, std::string>> binaries = {
      {"this build", *sidecar_bin}};
  if (!absl::GetFlag(FLAGS_baseline_sidecar).empty()) {
    binaries.emplace_back("baseline", absl::GetFlag(FLAGS_baseline_sidecar));
  }
  std::printf(
      "| sidecar | malloc | RSS after sync | RssAnon | RssFile | "
      "AnonHugePages | RSS with no objects | RssAnon with no objects | "
      "RSS/object | runs (RSS MB) |\n| --- | --- | --- | --- | --- | --- | "
      "--- | --- | --- | --- |\n");
  for (const std::string& tunables : absl::GetFlag(FLAGS_tunables)) {
    struct Series {
      std::vector<double> rss, anon, file, huge, base, base_anon, each;
    };
    std::vector<Series> series(binaries.size());
    for (int i = 0; i < absl::GetFlag(FLAGS_runs); ++i) {
      for (size_t b = 0; b < binaries.size(); ++b) {
        absl::StatusOr<SidecarMem> full = MeasureSidecar(
            binaries[b].second, *kubeconfig, dir, kNamespace, tunables);
        absl::StatusOr<SidecarMem> empty = MeasureSidecar(
            binaries[b].second, *kubeconfig, dir, "none", tunables);
        if (!full.ok() || !empty.ok()) {
          std::fprintf(stderr, "sidecar run failed: %s %s\n",
                       full.status().ToString().c_str(),
                       empty.status().ToString().c_str());
          return 1;
        }
        Series& s = series[b];
        s.rss.push_back(full->rss);
        s.anon.push_back(full->anon);
        s.file.push_back(full->file);
        s.base_anon.push_back(empty->anon);
        s.huge.push_back(full->huge);
        s.base.push_back(empty->rss);
        s.each.push_back((full->rss - empty->rss) / n);
      }
    }
    for (size_t b = 0; b < binaries.size(); ++b) {
      const Series& s = series[b];
      std::string runs;
      for (double r : s.rss) {
        absl::StrAppend(&runs, runs.empty() ? "" : " ",
                        static_cast<int>(r / 1e6 + 0.5));
      }
      std::printf(
          "| %s | %s | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | "
          "%.1f MB | %.0f B | %s |\n",
          binaries[b].first.c_str(), tunables.c_str(),
          integration::Median(s.rss) / 1e6, integration::Median(s.anon) / 1e6,
          integration::Median(s.file) / 1e6, integration::Median(s.huge) / 1e6,
          integration::Median(s.base) / 1e6,
          integration::Median(s.base_anon) / 1e6, integration::Median(s.each),
          runs.c_str());
    }
    std::fflush(stdout);
  }
  if (absl::GetFlag(FLAGS_breakdown)) {
    for (const std::string& tunables : absl::GetFlag(FLAGS_tunables)) {
      if (RunBreakdown("this build", self, (*emu)->url(), tunables) != 0) {
        return 1;
      }
      const std::string other = absl::GetFlag(FLAGS_baseline_bench);
      if (!other.empty() &&
          RunBreakdown("baseline", other, (*emu)->url(), tunables) != 0) {
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  if (absl::GetFlag(FLAGS_child)) return RunChild();
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 1;
  self[len] = '\0';
  return RunParent(self, argv[0]);
}

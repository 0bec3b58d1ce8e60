// Memory per cached object: the real informer_sidecar syncing N ConfigMaps
// (1 KiB of data each, about 1.5 KB of JSON as served, with managedFields)
// from the kube_emulator binary, seeded through its API (POST).
//
//   bazel run -c opt //integration_tests:memory_bench -- --runs=3
//       [--baseline_sidecar=/path/to/other/informer_sidecar
//        --baseline_bench=/path/to/other/memory_bench]
//       [--sidecar_bin=before=/tmp/b/informer_sidecar,after=/tmp/a/...]
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
// Side by side (--client_go_bench, a kube-informer-bench binary; by default
// $REALKUBE_BIN/kube-informer-bench when that exists): every run also
// times a plain download of the list (curl, the API server's floor; with
// --initial_state=default also of the WatchList, to its end bookmark) and
// runs client-go v0.37's shared informer on the same list twice, with its
// defaults and with managedFields stripped by a transform, one process at a
// time, alternating with the sidecar. Reported for each: sync time, RSS
// after sync and peak RSS during it (VmHWM).
//
// What is synced:
//   default        --objects ConfigMaps in one namespace, POSTed
//   --pods=N       N Pods of the emulator's seed (--seed_pods with
//                  --seed_pod_namespaces=--pod_namespaces), all namespaces,
//                  the emulator paced at --serve_bytes_per_sec (lists)
//                  and --serve_watch_list_bytes_per_sec (WatchLists)
//   --kubeconfig   an existing API server (e.g. the real kube-apiserver):
//                  --resource in --namespace as it is; nothing is seeded,
//                  and the download uses --curl_flags for its credentials
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
#include <optional>
#include <sstream>
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
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "informer/cache/indexer.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/kubeconfig.h"
#include "informer/client/resource_client.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/side_by_side.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"
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
ABSL_FLAG(std::vector<std::string>, sidecar_bin, {},
          "informer_sidecar binaries to measure alternately, in this order, "
          "instead of this build's and --baseline_sidecar (e.g. two builds "
          "copied aside, so that a rebuild of the tree during a run changes "
          "nothing): each NAME=PATH, the PATH optionally followed by more "
          "sidecar flags after spaces ('after-list=/tmp/a/informer_sidecar "
          "--watch_list=off'); a bare PATH is named by its position.");
ABSL_FLAG(std::string, baseline_bench, "",
          "A memory_bench built from other sources, for part 2's breakdown "
          "of the same list with that code.");
ABSL_FLAG(std::string, dump_smaps, "",
          "Write the synced sidecar's /proc/PID/smaps to this file (the last "
          "run's), to see which mappings hold the memory.");
ABSL_FLAG(absl::Duration, settle, absl::ZeroDuration(),
          "Measure the sidecar this long after SERVING rather than at once.");
ABSL_FLAG(bool, breakdown, true, "Run part 2 (the in-process breakdown).");
ABSL_FLAG(int, pods, 0,
          "Sync this many emulator-seeded Pods (all namespaces) instead of "
          "ConfigMaps.");
ABSL_FLAG(int, pod_namespaces, 100,
          "With --pods: namespaces they spread over.");
ABSL_FLAG(double, serve_bytes_per_sec, 7.5e7,
          "With --pods: the emulator's list pace (the API server's 75 MB/s).");
ABSL_FLAG(std::optional<double>, serve_watch_list_bytes_per_sec, std::nullopt,
          "With --pods: the emulator's pace of a WatchList's initial events; "
          "default: --serve_bytes_per_sec. kube-apiserver v1.37.2 streams a "
          "JSON WatchList at about half its JSON LIST rate.");
ABSL_FLAG(std::string, client_go_bench, "",
          "kube-informer-bench (client-go v0.37) to run side by side; "
          "default: $REALKUBE_BIN/kube-informer-bench if it exists.");
ABSL_FLAG(std::string, kubeconfig, "",
          "Measure against this existing API server instead of an emulator.");
ABSL_FLAG(std::string, resource, "configmaps",
          "With --kubeconfig: configmaps or pods.");
ABSL_FLAG(std::string, namespace, "",
          "With --kubeconfig: the namespace (empty: all namespaces).");
ABSL_FLAG(std::string, curl_flags, "",
          "With --kubeconfig: curl's credentials for the download, e.g. "
          "--cacert CA -H 'Authorization: Bearer TOKEN'.");
ABSL_FLAG(std::string, initial_state, "list",
          "How the sidecar and client-go get the initial state: list (both "
          "LIST then WATCH: the sidecar's --watch_list=off, client-go's "
          "WatchListClient gate off; the emulator paces lists only) or "
          "default (each one's default: WatchList where the server has it).");
ABSL_FLAG(bool, watch_cost, true,
          "Also measure the sidecar's RSS once a first Watch stream opened "
          "(the fan-out's per-object state; no history without changes).");
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

// What a run syncs and how to reach it.
struct Target {
  std::string resource;  // "configmaps" or "pods"
  std::string ns;        // empty: all namespaces
  std::string kubeconfig;
  std::string server;        // URL, no trailing '/'
  std::string curl_flags;    // credentials for the download
  bool legacy_child = true;  // part 2's child takes only --server
  // The reflector's first list, which the watch cache serves whole.
  std::string ListUrl() const {
    return absl::StrCat(
        server,
        ns.empty() ? "/api/v1/" : absl::StrCat("/api/v1/namespaces/", ns, "/"),
        resource, "?resourceVersion=0&limit=500");
  }
  // The collection, for a watch.
  std::string CollectionUrl() const {
    const std::string list = ListUrl();
    return list.substr(0, list.find('?'));
  }
};

struct SidecarMem {
  double rss = 0;
  double anon = 0;
  double file = 0;
  double huge = 0;
  double hwm = 0;        // VmHWM at SERVING: the peak during the sync
  double seconds = 0;    // start to SERVING
  double watch_rss = 0;  // VmRSS once a first Watch got its initial state
};

// Opens a Watch that matches no object (so the client costs nothing) and
// waits for INITIAL_STATE_DONE: the resource's fan-out then exists.
absl::Status OpenFirstWatch(integration::SidecarProcess& sidecar,
                            const std::string& resource) {
  auto stub = informer::v1::Informer::NewStub(sidecar.NewChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  informer::v1::WatchRequest req;
  req.set_resource(resource);
  req.set_label_selector("memory-bench-matches-nothing=1");
  auto reader = stub->Watch(&ctx, req);
  informer::v1::WatchResponse resp;
  while (reader->Read(&resp)) {
    for (const informer::v1::Event& e : resp.events()) {
      if (e.type() == informer::v1::EVENT_TYPE_INITIAL_STATE_DONE) {
        ctx.TryCancel();
        reader->Finish();
        return absl::OkStatus();
      }
    }
  }
  return absl::InternalError("Watch ended before INITIAL_STATE_DONE");
}

// One fresh sidecar caching `target` (in namespace `ns`), measured once
// health says SERVING.
absl::StatusOr<SidecarMem> MeasureSidecar(const std::string& command,
                                          const Target& target,
                                          const std::string& dir,
                                          const std::string& ns,
                                          const std::string& tunables) {
  // The binary, then flags of its own (--sidecar_bin).
  const std::vector<std::string> words =
      absl::StrSplit(command, ' ', absl::SkipEmpty());
  if (words.empty()) return absl::InvalidArgumentError("no sidecar binary");
  const std::string config =
      absl::StrCat(dir, "/config-", ns.empty() ? "all" : ns, ".yaml");
  std::ofstream(config) << "resources:\n- resource: " << target.resource << "\n"
                        << (ns.empty() ? "" : "  namespace: " + ns + "\n");
  integration::SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + target.kubeconfig, "--config=" + config,
                   "--print_events=false", "--http_listen=127.0.0.1:0"};
  if (absl::GetFlag(FLAGS_initial_state) == "list") {
    options.flags.push_back("--watch_list=off");
  }
  // After the defaults: the last of a repeated flag is the one taken.
  options.flags.insert(options.flags.end(), words.begin() + 1, words.end());
  options.env = {TunablesEnv(tunables)};
  // The sync's end from the sidecar's own log: the harness's gRPC channel
  // reconnects with a back-off of about a second, too coarse for a sync.
  options.stderr_file = absl::StrCat(dir, "/sidecar.log");
  std::ofstream(options.stderr_file, std::ios::trunc).flush();
  const std::string log = options.stderr_file;
  options.start_timeout = absl::Minutes(10);
  const absl::Time started = absl::Now();
  absl::StatusOr<std::unique_ptr<integration::SidecarProcess>> sidecar =
      integration::SidecarProcess::Start(words[0], std::move(options));
  if (!sidecar.ok()) return sidecar.status();
  SidecarMem m;
  absl::StatusOr<absl::Time> synced =
      integration::LogLineTime(log, ": cache synced");
  m.seconds =
      absl::ToDoubleSeconds((synced.ok() ? *synced : absl::Now()) - started);
  // Wall-clock wait on purpose: what the kernel does to the footprint
  // afterwards (khugepaged collapsing huge pages) takes time, not events.
  absl::SleepFor(absl::GetFlag(FLAGS_settle));
  const std::string proc = absl::StrCat("/proc/", (*sidecar)->pid());
  std::map<std::string, int64_t> status = ProcKb(proc + "/status");
  std::map<std::string, int64_t> rollup = ProcKb(proc + "/smaps_rollup");
  m.rss = static_cast<double>(status["VmRSS"]);
  m.anon = static_cast<double>(status["RssAnon"]);
  m.file = static_cast<double>(status["RssFile"] + status["RssShmem"]);
  m.huge = static_cast<double>(rollup["AnonHugePages"]);
  m.hwm = static_cast<double>(status["VmHWM"]);
  const std::string dump = absl::GetFlag(FLAGS_dump_smaps);
  if (!dump.empty() && ns == target.ns) {
    std::ifstream in(proc + "/smaps");
    std::ofstream(dump) << in.rdbuf();
  }
  if (absl::GetFlag(FLAGS_watch_cost)) {
    absl::Status w = OpenFirstWatch(**sidecar, target.resource);
    if (!w.ok()) return w;
    m.watch_rss = integration::ReadProcMemory((*sidecar)->pid()).rss;
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
  std::string resource = "configmaps", ns = kNamespace;
  if (!absl::GetFlag(FLAGS_kubeconfig).empty()) {
    auto kc =
        informer::client::LoadKubeconfigFile(absl::GetFlag(FLAGS_kubeconfig));
    if (!kc.ok()) return 1;
    auto rc = informer::client::RestConfigFromKubeconfig(*kc);
    if (!rc.ok()) return 1;
    config = *rc;
    resource = absl::GetFlag(FLAGS_resource);
    ns = absl::GetFlag(FLAGS_namespace);
  } else {
    config.server = absl::GetFlag(FLAGS_server);
  }
  config.request_timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(config);
  if (!kube.ok()) return 1;
  // Objects compressed at rest, as the sidecar keeps them.
  informer::client::ResourceClientOptions client_options;
  client_options.transform.compressor =
      std::make_shared<informer::ZstdJsonCompressor>();
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> cms =
      (*kube)->ForResource(resource, ns, client_options);
  if (!cms.ok()) return 1;
  informer::SharedIndexInformer::Options options;
  options.name = "bench-" + resource;
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
    const int64_t j = static_cast<int64_t>(o->stored_json_size()) + 1;
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
                 const Target& target, const std::string& tunables) {
  const std::string where =
      target.legacy_child ? absl::StrCat(" --server=", target.server)
                          : absl::StrCat(" --kubeconfig=", target.kubeconfig,
                                         " --resource=", target.resource,
                                         " --namespace='", target.ns, "'");
  const std::string cmd = absl::StrCat("env ", TunablesEnv(tunables), " ", self,
                                       " --child", where, " 2>/dev/null");
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

// Objects `target` lists now: remainingItemCount of a one-object list + 1.
absl::StatusOr<double> CountObjects(const Target& target) {
  std::string url = target.ListUrl();
  url = url.substr(0, url.find('?')) + "?limit=1";
  const std::string cmd =
      absl::StrCat("curl -sS -f ", target.curl_flags, " '", url, "'");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen curl");
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  if (pclose(p) != 0) return absl::InternalError("failed: " + cmd);
  const std::string key = "\"remainingItemCount\":";
  const size_t at = out.find(key);
  if (at == std::string::npos) {
    return out.find("\"items\":[{") == std::string::npos ? 0.0 : 1.0;
  }
  double n = 0;
  const std::string rest = out.substr(at + key.size());
  if (!absl::SimpleAtod(rest.substr(0, rest.find_first_of(",}")), &n)) {
    return absl::InternalError("bad remainingItemCount: " + out);
  }
  return n + 1;
}

// Starts and seeds the emulator (unless --kubeconfig names a server) and
// describes what to sync.
absl::StatusOr<Target> SetUpTarget(
    const std::string& emu_bin, const std::string& dir,
    std::unique_ptr<integration::EmulatorProcess>* emu) {
  Target t;
  if (!absl::GetFlag(FLAGS_kubeconfig).empty()) {
    t.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
    auto kc = informer::client::LoadKubeconfigFile(t.kubeconfig);
    if (!kc.ok()) return kc.status();
    auto rc = informer::client::RestConfigFromKubeconfig(*kc);
    if (!rc.ok()) return rc.status();
    t.server = rc->server;
    t.resource = absl::GetFlag(FLAGS_resource);
    t.ns = absl::GetFlag(FLAGS_namespace);
    t.curl_flags = absl::GetFlag(FLAGS_curl_flags);
    t.legacy_child = false;
    return t;
  }
  const int pods = absl::GetFlag(FLAGS_pods);
  std::vector<std::string> flags;
  if (pods > 0) {
    flags = {
        absl::StrCat("--seed_pods=", pods),
        absl::StrCat("--seed_pod_namespaces=",
                     absl::GetFlag(FLAGS_pod_namespaces)),
        absl::StrCat("--serve_bytes_per_sec=",
                     absl::GetFlag(FLAGS_serve_bytes_per_sec)),
        absl::StrCat("--serve_watch_list_bytes_per_sec=",
                     absl::GetFlag(FLAGS_serve_watch_list_bytes_per_sec)
                         .value_or(absl::GetFlag(FLAGS_serve_bytes_per_sec)))};
  }
  auto started = integration::EmulatorProcess::Start(emu_bin, flags, true);
  if (!started.ok()) return started.status();
  *emu = std::move(*started);
  t.server = (*emu)->url();
  auto kubeconfig = integration::WriteKubeconfig(dir, t.server);
  if (!kubeconfig.ok()) return kubeconfig.status();
  t.kubeconfig = *kubeconfig;
  if (pods > 0) {
    t.resource = "pods";
    t.legacy_child = false;
    return t;
  }
  t.resource = "configmaps";
  t.ns = kNamespace;
  const int n = absl::GetFlag(FLAGS_objects);
  const absl::Time seed_start = absl::Now();
  if (!Seed((*emu)->port(), n)) return absl::InternalError("seeding failed");
  std::fprintf(stderr, "seeded %d ConfigMaps in %s\n", n,
               absl::FormatDuration(absl::Now() - seed_start).c_str());
  return t;
}

std::string ClientGoBinary() {
  std::string b = absl::GetFlag(FLAGS_client_go_bench);
  if (!b.empty()) return b;
  const char* dir = std::getenv("REALKUBE_BIN");
  if (dir == nullptr) return "";
  b = absl::StrCat(dir, "/kube-informer-bench");
  return access(b.c_str(), X_OK) == 0 ? b : "";
}

// Every run of every contender, by name, in run order.
using Runs = std::map<std::string, std::vector<integration::SyncResult>>;

// One round of the download and the two client-go informers.
absl::Status RunOthers(const Target& t, const std::string& client_go,
                       Runs* runs) {
  absl::StatusOr<integration::SyncResult> curl =
      integration::RunCurl(t.ListUrl(), t.curl_flags);
  if (!curl.ok()) return curl.status();
  (*runs)["download (curl)"].push_back(*curl);
  if (absl::GetFlag(FLAGS_initial_state) != "list") {
    // A WatchList's own floor: the server streams it more slowly than it
    // serves the list (kube-apiserver v1.37, JSON: about 2x).
    absl::StatusOr<integration::SyncResult> watch =
        integration::RunCurlWatchList(t.CollectionUrl(), t.curl_flags,
                                      absl::Minutes(10));
    if (!watch.ok()) return watch.status();
    (*runs)["download, WatchList (curl to its end bookmark)"].push_back(*watch);
  }
  if (client_go.empty()) return absl::OkStatus();
  const std::string resource = absl::StrCat("v1/", t.resource);
  for (bool strip : {false, true}) {
    absl::StatusOr<integration::SyncResult> r = integration::RunClientGo(
        client_go, t.kubeconfig, resource, t.ns, strip,
        absl::GetFlag(FLAGS_initial_state) != "list", absl::Minutes(20));
    if (!r.ok()) return r.status();
    (*runs)[strip ? "client-go, managedFields stripped" : "client-go defaults"]
        .push_back(*r);
  }
  return absl::OkStatus();
}

double MedianOf(const std::vector<integration::SyncResult>& rs,
                double integration::SyncResult::*f) {
  std::vector<double> v;
  for (const integration::SyncResult& r : rs) v.push_back(r.*f);
  return integration::Median(v);
}

// The side-by-side table: medians, and the ratios to client-go.
void PrintSideBySide(const Runs& runs, double n) {
  auto med = [&](const std::string& name, double integration::SyncResult::*f) {
    auto it = runs.find(name);
    return it == runs.end() ? 0.0 : MedianOf(it->second, f);
  };
  const double floor =
      med("download (curl)", &integration::SyncResult::sync_seconds);
  const double go =
      med("client-go defaults", &integration::SyncResult::rss_bytes);
  const double go_strip = med("client-go, managedFields stripped",
                              &integration::SyncResult::rss_bytes);
  std::printf(
      "\nside by side (medians of %zu runs; %.0f objects; the sidecar with "
      "its default malloc settings)\n| contender | sync | / download | RSS "
      "after sync | peak RSS | RSS / client-go | RSS / client-go stripped | "
      "RSS per object | runs: sync s, RSS MB |\n| --- | --- | --- | --- | "
      "--- | --- | --- | --- | --- |\n",
      runs.empty() ? size_t{0} : runs.begin()->second.size(), n);
  for (const auto& [name, rs] : runs) {
    const double sync = MedianOf(rs, &integration::SyncResult::sync_seconds);
    const double rss = MedianOf(rs, &integration::SyncResult::rss_bytes);
    const double peak = MedianOf(rs, &integration::SyncResult::peak_bytes);
    std::string each;
    for (const integration::SyncResult& r : rs) {
      absl::StrAppend(&each, each.empty() ? "" : "; ",
                      absl::StrFormat("%.2f", r.sync_seconds));
      if (r.rss_bytes > 0) {
        absl::StrAppend(&each, absl::StrFormat(" %.0f", r.rss_bytes / 1e6));
      }
    }
    const bool dl = absl::StartsWith(name, "download");
    std::printf("| %s | %.2f s | %.2fx | %s | %s | %s | %s | %s | %s |\n",
                name.c_str(), sync, floor > 0 ? sync / floor : 0,
                dl ? "-" : absl::StrFormat("%.0f MB", rss / 1e6).c_str(),
                dl ? "-" : absl::StrFormat("%.0f MB", peak / 1e6).c_str(),
                dl || go <= 0 ? "-" : absl::StrFormat("%.3f", rss / go).c_str(),
                dl || go_strip <= 0
                    ? "-"
                    : absl::StrFormat("%.3f", rss / go_strip).c_str(),
                dl ? absl::StrFormat(
                         "%.0f B of JSON",
                         MedianOf(rs, &integration::SyncResult::objects) / n)
                         .c_str()
                   : absl::StrFormat("%.0f B", rss / n).c_str(),
                each.c_str());
  }
  std::fflush(stdout);
}

struct Series {
  std::vector<double> rss, anon, file, huge, base, base_anon, each, hwm,
      seconds, watch;
};

// Part 1's table rows for one malloc setting.
void PrintSidecarRows(
    const std::vector<std::pair<std::string, std::string>>& binaries,
    const std::vector<Series>& series, const std::string& tunables) {
  for (size_t b = 0; b < binaries.size(); ++b) {
    const Series& s = series[b];
    std::string runs;
    for (double r : s.rss) {
      absl::StrAppend(&runs, runs.empty() ? "" : " ",
                      static_cast<int>(r / 1e6 + 0.5));
    }
    using integration::Median;
    std::printf(
        "| %s | %s | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | "
        "%.1f MB | %.0f B | %.1f MB | %.2f s | %.1f MB | %s |\n",
        binaries[b].first.c_str(), tunables.c_str(), Median(s.rss) / 1e6,
        Median(s.anon) / 1e6, Median(s.file) / 1e6, Median(s.huge) / 1e6,
        Median(s.base) / 1e6, Median(s.base_anon) / 1e6, Median(s.each),
        Median(s.hwm) / 1e6, Median(s.seconds), Median(s.watch) / 1e6,
        runs.c_str());
  }
  std::fflush(stdout);
}

// Part 1 (and the side-by-side contenders, with the first malloc setting):
// every run alternates the contenders, one process at a time.
int RunSidecars(
    const std::vector<std::pair<std::string, std::string>>& binaries,
    const Target& target, const std::string& dir, double n) {
  const std::string client_go = ClientGoBinary();
  std::printf(
      "| sidecar | malloc | RSS after sync | RssAnon | RssFile | "
      "AnonHugePages | RSS with no objects | RssAnon with no objects | "
      "RSS/object | peak RSS | start to SERVING | RSS after a first Watch | "
      "runs (RSS MB) |\n| --- | --- | --- | --- | --- | --- | --- | --- | "
      "--- | --- | --- | --- | --- |\n");
  Runs side;
  const std::vector<std::string> all = absl::GetFlag(FLAGS_tunables);
  for (const std::string& tunables : all) {
    const bool first = tunables == all.front();
    std::vector<Series> series(binaries.size());
    for (int i = 0; i < absl::GetFlag(FLAGS_runs); ++i) {
      if (first) {
        if (absl::Status s = RunOthers(target, client_go, &side); !s.ok()) {
          std::fprintf(stderr, "%s\n", s.ToString().c_str());
          return 1;
        }
      }
      for (size_t b = 0; b < binaries.size(); ++b) {
        absl::StatusOr<SidecarMem> full = MeasureSidecar(
            binaries[b].second, target, dir, target.ns, tunables);
        absl::StatusOr<SidecarMem> empty = MeasureSidecar(
            binaries[b].second, target, dir, "memory-bench-none", tunables);
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
        s.hwm.push_back(full->hwm);
        s.seconds.push_back(full->seconds);
        s.watch.push_back(full->watch_rss);
        if (first) {
          side[absl::StrCat("sidecar (", binaries[b].first, ")")].push_back(
              {full->seconds, full->rss, full->hwm, n});
        }
      }
    }
    PrintSidecarRows(binaries, series, tunables);
  }
  PrintSideBySide(side, n);
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
  std::unique_ptr<integration::EmulatorProcess> emu;
  absl::StatusOr<Target> target = SetUpTarget(*emu_bin, dir, &emu);
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<double> n = CountObjects(*target);
  absl::StatusOr<integration::SyncResult> list =
      integration::RunCurl(target->ListUrl(), target->curl_flags);
  if (!n.ok() || !list.ok() || *n <= 0) {
    std::fprintf(stderr, "cannot list: %s %s\n", n.status().ToString().c_str(),
                 list.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "%.0f %s in %s, list %.1f MB, %.0f B of JSON per object as served; "
      "initial state: %s\n",
      *n, target->resource.c_str(),
      target->ns.empty() ? "all namespaces" : target->ns.c_str(),
      list->objects / 1e6, list->objects / *n,
      absl::GetFlag(FLAGS_initial_state) == "list"
          ? "LIST for all (sidecar --watch_list=off, client-go "
            "WatchListClient off)"
          : "each one's default");
  // The binaries compared, run alternately.
  std::vector<std::pair<std::string, std::string>> binaries = {
      {"this build", *sidecar_bin}};
  if (!absl::GetFlag(FLAGS_baseline_sidecar).empty()) {
    binaries.emplace_back("baseline", absl::GetFlag(FLAGS_baseline_sidecar));
  }
  if (!absl::GetFlag(FLAGS_sidecar_bin).empty()) {
    binaries.clear();
    for (const std::string& entry : absl::GetFlag(FLAGS_sidecar_bin)) {
      const size_t eq = entry.find('=');
      const size_t space = entry.find(' ');
      if (eq != std::string::npos && eq < space) {
        binaries.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
      } else {
        binaries.emplace_back(absl::StrCat("#", binaries.size() + 1), entry);
      }
    }
  }
  if (RunSidecars(binaries, *target, dir, *n) != 0) return 1;
  if (absl::GetFlag(FLAGS_breakdown)) {
    for (const std::string& tunables : absl::GetFlag(FLAGS_tunables)) {
      if (RunBreakdown("this build", self, *target, tunables) != 0) {
        return 1;
      }
      const std::string other = absl::GetFlag(FLAGS_baseline_bench);
      if (!other.empty() &&
          RunBreakdown("baseline", other, *target, tunables) != 0) {
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

// End-to-end initial sync: realistic Pods (~6 KiB of JSON each, with
// managedFields, seeded by the emulator) from the kube_emulator binary
// through the real API client (libcurl) into a SharedIndexInformer.
//
//   bazel run -c opt //integration_tests:sync_bench -- --runs=3
//
// For each size the emulator runs as its own process, so this process's
// memory is the informer's alone. Each measured sync runs in a fresh child
// process (this binary with --child), so one run's freed-but-retained heap
// cannot flatter the next run's RSS. Reported per configuration (medians):
//   sync       wall time from Start() to HasSynced
//   MB/s       list bytes (as curl counts them) / sync time
//   peak RSS   getrusage ru_maxrss of the child
//   RSS/obj    (RSS after sync - RSS before the informer started) / objects,
//              from /proc/self/statm
//   acct/obj   Object::MemoryUsage() summed over the cache / objects
//   transport  our HttpTransport GET of the same unpaged list, no decode
//   curl       `curl -s -o /dev/null` of the same list (resourceVersion=0,
//              unpaged) from the same server; ratio = sync / curl
//   memory     (one line per size) what a fresh process takes to allocate
//              and fill as many bytes as the cache holds, in object-sized
//              pieces, on one thread: the first-touch cost of the cache's
//              memory, which a sync cannot avoid and curl never pays
// The yardsticks: client-go holds ~29-36 KiB per cached Pod (aim
// for < 1/5), and the sync should be within 1.2x of curl.
//
// This is a plain binary rather than a Google Benchmark one on purpose:
// the figures are one-shot process-level measurements (peak RSS, RSS
// deltas) that need a fresh process per run.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/object/object.h"
#include "integration_tests/emulator_process.h"
#include "server/ops/malloc_tuning.h"

ABSL_FLAG(std::vector<std::string>, sizes,
          std::vector<std::string>({"10000", "100000"}), "Pod counts to sync.");
ABSL_FLAG(std::vector<std::string>, page_sizes,
          std::vector<std::string>({"500", "0"}),
          "Reflector page sizes (0: one unpaged list, like the curl run).");
ABSL_FLAG(int, runs, 3, "Runs per configuration (medians are reported).");
// Child mode (internal): one sync against --server, results on stdout.
ABSL_FLAG(bool, child, false, "internal: run one sync and print results");
ABSL_FLAG(bool, child_get, false,
          "internal: time one HttpTransport GET of the unpaged list (no "
          "decode) and print its nanoseconds");
ABSL_FLAG(int64_t, child_touch, 0,
          "internal: allocate and fill this many bytes in --expect pieces "
          "on a new thread and print the nanoseconds");
ABSL_FLAG(std::string, server, "", "internal: API server URL");
ABSL_FLAG(int64_t, page_size, 500, "internal: reflector page size");
ABSL_FLAG(int64_t, expect, 0, "internal: expected object count");

namespace {

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t PeakRssBytes() {
  struct rusage ru = {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// One sync in this (fresh) process. Prints
// "sync_ns rss_before rss_after peak_rss objects accounted_bytes".
int RunChild() {
  informer::client::RestConfig config;
  config.server = absl::GetFlag(FLAGS_server);
  config.request_timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(config);
  if (!kube.ok()) {
    LOG(ERROR) << kube.status();
    return 1;
  }
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> pods =
      (*kube)->ForResource("pods", "");
  if (!pods.ok()) {
    LOG(ERROR) << pods.status();
    return 1;
  }
  informer::SharedIndexInformer::Options options;
  options.name = "bench-pods";
  options.reflector.page_size = absl::GetFlag(FLAGS_page_size);
  const int64_t rss_before = RssBytes();
  const absl::Time start = absl::Now();
  int64_t rss_after = 0;
  int64_t objects = 0;
  int64_t accounted = 0;
  absl::Duration sync;
  {
    informer::SharedIndexInformer inf(pods->get(), options);
    if (!inf.Start().ok()) return 1;
    if (!inf.WaitForSync(absl::Minutes(10))) {
      LOG(ERROR) << "no sync: " << inf.LastError();
      return 1;
    }
    sync = absl::Now() - start;
    rss_after = RssBytes();
    const std::vector<informer::ObjectPtr> all = inf.GetIndexer().List();
    objects = static_cast<int64_t>(all.size());
    for (const informer::ObjectPtr& o : all) accounted += o->MemoryUsage();
    inf.Stop();
  }
  if (objects != absl::GetFlag(FLAGS_expect)) {
    LOG(ERROR) << "cached " << objects << " objects, expected "
               << absl::GetFlag(FLAGS_expect);
    return 1;
  }
  std::printf(
      "%lld %lld %lld %lld %lld %lld\n",
      static_cast<long long>(absl::ToInt64Nanoseconds(sync)),
      static_cast<long long>(rss_before), static_cast<long long>(rss_after),
      static_cast<long long>(PeakRssBytes()), static_cast<long long>(objects),
      static_cast<long long>(accounted));
  return 0;
}

// The client's transport alone: what it costs to receive the bytes, to
// separate transfer from decode and caching in the sync time.
int RunChildGet() {
  informer::client::RestConfig config;
  config.server = absl::GetFlag(FLAGS_server);
  config.request_timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(config);
  if (!kube.ok()) return 1;
  informer::client::HttpRequest req;
  req.path = "/api/v1/pods?resourceVersion=0";
  const absl::Time start = absl::Now();
  absl::StatusOr<informer::client::HttpResponse> resp =
      (*kube)->transport()->Do(req);
  const absl::Duration took = absl::Now() - start;
  if (!resp.ok()) return 1;
  std::printf("%lld\n", static_cast<long long>(absl::ToInt64Nanoseconds(took)));
  return 0;
}

// The memory floor: fresh heap memory for the cache's bytes, allocated in
// object-sized pieces and written once, on a thread other than main (as
// the reflector's decoding is).
int RunChildTouch() {
  const int64_t total = absl::GetFlag(FLAGS_child_touch);
  const int64_t pieces = std::max<int64_t>(1, absl::GetFlag(FLAGS_expect));
  const size_t piece = static_cast<size_t>(total / pieces);
  int64_t ns = 0;
  std::vector<std::string> kept;
  std::thread t([&] {
    const std::string src(piece, 'x');
    kept.reserve(static_cast<size_t>(pieces));
    const absl::Time start = absl::Now();
    for (int64_t i = 0; i < pieces; ++i) kept.emplace_back(src);
    ns = absl::ToInt64Nanoseconds(absl::Now() - start);
  });
  t.join();
  std::printf("%lld\n", static_cast<long long>(ns));
  return kept.size() == static_cast<size_t>(pieces) ? 0 : 1;
}

struct ChildResult {
  double sync_s = 0;
  double rss_per_obj = 0;
  double peak_rss = 0;
  double accounted_per_obj = 0;
  double accounted_bytes = 0;
};

// Runs `cmd` and returns its stdout.
absl::StatusOr<std::string> Capture(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen: " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("exit ", status, ": ", cmd));
  }
  return out;
}

absl::StatusOr<ChildResult> RunOne(const std::string& self,
                                   const std::string& url, int64_t page_size,
                                   int64_t expect) {
  absl::StatusOr<std::string> out = Capture(
      absl::StrCat(self, " --child --server=", url, " --page_size=", page_size,
                   " --expect=", expect, " 2>/dev/null"));
  if (!out.ok()) return out.status();
  std::vector<std::string> f =
      absl::StrSplit(*out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  std::vector<int64_t> v;
  for (const std::string& s : f) {
    int64_t x;
    if (!absl::SimpleAtoi(s, &x)) return absl::InternalError("bad: " + *out);
    v.push_back(x);
  }
  if (v.size() != 6) return absl::InternalError("bad: " + *out);
  ChildResult r;
  r.sync_s = v[0] / 1e9;
  r.rss_per_obj = static_cast<double>(v[2] - v[1]) / v[4];
  r.peak_rss = static_cast<double>(v[3]);
  r.accounted_per_obj = static_cast<double>(v[5]) / v[4];
  r.accounted_bytes = static_cast<double>(v[5]);
  return r;
}

struct CurlResult {
  double seconds = 0;
  double bytes = 0;
};

absl::StatusOr<CurlResult> CurlOnce(const std::string& url) {
  absl::StatusOr<std::string> out = Capture(
      absl::StrCat("curl -s -o /dev/null -w '%{size_download} %{time_total}' '",
                   url, "/api/v1/pods?resourceVersion=0'"));
  if (!out.ok()) return out.status();
  std::vector<std::string> f = absl::StrSplit(*out, ' ');
  CurlResult r;
  if (f.size() != 2 || !absl::SimpleAtod(f[0], &r.bytes) ||
      !absl::SimpleAtod(f[1], &r.seconds)) {
    return absl::InternalError("bad curl output: " + *out);
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

int RunParent(const std::string& self, const std::string& argv0) {
  absl::StatusOr<std::string> binary = integration::FindEmulatorBinary(argv0);
  if (!binary.ok()) {
    LOG(ERROR) << binary.status();
    return 1;
  }
  const int runs = absl::GetFlag(FLAGS_runs);
  std::printf("%8s %6s | %8s %8s %9s %9s %9s | %8s %7s | %s\n", "pods", "page",
              "sync s", "MB/s", "peak RSS", "RSS/obj", "acct/obj", "curl s",
              "ratio", "runs");
  for (const std::string& size_s : absl::GetFlag(FLAGS_sizes)) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(size_s, &size)) return 1;
    absl::StatusOr<std::unique_ptr<integration::EmulatorProcess>> emu =
        integration::EmulatorProcess::Start(
            *binary,
            // Without the watch cache every list honours `limit`, so the
            // page sizes compare paging with one response (with it, the
            // emulator serves the reflector's resourceVersion=0 list whole
            // whatever the page size; sidecar_sync_bench measures that).
            {absl::StrCat("--seed_pods=", size), "--watch_cache=false"},
            /*quiet=*/true);
    if (!emu.ok()) {
      LOG(ERROR) << emu.status();
      return 1;
    }
    const std::string url = (*emu)->url();
    std::vector<CurlResult> curls;
    // One warm-up (first touches of the emulator's pages), then the runs.
    if (!CurlOnce(url).ok()) return 1;
    for (int i = 0; i < runs; ++i) {
      absl::StatusOr<CurlResult> c = CurlOnce(url);
      if (!c.ok()) {
        LOG(ERROR) << c.status();
        return 1;
      }
      curls.push_back(*c);
    }
    std::vector<double> gets;
    for (int i = 0; i < runs; ++i) {
      absl::StatusOr<std::string> out = Capture(
          absl::StrCat(self, " --child_get --server=", url, " 2>/dev/null"));
      double ns = 0;
      if (!out.ok() ||
          !absl::SimpleAtod(absl::StripAsciiWhitespace(*out), &ns)) {
        LOG(ERROR) << "client GET failed";
        return 1;
      }
      gets.push_back(ns / 1e9);
    }
    const double get_s = Median(gets, [](double x) { return x; });
    const double curl_s =
        Median(curls, [](const CurlResult& c) { return c.seconds; });
    const double bytes =
        Median(curls, [](const CurlResult& c) { return c.bytes; });
    double cache_bytes = 0;
    for (const std::string& page_s : absl::GetFlag(FLAGS_page_sizes)) {
      int64_t page = 0;
      if (!absl::SimpleAtoi(page_s, &page)) return 1;
      std::vector<ChildResult> results;
      for (int i = 0; i < runs; ++i) {
        absl::StatusOr<ChildResult> r = RunOne(self, url, page, size);
        if (!r.ok()) {
          LOG(ERROR) << r.status();
          return 1;
        }
        results.push_back(*r);
      }
      const double sync_s =
          Median(results, [](const ChildResult& r) { return r.sync_s; });
      cache_bytes = results.front().accounted_bytes;
      std::string each;
      for (const ChildResult& r : results) {
        absl::StrAppend(&each, each.empty() ? "" : " ",
                        absl::StrFormat("%.3f", r.sync_s));
      }
      std::printf(
          "%8lld %6lld | %8.3f %8.1f %7.0fMB %7.2fKB %7.2fKB | %8.3f %6.2fx "
          "| sync %s\n",
          static_cast<long long>(size), static_cast<long long>(page), sync_s,
          bytes / sync_s / 1e6,
          Median(results, [](const ChildResult& r) { return r.peak_rss; }) /
              1e6,
          Median(results, [](const ChildResult& r) { return r.rss_per_obj; }) /
              1024,
          Median(results,
                 [](const ChildResult& r) { return r.accounted_per_obj; }) /
              1024,
          curl_s, sync_s / curl_s, each.c_str());
      std::fflush(stdout);
    }
    std::printf(
        "%8lld list: %.1f MB (%.0f B/pod); our transport's GET alone: "
        "%.3f s (%.2fx curl); curl runs:",
        static_cast<long long>(size), bytes / 1e6, bytes / size, get_s,
        get_s / curl_s);
    for (const CurlResult& c : curls) std::printf(" %.3f", c.seconds);
    std::printf("\n");
    if (cache_bytes > 0) {
      std::vector<double> touches;
      for (int i = 0; i < runs; ++i) {
        absl::StatusOr<std::string> out = Capture(absl::StrCat(
            self, " --child_touch=", static_cast<int64_t>(cache_bytes),
            " --expect=", size, " 2>/dev/null"));
        double ns = 0;
        if (!out.ok() ||
            !absl::SimpleAtod(absl::StripAsciiWhitespace(*out), &ns)) {
          LOG(ERROR) << "memory floor run failed";
          return 1;
        }
        touches.push_back(ns / 1e9);
      }
      const double touch_s = Median(touches, [](double x) { return x; });
      std::printf(
          "%8lld memory floor: allocating and filling the cache's %.0f MB in "
          "%.0f-byte pieces in a fresh process: %.3f s (%.2fx curl)\n",
          static_cast<long long>(size), cache_bytes / 1e6, cache_bytes / size,
          touch_s, touch_s / curl_s);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The informer runs with the sidecar's malloc settings (inherited by the
  // children; GLIBC_TUNABLES= on the command line measures glibc's
  // defaults instead).
  server::ReexecWithMallocTunables(argv);
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  if (absl::GetFlag(FLAGS_child)) return RunChild();
  if (absl::GetFlag(FLAGS_child_get)) return RunChildGet();
  if (absl::GetFlag(FLAGS_child_touch) > 0) return RunChildTouch();
  // /proc/self/exe: the child is exactly this binary, wherever bazel put it.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  return RunParent(self, argv[0]);
}

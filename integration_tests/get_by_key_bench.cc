// In-process GetByKey latency, call by call, on the informer's cache at the
// scale of the Kubernetes envelope: an Indexer with the sidecar's indexes
// (namespace, owner UID) holding --pods Pods of the emulator's seed shape
// (emulator/seed.h SeedSpreadPods' names and JSON, managedFields dropped as
// the sidecar caches them), and a reader that, for --samples random keys,
// times GetByKey plus reading the object's JSON (which, for an object
// stored compressed, is where its bytes are produced). p50 / p99 / p99.9 /
// max per call, medians over --repetitions.
//
//   bazel build -c opt //integration_tests:get_by_key_bench
//   bazel-bin/integration_tests/get_by_key_bench [--pods=150000]
//
// store_bench reports the mean of GetByKey; this reports its tail, which
// is what the bound (p99 at most 20 us) is about.

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emulator/seed.h"
#include "informer/cache/indexer.h"
#include "informer/cache/shared_informer.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "integration_tests/bench_stats.h"

ABSL_FLAG(int, pods, 150000, "Pods in the cache.");
ABSL_FLAG(int, namespaces, 100, "Namespaces they spread over.");
ABSL_FLAG(int, samples, 1000000, "Timed GetByKey calls per repetition.");
ABSL_FLAG(int, repetitions, 5, "Repetitions (medians reported).");

namespace {

// The seed's Pod JSON without its managedFields entry, as the sidecar keeps
// it.
std::string WithoutManagedFields(std::string json) {
  const std::string key = ",\"managedFields\":[";
  const size_t at = json.find(key);
  if (at == std::string::npos) return json;
  int depth = 0;
  size_t i = at + key.size() - 1;
  bool in_string = false;
  for (; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && --depth == 0) break;
  }
  json.erase(at, i + 1 - at);
  return json;
}

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_pods);
  const int nss = absl::GetFlag(FLAGS_namespaces);
  informer::Indexers indexers;
  indexers[std::string(informer::kNamespaceIndex)] =
      informer::MetaNamespaceIndexFunc;
  indexers[std::string(informer::kOwnerUidIndex)] = informer::OwnerUidIndexFunc;
  informer::Indexer indexer(indexers);
  std::vector<std::string> keys;
  // Objects compressed at rest, as the sidecar keeps them.
  informer::TransformOptions transform;
  transform.compressor = std::make_shared<informer::ZstdJsonCompressor>();
  for (int i = 0; i < n; ++i) {
    emulator::PodSpread spread;
    spread.namespaces = nss;
    std::string json = WithoutManagedFields(
        emulator::PodJson(emulator::SpreadPodParams(i, spread)));
    // The fields the API server adds.
    const std::string meta = "\"metadata\":{";
    json.insert(json.find(meta) + meta.size(),
                absl::StrFormat("\"uid\":\"%08x-1f2e-4d3c-8b4a-%012x\","
                                "\"resourceVersion\":\"%d\",",
                                i, i, 1000 + i));
    absl::StatusOr<informer::ObjectPtr> obj =
        informer::Object::Parse(json, transform);
    if (!obj.ok()) {
      std::fprintf(stderr, "bad pod: %s\n", obj.status().ToString().c_str());
      return 1;
    }
    keys.push_back((*obj)->Key());
    indexer.Add(*obj);
  }
  std::mt19937 rng(1);
  std::vector<double> p50, p99, p999, mx;
  for (int r = 0; r < absl::GetFlag(FLAGS_repetitions); ++r) {
    std::vector<int32_t> ns_lat;
    ns_lat.reserve(absl::GetFlag(FLAGS_samples));
    size_t bytes = 0;
    for (int s = 0; s < absl::GetFlag(FLAGS_samples); ++s) {
      const std::string& key =
          keys[std::uniform_int_distribution<size_t>(0, keys.size() - 1)(rng)];
      const int64_t t0 = NowNanos();
      informer::ObjectPtr o = indexer.GetByKey(key);
      auto json = o->json();
      bytes += json.size();
      ns_lat.push_back(static_cast<int32_t>(NowNanos() - t0));
    }
    std::sort(ns_lat.begin(), ns_lat.end());
    auto q = [&](double f) {
      return ns_lat[std::min(ns_lat.size() - 1,
                             static_cast<size_t>(f * ns_lat.size()))] /
             1000.0;
    };
    p50.push_back(q(0.5));
    p99.push_back(q(0.99));
    p999.push_back(q(0.999));
    mx.push_back(ns_lat.back() / 1000.0);
    if (bytes == 0) return 1;
  }
  std::printf(
      "%d Pods in %d namespaces, GetByKey + json(), %d calls x %d "
      "repetitions (medians):\n| p50 | p99 | p99.9 | max |\n| --- | --- | "
      "--- | --- |\n| %.2f us | %.2f us | %.2f us | %.1f us |\n",
      n, nss, absl::GetFlag(FLAGS_samples), absl::GetFlag(FLAGS_repetitions),
      integration::Median(p50), integration::Median(p99),
      integration::Median(p999), integration::Median(mx));
  return 0;
}

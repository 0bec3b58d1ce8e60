// Benchmarks for the informer cache (Indexer over ThreadSafeStore) at the
// scale of a big cluster's pod cache: 100k pods in 100 namespaces on 50
// nodes, with three indexes (namespace, label "app", field spec.nodeName).
//
//   bazel run -c opt //informer/cache:store_bench --
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// (one command line).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "informer/cache/index.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"

namespace informer {
namespace {

constexpr int kObjects = 100000;
constexpr int kNamespaces = 100;
constexpr int kNodes = 50;
constexpr int kApps = 500;

const std::string& NodeIndex() {
  static const std::string* name =
      new std::string(FieldIndexName("spec.nodeName"));
  return *name;
}
const std::string& AppIndex() {
  static const std::string* name = new std::string(LabelIndexName("app"));
  return *name;
}

Indexers BenchIndexers() {
  return Indexers{
      {std::string(kNamespaceIndex), MetaNamespaceIndexFunc},
      {AppIndex(), LabelIndexFunc("app")},
      {NodeIndex(), FieldIndexFunc("spec.nodeName")},
  };
}

std::string NamespaceName(int i) {
  return absl::StrCat("team-", i % kNamespaces);
}
std::string NodeName(int i) {
  return absl::StrCat("ip-10-0-", i % kNodes, "-17.ec2.internal");
}
std::string AppName(int i) { return absl::StrCat("app-", i % kApps); }

// A pod of realistic shape and size (~1.3 KB of JSON).
ObjectPtr MakePod(int i, int version, int node_shift = 0) {
  const std::string app = AppName(i);
  const std::string name = absl::StrCat(app, "-7d9f8b6c5-", i);
  std::string json = absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
      R"(","namespace":")", NamespaceName(i),
      R"(","uid":"0f6c3a52-8b7e-4c1d-9a7f-)", 100000000000 + i,
      R"(","resourceVersion":")", 1000000 + version * kObjects + i,
      R"(","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"app":")", app,
      R"(","pod-template-hash":"7d9f8b6c5","tier":"backend"},)",
      R"("annotations":{"prometheus.io/scrape":"true","prometheus.io/port":"9090"},)",
      R"("ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":")",
      app, R"(-7d9f8b6c5","uid":"5b1e2a3c-1111-2222-3333-)", 100000 + i % kApps,
      R"(","controller":true,"blockOwnerDeletion":true}]},)",
      R"("spec":{"containers":[{"name":"main","image":"registry.example.com/)",
      app, R"(:v1.2.3","ports":[{"containerPort":8080,"protocol":"TCP"}],)",
      R"("env":[{"name":"LOG_LEVEL","value":"info"},{"name":"REGION","value":"us-east-1"}],)",
      R"("resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}}},)",
      R"({"name":"sidecar","image":"registry.example.com/envoy:v1.27.0"}],)",
      R"("restartPolicy":"Always","serviceAccountName":"default","nodeName":")",
      NodeName(i + node_shift), R"(","schedulerName":"default-scheduler"},)",
      R"("status":{"phase":"Running","podIP":"10.1.)", i % 250, ".", i % 200,
      R"(","hostIP":"10.0.)", i % kNodes,
      R"(.17","startTime":"2024-01-01T00:00:05Z",)",
      R"("conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2024-01-01T00:00:09Z"},)",
      R"({"type":"ContainersReady","status":"True","lastTransitionTime":"2024-01-01T00:00:09Z"}],)",
      R"("containerStatuses":[{"name":"main","ready":true,"restartCount":)",
      version, R"(,"image":"registry.example.com/)", app, R"(:v1.2.3"}]}})");
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  if (!obj.ok()) {
    fprintf(stderr, "bad benchmark pod: %s\n", obj.status().ToString().c_str());
    abort();
  }
  return *std::move(obj);
}

// Built once and shared by every benchmark: parsing is not what is measured.
struct Pods {
  std::vector<ObjectPtr> v1;
  std::vector<ObjectPtr> v2;        // Same keys, status changed.
  std::vector<ObjectPtr> v2_moved;  // Same keys, rescheduled to another node.
};
const Pods& GetPods() {
  static const Pods* pods = [] {
    auto* p = new Pods;
    for (int i = 0; i < kObjects; ++i) {
      p->v1.push_back(MakePod(i, 1));
      p->v2.push_back(MakePod(i, 2));
      p->v2_moved.push_back(MakePod(i, 2, /*node_shift=*/7));
    }
    return p;
  }();
  return *pods;
}

std::unique_ptr<Indexer> PopulatedIndexer() {
  auto indexer = std::make_unique<Indexer>(BenchIndexers());
  for (const ObjectPtr& pod : GetPods().v1) indexer->Add(pod);
  return indexer;
}

// Adding 100k pods to an empty indexed cache (the initial list, object by
// object). Reported per added object.
void BM_Add100k(benchmark::State& state) {
  const Pods& pods = GetPods();
  for (auto _ : state) {
    state.PauseTiming();
    auto indexer = std::make_unique<Indexer>(BenchIndexers());
    state.ResumeTiming();
    for (const ObjectPtr& pod : pods.v1) indexer->Add(pod);
    state.PauseTiming();
    benchmark::DoNotOptimize(indexer->Size());
    indexer.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kObjects);
}
BENCHMARK(BM_Add100k)->Unit(benchmark::kMillisecond);

// Replace of 100k pods (a relist) into a populated cache.
void BM_Replace100k(benchmark::State& state) {
  const Pods& pods = GetPods();
  std::unique_ptr<Indexer> indexer = PopulatedIndexer();
  bool flip = false;
  for (auto _ : state) {
    indexer->Replace(flip ? pods.v1 : pods.v2, "");
    flip = !flip;
  }
  state.SetItemsProcessed(state.iterations() * kObjects);
}
BENCHMARK(BM_Replace100k)->Unit(benchmark::kMillisecond);

// One update of a pod in a 100k cache, indexed values unchanged (the common
// status update).
void BM_Update(benchmark::State& state) {
  const Pods& pods = GetPods();
  std::unique_ptr<Indexer> indexer = PopulatedIndexer();
  size_t i = 0;
  bool second = true;
  for (auto _ : state) {
    indexer->Update(second ? pods.v2[i] : pods.v1[i]);
    if (++i == pods.v1.size()) {
      i = 0;
      second = !second;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Update);

// One update of a pod in a 100k cache that moves it to another node (its
// spec.nodeName index entry moves).
void BM_UpdateMovingIndexValue(benchmark::State& state) {
  const Pods& pods = GetPods();
  std::unique_ptr<Indexer> indexer = PopulatedIndexer();
  size_t i = 0;
  bool moved = true;
  for (auto _ : state) {
    indexer->Update(moved ? pods.v2_moved[i] : pods.v1[i]);
    if (++i == pods.v1.size()) {
      i = 0;
      moved = !moved;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UpdateMovingIndexValue);

// The index functions alone, per call on one pod: the share of an Update
// that is spent computing index values (each Update computes the old and the
// new object's values for every index). Arg: 0 namespace, 1 label, 2 field.
void BM_IndexFunc(benchmark::State& state) {
  const Pods& pods = GetPods();
  Indexers indexers = BenchIndexers();
  const IndexFunc& func = state.range(0) == 0   ? indexers.at(kNamespaceIndex)
                          : state.range(0) == 1 ? indexers.at(AppIndex())
                                                : indexers.at(NodeIndex());
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(func(*pods.v1[i]));
    if (++i == pods.v1.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_IndexFunc)->Arg(0)->Arg(1)->Arg(2);

// GetByKey in a 100k cache.
void BM_GetByKey(benchmark::State& state) {
  std::unique_ptr<Indexer> indexer = PopulatedIndexer();
  std::vector<std::string> keys;
  for (const ObjectPtr& pod : GetPods().v1) keys.push_back(pod->Key());
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(indexer->GetByKey(keys[i]));
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GetByKey);

// ByIndex in a 100k cache; arg 0: namespace (1000 pods per value),
// 1: node (2000 per value), 2: app label (200 per value). Items = objects
// returned.
void BM_ByIndex(benchmark::State& state) {
  std::unique_ptr<Indexer> indexer = PopulatedIndexer();
  std::string index;
  std::vector<std::string> values;
  switch (state.range(0)) {
    case 0:
      index = std::string(kNamespaceIndex);
      for (int i = 0; i < kNamespaces; ++i) values.push_back(NamespaceName(i));
      break;
    case 1:
      index = NodeIndex();
      for (int i = 0; i < kNodes; ++i) values.push_back(NodeName(i));
      break;
    default:
      index = AppIndex();
      for (int i = 0; i < kApps; ++i) values.push_back(AppName(i));
      break;
  }
  state.SetLabel(index);
  size_t i = 0;
  int64_t returned = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<ObjectPtr>> objs =
        indexer->ByIndex(index, values[i]);
    returned += static_cast<int64_t>(objs->size());
    benchmark::DoNotOptimize(objs);
    if (++i == values.size()) i = 0;
  }
  state.SetItemsProcessed(returned);
}
BENCHMARK(BM_ByIndex)->Arg(0)->Arg(1)->Arg(2);

// ByIndex from several reader threads at once (shared lock, no contention
// between readers expected).
void BM_ByIndexConcurrentReaders(benchmark::State& state) {
  static Indexer* indexer = nullptr;
  if (state.thread_index() == 0) indexer = PopulatedIndexer().release();
  // google-benchmark's threads start the loop together after setup.
  static const std::vector<std::string>* namespaces = [] {
    auto* v = new std::vector<std::string>;
    for (int n = 0; n < kNamespaces; ++n) v->push_back(NamespaceName(n));
    return v;
  }();
  size_t i = state.thread_index();
  for (auto _ : state) {
    auto objs = indexer->ByIndex(kNamespaceIndex, (*namespaces)[i]);
    benchmark::DoNotOptimize(objs);
    i = (i + 1) % kNamespaces;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    delete indexer;
    indexer = nullptr;
  }
}
BENCHMARK(BM_ByIndexConcurrentReaders)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace informer

// DeltaFIFO throughput.
//
//   bazel run -c opt //informer/cache:delta_fifo_bench --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/store.h"
#include "informer/object/object.h"

namespace informer {
namespace {

// objects[u][k]: version u of key k, built once so the benchmarks measure the
// FIFO, not object construction.
std::vector<std::vector<ObjectPtr>> MakeObjects(int keys, int versions) {
  std::vector<std::vector<ObjectPtr>> out(versions);
  for (int u = 0; u < versions; ++u) {
    out[u].reserve(keys);
    for (int k = 0; k < keys; ++k) {
      out[u].push_back(ObjectBuilder()
                           .SetKind("Pod")
                           .SetNamespace("default")
                           .SetName(absl::StrCat("pod-", k))
                           .SetResourceVersion(absl::StrCat(u + 1))
                           .Build());
    }
  }
  return out;
}

absl::Status CountDeltas(int64_t* count, const Deltas& deltas) {
  *count += static_cast<int64_t>(deltas.size());
  return absl::OkStatus();
}

// Queue `updates` updates to each of `keys` keys, then pop everything: the
// informer's burst-then-drain path (deltas coalesce per key). The FIFO is
// long-lived, as in an informer, so its hash table is already grown; a fresh
// FIFO per iteration would mostly measure page faults of table growth.
void BM_UpdateThenPopAll(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  const int updates = static_cast<int>(state.range(1));
  const auto objects = MakeObjects(keys, updates);
  int64_t popped = 0;
  DeltaFIFO fifo({});
  for (auto _ : state) {
    for (int u = 0; u < updates; ++u) {
      for (const ObjectPtr& obj : objects[u]) {
        benchmark::DoNotOptimize(fifo.Update(obj));
      }
    }
    for (int k = 0; k < keys; ++k) {
      benchmark::DoNotOptimize(fifo.Pop(
          [&](const Deltas& d, bool) { return CountDeltas(&popped, d); }));
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * keys *
                          updates);
  benchmark::DoNotOptimize(popped);
}
BENCHMARK(BM_UpdateThenPopAll)->Args({10000, 1})->Args({10000, 4});

// One producer thread queues `updates` rounds of updates over `keys` keys
// while the benchmark thread pops until every delta has been seen: lock
// hand-off between a reflector and the processing loop.
void BM_ProducerConsumer(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  const int updates = static_cast<int>(state.range(1));
  const auto objects = MakeObjects(keys, updates);
  const int64_t total = static_cast<int64_t>(keys) * updates;
  DeltaFIFO fifo({});
  for (auto _ : state) {
    std::thread producer([&] {
      for (int u = 0; u < updates; ++u) {
        for (const ObjectPtr& obj : objects[u]) {
          benchmark::DoNotOptimize(fifo.Update(obj));
        }
      }
    });
    int64_t seen = 0;
    while (seen < total) {
      benchmark::DoNotOptimize(fifo.Pop(
          [&](const Deltas& d, bool) { return CountDeltas(&seen, d); }));
    }
    producer.join();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * total);
}
BENCHMARK(BM_ProducerConsumer)->Args({10000, 10})->UseRealTime();

class MapKnownObjects : public KeyListerGetter {
 public:
  explicit MapKnownObjects(const std::vector<ObjectPtr>& objects) {
    for (const ObjectPtr& obj : objects) objects_[obj->Key()] = obj;
  }
  std::vector<std::string> ListKeys() const override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> keys;
    keys.reserve(objects_.size());
    for (const auto& [key, obj] : objects_) keys.push_back(key);
    return keys;
  }
  ObjectPtr GetByKey(absl::string_view key) const override {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ObjectPtr> objects_ ABSL_GUARDED_BY(mu_);
};

// A relist of `keys` objects against a store of the same size in which half
// the listed objects are new and half the known ones vanished, then drained.
void BM_ReplaceWithTombstonesThenPopAll(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  const auto all = MakeObjects(2 * keys, 1)[0];
  // Known: pods [0, keys); listed: pods [keys/2, keys/2 + keys).
  MapKnownObjects known(
      std::vector<ObjectPtr>(all.begin(), all.begin() + keys));
  const std::vector<ObjectPtr> listed(all.begin() + keys / 2,
                                      all.begin() + keys / 2 + keys);
  int64_t popped = 0;
  DeltaFIFO::Options options;
  options.known_objects = &known;
  DeltaFIFO fifo(options);
  for (auto _ : state) {
    benchmark::DoNotOptimize(fifo.Replace(listed, "1"));
    while (fifo.Len() > 0) {
      benchmark::DoNotOptimize(fifo.Pop(
          [&](const Deltas& d, bool) { return CountDeltas(&popped, d); }));
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          (keys + keys / 2));
  benchmark::DoNotOptimize(popped);
}
BENCHMARK(BM_ReplaceWithTombstonesThenPopAll)->Arg(10000);

// Periodic resync of a 10k-object store into an empty FIFO, then drained.
void BM_ResyncThenPopAll(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  MapKnownObjects known(MakeObjects(keys, 1)[0]);
  DeltaFIFO::Options options;
  options.known_objects = &known;
  DeltaFIFO fifo(options);
  int64_t popped = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(fifo.Resync());
    while (fifo.Len() > 0) {
      benchmark::DoNotOptimize(fifo.Pop(
          [&](const Deltas& d, bool) { return CountDeltas(&popped, d); }));
    }
  }
  benchmark::DoNotOptimize(popped);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * keys);
}
BENCHMARK(BM_ResyncThenPopAll)->Arg(10000);

}  // namespace
}  // namespace informer

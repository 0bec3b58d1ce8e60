// Work queue throughput: Add + Get + Done per key, single-threaded and with
// worker threads, with and without metrics; plus the default controller rate
// limiter's When.
//
//   bazel run -c opt //informer/workqueue:workqueue_bench --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "informer/util/clock.h"
#include "informer/workqueue/rate_limiter.h"
#include "informer/workqueue/workqueue.h"
#include "informer/workqueue/workqueue_metrics.h"

namespace informer {
namespace {

std::vector<std::string> MakeKeys(int n) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("default/pod-", i));
  return keys;
}

// One thread does Add, Get and Done for each key of a batch.
void BM_AddGetDone_SingleThread(benchmark::State& state) {
  const bool with_metrics = state.range(0) != 0;
  WorkQueueMetricsRegistry registry(RealClock());
  WorkQueueOptions options;
  if (with_metrics) options.metrics = registry.NewQueueMetrics("bench");
  auto q = NewWorkQueue(std::move(options));
  const std::vector<std::string> keys = MakeKeys(1024);
  std::string key;
  for (auto _ : state) {
    for (const std::string& k : keys) q->Add(k);
    for (size_t i = 0; i < keys.size(); ++i) {
      q->Get(&key);
      q->Done(key);
    }
  }
  state.SetItemsProcessed(state.iterations() * keys.size());
  state.SetLabel(with_metrics ? "metrics" : "no metrics");
}
BENCHMARK(BM_AddGetDone_SingleThread)->Arg(0)->Arg(1);

// Duplicate adds of a waiting key (the stingy path): no allocation expected.
void BM_AddDuplicate(benchmark::State& state) {
  auto q = NewWorkQueue();
  q->Add("default/pod-0");
  for (auto _ : state) q->Add("default/pod-0");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddDuplicate);

// The benchmark thread adds a batch of distinct keys; `range(0)` worker
// threads Get and Done them. One iteration = one batch fully processed.
void BM_AddGetDone_Workers(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  constexpr int kBatch = 4096;
  auto q = NewWorkQueue();
  const std::vector<std::string> keys = MakeKeys(kBatch);

  absl::Mutex mu;
  int done_in_batch = 0;  // Guarded by mu.
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      std::string key;
      while (q->Get(&key)) {
        q->Done(key);
        absl::MutexLock lock(&mu);
        ++done_in_batch;
      }
    });
  }

  for (auto _ : state) {
    for (const std::string& k : keys) q->Add(k);
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* done) { return *done == kBatch; }, &done_in_batch));
    done_in_batch = 0;
  }
  q->ShutDown();
  for (auto& t : threads) t.join();
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_AddGetDone_Workers)->Arg(1)->Arg(2)->Arg(8)->UseRealTime();

void BM_DefaultControllerRateLimiterWhen(benchmark::State& state) {
  auto limiter = DefaultControllerRateLimiter(RealClock());
  const std::vector<std::string> keys = MakeKeys(1024);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->When(keys[i++ & 1023]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DefaultControllerRateLimiterWhen);

}  // namespace
}  // namespace informer

#ifndef INFORMER_WORKQUEUE_WORKQUEUE_METRICS_H_
#define INFORMER_WORKQUEUE_WORKQUEUE_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace informer {

// WorkQueueMetrics receives the life-cycle events of one named work queue,
// like client-go's queueMetrics + retryMetrics pair.
//
// Event contract (what the queues in this package guarantee):
//   - OnAdd(key): `key` became dirty (a fresh Add, not a duplicate). Also
//     called for a key re-added while it is being processed.
//   - OnGet(key): a worker took `key` from the queue.
//   - OnDone(key): the worker finished `key`.
//   - OnRetry(): a delayed / rate-limited add was requested (AddAfter).
//
// Thread-safety: implementations must be thread-safe. The queues call these
// hooks while holding their own mutex (so a key's events arrive in order);
// implementations must therefore be fast and must never call back into the
// queue.
class WorkQueueMetrics {
 public:
  virtual ~WorkQueueMetrics() = default;

  virtual void OnAdd(absl::string_view key) = 0;
  virtual void OnGet(absl::string_view key) = 0;
  virtual void OnDone(absl::string_view key) = 0;
  virtual void OnRetry() = 0;
};

// A histogram of durations in seconds with client-go's workqueue buckets
// (10ns, 100ns, ..., 10s, and an overflow bucket), so the numbers can later be
// exported in Prometheus text format without changing what is recorded.
struct DurationHistogram {
  static constexpr int kNumBounds = 10;
  // Upper bounds (inclusive) of the first kNumBounds buckets, in seconds.
  static constexpr std::array<double, kNumBounds> kUpperBoundsSeconds = {
      1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0};

  void Observe(absl::Duration d);

  int64_t count = 0;
  absl::Duration sum = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();
  // bucket_counts[i] counts observations in (bound[i-1], bound[i]]; the last
  // element counts observations above 10s. Not cumulative.
  std::array<int64_t, kNumBounds + 1> bucket_counts = {};
};

// A point-in-time copy of one queue's metrics.
struct WorkQueueMetricsSnapshot {
  std::string name;
  // Keys added and not yet handed to a worker (client-go "depth"; includes a
  // key re-added while processing, which waits for Done).
  int64_t depth = 0;
  // Total non-duplicate adds.
  int64_t adds = 0;
  // Total AddAfter / AddRateLimited calls.
  int64_t retries = 0;
  // Time from a key's first add until a worker took it.
  DurationHistogram queue_latency;
  // Time from Get until Done.
  DurationHistogram work_duration;
  // Sum of the ages of all in-flight keys at snapshot time; a value that
  // grows without keys completing points at stuck workers.
  double unfinished_work_seconds = 0;
  // Age of the oldest in-flight key at snapshot time.
  double longest_running_processor_seconds = 0;
};

// InMemoryWorkQueueMetrics records the events of one queue in memory and
// serves snapshots. Unlike client-go, which refreshes the unfinished-work
// gauges from a 500ms ticker, they are computed from the clock when Snapshot
// is called, so no background thread is needed.
//
// Thread-safety: thread-safe. Ownership: `clock` must outlive this object.
class InMemoryWorkQueueMetrics final : public WorkQueueMetrics {
 public:
  InMemoryWorkQueueMetrics(std::string name, Clock* clock);

  InMemoryWorkQueueMetrics(const InMemoryWorkQueueMetrics&) = delete;
  InMemoryWorkQueueMetrics& operator=(const InMemoryWorkQueueMetrics&) = delete;

  void OnAdd(absl::string_view key) override;
  void OnGet(absl::string_view key) override;
  void OnDone(absl::string_view key) override;
  void OnRetry() override;

  WorkQueueMetricsSnapshot Snapshot() const;

  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  int64_t depth_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t adds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t retries_ ABSL_GUARDED_BY(mu_) = 0;
  DurationHistogram queue_latency_ ABSL_GUARDED_BY(mu_);
  DurationHistogram work_duration_ ABSL_GUARDED_BY(mu_);
  // First add time of each key waiting to be taken.
  absl::flat_hash_map<std::string, absl::Time> add_times_ ABSL_GUARDED_BY(mu_);
  // Get time of each in-flight key.
  absl::flat_hash_map<std::string, absl::Time> processing_start_times_
      ABSL_GUARDED_BY(mu_);
};

// WorkQueueMetricsRegistry hands out InMemoryWorkQueueMetrics per queue name
// and snapshots every live queue, e.g. for a stats endpoint.
//
// The registry holds only weak references: a queue's metrics disappear from
// Snapshot once the queue (the last owner) is destroyed. Creating metrics for
// a name that is already live replaces the registered entry (the older object
// keeps working for its queue but is no longer reported).
//
// Thread-safety: thread-safe. Ownership: `clock` must outlive the registry and
// every metrics object it created.
class WorkQueueMetricsRegistry {
 public:
  explicit WorkQueueMetricsRegistry(Clock* clock);

  WorkQueueMetricsRegistry(const WorkQueueMetricsRegistry&) = delete;
  WorkQueueMetricsRegistry& operator=(const WorkQueueMetricsRegistry&) = delete;

  // Returns fresh metrics for the queue `name`, to be passed in the queue's
  // options.
  std::shared_ptr<InMemoryWorkQueueMetrics> NewQueueMetrics(
      absl::string_view name);

  // Snapshots of every live queue, sorted by name.
  std::vector<WorkQueueMetricsSnapshot> Snapshot() const;

 private:
  Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<InMemoryWorkQueueMetrics>>
      queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace informer

#endif  // INFORMER_WORKQUEUE_WORKQUEUE_METRICS_H_

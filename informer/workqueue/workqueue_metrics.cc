#include "informer/workqueue/workqueue_metrics.h"

#include <algorithm>
#include <utility>

namespace informer {

constexpr std::array<double, DurationHistogram::kNumBounds>
    DurationHistogram::kUpperBoundsSeconds;

void DurationHistogram::Observe(absl::Duration d) {
  ++count;
  sum += d;
  max = std::max(max, d);
  const double seconds = absl::ToDoubleSeconds(d);
  int bucket = kNumBounds;
  for (int i = 0; i < kNumBounds; ++i) {
    if (seconds <= kUpperBoundsSeconds[i]) {
      bucket = i;
      break;
    }
  }
  ++bucket_counts[bucket];
}

InMemoryWorkQueueMetrics::InMemoryWorkQueueMetrics(std::string name,
                                                   Clock* clock)
    : name_(std::move(name)), clock_(clock) {}

void InMemoryWorkQueueMetrics::OnAdd(absl::string_view key) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  ++adds_;
  ++depth_;
  // Keep the first add time: latency is measured from when the key first
  // needed work, as in client-go.
  add_times_.try_emplace(key, now);
}

void InMemoryWorkQueueMetrics::OnGet(absl::string_view key) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  --depth_;
  processing_start_times_[key] = now;
  auto it = add_times_.find(key);
  if (it != add_times_.end()) {
    queue_latency_.Observe(now - it->second);
    add_times_.erase(it);
  }
}

void InMemoryWorkQueueMetrics::OnDone(absl::string_view key) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = processing_start_times_.find(key);
  if (it != processing_start_times_.end()) {
    work_duration_.Observe(now - it->second);
    processing_start_times_.erase(it);
  }
}

void InMemoryWorkQueueMetrics::OnRetry() {
  absl::MutexLock lock(&mu_);
  ++retries_;
}

WorkQueueMetricsSnapshot InMemoryWorkQueueMetrics::Snapshot() const {
  const absl::Time now = clock_->Now();
  WorkQueueMetricsSnapshot s;
  s.name = name_;
  absl::MutexLock lock(&mu_);
  s.depth = depth_;
  s.adds = adds_;
  s.retries = retries_;
  s.queue_latency = queue_latency_;
  s.work_duration = work_duration_;
  for (const auto& [key, start] : processing_start_times_) {
    const double age = absl::ToDoubleSeconds(now - start);
    s.unfinished_work_seconds += age;
    s.longest_running_processor_seconds =
        std::max(s.longest_running_processor_seconds, age);
  }
  return s;
}

WorkQueueMetricsRegistry::WorkQueueMetricsRegistry(Clock* clock)
    : clock_(clock) {}

std::shared_ptr<InMemoryWorkQueueMetrics>
WorkQueueMetricsRegistry::NewQueueMetrics(absl::string_view name) {
  auto metrics =
      std::make_shared<InMemoryWorkQueueMetrics>(std::string(name), clock_);
  absl::MutexLock lock(&mu_);
  // Drop entries of destroyed queues so churn of short-lived names does not
  // grow the map forever.
  absl::erase_if(queues_,
                 [](const auto& entry) { return entry.second.expired(); });
  queues_[name] = metrics;
  return metrics;
}

std::vector<WorkQueueMetricsSnapshot> WorkQueueMetricsRegistry::Snapshot()
    const {
  std::vector<std::shared_ptr<InMemoryWorkQueueMetrics>> live;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, weak] : queues_) {
      if (auto metrics = weak.lock()) live.push_back(std::move(metrics));
    }
  }
  std::vector<WorkQueueMetricsSnapshot> out;
  out.reserve(live.size());
  for (const auto& metrics : live) out.push_back(metrics->Snapshot());
  std::sort(out.begin(), out.end(),
            [](const WorkQueueMetricsSnapshot& a,
               const WorkQueueMetricsSnapshot& b) { return a.name < b.name; });
  return out;
}

}  // namespace informer

#include "informer/workqueue/workqueue_metrics.h"

#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "informer/util/clock.h"
#include "informer/workqueue/rate_limiter.h"
#include "informer/workqueue/rate_limiting_queue.h"

namespace informer {
namespace {

using absl::Seconds;

TEST(DurationHistogramTest, ObservationsLandInClientGoBuckets) {
  DurationHistogram h;
  h.Observe(absl::Nanoseconds(10));   // <= 1e-8: bucket 0
  h.Observe(absl::Milliseconds(5));   // <= 1e-2: bucket 6
  h.Observe(absl::Milliseconds(10));  // Exactly 1e-2: still bucket 6
  h.Observe(Seconds(10));             // <= 10: bucket 9
  h.Observe(Seconds(20));             // Overflow bucket
  EXPECT_EQ(h.count, 5);
  EXPECT_EQ(h.sum,
            absl::Nanoseconds(10) + absl::Milliseconds(15) + Seconds(30));
  EXPECT_EQ(h.max, Seconds(20));
  EXPECT_EQ(h.bucket_counts[0], 1);
  EXPECT_EQ(h.bucket_counts[6], 2);
  EXPECT_EQ(h.bucket_counts[9], 1);
  EXPECT_EQ(h.bucket_counts[DurationHistogram::kNumBounds], 1);
}

class WorkQueueMetricsTest : public ::testing::Test {
 protected:
  WorkQueueMetricsTest() : registry_(&clock_) {
    metrics_ = registry_.NewQueueMetrics("controller");
    WorkQueueOptions options;
    options.name = "controller";
    options.clock = &clock_;
    options.metrics = metrics_;
    q_ = NewRateLimitingQueue(
        std::make_unique<ItemExponentialFailureRateLimiter>(Seconds(1),
                                                            Seconds(60)),
        std::move(options));
  }

  std::string Get() {
    std::string key;
    EXPECT_TRUE(q_->Get(&key));
    return key;
  }

  FakeClock clock_;
  WorkQueueMetricsRegistry registry_;
  std::shared_ptr<InMemoryWorkQueueMetrics> metrics_;
  std::unique_ptr<RateLimitingQueue> q_;
};

TEST_F(WorkQueueMetricsTest, DepthAndAddsCountOnlyNonDuplicateAdds) {
  q_->Add("a");
  q_->Add("b");
  q_->Add("a");  // Duplicate while waiting: not counted.
  WorkQueueMetricsSnapshot s = metrics_->Snapshot();
  EXPECT_EQ(s.name, "controller");
  EXPECT_EQ(s.adds, 2);
  EXPECT_EQ(s.depth, 2);

  EXPECT_EQ(Get(), "a");
  s = metrics_->Snapshot();
  EXPECT_EQ(s.depth, 1);
  EXPECT_EQ(s.adds, 2);

  // Re-added while processing: counted as an add and in depth (it waits for
  // Done), like client-go.
  q_->Add("a");
  s = metrics_->Snapshot();
  EXPECT_EQ(s.adds, 3);
  EXPECT_EQ(s.depth, 2);
}

TEST_F(WorkQueueMetricsTest, LatencyAndWorkDurationFollowTheClock) {
  q_->Add("a");
  clock_.Advance(Seconds(2));
  q_->Add("a");  // A duplicate does not reset the latency start.
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");  // Waited 3s.
  clock_.Advance(Seconds(4));
  q_->Done("a");  // Worked 4s.

  const WorkQueueMetricsSnapshot s = metrics_->Snapshot();
  EXPECT_EQ(s.queue_latency.count, 1);
  EXPECT_EQ(s.queue_latency.sum, Seconds(3));
  EXPECT_EQ(s.work_duration.count, 1);
  EXPECT_EQ(s.work_duration.sum, Seconds(4));
  EXPECT_EQ(s.unfinished_work_seconds, 0);
  EXPECT_EQ(s.longest_running_processor_seconds, 0);
}

TEST_F(WorkQueueMetricsTest, UnfinishedWorkSumsAgesOfInFlightKeys) {
  q_->Add("a");
  q_->Add("b");
  EXPECT_EQ(Get(), "a");
  clock_.Advance(Seconds(3));
  EXPECT_EQ(Get(), "b");
  clock_.Advance(Seconds(1));

  WorkQueueMetricsSnapshot s = metrics_->Snapshot();
  EXPECT_DOUBLE_EQ(s.unfinished_work_seconds, 4 + 1);
  EXPECT_DOUBLE_EQ(s.longest_running_processor_seconds, 4);

  q_->Done("a");
  s = metrics_->Snapshot();
  EXPECT_DOUBLE_EQ(s.unfinished_work_seconds, 1);
  EXPECT_DOUBLE_EQ(s.longest_running_processor_seconds, 1);
}

TEST_F(WorkQueueMetricsTest, RetriesCountAddAfterAndAddRateLimited) {
  q_->AddAfter("a", Seconds(1));
  q_->AddAfter("b", absl::ZeroDuration());
  q_->AddRateLimited("c");
  EXPECT_EQ(metrics_->Snapshot().retries, 3);
  q_->Add("d");  // A plain add is not a retry.
  EXPECT_EQ(metrics_->Snapshot().retries, 3);
}

TEST(WorkQueueMetricsRegistryTest, SnapshotListsLiveQueuesByName) {
  FakeClock clock;
  WorkQueueMetricsRegistry registry(&clock);
  auto zeta = registry.NewQueueMetrics("zeta");
  auto alpha = registry.NewQueueMetrics("alpha");
  zeta->OnAdd("k");

  auto snapshots = registry.Snapshot();
  ASSERT_EQ(snapshots.size(), 2u);
  EXPECT_EQ(snapshots[0].name, "alpha");
  EXPECT_EQ(snapshots[0].adds, 0);
  EXPECT_EQ(snapshots[1].name, "zeta");
  EXPECT_EQ(snapshots[1].adds, 1);

  // Gone with its last owner (the queue).
  zeta.reset();
  snapshots = registry.Snapshot();
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].name, "alpha");
}

TEST(WorkQueueMetricsRegistryTest, QueueDestroyedRemovesItsMetrics) {
  FakeClock clock;
  WorkQueueMetricsRegistry registry(&clock);
  {
    WorkQueueOptions options;
    options.clock = &clock;
    options.metrics = registry.NewQueueMetrics("short-lived");
    auto q = NewWorkQueue(std::move(options));
    q->Add("a");
    auto snapshots = registry.Snapshot();
    ASSERT_EQ(snapshots.size(), 1u);
    EXPECT_EQ(snapshots[0].depth, 1);
  }
  EXPECT_TRUE(registry.Snapshot().empty());
}

TEST(WorkQueueMetricsRegistryTest, NewMetricsForSameNameReplacesTheEntry) {
  FakeClock clock;
  WorkQueueMetricsRegistry registry(&clock);
  auto first = registry.NewQueueMetrics("q");
  first->OnAdd("x");
  auto second = registry.NewQueueMetrics("q");
  const auto snapshots = registry.Snapshot();
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].adds, 0);  // The newer object is reported.
}

}  // namespace
}  // namespace informer

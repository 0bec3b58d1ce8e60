#include "informer/workqueue/delaying_queue.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

class DelayingQueueTest : public ::testing::Test {
 protected:
  DelayingQueueTest() {
    WorkQueueOptions options;
    options.name = "delaying-test";
    options.clock = &clock_;
    q_ = NewDelayingQueue(std::move(options));
  }

  // Blocks until the background loop has moved a key into the queue, and
  // returns it (marked Done at once).
  std::string GetAndDone() {
    std::string key;
    EXPECT_TRUE(q_->Get(&key));
    q_->Done(key);
    return key;
  }

  FakeClock clock_;
  std::unique_ptr<DelayingQueue> q_;
};

TEST_F(DelayingQueueTest, ZeroOrNegativeDelayAddsAtOnce) {
  q_->AddAfter("zero", absl::ZeroDuration());
  q_->AddAfter("negative", absl::Seconds(-3));
  // Synchronous: no clock movement and no background work needed.
  EXPECT_EQ(q_->Len(), 2);
  EXPECT_EQ(q_->NumWaiting(), 0);
  EXPECT_EQ(GetAndDone(), "zero");
  EXPECT_EQ(GetAndDone(), "negative");
}

TEST_F(DelayingQueueTest, KeyIsAddedOnlyWhenTheClockReachesItsReadyTime) {
  const absl::Time ready_at = clock_.Now() + absl::Seconds(1);
  q_->AddAfter("a", absl::Seconds(1));
  EXPECT_EQ(q_->NumWaiting(), 1);
  // The loop parks on the clock until exactly the ready time.
  EXPECT_EQ(clock_.WaitForWaiters(1), ready_at);

  clock_.Advance(absl::Milliseconds(999));
  // Not ready yet, so nothing can have been moved.
  EXPECT_EQ(q_->Len(), 0);
  EXPECT_EQ(q_->NumWaiting(), 1);

  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(GetAndDone(), "a");
  EXPECT_EQ(q_->NumWaiting(), 0);
}

TEST_F(DelayingQueueTest, KeysBecomeReadyInReadyTimeOrderNotAddOrder) {
  q_->AddAfter("c", absl::Seconds(3));
  q_->AddAfter("a", absl::Seconds(1));
  q_->AddAfter("b", absl::Seconds(2));
  EXPECT_EQ(q_->NumWaiting(), 3);
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(GetAndDone(), "a");
  EXPECT_EQ(GetAndDone(), "b");
  EXPECT_EQ(GetAndDone(), "c");
}

TEST_F(DelayingQueueTest, KeysWithEqualReadyTimesKeepAddOrder) {
  for (const char* key : {"k1", "k2", "k3", "k4", "k5"}) {
    q_->AddAfter(key, absl::Seconds(1));
  }
  clock_.Advance(absl::Seconds(1));
  for (const char* want : {"k1", "k2", "k3", "k4", "k5"}) {
    EXPECT_EQ(GetAndDone(), want);
  }
}

TEST_F(DelayingQueueTest, EarlierAddAfterMovesAWaitingKeyEarlier) {
  q_->AddAfter("a", absl::Seconds(10));
  q_->AddAfter("a", absl::Seconds(1));
  EXPECT_EQ(q_->NumWaiting(), 1);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(GetAndDone(), "a");
  // The 10s entry was replaced, not kept beside it.
  EXPECT_EQ(q_->NumWaiting(), 0);
}

TEST_F(DelayingQueueTest, LaterAddAfterNeverDelaysAWaitingKey) {
  q_->AddAfter("a", absl::Seconds(1));
  q_->AddAfter("a", absl::Seconds(10));
  EXPECT_EQ(q_->NumWaiting(), 1);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(GetAndDone(), "a");
  EXPECT_EQ(q_->NumWaiting(), 0);
}

TEST_F(DelayingQueueTest, EarlierKeyWakesTheLoopParkedOnALaterDeadline) {
  const absl::Time start = clock_.Now();
  q_->AddAfter("late", absl::Seconds(10));
  EXPECT_EQ(clock_.WaitForWaiters(1), start + absl::Seconds(10));
  q_->AddAfter("early", absl::Seconds(1));
  clock_.Advance(absl::Seconds(1));
  // Would block forever if the loop stayed parked until +10s.
  EXPECT_EQ(GetAndDone(), "early");
  EXPECT_EQ(q_->NumWaiting(), 1);
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(GetAndDone(), "late");
}

TEST_F(DelayingQueueTest, DelayedKeyFollowsDirtyAndProcessingRules) {
  q_->Add("a");
  std::string key;
  ASSERT_TRUE(q_->Get(&key));  // "a" is now being processed.
  q_->AddAfter("a", absl::Seconds(1));
  clock_.Advance(absl::Seconds(1));
  // Wait for the loop to move "a" (it becomes dirty, not queued).
  while (q_->NumWaiting() != 0) std::this_thread::yield();
  EXPECT_EQ(q_->Len(), 0);
  q_->Done("a");
  EXPECT_EQ(q_->Len(), 1);
  EXPECT_EQ(GetAndDone(), "a");
}

TEST_F(DelayingQueueTest, ShutDownDropsWaitingKeysAndIgnoresLaterAddAfter) {
  q_->AddAfter("waiting", absl::Seconds(1));
  q_->AddAfter("now", absl::ZeroDuration());
  q_->ShutDown();
  EXPECT_TRUE(q_->ShuttingDown());
  q_->AddAfter("after", absl::ZeroDuration());
  q_->AddAfter("after-delay", absl::Seconds(1));
  EXPECT_EQ(q_->NumWaiting(), 1);  // Only the dropped-at-shutdown key.

  clock_.Advance(absl::Seconds(5));
  std::string key;
  ASSERT_TRUE(q_->Get(&key));
  EXPECT_EQ(key, "now");
  q_->Done(key);
  EXPECT_FALSE(q_->Get(&key));
  // The loop has exited: nothing is parked on the clock any more.
  EXPECT_EQ(clock_.NumWaiters(), 0);
  q_->ShutDown();  // Idempotent.
}

TEST_F(DelayingQueueTest, ShutDownWithDrainWaitsForInFlightKeys) {
  q_->Add("a");
  std::string key;
  ASSERT_TRUE(q_->Get(&key));
  std::thread drainer([&] { q_->ShutDownWithDrain(); });
  q_->Done("a");
  drainer.join();
  EXPECT_TRUE(q_->ShuttingDown());
  EXPECT_FALSE(q_->Get(&key));
}

TEST_F(DelayingQueueTest, ConcurrentShutDownCallsAllReturn) {
  q_->AddAfter("a", absl::Hours(1));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { q_->ShutDown(); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(q_->ShuttingDown());
  EXPECT_EQ(clock_.NumWaiters(), 0);
}

TEST_F(DelayingQueueTest, DestroyingWithWaitingKeysStopsTheLoop) {
  q_->AddAfter("a", absl::Hours(1));
  clock_.WaitForWaiters(1);
  q_.reset();
  EXPECT_EQ(clock_.NumWaiters(), 0);
}

}  // namespace
}  // namespace informer

#include "informer/workqueue/rate_limiting_queue.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "informer/util/clock.h"
#include "informer/workqueue/rate_limiter.h"

namespace informer {
namespace {

using absl::Seconds;

class RateLimitingQueueTest : public ::testing::Test {
 protected:
  RateLimitingQueueTest() {
    WorkQueueOptions options;
    options.name = "rate-limited-test";
    options.clock = &clock_;
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
  std::unique_ptr<RateLimitingQueue> q_;
};

TEST_F(RateLimitingQueueTest, AddRateLimitedWaitsForTheLimiterDelay) {
  q_->AddRateLimited("a");
  EXPECT_EQ(q_->NumRequeues("a"), 1);
  EXPECT_EQ(q_->NumWaiting(), 1);
  EXPECT_EQ(q_->Len(), 0);
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  q_->Done("a");
}

TEST_F(RateLimitingQueueTest, RepeatedFailuresBackOffExponentially) {
  q_->AddRateLimited("a");  // 1s
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  q_->AddRateLimited("a");  // 2s: fails again while processing.
  q_->Done("a");

  clock_.Advance(Seconds(1));
  // Not ready yet: nothing can have been added.
  EXPECT_EQ(q_->Len(), 0);
  EXPECT_EQ(q_->NumWaiting(), 1);
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  EXPECT_EQ(q_->NumRequeues("a"), 2);
  q_->Done("a");
}

TEST_F(RateLimitingQueueTest, ForgetResetsTheBackOff) {
  q_->AddRateLimited("a");
  q_->AddRateLimited("a");
  q_->AddRateLimited("a");
  EXPECT_EQ(q_->NumRequeues("a"), 3);
  q_->Forget("a");
  EXPECT_EQ(q_->NumRequeues("a"), 0);
  // Forget does not cancel the pending wait (as in client-go); it only
  // resets the count, so the next failure waits the base delay again.
  EXPECT_EQ(q_->NumWaiting(), 1);
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  q_->AddRateLimited("a");
  q_->Done("a");
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  q_->Done("a");
}

TEST_F(RateLimitingQueueTest, KeysAreLimitedIndependently) {
  q_->AddRateLimited("a");
  q_->AddRateLimited("a");  // a: 2nd failure wants 2s, keeps the earlier 1s.
  q_->AddRateLimited("b");  // b: 1s.
  EXPECT_EQ(q_->NumRequeues("a"), 2);
  EXPECT_EQ(q_->NumRequeues("b"), 1);
  clock_.Advance(Seconds(1));
  EXPECT_EQ(Get(), "a");
  EXPECT_EQ(Get(), "b");
}

TEST_F(RateLimitingQueueTest, ShutDownStopsDelayedRetries) {
  q_->AddRateLimited("a");
  q_->ShutDown();
  EXPECT_TRUE(q_->ShuttingDown());
  clock_.Advance(Seconds(10));
  std::string key;
  EXPECT_FALSE(q_->Get(&key));
}

TEST(RateLimitingQueueDefaultTest, DefaultControllerLimiterRetriesAfter5ms) {
  FakeClock clock;
  WorkQueueOptions options;
  options.clock = &clock;
  auto q = NewRateLimitingQueue(DefaultControllerRateLimiter(&clock),
                                std::move(options));
  q->AddRateLimited("a");
  clock.Advance(absl::Milliseconds(4));
  EXPECT_EQ(q->Len(), 0);
  clock.Advance(absl::Milliseconds(1));
  std::string key;
  ASSERT_TRUE(q->Get(&key));
  EXPECT_EQ(key, "a");
  q->Done(key);
}

}  // namespace
}  // namespace informer

#include "informer/workqueue/rate_limiter.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

using absl::Milliseconds;
using absl::Seconds;

TEST(ItemExponentialFailureRateLimiterTest, DelayDoublesPerFailureFromBase) {
  ItemExponentialFailureRateLimiter limiter(Milliseconds(1), Seconds(1));
  EXPECT_EQ(limiter.When("one"), Milliseconds(1));
  EXPECT_EQ(limiter.When("one"), Milliseconds(2));
  EXPECT_EQ(limiter.When("one"), Milliseconds(4));
  EXPECT_EQ(limiter.When("one"), Milliseconds(8));
  EXPECT_EQ(limiter.When("one"), Milliseconds(16));
  EXPECT_EQ(limiter.NumRequeues("one"), 5);
}

TEST(ItemExponentialFailureRateLimiterTest, KeysBackOffIndependently) {
  ItemExponentialFailureRateLimiter limiter(Milliseconds(1), Seconds(1));
  EXPECT_EQ(limiter.When("one"), Milliseconds(1));
  EXPECT_EQ(limiter.When("one"), Milliseconds(2));
  EXPECT_EQ(limiter.When("two"), Milliseconds(1));
  EXPECT_EQ(limiter.When("two"), Milliseconds(2));
  EXPECT_EQ(limiter.NumRequeues("one"), 2);
  EXPECT_EQ(limiter.NumRequeues("two"), 2);
  EXPECT_EQ(limiter.NumRequeues("never"), 0);
}

TEST(ItemExponentialFailureRateLimiterTest, ForgetRestartsFromBase) {
  ItemExponentialFailureRateLimiter limiter(Milliseconds(1), Seconds(1));
  limiter.When("one");
  limiter.When("one");
  limiter.When("two");
  limiter.Forget("one");
  EXPECT_EQ(limiter.NumRequeues("one"), 0);
  EXPECT_EQ(limiter.NumRequeues("two"), 1);
  EXPECT_EQ(limiter.When("one"), Milliseconds(1));
  EXPECT_EQ(limiter.When("two"), Milliseconds(2));
}

TEST(ItemExponentialFailureRateLimiterTest, DelayIsCappedAtMax) {
  ItemExponentialFailureRateLimiter limiter(Milliseconds(1), Seconds(1));
  for (int i = 0; i < 10; ++i) limiter.When("one");  // Up to 512ms.
  EXPECT_EQ(limiter.When("one"), Seconds(1));        // 1024ms capped.
  EXPECT_EQ(limiter.When("one"), Seconds(1));
}

TEST(ItemExponentialFailureRateLimiterTest,
     HundredFailuresStayAtMaxNoOverflow) {
  ItemExponentialFailureRateLimiter limiter(Milliseconds(5), Seconds(1000));
  absl::Duration previous = absl::ZeroDuration();
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = limiter.When("one");
    EXPECT_GE(d, previous) << "failure " << i;  // Never wraps negative.
    EXPECT_LE(d, Seconds(1000)) << "failure " << i;
    previous = d;
  }
  EXPECT_EQ(previous, Seconds(1000));
  EXPECT_EQ(limiter.NumRequeues("one"), 100);
}

TEST(ItemExponentialFailureRateLimiterTest, ExponentBeyondInt64ReturnsMax) {
  // base * 2^n exceeds int64 nanoseconds at n = 34 for a 1s base; with a max
  // that large, the cap alone would not prevent an overflow.
  const absl::Duration max =
      absl::Nanoseconds(std::numeric_limits<int64_t>::max());
  ItemExponentialFailureRateLimiter limiter(Seconds(1), max);
  for (int i = 0; i < 33; ++i) limiter.When("one");
  EXPECT_EQ(limiter.When("one"), Seconds(int64_t{1} << 33));
  EXPECT_EQ(limiter.When("one"), max);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(limiter.When("one"), max) << "failure " << 35 + i;
  }
}

TEST(ItemFastSlowRateLimiterTest, FastForFirstAttemptsThenSlow) {
  ItemFastSlowRateLimiter limiter(Milliseconds(5), Seconds(10), 3);
  EXPECT_EQ(limiter.When("one"), Milliseconds(5));
  EXPECT_EQ(limiter.When("one"), Milliseconds(5));
  EXPECT_EQ(limiter.When("one"), Milliseconds(5));
  EXPECT_EQ(limiter.When("one"), Seconds(10));
  EXPECT_EQ(limiter.When("one"), Seconds(10));
  EXPECT_EQ(limiter.NumRequeues("one"), 5);
  // Other keys have their own count.
  EXPECT_EQ(limiter.When("two"), Milliseconds(5));
  EXPECT_EQ(limiter.NumRequeues("two"), 1);
}

TEST(ItemFastSlowRateLimiterTest, ForgetReturnsToFast) {
  ItemFastSlowRateLimiter limiter(Milliseconds(5), Seconds(10), 1);
  EXPECT_EQ(limiter.When("one"), Milliseconds(5));
  EXPECT_EQ(limiter.When("one"), Seconds(10));
  limiter.Forget("one");
  EXPECT_EQ(limiter.NumRequeues("one"), 0);
  EXPECT_EQ(limiter.When("one"), Milliseconds(5));
}

TEST(BucketRateLimiterTest, BurstIsFreeThenReservationsAreSpacedByOneOverQps) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, /*qps=*/10, /*burst=*/100);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(limiter.When(absl::StrCat("key-", i)), absl::ZeroDuration())
        << "call " << i;
  }
  EXPECT_EQ(limiter.When("a"), Milliseconds(100));
  EXPECT_EQ(limiter.When("b"), Milliseconds(200));
  EXPECT_EQ(limiter.When("c"), Milliseconds(300));
  // The bucket is shared: the same key does not get a separate budget.
  EXPECT_EQ(limiter.When("a"), Milliseconds(400));
}

TEST(BucketRateLimiterTest, TokensRefillWithTheClockUpToBurst) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, /*qps=*/4, /*burst=*/2);
  EXPECT_EQ(limiter.When("k"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("k"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("k"), Milliseconds(250));  // Debt: 1 token.

  // Half a token refilled: debt 0.5, so the next reservation waits for 1.5.
  clock.Advance(Milliseconds(125));
  EXPECT_EQ(limiter.When("k"), Milliseconds(375));

  // A long pause refills to the burst only, never beyond.
  clock.Advance(Seconds(100));
  EXPECT_EQ(limiter.When("k"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("k"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("k"), Milliseconds(250));
}

TEST(BucketRateLimiterTest, TracksNoKeys) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, 10, 1);
  limiter.When("a");
  limiter.When("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  limiter.Forget("a");  // No effect on the bucket.
  EXPECT_EQ(limiter.When("a"), Milliseconds(200));
}

TEST(BucketRateLimiterTest, ZeroQpsGrantsOnlyTheBurst) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, /*qps=*/0, /*burst=*/2);
  EXPECT_EQ(limiter.When("a"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("a"), absl::ZeroDuration());
  EXPECT_EQ(limiter.When("a"), absl::InfiniteDuration());
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(limiter.When("a"), absl::InfiniteDuration());
}

TEST(BucketRateLimiterTest, ZeroBurstNeverGrants) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, /*qps=*/10, /*burst=*/0);
  EXPECT_EQ(limiter.When("a"), absl::InfiniteDuration());
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(limiter.When("a"), absl::InfiniteDuration());
}

TEST(BucketRateLimiterTest, InfiniteQpsNeverDelays) {
  FakeClock clock;
  BucketRateLimiter limiter(&clock, std::numeric_limits<double>::infinity(), 0);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(limiter.When("a"), absl::ZeroDuration());
  }
}

std::unique_ptr<RateLimiter> FastSlowAndExponential() {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemFastSlowRateLimiter>(Milliseconds(5),
                                                               Seconds(3), 3));
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter>(
      Milliseconds(1), Seconds(1)));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

TEST(MaxOfRateLimiterTest, ReturnsTheLongestDelayOfAllLimiters) {
  auto limiter = FastSlowAndExponential();
  // Fast/slow: 5,5,5ms,3s,3s; exponential: 1,2,4,8,16ms.
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
  EXPECT_EQ(limiter->When("one"), Seconds(3));
  EXPECT_EQ(limiter->When("one"), Seconds(3));
  EXPECT_EQ(limiter->NumRequeues("one"), 5);
}

TEST(MaxOfRateLimiterTest, ExponentialWinsOnceItExceedsTheOthers) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemFastSlowRateLimiter>(
      Milliseconds(5), Milliseconds(5), 0));
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter>(
      Milliseconds(1), Seconds(1)));
  MaxOfRateLimiter limiter(std::move(limiters));
  std::vector<absl::Duration> got;
  for (int i = 0; i < 5; ++i) got.push_back(limiter.When("one"));
  EXPECT_EQ(got, (std::vector<absl::Duration>{Milliseconds(5), Milliseconds(5),
                                              Milliseconds(5), Milliseconds(8),
                                              Milliseconds(16)}));
}

TEST(MaxOfRateLimiterTest, ForgetResetsEveryLimiter) {
  auto limiter = FastSlowAndExponential();
  for (int i = 0; i < 5; ++i) limiter->When("one");
  limiter->Forget("one");
  EXPECT_EQ(limiter->NumRequeues("one"), 0);
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
}

TEST(MaxWaitRateLimiterTest, CapsTheWrappedDelay) {
  MaxWaitRateLimiter limiter(
      std::make_unique<ItemExponentialFailureRateLimiter>(Seconds(1),
                                                          Seconds(1000)),
      Seconds(5));
  EXPECT_EQ(limiter.When("one"), Seconds(1));
  EXPECT_EQ(limiter.When("one"), Seconds(2));
  EXPECT_EQ(limiter.When("one"), Seconds(4));
  EXPECT_EQ(limiter.When("one"), Seconds(5));
  EXPECT_EQ(limiter.When("one"), Seconds(5));
  EXPECT_EQ(limiter.NumRequeues("one"), 5);
  limiter.Forget("one");
  EXPECT_EQ(limiter.NumRequeues("one"), 0);
  EXPECT_EQ(limiter.When("one"), Seconds(1));
}

TEST(DefaultControllerRateLimiterTest, PerKeyExponentialFrom5ms) {
  FakeClock clock;
  auto limiter = DefaultControllerRateLimiter(&clock);
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
  EXPECT_EQ(limiter->When("one"), Milliseconds(10));
  EXPECT_EQ(limiter->When("one"), Milliseconds(20));
  EXPECT_EQ(limiter->NumRequeues("one"), 3);
  limiter->Forget("one");
  EXPECT_EQ(limiter->When("one"), Milliseconds(5));
}

TEST(DefaultControllerRateLimiterTest, OverallBucketOf10QpsAfterBurstOf100) {
  FakeClock clock;
  auto limiter = DefaultControllerRateLimiter(&clock);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(limiter->When(absl::StrCat("key-", i)), Milliseconds(5));
  }
  EXPECT_EQ(limiter->When("key-100"), Milliseconds(100));
  EXPECT_EQ(limiter->When("key-101"), Milliseconds(200));
}

TEST(DefaultControllerRateLimiterTest, CapsAt1000Seconds) {
  FakeClock clock;
  auto limiter = DefaultControllerRateLimiter(&clock);
  absl::Duration last;
  for (int i = 0; i < 100; ++i) last = limiter->When("one");
  EXPECT_EQ(last, Seconds(1000));
}

}  // namespace
}  // namespace informer

#include "informer/util/clock.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

TEST(FakeClockTest, NowMovesOnlyOnAdvance) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.SetTime(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

TEST(FakeClockTest, SleeperWakesOnlyWhenDeadlinePassed) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Seconds(10);
  absl::Notification woke;
  std::thread sleeper([&] {
    clock.SleepUntil(deadline);
    woke.Notify();
  });
  EXPECT_EQ(clock.WaitForWaiters(1), deadline);
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(woke.HasBeenNotified());
  EXPECT_EQ(clock.NumWaiters(), 1);
  clock.Advance(absl::Seconds(1));
  woke.WaitForNotification();
  sleeper.join();
  EXPECT_EQ(clock.NumWaiters(), 0);
}

TEST(FakeClockTest, AwaitReturnsTrueWhenConditionBecomesTrueBeforeDeadline) {
  FakeClock clock;
  absl::Mutex mu;
  bool flag = false;
  bool result = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result =
        clock.AwaitWithTimeout(&mu, absl::Condition(&flag), absl::Hours(1));
  });
  clock.WaitForWaiters(1);
  {
    absl::MutexLock lock(&mu);
    flag = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
}

TEST(FakeClockTest, AwaitReturnsFalseOnTimeout) {
  FakeClock clock;
  absl::Mutex mu;
  bool flag = false;
  bool result = true;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result =
        clock.AwaitWithTimeout(&mu, absl::Condition(&flag), absl::Seconds(3));
  });
  clock.WaitForWaiters(1);
  clock.Advance(absl::Seconds(3));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(RealClockTest, SleepUntilPastDeadlineReturnsAtOnce) {
  RealClock()->SleepUntil(absl::Now() - absl::Seconds(1));
  SUCCEED();
}

}  // namespace
}  // namespace informer

#include "emulator/fault_injector.h"

#include "gtest/gtest.h"

namespace emulator {
namespace {

TEST(FaultInjectorTest, NothingArmedMeansNoFault) {
  FaultInjector f;
  EXPECT_FALSE(f.OnRequest("list", "pods").has_value());
  EXPECT_FALSE(f.TakeWatchExpiry("pods"));
  EXPECT_FALSE(f.TakeContinueExpiry());
}

TEST(FaultInjectorTest, ThrottleFiresExactlyCountTimes) {
  FaultInjector f;
  f.ThrottleNextRequests(2, 7);
  for (int i = 0; i < 2; ++i) {
    auto fault = f.OnRequest("get", "configmaps");
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->code, 429);
    EXPECT_EQ(fault->retry_after_seconds, 7);
  }
  EXPECT_FALSE(f.OnRequest("get", "configmaps").has_value());
}

TEST(FaultInjectorTest, VerbFailureMatchesVerbAndResource) {
  FaultInjector f;
  f.FailRequests("list", "pods", 500, 1);
  EXPECT_FALSE(f.OnRequest("watch", "pods").has_value());
  EXPECT_FALSE(f.OnRequest("list", "configmaps").has_value());
  auto fault = f.OnRequest("list", "pods");
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->code, 500);
  EXPECT_FALSE(f.OnRequest("list", "pods").has_value());
}

TEST(FaultInjectorTest, UnlimitedFailureLastsUntilClear) {
  FaultInjector f;
  f.FailRequests("*", "*", 503, -1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(f.OnRequest("get", "x").has_value());
  f.Clear();
  EXPECT_FALSE(f.OnRequest("get", "x").has_value());
}

TEST(FaultInjectorTest, WatchAndContinueExpiriesAreOneShot) {
  FaultInjector f;
  f.ExpireNextWatch("pods");
  EXPECT_FALSE(f.TakeWatchExpiry("configmaps"));
  EXPECT_TRUE(f.TakeWatchExpiry("pods"));
  EXPECT_FALSE(f.TakeWatchExpiry("pods"));
  f.ExpireNextWatch("*");
  EXPECT_TRUE(f.TakeWatchExpiry("nodes"));
  f.ExpireNextContinue();
  EXPECT_TRUE(f.TakeContinueExpiry());
  EXPECT_FALSE(f.TakeContinueExpiry());
}

}  // namespace
}  // namespace emulator

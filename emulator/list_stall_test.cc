#include "emulator/list_stall.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace emulator {
namespace {

TEST(ListStallsTest, StallsTheNamedResourceOnly) {
  ResourceInfo pods;
  ResourceInfo configmaps;
  ListStalls stalls;
  EXPECT_FALSE(stalls.Check(pods).has_value());
  stalls.Stall(&pods);
  EXPECT_TRUE(stalls.Check(pods).has_value());
  EXPECT_FALSE(stalls.Check(configmaps).has_value());
  stalls.Resume();
  EXPECT_FALSE(stalls.Check(pods).has_value());
}

TEST(ListStallsTest, NullStallsEveryResource) {
  ResourceInfo pods;
  ListStalls stalls;
  stalls.Stall(nullptr);
  EXPECT_TRUE(stalls.Check(pods).has_value());
}

TEST(ListStallsTest, ResumeReleasesAWaitingList) {
  ResourceInfo pods;
  ListStalls stalls;
  stalls.Stall(&pods);
  const int64_t token = *stalls.Check(pods);
  std::atomic<bool> released{false};
  std::thread list([&] {
    stalls.AwaitResume(token);
    released = true;
  });
  EXPECT_FALSE(released.load());
  stalls.Resume();
  list.join();
  EXPECT_TRUE(released.load());
}

TEST(ListStallsTest, ShutdownReleasesWaitsAndEndsStalls) {
  ResourceInfo pods;
  ListStalls stalls;
  stalls.Stall(&pods);
  const int64_t token = *stalls.Check(pods);
  std::thread list([&] { stalls.AwaitResume(token); });
  stalls.Shutdown();
  list.join();
  stalls.Stall(&pods);
  EXPECT_FALSE(stalls.Check(pods).has_value());
}

}  // namespace
}  // namespace emulator

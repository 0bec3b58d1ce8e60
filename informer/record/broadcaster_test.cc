#include "informer/record/broadcaster.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/types/optional.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using IntBroadcaster = Broadcaster<int>;

BroadcasterOptions Opts(size_t incoming, size_t per_watcher,
                        FullQueueBehavior behavior) {
  BroadcasterOptions o;
  o.incoming_queue_length = incoming;
  o.watcher_queue_length = per_watcher;
  o.full_queue_behavior = behavior;
  return o;
}

std::vector<int> Drain(IntBroadcaster::Watcher& w) {
  std::vector<int> out;
  while (absl::optional<int> v = w.Next()) out.push_back(*v);
  return out;
}

TEST(BroadcasterTest, DefaultIncomingQueueLengthIs25) {
  EXPECT_EQ(BroadcasterOptions().incoming_queue_length, 25u);
}

TEST(BroadcasterTest, WatcherSeesValuesSentAfterWatchReturns) {
  IntBroadcaster b;
  std::vector<std::unique_ptr<IntBroadcaster::Watcher>> watchers;
  for (int i = 0; i < 50; ++i) {
    watchers.push_back(b.Watch());
    // Registration is in effect when Watch() returns: this value is never
    // missed, for every watcher registered so far.
    ASSERT_TRUE(b.Action(i));
  }
  b.Shutdown();
  for (int i = 0; i < 50; ++i) {
    std::vector<int> got = Drain(*watchers[i]);
    ASSERT_EQ(got.size(), static_cast<size_t>(50 - i)) << "watcher " << i;
    EXPECT_EQ(got.front(), i);
    EXPECT_EQ(got.back(), 49);
  }
}

TEST(BroadcasterTest, NewWatcherDoesNotSeeValuesQueuedBeforeItRegistered) {
  // A wait-mode watcher with room for one value stalls distribution, so
  // values 2 and 3 are still queued when the second watcher registers.
  IntBroadcaster b(Opts(25, 1, FullQueueBehavior::kWaitIfFull));
  std::unique_ptr<IntBroadcaster::Watcher> first = b.Watch();
  ASSERT_TRUE(b.Action(1));
  ASSERT_TRUE(b.Action(2));
  ASSERT_TRUE(b.Action(3));
  std::unique_ptr<IntBroadcaster::Watcher> second;
  std::thread registering([&] { second = b.Watch(); });
  // Draining the first watcher lets distribution reach the registration.
  EXPECT_EQ(first->Next(), 1);
  EXPECT_EQ(first->Next(), 2);
  EXPECT_EQ(first->Next(), 3);
  registering.join();
  ASSERT_TRUE(b.Action(4));
  EXPECT_EQ(first->Next(), 4);
  b.Shutdown();
  EXPECT_EQ(Drain(*second), std::vector<int>({4}));
  EXPECT_EQ(first->Next(), absl::nullopt);
}

TEST(BroadcasterTest, DropIfFullDropsOnlyForTheFullWatcher) {
  IntBroadcaster b(Opts(25, 2, FullQueueBehavior::kDropIfFull));
  std::unique_ptr<IntBroadcaster::Watcher> slow = b.Watch();
  std::unique_ptr<IntBroadcaster::Watcher> fast = b.Watch();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(b.Action(i));
    // The fast watcher keeps up; the slow one never reads.
    EXPECT_EQ(fast->Next(), i);
  }
  b.Shutdown();
  EXPECT_EQ(Drain(*slow), std::vector<int>({0, 1}));
  EXPECT_EQ(fast->Next(), absl::nullopt);
}

TEST(BroadcasterTest, WaitIfFullHoldsDistributionUntilTheWatcherHasRoom) {
  IntBroadcaster b(Opts(1, 1, FullQueueBehavior::kWaitIfFull));
  std::unique_ptr<IntBroadcaster::Watcher> w = b.Watch();
  ASSERT_TRUE(b.Action(1));  // fills the watcher's queue
  ASSERT_TRUE(b.Action(2));  // distribution waits holding it
  ASSERT_TRUE(b.Action(3));  // returns once 2 left the incoming queue
  // Incoming holds 3 and distribution cannot move: nothing is dropped, the
  // sender is refused instead.
  EXPECT_FALSE(b.ActionOrDrop(4));
  EXPECT_EQ(w->Next(), 1);
  EXPECT_EQ(w->Next(), 2);
  EXPECT_EQ(w->Next(), 3);
  b.Shutdown();
  EXPECT_EQ(w->Next(), absl::nullopt);
}

TEST(BroadcasterTest, StoppedWatcherReceivesNothingMore) {
  IntBroadcaster b;
  std::unique_ptr<IntBroadcaster::Watcher> stopped = b.Watch();
  std::unique_ptr<IntBroadcaster::Watcher> live = b.Watch();
  ASSERT_TRUE(b.Action(1));
  EXPECT_EQ(live->Next(), 1);
  stopped->Stop();
  ASSERT_TRUE(b.Action(2));
  EXPECT_EQ(live->Next(), 2);
  // What was queued before Stop drains, then the watcher is closed.
  EXPECT_EQ(stopped->Next(), 1);
  EXPECT_EQ(stopped->Next(), absl::nullopt);
  b.Shutdown();
}

TEST(BroadcasterTest, StoppingAFullWatcherUnblocksWaitModeDistribution) {
  IntBroadcaster b(Opts(25, 1, FullQueueBehavior::kWaitIfFull));
  std::unique_ptr<IntBroadcaster::Watcher> stuck = b.Watch();
  ASSERT_TRUE(b.Action(1));
  ASSERT_TRUE(b.Action(2));  // distribution waits on `stuck`
  std::unique_ptr<IntBroadcaster::Watcher> later;
  std::thread registering([&] { later = b.Watch(); });
  stuck->Stop();  // distribution moves on to the registration
  registering.join();
  ASSERT_TRUE(b.Action(3));
  b.Shutdown();
  EXPECT_EQ(Drain(*later), std::vector<int>({3}));
}

TEST(BroadcasterTest, ShutdownDeliversEverythingQueuedThenClosesWatchers) {
  IntBroadcaster b(Opts(25, 100, FullQueueBehavior::kDropIfFull));
  std::unique_ptr<IntBroadcaster::Watcher> a = b.Watch();
  std::unique_ptr<IntBroadcaster::Watcher> c = b.Watch();
  std::vector<int> sent;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(b.Action(i));
    sent.push_back(i);
  }
  b.Shutdown();
  EXPECT_EQ(Drain(*a), sent);
  EXPECT_EQ(Drain(*c), sent);
  EXPECT_FALSE(b.Action(99));
  EXPECT_FALSE(b.ActionOrDrop(99));
  std::unique_ptr<IntBroadcaster::Watcher> after = b.Watch();
  EXPECT_EQ(after->Next(), absl::nullopt);
  b.Shutdown();  // idempotent
}

TEST(BroadcasterTest, ConcurrentConsumersReceiveEveryValueInOrder) {
  IntBroadcaster b(Opts(25, 8, FullQueueBehavior::kWaitIfFull));
  constexpr int kWatchers = 4;
  constexpr int kValues = 2000;
  std::vector<std::unique_ptr<IntBroadcaster::Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) watchers.push_back(b.Watch());
  std::vector<std::vector<int>> got(kWatchers);
  std::vector<std::thread> consumers;
  for (int i = 0; i < kWatchers; ++i) {
    consumers.emplace_back([&, i] { got[i] = Drain(*watchers[i]); });
  }
  for (int v = 0; v < kValues; ++v) ASSERT_TRUE(b.Action(v));
  b.Shutdown();
  for (std::thread& t : consumers) t.join();
  for (int i = 0; i < kWatchers; ++i) {
    ASSERT_EQ(got[i].size(), static_cast<size_t>(kValues));
    for (int v = 0; v < kValues; ++v) ASSERT_EQ(got[i][v], v);
  }
}

}  // namespace
}  // namespace informer

#include "informer/workqueue/workqueue.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

using GetResult = WorkQueue::GetResult;

class WorkQueueTest : public ::testing::Test {
 protected:
  std::unique_ptr<WorkQueue> NewQueue() {
    WorkQueueOptions options;
    options.name = "test";
    options.clock = &clock_;
    return NewWorkQueue(std::move(options));
  }

  // Gets a key without blocking; "" when none is queued.
  static std::string TryGet(WorkQueue& q, Clock& clock) {
    std::string key;
    return q.GetWithDeadline(&key, clock.Now()) == GetResult::kKey ? key : "";
  }

  FakeClock clock_;
};

TEST_F(WorkQueueTest, GetReturnsKeysInAddOrder) {
  auto q = NewQueue();
  q->Add("a");
  q->Add("b");
  q->Add("c");
  std::string key;
  for (const char* want : {"a", "b", "c"}) {
    ASSERT_TRUE(q->Get(&key));
    EXPECT_EQ(key, want);
    q->Done(key);
  }
  EXPECT_EQ(q->Len(), 0);
}

TEST_F(WorkQueueTest, KeyAddedTwiceWhileWaitingIsQueuedOnce) {
  auto q = NewQueue();
  q->Add("a");
  q->Add("b");
  q->Add("a");
  EXPECT_EQ(q->Len(), 2);
  EXPECT_EQ(TryGet(*q, clock_), "a");
  EXPECT_EQ(TryGet(*q, clock_), "b");
  EXPECT_EQ(TryGet(*q, clock_), "");
}

TEST_F(WorkQueueTest, KeyReAddedDuringProcessingComesBackExactlyOnceAfterDone) {
  auto q = NewQueue();
  q->Add("a");
  std::string key;
  ASSERT_TRUE(q->Get(&key));
  ASSERT_EQ(key, "a");

  // Re-added (three times) while a worker holds it: not handed out again yet.
  q->Add("a");
  q->Add("a");
  q->Add("a");
  EXPECT_EQ(q->Len(), 0);
  EXPECT_EQ(TryGet(*q, clock_), "");

  q->Done("a");
  EXPECT_EQ(q->Len(), 1);
  EXPECT_EQ(TryGet(*q, clock_), "a");
  q->Done("a");
  EXPECT_EQ(q->Len(), 0);
  EXPECT_EQ(TryGet(*q, clock_), "");
}

TEST_F(WorkQueueTest, KeyReAddedDuringProcessingGoesBehindOtherWaitingKeys) {
  auto q = NewQueue();
  q->Add("a");
  EXPECT_EQ(TryGet(*q, clock_), "a");
  q->Add("a");
  q->Add("b");
  q->Done("a");
  EXPECT_EQ(TryGet(*q, clock_), "b");
  EXPECT_EQ(TryGet(*q, clock_), "a");
}

TEST_F(WorkQueueTest, DoneWithoutReAddDoesNotRequeue) {
  auto q = NewQueue();
  q->Add("a");
  EXPECT_EQ(TryGet(*q, clock_), "a");
  q->Done("a");
  EXPECT_EQ(q->Len(), 0);
  // The key is fully forgotten: a new Add queues it again.
  q->Add("a");
  EXPECT_EQ(q->Len(), 1);
}

TEST_F(WorkQueueTest, DoneForKeyNotBeingProcessedIsIgnored) {
  auto q = NewQueue();
  q->Add("a");
  q->Done("a");  // Misuse: "a" was never handed out.
  EXPECT_EQ(q->Len(), 1);
  EXPECT_EQ(TryGet(*q, clock_), "a");
  EXPECT_EQ(TryGet(*q, clock_), "");
}

TEST_F(WorkQueueTest, BlockedGetReturnsKeyAddedLater) {
  auto q = NewQueue();
  GetResult result = GetResult::kDeadlineExceeded;
  std::string key;
  std::thread getter([&] {
    result = q->GetWithDeadline(&key, clock_.Now() + absl::Hours(1));
  });
  clock_.WaitForWaiters(1);  // The getter is parked.
  q->Add("a");
  getter.join();
  EXPECT_EQ(result, GetResult::kKey);
  EXPECT_EQ(key, "a");
}

TEST_F(WorkQueueTest, GetWithDeadlineGivesUpWhenClockReachesDeadline) {
  auto q = NewQueue();
  const absl::Time deadline = clock_.Now() + absl::Seconds(5);
  GetResult result = GetResult::kKey;
  std::string key;
  std::thread getter([&] { result = q->GetWithDeadline(&key, deadline); });
  EXPECT_EQ(clock_.WaitForWaiters(1), deadline);
  clock_.Advance(absl::Seconds(5));
  getter.join();
  EXPECT_EQ(result, GetResult::kDeadlineExceeded);
}

TEST_F(WorkQueueTest, ShutDownWakesEveryBlockedGetter) {
  auto q = NewQueue();
  constexpr int kGetters = 3;
  std::vector<GetResult> results(kGetters, GetResult::kKey);
  std::vector<std::thread> getters;
  for (int i = 0; i < kGetters; ++i) {
    getters.emplace_back([&, i] {
      std::string key;
      results[i] = q->GetWithDeadline(&key, clock_.Now() + absl::Hours(1));
    });
  }
  // Plain Get (no deadline) must wake too.
  std::atomic<bool> plain_get_result{true};
  std::thread plain_getter([&] {
    std::string key;
    plain_get_result = q->Get(&key);
  });
  clock_.WaitForWaiters(kGetters);
  EXPECT_FALSE(q->ShuttingDown());

  q->ShutDown();

  for (auto& t : getters) t.join();
  plain_getter.join();
  EXPECT_TRUE(q->ShuttingDown());
  for (GetResult r : results) EXPECT_EQ(r, GetResult::kShutDown);
  EXPECT_FALSE(plain_get_result);
}

TEST_F(WorkQueueTest, AfterShutDownQueuedKeysAreStillHandedOutThenGetFails) {
  auto q = NewQueue();
  q->Add("a");
  q->Add("b");
  q->ShutDown();
  q->Add("c");  // Ignored while shutting down.
  EXPECT_EQ(q->Len(), 2);

  std::string key;
  ASSERT_TRUE(q->Get(&key));
  EXPECT_EQ(key, "a");
  ASSERT_TRUE(q->Get(&key));
  EXPECT_EQ(key, "b");
  EXPECT_FALSE(q->Get(&key));
  EXPECT_EQ(q->GetWithDeadline(&key, clock_.Now() + absl::Hours(1)),
            GetResult::kShutDown);
}

TEST_F(WorkQueueTest, DoneAfterShutDownRequeuesKeyReAddedBeforeShutDown) {
  auto q = NewQueue();
  q->Add("a");
  EXPECT_EQ(TryGet(*q, clock_), "a");
  q->Add("a");
  q->ShutDown();
  q->Done("a");
  std::string key;
  ASSERT_TRUE(q->Get(&key));
  EXPECT_EQ(key, "a");
  q->Done("a");
  EXPECT_FALSE(q->Get(&key));
}

TEST_F(WorkQueueTest, ShutDownWithDrainReturnsAtOnceWhenNothingIsInFlight) {
  auto q = NewQueue();
  q->ShutDownWithDrain();
  EXPECT_TRUE(q->ShuttingDown());
}

TEST_F(WorkQueueTest, ShutDownWithDrainWaitsUntilInFlightKeysAreDone) {
  auto q = NewQueue();
  q->Add("a");
  q->Add("b");
  EXPECT_EQ(TryGet(*q, clock_), "a");
  EXPECT_EQ(TryGet(*q, clock_), "b");

  // A parked getter tells us when the drain has begun (it sees shutdown).
  GetResult getter_result = GetResult::kKey;
  std::thread getter([&] {
    std::string key;
    getter_result = q->GetWithDeadline(&key, clock_.Now() + absl::Hours(1));
  });
  clock_.WaitForWaiters(1);

  absl::Notification drained;
  std::thread drainer([&] {
    q->ShutDownWithDrain();
    drained.Notify();
  });
  getter.join();
  EXPECT_EQ(getter_result, GetResult::kShutDown);

  // Both keys are in flight: the drain cannot have finished.
  EXPECT_FALSE(drained.HasBeenNotified());
  q->Done("a");
  EXPECT_FALSE(drained.HasBeenNotified());
  q->Done("b");
  drained.WaitForNotification();
  drainer.join();
}

TEST_F(WorkQueueTest, ShutDownReleasesAPendingDrain) {
  auto q = NewQueue();
  q->Add("a");
  EXPECT_EQ(TryGet(*q, clock_), "a");
  // A parked getter tells us when the drain has begun.
  std::thread getter([&] {
    std::string key;
    q->GetWithDeadline(&key, clock_.Now() + absl::Hours(1));
  });
  clock_.WaitForWaiters(1);
  absl::Notification drained;
  std::thread drainer([&] {
    q->ShutDownWithDrain();
    drained.Notify();
  });
  getter.join();
  EXPECT_FALSE(drained.HasBeenNotified());
  // ShutDown cancels the drain, so it returns although "a" is in flight.
  q->ShutDown();
  drained.WaitForNotification();
  drainer.join();
  q->Done("a");
}

TEST_F(WorkQueueTest, ConcurrentWorkersNeverHoldTheSameKeyAndLoseNoUpdate) {
  auto q = NewWorkQueue();  // Real clock: no deadlines are used.
  constexpr int kKeys = 8;
  constexpr int kWorkers = 6;
  constexpr int kAddsPerKey = 2000;

  absl::Mutex mu;
  absl::flat_hash_set<std::string> in_flight;
  // Latest version added per key, and the version each key's last processing
  // started with. Versions are bumped *before* Add, so a processing that
  // started after the last Add must observe the final version.
  absl::flat_hash_map<std::string, int> added_version;
  absl::flat_hash_map<std::string, int> processed_version;
  int overlaps = 0;
  int processed = 0;

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      std::string key;
      while (q->Get(&key)) {
        {
          absl::MutexLock lock(&mu);
          if (!in_flight.insert(key).second) ++overlaps;
          processed_version[key] = added_version[key];
          ++processed;
        }
        std::this_thread::yield();  // Widen the window for an overlap.
        {
          absl::MutexLock lock(&mu);
          in_flight.erase(key);
        }
        q->Done(key);
      }
    });
  }

  for (int i = 0; i < kAddsPerKey; ++i) {
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = absl::StrCat("key-", k);
      {
        absl::MutexLock lock(&mu);
        ++added_version[key];
      }
      q->Add(key);
    }
  }
  // Workers keep draining queued (and re-queued) keys after ShutDown and
  // exit once the queue is empty.
  q->ShutDownWithDrain();
  for (auto& t : workers) t.join();

  absl::MutexLock lock(&mu);
  EXPECT_EQ(overlaps, 0);
  EXPECT_GT(processed, 0);
  EXPECT_LE(processed, kKeys * kAddsPerKey);
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = absl::StrCat("key-", k);
    EXPECT_EQ(processed_version[key], kAddsPerKey) << key;
  }
  EXPECT_EQ(q->Len(), 0);
}

}  // namespace
}  // namespace informer

#include "server/ops/heap_releaser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace server {
namespace {

// Waits on a Probe give up after this (a failure, never reached when the
// releaser works).
constexpr absl::Duration kPatience = absl::Minutes(1);

// Stands in for malloc_trim and mallinfo2: counts the calls, records their
// threads and how many run at once, and can hold releases at a gate.
class Probe {
 public:
  std::function<bool()> Release() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++releases_;
      release_thread_ = std::this_thread::get_id();
      ++active_;
      max_active_ = std::max(max_active_, active_);
      auto open = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return gate_open_; };
      mu_.AwaitWithTimeout(absl::Condition(&open), kPatience);
      --active_;
      return true;
    };
  }
  std::function<size_t()> Measure() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++measures_;
      measure_thread_ = std::this_thread::get_id();
      return heap_;
    };
  }

  void CloseGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = true;
  }
  void SetHeap(size_t bytes) {
    absl::MutexLock lock(&mu_);
    heap_ = bytes;
  }
  // Waits until `n` releases started / `n` measurements were taken.
  bool AwaitReleases(int n) { return AwaitAtLeast(&releases_, n); }
  bool AwaitMeasures(int n) { return AwaitAtLeast(&measures_, n); }

  int releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  int measures() {
    absl::MutexLock lock(&mu_);
    return measures_;
  }
  int max_active() {
    absl::MutexLock lock(&mu_);
    return max_active_;
  }
  std::thread::id release_thread() {
    absl::MutexLock lock(&mu_);
    return release_thread_;
  }
  std::thread::id measure_thread() {
    absl::MutexLock lock(&mu_);
    return measure_thread_;
  }

 private:
  bool AwaitAtLeast(int* counter, int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [counter, n]() { return *counter >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }

  absl::Mutex mu_;
  bool gate_open_ ABSL_GUARDED_BY(mu_) = true;
  int releases_ ABSL_GUARDED_BY(mu_) = 0;
  int measures_ ABSL_GUARDED_BY(mu_) = 0;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int max_active_ ABSL_GUARDED_BY(mu_) = 0;
  size_t heap_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id release_thread_ ABSL_GUARDED_BY(mu_);
  std::thread::id measure_thread_ ABSL_GUARDED_BY(mu_);
};

HeapReleaser::Options ProbeOptions(Probe* probe,
                                   informer::Clock* clock = nullptr) {
  HeapReleaser::Options options;
  options.release = probe->Release();
  options.heap_in_use = probe->Measure();
  options.clock = clock;
  return options;
}

TEST(HeapReleaserTest, ReleasesOnItsOwnThreadWithoutBlockingTheCaller) {
  Probe probe;
  probe.CloseGate();
  HeapReleaser releaser(ProbeOptions(&probe));
  // Returns while the release is held at the gate.
  releaser.RequestRelease();
  ASSERT_TRUE(probe.AwaitReleases(1));
  EXPECT_NE(probe.release_thread(), std::this_thread::get_id());
  EXPECT_EQ(releaser.releases(), 0);
  probe.OpenGate();
  // A release after the held one, waited for.
  EXPECT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(probe.releases(), 2);
  EXPECT_EQ(releaser.releases(), 2);
}

TEST(HeapReleaserTest, RequestsDuringAReleaseCoalesceIntoOneMore) {
  Probe probe;
  probe.CloseGate();
  HeapReleaser releaser(ProbeOptions(&probe));
  releaser.RequestRelease();
  ASSERT_TRUE(probe.AwaitReleases(1));
  // A burst of relists while the first release runs.
  for (int i = 0; i < 20; ++i) releaser.RequestRelease();
  probe.OpenGate();
  ASSERT_TRUE(probe.AwaitReleases(2));
  // One more waited for: the burst took exactly one release.
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(probe.releases(), 3);
  EXPECT_EQ(releaser.releases(), 3);
}

TEST(HeapReleaserTest, NeverTwoReleasesAtOnce) {
  Probe probe;
  HeapReleaser releaser(ProbeOptions(&probe));
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&releaser] {
      for (int i = 0; i < 50; ++i) {
        releaser.RequestRelease();
        if (i % 10 == 0) EXPECT_TRUE(releaser.ReleaseAndWait());
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(probe.max_active(), 1);
  EXPECT_GE(probe.releases(), 1);
  EXPECT_LE(probe.releases(), 8 * 50 + 1);
}

TEST(HeapReleaserTest, StopFinishesTheRunningReleaseAndDropsThePendingOne) {
  Probe probe;
  probe.CloseGate();
  HeapReleaser releaser(ProbeOptions(&probe));
  releaser.RequestRelease();
  ASSERT_TRUE(probe.AwaitReleases(1));
  releaser.RequestRelease();  // pending behind the held one
  bool waited = true;
  std::thread waiter([&] { waited = releaser.ReleaseAndWait(); });
  std::thread stopper([&] { releaser.Stop(); });
  // The waiter returns (false) only once Stop has begun: the held release
  // cannot finish before the gate opens.
  waiter.join();
  EXPECT_FALSE(waited);
  probe.OpenGate();
  stopper.join();
  EXPECT_EQ(probe.releases(), 1);
  EXPECT_EQ(releaser.releases(), 1);
  // After Stop: ignored, and Stop again is harmless.
  releaser.RequestRelease();
  EXPECT_FALSE(releaser.ReleaseAndWait());
  releaser.Stop();
  EXPECT_EQ(probe.releases(), 1);
}

TEST(HeapReleaserTest, HeapInUseIsMeasuredOffTheReadersThreadAtABoundedRate) {
  informer::FakeClock clock;
  Probe probe;
  probe.SetHeap(100);
  HeapReleaser::Options options = ProbeOptions(&probe, &clock);
  options.measure_interval = absl::Seconds(10);
  HeapReleaser releaser(std::move(options));
  // Measured once when built.
  const absl::Time start = clock.Now();
  EXPECT_EQ(probe.measures(), 1);
  HeapReleaser::HeapInUse heap = releaser.LastHeapInUse();
  EXPECT_EQ(heap.bytes, 100u);
  EXPECT_EQ(heap.measured, start);

  // Younger than the interval: the last value, no new measurement.
  probe.SetHeap(200);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(releaser.LastHeapInUse().bytes, 100u);
  // As old as the interval: still the last value, a measurement requested.
  clock.Advance(absl::Seconds(5));
  heap = releaser.LastHeapInUse();
  EXPECT_EQ(heap.bytes, 100u);
  EXPECT_EQ(heap.measured, start);
  EXPECT_EQ(heap.age, absl::Seconds(10));
  ASSERT_TRUE(probe.AwaitMeasures(2));
  EXPECT_NE(probe.measure_thread(), std::this_thread::get_id());
  // A release waited for comes after it on the thread: the new value is in.
  ASSERT_TRUE(releaser.ReleaseAndWait());
  heap = releaser.LastHeapInUse();
  EXPECT_EQ(heap.bytes, 200u);
  EXPECT_EQ(heap.measured, start + absl::Seconds(10));
  EXPECT_EQ(heap.age, absl::ZeroDuration());
  // When built, when asked at 10 s, after the release: nothing at 5 s.
  EXPECT_EQ(probe.measures(), 3);

  // Each release measures, whatever the age.
  probe.SetHeap(300);
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(releaser.LastHeapInUse().bytes, 300u);
}

TEST(HeapReleaserTest, ReleasesAgainAfterTheDelayOnceThenWaits) {
  informer::FakeClock clock;
  Probe probe;
  HeapReleaser::Options options = ProbeOptions(&probe, &clock);
  options.release_again_after = absl::Seconds(60);
  HeapReleaser releaser(std::move(options));
  // Nothing is due before a release that served a request.
  EXPECT_EQ(releaser.releases(), 0);

  // A relist's release arms the delayed one, due 60 s later.
  const absl::Time first = clock.Now();
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(clock.WaitForWaiters(1), first + absl::Seconds(60));
  clock.Advance(absl::Seconds(59));
  EXPECT_EQ(clock.WaitForWaiters(1), first + absl::Seconds(60));
  EXPECT_EQ(probe.releases(), 1);
  EXPECT_EQ(releaser.releases_again(), 0);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(probe.AwaitReleases(2));
  // Counted once it finished; then nothing is due: the thread waits for
  // requests alone (no deadline on the clock).
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(probe.releases(), 3);
  EXPECT_EQ(releaser.releases_again(), 1);
  EXPECT_EQ(releaser.releases(), 3);

  // That third release (a request) armed the next; another request 20 s
  // later re-arms it: a burst of relists gets one delayed release, after
  // its last.
  const absl::Time third = clock.Now();
  EXPECT_EQ(clock.WaitForWaiters(1), third + absl::Seconds(60));
  clock.Advance(absl::Seconds(20));
  releaser.RequestRelease();
  ASSERT_TRUE(probe.AwaitReleases(4));
  EXPECT_EQ(clock.WaitForWaiters(1), third + absl::Seconds(80));
  clock.Advance(absl::Seconds(40));
  EXPECT_EQ(clock.WaitForWaiters(1), third + absl::Seconds(80));
  EXPECT_EQ(releaser.releases_again(), 1);
  clock.Advance(absl::Seconds(20));
  ASSERT_TRUE(probe.AwaitReleases(5));
  releaser.Stop();
  EXPECT_EQ(releaser.releases_again(), 2);
  EXPECT_EQ(releaser.releases(), 5);
}

TEST(HeapReleaserTest, NoDelayedReleaseWhenOff) {
  informer::FakeClock clock;
  Probe probe;
  HeapReleaser releaser(ProbeOptions(&probe, &clock));
  ASSERT_TRUE(releaser.ReleaseAndWait());
  // Parked on the clock without a deadline: Advance wakes nothing due.
  clock.Advance(absl::Hours(1));
  ASSERT_TRUE(releaser.ReleaseAndWait());
  EXPECT_EQ(probe.releases(), 2);
  EXPECT_EQ(releaser.releases_again(), 0);
}

}  // namespace
}  // namespace server

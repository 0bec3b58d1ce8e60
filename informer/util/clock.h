#ifndef INFORMER_UTIL_CLOCK_H_
#define INFORMER_UTIL_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace informer {

// Clock is the single source of time for everything in the informer core
// (back-off, resync, rate limiters, delaying queues, event timestamps), so
// that tests drive time with a FakeClock and never sleep on the wall clock.
//
// Thread-safety: every method may be called from any thread.
// Ownership: components take a `Clock*` that must outlive them; the process
// wide RealClock() is never destroyed.
class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // Waits until `cond` holds or this clock reaches `deadline`, like
  // absl::Mutex::AwaitWithDeadline. `mu` must be held on entry and is held on
  // return, but an implementation may release and re-acquire it in between
  // (as any condition wait does), so callers re-check state they care about.
  // Returns the value of `cond` evaluated under `mu` on return.
  // absl::InfiniteFuture() waits for `cond` alone.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) = 0;

  // Convenience: AwaitWithDeadline(mu, cond, Now() + timeout).
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }

  // Blocks the calling thread until this clock reaches `deadline`.
  void SleepUntil(absl::Time deadline);
};

// The process-wide wall clock. Never null, never destroyed.
Clock* RealClock();

// FakeClock: time moves only when a test calls Advance/SetTime. Waiters in
// AwaitWithDeadline wake when their condition becomes true (as with a real
// mutex) or when an Advance moves the time past their deadline.
//
// WaitForWaiters lets a test block until a component is parked on the clock,
// so "advance past the back-off" is deterministic without wall-clock sleeps.
//
// Lock ordering: a waiter releases its own mutex before it touches the
// clock's registry, and Advance holds the registry while it pokes the waiters'
// mutexes, so neither can deadlock the other. Do not call Advance while
// holding a mutex that a waiter on this clock uses.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000));

  absl::Time Now() const override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) override;

  void Advance(absl::Duration d);
  void SetTime(absl::Time t);

  // Blocks until at least `n` threads are waiting on this clock for a
  // deadline still in the future. Returns the earliest such deadline.
  absl::Time WaitForWaiters(int n = 1);
  int NumWaiters() const;

 private:
  struct Waiter {
    absl::Mutex* mu;
    absl::Time deadline;
  };
  void WakeAll();

  std::atomic<int64_t> now_ns_;
  mutable absl::Mutex registry_mu_;
  std::vector<Waiter*> waiters_ ABSL_GUARDED_BY(registry_mu_);
};

}  // namespace informer

#endif  // INFORMER_UTIL_CLOCK_H_

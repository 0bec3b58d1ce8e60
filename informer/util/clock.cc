#include "informer/util/clock.h"

#include <algorithm>

namespace informer {
namespace {

class RealClockImpl final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) override {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new RealClockImpl();
  return clock;
}

void Clock::SleepUntil(absl::Time deadline) {
  static constexpr bool kNever = false;
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  AwaitWithDeadline(&mu, absl::Condition(&kNever), deadline);
}

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const {
  return absl::FromUnixNanos(now_ns_.load(std::memory_order_acquire));
}

bool FakeClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  Waiter self{mu, deadline};
  // Register without holding `mu` (see the lock-ordering note in clock.h).
  mu->Unlock();
  {
    absl::MutexLock lock(&registry_mu_);
    waiters_.push_back(&self);
  }
  mu->Lock();
  const int64_t deadline_ns = deadline == absl::InfiniteFuture()
                                  ? INT64_MAX
                                  : absl::ToUnixNanos(deadline);
  struct Args {
    const absl::Condition* cond;
    const std::atomic<int64_t>* now_ns;
    int64_t deadline_ns;
  } args{&cond, &now_ns_, deadline_ns};
  mu->Await(absl::Condition(
      +[](Args* a) {
        return a->cond->Eval() ||
               a->now_ns->load(std::memory_order_acquire) >= a->deadline_ns;
      },
      &args));
  mu->Unlock();
  {
    absl::MutexLock lock(&registry_mu_);
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
  }
  mu->Lock();
  return cond.Eval();
}

void FakeClock::Advance(absl::Duration d) {
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
  WakeAll();
}

void FakeClock::SetTime(absl::Time t) {
  now_ns_.store(absl::ToUnixNanos(t), std::memory_order_release);
  WakeAll();
}

void FakeClock::WakeAll() {
  absl::MutexLock lock(&registry_mu_);
  // Releasing a waiter's mutex makes absl re-evaluate its condition, which
  // reads the new time.
  for (Waiter* w : waiters_) {
    w->mu->Lock();
    w->mu->Unlock();
  }
}

absl::Time FakeClock::WaitForWaiters(int n) {
  absl::MutexLock lock(&registry_mu_);
  // Only waiters still waiting for a future time count: one whose deadline
  // has passed is about to wake and must not satisfy the next call.
  // Compared in whole nanoseconds, as the waiters' wake-up test is.
  auto pending = [this](const Waiter* w) {
    return w->deadline != absl::InfiniteFuture() &&
           absl::ToUnixNanos(w->deadline) >
               now_ns_.load(std::memory_order_acquire);
  };
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu_) {
    return std::count_if(waiters_.begin(), waiters_.end(), pending) >= n;
  };
  registry_mu_.Await(absl::Condition(&enough));
  absl::Time earliest = absl::InfiniteFuture();
  for (const Waiter* w : waiters_) {
    if (pending(w)) earliest = std::min(earliest, w->deadline);
  }
  return earliest;
}

int FakeClock::NumWaiters() const {
  absl::MutexLock lock(&registry_mu_);
  return static_cast<int>(waiters_.size());
}

}  // namespace informer

#include "informer/workqueue/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "glog/logging.h"

namespace informer {
namespace {

// Increments a per-key attempt counter without wrapping around.
int IncrementSaturating(int* count) {
  const int before = *count;
  if (*count < std::numeric_limits<int>::max()) ++*count;
  return before;
}

}  // namespace

// ---- ItemExponentialFailureRateLimiter ----

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(
    absl::Duration base_delay, absl::Duration max_delay)
    : base_delay_(std::max(base_delay, absl::ZeroDuration())),
      max_delay_(std::max(max_delay, absl::ZeroDuration())) {}

absl::Duration ItemExponentialFailureRateLimiter::When(absl::string_view key) {
  int exponent;
  {
    absl::MutexLock lock(&mu_);
    exponent = IncrementSaturating(&failures_[key]);
  }
  // Computed in floating point so that 2^exponent cannot overflow: ldexp
  // saturates to +inf, which the range check below maps to max_delay_.
  const double backoff_ns =
      std::ldexp(absl::ToDoubleNanoseconds(base_delay_), exponent);
  // 2^63 is the first double beyond int64 nanoseconds.
  if (!(backoff_ns < 9223372036854775808.0)) return max_delay_;
  return std::min(absl::Nanoseconds(static_cast<int64_t>(backoff_ns)),
                  max_delay_);
}

void ItemExponentialFailureRateLimiter::Forget(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  failures_.erase(key);
}

int ItemExponentialFailureRateLimiter::NumRequeues(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

// ---- ItemFastSlowRateLimiter ----

ItemFastSlowRateLimiter::ItemFastSlowRateLimiter(absl::Duration fast_delay,
                                                 absl::Duration slow_delay,
                                                 int max_fast_attempts)
    : fast_delay_(std::max(fast_delay, absl::ZeroDuration())),
      slow_delay_(std::max(slow_delay, absl::ZeroDuration())),
      max_fast_attempts_(max_fast_attempts) {}

absl::Duration ItemFastSlowRateLimiter::When(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  int& attempts = failures_[key];
  IncrementSaturating(&attempts);
  return attempts <= max_fast_attempts_ ? fast_delay_ : slow_delay_;
}

void ItemFastSlowRateLimiter::Forget(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  failures_.erase(key);
}

int ItemFastSlowRateLimiter::NumRequeues(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

// ---- BucketRateLimiter ----

BucketRateLimiter::BucketRateLimiter(Clock* clock, double qps, int burst)
    : clock_(clock),
      qps_(qps),
      burst_(burst),
      tokens_(std::max(burst, 0)),
      last_(clock->Now()) {
  CHECK(clock_ != nullptr);
}

absl::Duration BucketRateLimiter::When(absl::string_view /*key*/) {
  if (std::isinf(qps_) && qps_ > 0) return absl::ZeroDuration();
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  // Refill for the time since the last reservation (a clock that went
  // backwards refills nothing), capped at the bucket size.
  double tokens = tokens_;
  if (qps_ > 0 && now > last_) {
    tokens += absl::ToDoubleSeconds(now - last_) * qps_;
  }
  tokens = std::min(tokens, static_cast<double>(burst_));
  tokens -= 1;
  absl::Duration wait = absl::ZeroDuration();
  if (tokens < 0) {
    // A bucket that can never hold a token, or never refills, cannot grant
    // this reservation: do not record it (x/time/rate's !ok case).
    if (burst_ < 1 || qps_ <= 0) return absl::InfiniteDuration();
    const double wait_ns = -tokens / qps_ * 1e9;
    wait = wait_ns < 9223372036854775808.0
               ? absl::Nanoseconds(static_cast<int64_t>(wait_ns))
               : absl::InfiniteDuration();
  }
  if (now > last_) last_ = now;
  tokens_ = tokens;
  return wait;
}

// ---- MaxOfRateLimiter ----

MaxOfRateLimiter::MaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

absl::Duration MaxOfRateLimiter::When(absl::string_view key) {
  absl::Duration longest = absl::ZeroDuration();
  // Every child is asked (not short-circuited) so each records the attempt.
  for (const auto& limiter : limiters_) {
    longest = std::max(longest, limiter->When(key));
  }
  return longest;
}

void MaxOfRateLimiter::Forget(absl::string_view key) {
  for (const auto& limiter : limiters_) limiter->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(absl::string_view key) {
  int most = 0;
  for (const auto& limiter : limiters_) {
    most = std::max(most, limiter->NumRequeues(key));
  }
  return most;
}

// ---- MaxWaitRateLimiter ----

MaxWaitRateLimiter::MaxWaitRateLimiter(std::unique_ptr<RateLimiter> limiter,
                                       absl::Duration max_delay)
    : limiter_(std::move(limiter)),
      max_delay_(std::max(max_delay, absl::ZeroDuration())) {
  CHECK(limiter_ != nullptr);
}

absl::Duration MaxWaitRateLimiter::When(absl::string_view key) {
  return std::min(limiter_->When(key), max_delay_);
}

void MaxWaitRateLimiter::Forget(absl::string_view key) {
  limiter_->Forget(key);
}

int MaxWaitRateLimiter::NumRequeues(absl::string_view key) {
  return limiter_->NumRequeues(key);
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter>(
      absl::Milliseconds(5), absl::Seconds(1000)));
  // Overall retry speed only, not per key.
  limiters.push_back(
      std::make_unique<BucketRateLimiter>(clock, /*qps=*/10, /*burst=*/100));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace informer

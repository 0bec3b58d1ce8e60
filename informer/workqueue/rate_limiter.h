#ifndef INFORMER_WORKQUEUE_RATE_LIMITER_H_
#define INFORMER_WORKQUEUE_RATE_LIMITER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace informer {

// RateLimiter decides how long a key must wait before it is retried
// (client-go's workqueue.RateLimiter). Used by RateLimitingQueue.
//
// Thread-safety: implementations are thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;

  // Records one more attempt for `key` and returns how long it should wait.
  // Never negative.
  virtual absl::Duration When(absl::string_view key) = 0;

  // Stops tracking `key` (after success, or after giving up on it), so its
  // next failure starts from the beginning again.
  virtual void Forget(absl::string_view key) = 0;

  // How many times `key` has been limited since it was last forgotten.
  virtual int NumRequeues(absl::string_view key) = 0;
};

// Per-key exponential back-off: the n-th When for a key (n counted from 0)
// returns min(base * 2^n, max). Overflow-safe: once base * 2^n is beyond what
// a Duration of int64 nanoseconds holds, it returns `max`.
class ItemExponentialFailureRateLimiter final : public RateLimiter {
 public:
  ItemExponentialFailureRateLimiter(absl::Duration base_delay,
                                    absl::Duration max_delay);

  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  const absl::Duration base_delay_;
  const absl::Duration max_delay_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
};

// Per-key fast/slow: the first `max_fast_attempts` When calls for a key return
// `fast_delay`, every later one `slow_delay`.
class ItemFastSlowRateLimiter final : public RateLimiter {
 public:
  ItemFastSlowRateLimiter(absl::Duration fast_delay, absl::Duration slow_delay,
                          int max_fast_attempts);

  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  const absl::Duration fast_delay_;
  const absl::Duration slow_delay_;
  const int max_fast_attempts_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
};

// Overall (not per-key) token bucket, with the reservation semantics of
// golang.org/x/time/rate's Limiter.Reserve().Delay(): the bucket starts full
// with `burst` tokens and refills at `qps` tokens per second up to `burst`;
// every When takes one token, going into debt if none is left, and returns how
// long until that token exists. So with qps 10 and burst 100, 100 calls at
// one instant return 0 and the next ones 100ms, 200ms, 300ms, ...
// Edge cases as in x/time/rate: an infinite qps never delays; burst <= 0 with
// a finite qps can never grant a token and returns absl::InfiniteDuration().
// NumRequeues is always 0 and Forget a no-op: the bucket tracks no keys.
//
// Ownership: `clock` must outlive the limiter.
class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(Clock* clock, double qps, int burst);

  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override {}
  int NumRequeues(absl::string_view key) override { return 0; }

 private:
  Clock* const clock_;
  const double qps_;
  const int burst_;
  absl::Mutex mu_;
  // Tokens at time `last_`; negative when reservations are outstanding.
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

// Asks every limiter (each records the attempt) and returns the longest
// delay. NumRequeues is the maximum of the children's; Forget forgets in all.
// With a token bucket inside, the burst can appear exceeded when some keys
// were delayed longer by another limiter (same as client-go).
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);

  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  const std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// Caps the delay of another limiter at `max_delay` (client-go's
// WithMaxWaitRateLimiter). Forget and NumRequeues pass through.
class MaxWaitRateLimiter final : public RateLimiter {
 public:
  MaxWaitRateLimiter(std::unique_ptr<RateLimiter> limiter,
                     absl::Duration max_delay);

  absl::Duration When(absl::string_view key) override;
  void Forget(absl::string_view key) override;
  int NumRequeues(absl::string_view key) override;

 private:
  const std::unique_ptr<RateLimiter> limiter_;
  const absl::Duration max_delay_;
};

// client-go's DefaultControllerRateLimiter: max of a per-key exponential
// back-off from 5ms to 1000s and an overall bucket of 10 qps, burst 100.
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock);

}  // namespace informer

#endif  // INFORMER_WORKQUEUE_RATE_LIMITER_H_

#ifndef EMULATOR_PACER_H_
#define EMULATOR_PACER_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace emulator {

// Pacer limits a byte stream to a rate: a token bucket that fills at
// `bytes_per_sec` up to `burst` bytes and may go into debt, so that a
// write larger than the bucket is allowed at once and the NEXT write
// waits for it to be paid off. The emulator paces a list response's body
// and a WatchList's initial events with it to serve at an API-server-like
// rate (kube-apiserver's pace for a large list, far below the emulator's
// own: see docs/benchmarks.md, section 'Initial sync').
//
// Reserve() is pure bookkeeping on the injected clock (unit-testable with
// a FakeClock); Take() also waits, on the same clock.
//
// Thread-safety: all methods are thread-safe. The clock is not owned and
// must outlive the pacer.
class Pacer {
 public:
  // `bytes_per_sec` > 0. The bucket starts full.
  Pacer(double bytes_per_sec, size_t burst, informer::Clock* clock);
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // Accounts for `bytes` and returns the time at which they may go out:
  // now while the bucket covers them, later by the debt / rate otherwise.
  absl::Time Reserve(size_t bytes);
  // Reserve, then wait (on the clock) until that time.
  void Take(size_t bytes);

 private:
  const double rate_;   // bytes per second
  const double burst_;  // bucket size in bytes
  informer::Clock* const clock_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);  // negative: debt
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emulator

#endif  // EMULATOR_PACER_H_

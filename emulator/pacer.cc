#include "emulator/pacer.h"

#include <algorithm>

namespace emulator {

Pacer::Pacer(double bytes_per_sec, size_t burst, informer::Clock* clock)
    : rate_(bytes_per_sec),
      burst_(static_cast<double>(burst)),
      clock_(clock),
      tokens_(static_cast<double>(burst)),
      last_(clock->Now()) {}

absl::Time Pacer::Reserve(size_t bytes) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now > last_) {
    tokens_ =
        std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_);
    last_ = now;
  }
  tokens_ -= static_cast<double>(bytes);
  if (tokens_ >= 0) return now;
  return now + absl::Seconds(-tokens_ / rate_);
}

void Pacer::Take(size_t bytes) {
  const absl::Time at = Reserve(bytes);
  if (at > clock_->Now()) clock_->SleepUntil(at);
}

}  // namespace emulator

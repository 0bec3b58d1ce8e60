#include "server/ops/heap_releaser.h"

#include <glog/logging.h>

#include <cstdio>
#include <utility>

#include "server/ops/malloc_tuning.h"

namespace server {

HeapReleaser::HeapReleaser(Options options)
    : release_(options.release ? std::move(options.release)
                               : ReleaseFreeHeapMemory),
      heap_in_use_(options.heap_in_use ? std::move(options.heap_in_use)
                                       : HeapInUseBytes),
      clock_(options.clock != nullptr ? options.clock : informer::RealClock()),
      measure_interval_(options.measure_interval),
      release_again_after_(options.release_again_after) {
  const size_t bytes = heap_in_use_();
  {
    absl::MutexLock lock(&mu_);
    last_ = {bytes, clock_->Now()};
  }
  thread_ = std::thread([this] { Run(); });
}

HeapReleaser::~HeapReleaser() { Stop(); }

void HeapReleaser::RequestRelease() {
  absl::MutexLock lock(&mu_);
  if (!stopping_) ++requested_;
}

bool HeapReleaser::ReleaseAndWait() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  const uint64_t mine = ++requested_;
  auto finished = [this, mine]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ >= mine || stopping_;
  };
  mu_.Await(absl::Condition(&finished));
  return done_ >= mine;
}

HeapReleaser::HeapInUse HeapReleaser::LastHeapInUse() {
  absl::MutexLock lock(&mu_);
  HeapInUse last = last_;
  last.age = clock_->Now() - last_.measured;
  if (last.age >= measure_interval_) measure_requested_ = true;
  return last;
}

HeapReleaser::HeapInUse HeapReleaser::PeekHeapInUse() const {
  absl::MutexLock lock(&mu_);
  HeapInUse last = last_;
  last.age = clock_->Now() - last_.measured;
  return last;
}

int64_t HeapReleaser::releases() const {
  absl::MutexLock lock(&mu_);
  return releases_;
}

int64_t HeapReleaser::releases_again() const {
  absl::MutexLock lock(&mu_);
  return releases_again_;
}

void HeapReleaser::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  std::call_once(join_once_, [this] { thread_.join(); });
}

void HeapReleaser::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || requested_ > started_ || measure_requested_;
    };
    // On the clock, so that tests drive the delayed release.
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&work), again_at_);
    if (stopping_) return;
    if (!work()) {
      if (clock_->Now() < again_at_) continue;
      again_at_ = absl::InfiniteFuture();
      measure_requested_ = false;
      mu_.Unlock();
      ReleaseAndMeasure(0, 0, /*again=*/true);
      mu_.Lock();
      continue;
    }
    const uint64_t requests = requested_ - started_;
    const uint64_t covers = requests > 0 ? requested_ : 0;
    started_ = requested_;
    // The measurement after a release answers a reader's request too.
    measure_requested_ = false;
    mu_.Unlock();
    ReleaseAndMeasure(covers, requests, /*again=*/false);
    mu_.Lock();
    if (covers > 0 && release_again_after_ > absl::ZeroDuration()) {
      again_at_ = clock_->Now() + release_again_after_;
    }
  }
}

void HeapReleaser::ReleaseAndMeasure(uint64_t covers, uint64_t requests,
                                     bool again) {
  const bool release = covers > 0 || again;
  size_t rss_before = 0;
  absl::Duration took;
  if (release) {
    rss_before = ResidentBytes();
    const absl::Time start = absl::Now();
    release_();
    took = absl::Now() - start;
  }
  const size_t bytes = heap_in_use_();
  const absl::Time measured = clock_->Now();
  if (release) {
    char line[160];
    std::snprintf(line, sizeof(line),
                  "RSS %.1f -> %.1f MB in %.1f ms, heap in use %.1f MB",
                  rss_before / 1e6, ResidentBytes() / 1e6,
                  absl::ToDoubleMilliseconds(took), bytes / 1e6);
    if (again) {
      LOG(INFO) << "free heap released again, "
                << absl::FormatDuration(release_again_after_)
                << " after the last release (" << line << ")";
    } else {
      LOG(INFO) << "free heap released for " << requests << " request"
                << (requests == 1 ? "" : "s") << " (" << line << ")";
    }
  }
  absl::MutexLock lock(&mu_);
  last_ = {bytes, measured};
  if (release) {
    if (covers > 0) done_ = covers;
    ++releases_;
    if (again) ++releases_again_;
  }
}

}  // namespace server

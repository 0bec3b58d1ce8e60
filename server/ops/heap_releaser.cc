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
      measure_interval_(options.measure_interval) {
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
    mu_.Await(absl::Condition(&work));
    if (stopping_) return;
    const uint64_t requests = requested_ - started_;
    const uint64_t covers = requests > 0 ? requested_ : 0;
    started_ = requested_;
    // The measurement after a release answers a reader's request too.
    measure_requested_ = false;
    mu_.Unlock();
    ReleaseAndMeasure(covers, requests);
    mu_.Lock();
  }
}

void HeapReleaser::ReleaseAndMeasure(uint64_t covers, uint64_t requests) {
  const bool release = covers > 0;
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
    LOG(INFO) << "free heap released for " << requests << " request"
              << (requests == 1 ? "" : "s") << " (" << line << ")";
  }
  absl::MutexLock lock(&mu_);
  last_ = {bytes, measured};
  if (release) {
    done_ = covers;
    ++releases_;
  }
}

}  // namespace server

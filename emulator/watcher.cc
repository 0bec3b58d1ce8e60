#include "emulator/watcher.h"

#include <utility>

#include "glog/logging.h"

namespace emulator {

Watcher::Watcher(const ResourceInfo* resource, WatchRequest request,
                 size_t queue_limit)
    : resource_(resource),
      request_(std::move(request)),
      queue_limit_(queue_limit) {}

void Watcher::Push(StoreEvent event) {
  absl::MutexLock lock(&mu_);
  if (close_ != CloseKind::kOpen) return;
  if (queue_.size() >= queue_limit_) {
    // A consumer this slow is dropped, as the API server drops watchers whose
    // buffer is full; the client re-watches from its last RV.
    LOG(WARNING) << "closing a watch on " << resource_->resource
                 << ": queue limit reached";
    close_ = CloseKind::kGraceful;
    return;
  }
  queue_.push_back(std::move(event));
}

void Watcher::Next(informer::Clock* clock, absl::Time deadline, size_t max,
                   std::vector<StoreEvent>* out, Directives* directives,
                   CloseKind* close) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return close_ != CloseKind::kOpen || poked_ ||
           (!directives_.stalled &&
            (!queue_.empty() || directives_.malformed_lines > 0));
  };
  clock->AwaitWithDeadline(&mu_, absl::Condition(&ready), deadline);
  poked_ = false;
  *close = close_;
  *directives = directives_;
  directives_.malformed_lines = 0;
  if (directives_.stalled || close_ != CloseKind::kOpen) return;
  while (!queue_.empty() && out->size() < max) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (!out->empty()) directives_.cut_next_event = false;
}

void Watcher::Update(const std::function<void(Directives&)>& fn) {
  absl::MutexLock lock(&mu_);
  fn(directives_);
  poked_ = true;
}

void Watcher::Close(CloseKind kind) {
  absl::MutexLock lock(&mu_);
  if (close_ == CloseKind::kOpen) close_ = kind;
}

size_t Watcher::QueueSize() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace emulator

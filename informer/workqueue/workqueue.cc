#include "informer/workqueue/workqueue.h"

#include <deque>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace informer {
namespace {

class WorkQueueImpl final : public WorkQueue {
 public:
  explicit WorkQueueImpl(WorkQueueOptions options)
      : name_(std::move(options.name)),
        clock_(options.clock),
        metrics_(std::move(options.metrics)) {
    CHECK(clock_ != nullptr) << "work queue " << name_ << " needs a clock";
  }

  void Add(absl::string_view key) override {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    // Stingy: a key that is already dirty is either queued or will be queued
    // by Done.
    if (!dirty_.emplace(key).second) return;
    if (metrics_ != nullptr) metrics_->OnAdd(key);
    // Exclusive: a key being processed is queued by Done, not now.
    if (processing_.contains(key)) return;
    queue_.emplace_back(key);
  }

  bool Get(std::string* key) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &WorkQueueImpl::HasKeyOrShutDownLocked));
    return TakeLocked(key);
  }

  GetResult GetWithDeadline(std::string* key, absl::Time deadline) override {
    absl::MutexLock lock(&mu_);
    if (!clock_->AwaitWithDeadline(
            &mu_, absl::Condition(this, &WorkQueueImpl::HasKeyOrShutDownLocked),
            deadline)) {
      return GetResult::kDeadlineExceeded;
    }
    return TakeLocked(key) ? GetResult::kKey : GetResult::kShutDown;
  }

  void Done(absl::string_view key) override {
    absl::MutexLock lock(&mu_);
    if (metrics_ != nullptr) metrics_->OnDone(key);
    auto it = processing_.find(key);
    if (it == processing_.end()) {
      LOG(ERROR) << "work queue " << name_
                 << ": Done for a key that is not being processed";
      return;
    }
    processing_.erase(it);
    if (dirty_.contains(key)) queue_.emplace_back(key);
    // Waiters (Get, ShutDownWithDrain) re-evaluate their conditions when mu_
    // is released; no explicit signal is needed.
  }

  int Len() const override {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(queue_.size());
  }

  void ShutDown() override {
    absl::MutexLock lock(&mu_);
    drain_ = false;
    shutting_down_ = true;
  }

  void ShutDownWithDrain() override {
    absl::MutexLock lock(&mu_);
    drain_ = true;
    shutting_down_ = true;
    // Returns when nothing is in flight, or when a later ShutDown cancels the
    // drain.
    mu_.Await(absl::Condition(this, &WorkQueueImpl::DrainFinishedLocked));
  }

  bool ShuttingDown() const override {
    absl::MutexLock lock(&mu_);
    return shutting_down_;
  }

 private:
  bool HasKeyOrShutDownLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || shutting_down_;
  }

  bool DrainFinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return processing_.empty() || !drain_;
  }

  // Pops the head into `*key` and marks it processing; false if the queue is
  // empty (which, after the wait, means shut down).
  bool TakeLocked(std::string* key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.empty()) return false;
    *key = std::move(queue_.front());
    queue_.pop_front();
    if (metrics_ != nullptr) metrics_->OnGet(*key);
    processing_.insert(*key);
    dirty_.erase(*key);
    return true;
  }

  const std::string name_;
  Clock* const clock_;
  const std::shared_ptr<WorkQueueMetrics> metrics_;

  mutable absl::Mutex mu_;
  // Order of work. Every element is in dirty_ and not in processing_.
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // Keys that need processing (queued, or re-added while processing).
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  // Keys handed to a worker and not yet Done.
  absl::flat_hash_set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

std::unique_ptr<WorkQueue> NewWorkQueue(WorkQueueOptions options) {
  return std::make_unique<WorkQueueImpl>(std::move(options));
}

}  // namespace informer

#include "informer/workqueue/delaying_queue.h"

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace informer {
namespace {

// A key waiting for its ready time. Heap-allocated so `key` (which the index
// map views) never moves.
struct WaitingKey {
  std::string key;
  absl::Time ready_at;
  uint64_t seq;  // Insertion order; breaks ties so equal times stay FIFO.
  size_t heap_index;
};

// Min-heap of waiting keys by (ready_at, seq) with an index by key, so an
// earlier AddAfter can move an existing entry up (decrease-key). Not
// thread-safe; guarded by the owner's mutex.
class WaitingHeap {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const WaitingKey& top() const { return *heap_.front(); }

  // Inserts `key` ready at `ready_at`, or moves an existing entry earlier.
  // An existing entry never moves later.
  void Upsert(absl::string_view key, absl::Time ready_at) {
    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      WaitingKey* existing = it->second;
      if (ready_at < existing->ready_at) {
        existing->ready_at = ready_at;
        SiftUp(existing->heap_index);
      }
      return;
    }
    auto entry = std::make_unique<WaitingKey>(
        WaitingKey{std::string(key), ready_at, next_seq_++, heap_.size()});
    by_key_.emplace(entry->key, entry.get());
    heap_.push_back(std::move(entry));
    SiftUp(heap_.size() - 1);
  }

  std::string PopTop() {
    std::unique_ptr<WaitingKey> top = std::move(heap_.front());
    by_key_.erase(top->key);
    if (heap_.size() > 1) {
      heap_.front() = std::move(heap_.back());
      heap_.front()->heap_index = 0;
    }
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0);
    return std::move(top->key);
  }

 private:
  static bool Less(const WaitingKey& a, const WaitingKey& b) {
    if (a.ready_at != b.ready_at) return a.ready_at < b.ready_at;
    return a.seq < b.seq;
  }

  void Swap(size_t i, size_t j) {
    std::swap(heap_[i], heap_[j]);
    heap_[i]->heap_index = i;
    heap_[j]->heap_index = j;
  }

  void SiftUp(size_t i) {
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Less(*heap_[i], *heap_[parent])) break;
      Swap(i, parent);
      i = parent;
    }
  }

  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    while (true) {
      size_t smallest = i;
      const size_t left = 2 * i + 1;
      const size_t right = left + 1;
      if (left < n && Less(*heap_[left], *heap_[smallest])) smallest = left;
      if (right < n && Less(*heap_[right], *heap_[smallest])) smallest = right;
      if (smallest == i) return;
      Swap(i, smallest);
      i = smallest;
    }
  }

  std::vector<std::unique_ptr<WaitingKey>> heap_;
  absl::flat_hash_map<absl::string_view, WaitingKey*> by_key_;
  uint64_t next_seq_ = 0;
};

class DelayingQueueImpl final : public DelayingQueue {
 public:
  explicit DelayingQueueImpl(WorkQueueOptions options)
      : clock_(options.clock), metrics_(options.metrics) {
    CHECK(clock_ != nullptr) << "delaying queue needs a clock";
    queue_ = NewWorkQueue(std::move(options));
    waiting_loop_ = std::thread([this] { WaitingLoop(); });
  }

  ~DelayingQueueImpl() override { ShutDown(); }

  void AddAfter(absl::string_view key, absl::Duration delay) override {
    if (queue_->ShuttingDown()) return;
    if (metrics_ != nullptr) metrics_->OnRetry();
    if (delay <= absl::ZeroDuration()) {
      queue_->Add(key);
      return;
    }
    const absl::Time ready_at = clock_->Now() + delay;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    // The waiting loop re-evaluates WakeLoopLocked when mu_ is released and
    // re-arms its deadline if this key became the earliest.
    waiting_.Upsert(key, ready_at);
  }

  int NumWaiting() const override {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(waiting_.size());
  }

  void Add(absl::string_view key) override { queue_->Add(key); }
  bool Get(std::string* key) override { return queue_->Get(key); }
  GetResult GetWithDeadline(std::string* key, absl::Time deadline) override {
    return queue_->GetWithDeadline(key, deadline);
  }
  void Done(absl::string_view key) override { queue_->Done(key); }
  int Len() const override { return queue_->Len(); }
  bool ShuttingDown() const override { return queue_->ShuttingDown(); }

  void ShutDown() override {
    // Shut the queue first so nothing added from here on is accepted, then
    // stop the loop (a key it moves meanwhile is ignored by the queue).
    queue_->ShutDown();
    StopWaitingLoop();
  }

  void ShutDownWithDrain() override {
    StopWaitingLoop();
    queue_->ShutDownWithDrain();
  }

 private:
  void StopWaitingLoop() ABSL_LOCKS_EXCLUDED(mu_, stop_mu_) {
    // stop_mu_ serialises concurrent ShutDown calls so exactly one joins and
    // the others return only after the loop has exited.
    absl::MutexLock stop_lock(&stop_mu_);
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (waiting_loop_.joinable()) waiting_loop_.join();
  }

  bool WakeLoopLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ ||
           (!waiting_.empty() && waiting_.top().ready_at < armed_deadline_);
  }

  void WaitingLoop() {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      const absl::Time now = clock_->Now();
      while (!waiting_.empty() && waiting_.top().ready_at <= now) {
        // Lock order: mu_ before the queue's mutex; the queue never calls
        // back into this object.
        queue_->Add(waiting_.PopTop());
      }
      armed_deadline_ =
          waiting_.empty() ? absl::InfiniteFuture() : waiting_.top().ready_at;
      clock_->AwaitWithDeadline(
          &mu_, absl::Condition(this, &DelayingQueueImpl::WakeLoopLocked),
          armed_deadline_);
    }
  }

  Clock* const clock_;
  const std::shared_ptr<WorkQueueMetrics> metrics_;
  std::unique_ptr<WorkQueue> queue_;

  absl::Mutex stop_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  WaitingHeap waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Deadline the waiting loop is parked on; an AddAfter that is earlier wakes
  // it.
  absl::Time armed_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();

  // Started in the constructor after every other member; joined once by
  // StopWaitingLoop (under stop_mu_).
  std::thread waiting_loop_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace

std::unique_ptr<DelayingQueue> NewDelayingQueue(WorkQueueOptions options) {
  return std::make_unique<DelayingQueueImpl>(std::move(options));
}

}  // namespace informer

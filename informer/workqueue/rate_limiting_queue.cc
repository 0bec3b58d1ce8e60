#include "informer/workqueue/rate_limiting_queue.h"

#include <string>
#include <utility>

#include "glog/logging.h"

namespace informer {
namespace {

class RateLimitingQueueImpl final : public RateLimitingQueue {
 public:
  RateLimitingQueueImpl(std::unique_ptr<RateLimiter> limiter,
                        WorkQueueOptions options)
      : limiter_(std::move(limiter)),
        queue_(NewDelayingQueue(std::move(options))) {
    CHECK(limiter_ != nullptr) << "rate-limiting queue needs a limiter";
  }

  void AddRateLimited(absl::string_view key) override {
    queue_->AddAfter(key, limiter_->When(key));
  }
  void Forget(absl::string_view key) override { limiter_->Forget(key); }
  int NumRequeues(absl::string_view key) override {
    return limiter_->NumRequeues(key);
  }

  void AddAfter(absl::string_view key, absl::Duration delay) override {
    queue_->AddAfter(key, delay);
  }
  int NumWaiting() const override { return queue_->NumWaiting(); }
  void Add(absl::string_view key) override { queue_->Add(key); }
  bool Get(std::string* key) override { return queue_->Get(key); }
  GetResult GetWithDeadline(std::string* key, absl::Time deadline) override {
    return queue_->GetWithDeadline(key, deadline);
  }
  void Done(absl::string_view key) override { queue_->Done(key); }
  int Len() const override { return queue_->Len(); }
  void ShutDown() override { queue_->ShutDown(); }
  void ShutDownWithDrain() override { queue_->ShutDownWithDrain(); }
  bool ShuttingDown() const override { return queue_->ShuttingDown(); }

 private:
  // Declared before queue_ so it outlives the queue's background thread.
  const std::unique_ptr<RateLimiter> limiter_;
  const std::unique_ptr<DelayingQueue> queue_;
};

}  // namespace

std::unique_ptr<RateLimitingQueue> NewRateLimitingQueue(
    std::unique_ptr<RateLimiter> limiter, WorkQueueOptions options) {
  return std::make_unique<RateLimitingQueueImpl>(std::move(limiter),
                                                 std::move(options));
}

}  // namespace informer

#ifndef INFORMER_WORKQUEUE_RATE_LIMITING_QUEUE_H_
#define INFORMER_WORKQUEUE_RATE_LIMITING_QUEUE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "informer/workqueue/delaying_queue.h"
#include "informer/workqueue/rate_limiter.h"

namespace informer {

// RateLimitingQueue is a DelayingQueue whose retries are paced by a
// RateLimiter (client-go's RateLimitingInterface). The usual worker loop:
//
//   std::string key;
//   while (queue->Get(&key)) {
//     if (Sync(key).ok()) {
//       queue->Forget(key);          // reset the key's back-off
//     } else {
//       queue->AddRateLimited(key);  // retry later, backing off
//     }
//     queue->Done(key);
//   }
//
// Remember to Forget keys that succeeded, or their failure counts are kept
// forever.
//
// Thread-safety: every method may be called concurrently from any thread.
class RateLimitingQueue : public DelayingQueue {
 public:
  // AddAfter(key, limiter.When(key)): records an attempt for `key` and adds it
  // once the limiter allows.
  virtual void AddRateLimited(absl::string_view key) = 0;

  // Tells the limiter to stop tracking `key`. Only resets the back-off; the
  // key must still be passed to Done if a worker holds it.
  virtual void Forget(absl::string_view key) = 0;

  // How many times `key` was rate-limited since it was last forgotten.
  virtual int NumRequeues(absl::string_view key) = 0;
};

// Returns a new rate-limiting queue owning `limiter` (must not be null) and a
// fresh DelayingQueue built from `options`. For the client-go defaults pass
// DefaultControllerRateLimiter(options.clock).
std::unique_ptr<RateLimitingQueue> NewRateLimitingQueue(
    std::unique_ptr<RateLimiter> limiter, WorkQueueOptions options = {});

}  // namespace informer

#endif  // INFORMER_WORKQUEUE_RATE_LIMITING_QUEUE_H_

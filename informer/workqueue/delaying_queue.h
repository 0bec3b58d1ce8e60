#ifndef INFORMER_WORKQUEUE_DELAYING_QUEUE_H_
#define INFORMER_WORKQUEUE_DELAYING_QUEUE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/workqueue/workqueue.h"

namespace informer {

// DelayingQueue is a WorkQueue that can also add a key later, so failed keys
// are retried after a pause instead of in a hot loop (client-go's
// DelayingInterface).
//
// AddAfter(key, d):
//   - d <= 0 adds at once (plain Add).
//   - Otherwise the key waits in a min-heap ordered by ready time (ties in
//     the order they were added) and is Added when the queue's clock reaches
//     it. A key waits in the heap at most once: adding a waiting key again
//     moves its ready time earlier if the new one is earlier, never later.
//   - The wait is independent of the key being queued or processed: when it
//     fires it is a normal Add, with the usual dirty/processing rules.
// One background thread per queue moves ready keys; it waits on the injected
// clock, so with a FakeClock tests control exactly when keys become ready.
//
// Shutdown: ShutDown / ShutDownWithDrain stop the background thread and drop
// keys that are still waiting for their delay (as client-go does), then shut
// the underlying queue down. The destructor shuts down.
//
// Thread-safety: every method may be called concurrently from any thread.
class DelayingQueue : public WorkQueue {
 public:
  // Adds `key` once `delay` has passed on the queue's clock. No-op while
  // shutting down.
  virtual void AddAfter(absl::string_view key, absl::Duration delay) = 0;

  // Number of keys waiting for their delay (not yet added). Informational.
  virtual int NumWaiting() const = 0;
};

// Returns a new delaying queue, which owns a fresh WorkQueue built from the
// same options and its background thread.
std::unique_ptr<DelayingQueue> NewDelayingQueue(WorkQueueOptions options = {});

}  // namespace informer

#endif  // INFORMER_WORKQUEUE_DELAYING_QUEUE_H_

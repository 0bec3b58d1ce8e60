#ifndef INFORMER_WORKQUEUE_WORKQUEUE_H_
#define INFORMER_WORKQUEUE_WORKQUEUE_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"
#include "informer/workqueue/workqueue_metrics.h"

namespace informer {

// Construction options shared by every queue in this package.
struct WorkQueueOptions {
  // Used in logs. Metrics, if any, are named by their own object.
  std::string name;
  // Time source for deadlines, delays and rate limiters. Must outlive the
  // queue. Never null.
  Clock* clock = RealClock();
  // Receives the queue's events (see WorkQueueMetrics); null means none.
  std::shared_ptr<WorkQueueMetrics> metrics;
};

// WorkQueue is a FIFO of keys with client-go's `util/workqueue` guarantees,
// which is what makes "one worker per key" controllers simple:
//
//   - Fair: keys are handed out in the order they were added.
//   - Stingy: a key waits in the queue at most once, however often it is
//     added before a worker takes it (the "dirty" set).
//   - Exclusive: a key is handed to at most one worker at a time (the
//     "processing" set). A key added while a worker holds it is not handed
//     out again until that worker calls Done; then it is queued (at the back)
//     exactly once, so the latest state is always processed.
//
// Typical worker loop:
//
//   std::string key;
//   while (queue->Get(&key)) {
//     Process(key);
//     queue->Done(key);
//   }
//
// Shutdown (same as client-go): after ShutDown, Add is ignored and Get keeps
// returning the keys that are still queued (including keys re-queued by a
// Done); once the queue is empty Get returns false to every caller, blocked
// or not. ShutDownWithDrain additionally blocks until no key is being
// processed.
//
// Thread-safety: every method may be called concurrently from any thread.
// Every key a worker got must be passed to Done exactly once.
class WorkQueue {
 public:
  enum class GetResult {
    kKey,               // `*key` holds a key; call Done(key) when finished.
    kShutDown,          // The queue is shut down and empty.
    kDeadlineExceeded,  // Nothing arrived before the deadline.
  };

  virtual ~WorkQueue() = default;

  // Marks `key` as needing processing. No-op while shutting down or if `key`
  // is already waiting.
  virtual void Add(absl::string_view key) = 0;

  // Blocks until a key is available and stores it in `*key` (returns true),
  // or until the queue is shut down and empty (returns false).
  virtual bool Get(std::string* key) = 0;

  // Like Get, but gives up at `deadline` on the queue's clock. Lets a caller
  // that must also watch something else (e.g. a cancelled stream) poll.
  virtual GetResult GetWithDeadline(std::string* key, absl::Time deadline) = 0;

  // Marks `key` (obtained from Get) as finished. If it was added again while
  // processing, it is queued again now.
  virtual void Done(absl::string_view key) = 0;

  // Number of keys waiting to be handed out (excludes keys being processed,
  // even if they were re-added). Informational only.
  virtual int Len() const = 0;

  // Ignores further adds and wakes every blocked Get; see class comment.
  // Idempotent.
  virtual void ShutDown() = 0;

  // ShutDown, then blocks until every key being processed is Done. Workers
  // must keep calling Done or this blocks forever; a concurrent ShutDown
  // releases it early (as in client-go).
  virtual void ShutDownWithDrain() = 0;

  virtual bool ShuttingDown() const = 0;
};

// Returns a new work queue.
std::unique_ptr<WorkQueue> NewWorkQueue(WorkQueueOptions options = {});

}  // namespace informer

#endif  // INFORMER_WORKQUEUE_WORKQUEUE_H_

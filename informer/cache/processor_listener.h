#ifndef INFORMER_CACHE_PROCESSOR_LISTENER_H_
#define INFORMER_CACHE_PROCESSOR_LISTENER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/event_handler.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"

namespace informer {

// One notification for a handler.
struct Notification {
  enum class Type { kAdd, kUpdate, kDelete };
  Type type = Type::kAdd;
  std::string key;                   // cache key of the object
  ObjectPtr old_obj;                 // kUpdate only
  ObjectPtr obj;                     // the new (or deleted) state
  bool is_in_initial_list = false;   // kAdd only
  bool final_state_unknown = false;  // kDelete only
};

// ProcessorListener feeds one handler (client-go's processorListener).
//
// Two modes, chosen at construction:
// - Queued (the default): the handler runs on the listener's own thread,
//   fed by a pending queue, so a slow handler never delays other handlers or
//   the informer.
// - Inline (non-blocking): Add() calls the handler directly on the caller's
//   thread. For handlers that never block, e.g. the gRPC layer's fan-out, so
//   thousands of streams never mean thousands of handler threads. Inline
//   handlers see every notification, never coalesced.
//
// Differs from client-go on purpose (queued mode): client-go never merges
// notifications; its pendingNotifications buffer grows without bound, so a
// slow handler under a high event rate can run the process out of memory.
// Here, when the queue holds more than `max_pending` notifications, it is
// compacted per object key (CoalesceInto). What the handler is told then
// still makes sense against what it was told before, and nothing it would
// need to know is lost:
//   - a delete is never dropped for an object the handler knows: if that
//     object is deleted, recreated and deleted again while queued, the
//     handler gets OnDelete of the object it knew; if a queued update
//     replaced it by a new object (another UID) that is then deleted, the
//     handler gets OnDelete of the object it knew, in the last state it was
//     told, with final_state_unknown set;
//   - an object the handler has not heard of whose Add and Delete are both
//     queued vanishes entirely: the Add and the Delete go together, never
//     one without the other;
//   - consecutive changes merge into one: Add+Update -> Add of the latest
//     state, Update+Update -> one Update from the oldest undelivered old
//     state to the newest, Update+Delete -> Delete; Delete then Add of a new
//     object stays Delete, Add;
//   - the events of one key are never reordered; events of different keys
//     may be (their relative order, which client-go keeps, is not kept).
// The handler always converges on the latest state of every object, and the
// queue holds at most about two entries per object, whatever the event rate.
//
// Per-object order is preserved in both modes.
//
// Thread-safety: Add/HasSynced/Stats are safe from any thread. Handler calls
// of one listener never overlap. Start() once; Stop() joins the thread and
// drops what is pending. Owned by the SharedIndexInformer.
class ProcessorListener {
 public:
  struct Options {
    // Queued mode: the pending-queue size at which coalescing starts.
    size_t max_pending = 1024;
    bool inline_handler = false;
    // 0 = no periodic resync for this handler.
    absl::Duration resync_period = absl::ZeroDuration();
  };

  ProcessorListener(ResourceEventHandler* handler, Options options,
                    Clock* clock);
  ~ProcessorListener();

  ProcessorListener(const ProcessorListener&) = delete;
  ProcessorListener& operator=(const ProcessorListener&) = delete;

  void Start();
  void Stop();

  void Add(Notification n);

  // Resync scheduling (client-go's shouldResync/determineNextResync).
  // True when this handler's resync period has elapsed at `now`.
  bool ShouldResync(absl::Time now) const;
  void DetermineNextResync(absl::Time now);
  absl::Duration resync_period() const { return options_.resync_period; }

  // True when every notification marked is_in_initial_list that was handed
  // to this listener has been delivered to the handler. A handler
  // registration has synced when its informer has and this holds.
  bool InitialListDelivered() const;

  // Blocks until the pending queue is empty and no handler call is running
  // (tests, orderly shutdown).
  void WaitIdle() const;

  struct Stats {
    size_t pending = 0;
    uint64_t delivered = 0;
    uint64_t coalesced = 0;  // notifications merged away
  };
  Stats GetStats() const;

 private:
  void Run();
  void Deliver(const Notification& n);
  void CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t CountInitialLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ResourceEventHandler* const handler_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::deque<Notification> pending_ ABSL_GUARDED_BY(mu_);
  // Coalescing starts again only when the queue has doubled since the last
  // compaction, so compaction stays amortised O(1) per notification even
  // when more distinct objects than max_pending are pending.
  size_t compact_at_ ABSL_GUARDED_BY(mu_);
  size_t initial_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool inflight_initial_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t coalesced_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  // Inline mode: serialises handler calls.
  absl::Mutex inline_mu_;
};

// Merges `next` into the pending notifications of the same object key
// (`tail` holds at most two: an optional Delete followed by an optional
// Add/Update), by the rules in the ProcessorListener comment. Assumes the
// informer's consistent stream for one key: Add only when absent, Update and
// Delete only when present. Exposed for tests.
void CoalesceInto(std::deque<Notification>* tail, Notification next);

}  // namespace informer

#endif  // INFORMER_CACHE_PROCESSOR_LISTENER_H_

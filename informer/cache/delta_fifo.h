#ifndef INFORMER_CACHE_DELTA_FIFO_H_
#define INFORMER_CACHE_DELTA_FIFO_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "informer/cache/store.h"
#include "informer/object/object.h"

namespace informer {

// What happened to an object (client-go's DeltaType).
enum class DeltaType {
  kAdded,
  kUpdated,
  kDeleted,
  // A relist (Replace) saw the object; it may or may not have changed.
  kReplaced,
  // A periodic resync re-delivered the cached object (also used for Replace
  // when DeltaFIFO::Options::emit_delta_type_replaced is false).
  kSync,
};

// "Added", "Updated", "Deleted", "Replaced", "Sync" (client-go's spelling).
absl::string_view DeltaTypeName(DeltaType type);

// One change to one object: the object's state after the change, or for a
// deletion its last state before it.
struct Delta {
  DeltaType type = DeltaType::kAdded;
  // Never null in a Delta produced by DeltaFIFO.
  ObjectPtr object;
  // True for client-go's DeletedFinalStateUnknown tombstone: a kDeleted that
  // a relist inferred because the object vanished while no watch was open.
  // `object` is then the last state we knew, which may be stale.
  bool final_state_unknown = false;
};

// The changes queued for one key, oldest first. Never empty inside the FIFO.
// Usually one (a list's item, or an event popped before the next arrives):
// kept inline in the FIFO's table, so queuing an object allocates nothing
// per key, and a drained list leaves no per-object holes in the heap among
// the objects it cached.
using Deltas = absl::InlinedVector<Delta, 1>;

// The key of a delta's object ("namespace/name" or "name"); for a tombstone
// this is the key it was recorded under, which is the object's key too.
std::string KeyOf(const Delta& delta);
// The key of the newest delta; empty string for empty `deltas`.
std::string KeyOf(const Deltas& deltas);

// Oldest/newest delta, or nullptr for empty `deltas`.
const Delta* Oldest(const Deltas& deltas);
const Delta* Newest(const Deltas& deltas);

// The FIFO's dedup rule, applied after each append: if the two newest deltas
// are both kDeleted they collapse into one, keeping the one that is not a
// tombstone (it carries the real final state), or the newer of two
// tombstones. Exposed for tests.
void DedupDeltas(Deltas& deltas);

// A status a Pop process function returns to ask for its Deltas to be put
// back (client-go's ErrRequeue). `cause` is what Pop then reports; an OK
// cause is replaced by an Aborted status, since an OK status cannot carry the
// requeue marker (a payload).
absl::Status RequeueStatus(absl::Status cause);
// True for a status made by RequeueStatus.
bool IsRequeue(const absl::Status& status);

// True for the status Pop returns once the FIFO is closed and drained
// (client-go's ErrFIFOClosed): absl::CancelledError("DeltaFIFO closed").
bool IsFifoClosed(const absl::Status& status);

// DeltaFIFO is client-go's DeltaFIFO: the queue between a Reflector
// (producer: Add/Update/Delete from watch events, Replace from a relist,
// Resync on a timer) and the informer's processing loop (consumer: Pop).
//
// Semantics: per-key coalescing. `items_` maps a key to the Deltas that
// happened to it since it was last popped; `queue_` holds each key with
// queued Deltas exactly once, in the order the key FIRST became pending. Pop
// hands over all of a key's Deltas at once, so a consumer sees everything
// that happened to an object since it last processed it.
//  - Per-object order is always preserved: a key's Deltas are kept oldest
//    first, handed out together, and processed under the lock, so a later
//    Pop of the same key always sees strictly newer deltas (a requeue puts
//    the Deltas back before any newer event can be queued).
//  - Order ACROSS keys is the order keys became pending, not the order of
//    the events: if A became pending before B, a later update to A is still
//    delivered (with A's other deltas) before B's earlier one.
//  - The queue never holds more entries than there are distinct pending
//    keys, however fast events arrive. Deltas within a key are not merged
//    (only consecutive deletions are, as in client-go), so a key's list grows
//    with that key's own events while the consumer is stalled; handlers still
//    see every intermediate state.
// Recent client-go versions let informers use RealFIFO (feature gate
// InOrderInformers), which keeps one entry per event and so preserves
// cross-key order at the price of one queue entry (and one consumer call)
// per event. We keep DeltaFIFO's per-key semantics: nothing in an informer
// needs cross-key order (handlers are per object), the queue length stays
// bounded by the number of objects, and a burst of events for one object is
// applied to the indexer in one Pop.
//
// Consecutive deletions of one key collapse into one (dedup): the delete that
// is not a tombstone is kept (it carries the real final state); of two
// tombstones the newer is kept.
//
// knownObjects (Options::known_objects, usually the informer's Indexer) is
// the consumer's view of which objects exist. It changes what Delete, Replace
// and Resync do: Delete of a key neither known nor queued is dropped (it was
// already reported, e.g. by a relist tombstone); Replace emits tombstones for
// known keys that vanished; Resync re-delivers known objects.
//
// Pop calls the process function WHILE HOLDING the FIFO's lock, as client-go
// does. This makes "remove from the FIFO + apply to knownObjects" atomic with
// respect to Replace and Resync, which both read knownObjects: were the lock
// released in between, a Resync could find the key neither queued nor yet
// updated in the store and queue a Sync carrying the PREVIOUS object (a
// regression delivered after the newer update), and a Replace could miss a
// just-popped Add that is not yet in the store and leak it forever. The price
// is that producers wait while process runs, so process must be quick and
// non-blocking (update the indexer, enqueue notifications to handler queues)
// and must NOT call any method of this DeltaFIFO (the lock is not reentrant).
// Lock order: the FIFO's lock is taken before knownObjects' lock (Replace and
// Resync call into knownObjects with it held); never call into the FIFO while
// holding a lock knownObjects uses.
//
// Close: as in client-go, closing does not discard queued items. Pop keeps
// returning queued Deltas and reports the closed error only once the queue is
// empty (and then immediately, without blocking), so a consumer loop that
// stops on IsFifoClosed drains what was queued. Producers may keep adding
// after Close (client-go does not gate them either).
//
// Thread-safety: every method may be called from any thread. Several threads
// may Pop; since process runs under the lock, their process calls serialise,
// so one key's Deltas are never processed by two threads at once. The same
// holds for a producer running Options::process_when_idle.
// Ownership: `known_objects` is not owned and must outlive the FIFO.
class DeltaFIFO {
 public:
  // The consumer's callback for Pop. `deltas` is everything queued for one
  // key, oldest first. `is_in_initial_list` is true while the items of the
  // first Replace (the initial list) are still being popped.
  using ProcessFn = std::function<absl::Status(const Deltas& deltas,
                                               bool is_in_initial_list)>;

  struct Options {
    // The consumer's store; may be null (Replace then only infers deletions
    // for keys that are still queued, and Resync does nothing).
    KeyListerGetter* known_objects = nullptr;
    // True: Replace queues kReplaced deltas. False: kSync, the behaviour of
    // client-go before kReplaced existed (consumers then cannot tell a
    // relist from a periodic resync).
    bool emit_delta_type_replaced = true;
    // Optional: lets the producer's thread do the consumer's work when the
    // consumer has nothing to do. An Add/Update/Delete that finds the queue
    // empty runs this on its key's deltas at once, inside the same critical
    // section, exactly as a Pop would have right after it (nothing else is
    // queued, and a Pop processes under the lock, so none is mid-way), and
    // the consumer is not woken for it. Saves a thread wake-up per event on
    // a quiet stream; under a backlog the consumer's Pops do the work and
    // the producer only queues, so the two threads still overlap. Same
    // contract as a Pop's process function (quick, non-blocking, no calls
    // into this FIFO); its status is not the producer's (the Add itself
    // succeeded): a RequeueStatus puts the deltas back for Pop, as Pop does,
    // and any other error is for the function to report. Never used once
    // the FIFO is closed (the consumer drains it).
    ProcessFn process_when_idle;
  };

  explicit DeltaFIFO(Options options);
  DeltaFIFO(const DeltaFIFO&) = delete;
  DeltaFIFO& operator=(const DeltaFIFO&) = delete;
  ~DeltaFIFO() = default;

  // Queue a kAdded / kUpdated / kDeleted delta for the object's key.
  // InvalidArgument for a null object. Delete is dropped (returns OK) when
  // the key is neither queued nor, with known_objects, known: it was
  // presumably reported already by a relist.
  absl::Status Add(ObjectPtr obj) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Update(ObjectPtr obj) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Delete(ObjectPtr obj) ABSL_LOCKS_EXCLUDED(mu_);

  // Queue `deltas` under `key` unless the key already has queued deltas (a
  // newer event arrived meanwhile; its deltas win). Used to requeue what Pop
  // handed out. InvalidArgument for empty deltas or an empty key.
  absl::Status AddIfNotPresent(absl::string_view key, Deltas deltas)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A relist: atomically queues kReplaced (or kSync) for every object in
  // `list`, then a kDeleted tombstone (final_state_unknown) for every key
  // that is pending or known but absent from `list`. The tombstone carries
  // the newest queued object when the key has queued deltas (the newest
  // state we have; client-go since v1.27, kubernetes#115620: before, given
  // known_objects, used the store's possibly older object and missed keys
  // queued but not yet stored), else known_objects' object; a known key whose
  // object cannot be fetched gets no tombstone (logged). The first Replace
  // defines the initial list: its size plus the tombstones it queued must be
  // popped before HasSynced. `resource_version` is unused, as in client-go.
  // InvalidArgument (and nothing queued) if `list` holds a null object.
  absl::Status Replace(const std::vector<ObjectPtr>& list,
                       absl::string_view resource_version)
      ABSL_LOCKS_EXCLUDED(mu_);

  // What ReplaceReconciled did with a list.
  struct ReconcileCounts {
    // Items known_objects holds as they are: handed to `unchanged`.
    size_t unchanged = 0;
    // Items queued (kReplaced): new, changed, or with deltas queued.
    size_t queued = 0;
    // Of those, items queued after a tombstone: their key's newest state
    // has another uid (the name now belongs to another object).
    size_t recreated = 0;
    // Tombstones for keys known or queued but absent from the list.
    size_t vanished = 0;
  };
  using UnchangedFn =
      absl::FunctionRef<void(const std::vector<ObjectPtr>& unchanged)>;

  // A relist already compared with known_objects (see ListReconciler):
  // `list` is the whole list in list order, where an item known_objects
  // holds unchanged (same uid and resourceVersion) is known_objects' own
  // object. Atomically, what Replace(list) would queue, except:
  //  - an item that IS known_objects' object for its key, with no deltas
  //    queued for the key, queues nothing: it is handed to `unchanged`
  //    (all of them, in list order, once, under the FIFO's lock where a
  //    Pop's process function runs, so the consumer can do there what
  //    popping their kReplaced deltas would have done, minus storing an
  //    object the store already holds);
  //  - an item whose uid differs from its key's newest state (queued,
  //    else known) is queued after a tombstone (final_state_unknown) for
  //    that state: a delete and an add, not an update, since the name
  //    now belongs to another object.
  // Vanished keys get tombstones exactly as in Replace; as a first
  // Replace, it defines the initial list (what it queued). `unchanged`
  // must not call into this FIFO. FailedPrecondition without
  // known_objects; InvalidArgument (nothing queued) for a null item.
  absl::StatusOr<ReconcileCounts> ReplaceReconciled(
      const std::vector<ObjectPtr>& list, UnchangedFn unchanged)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A Replace whose result the consumer has already built out of sight (a
  // staged initial list): when nothing is queued, calls `apply` under the
  // FIFO's lock, where a Pop's process function would run, so that it can
  // publish the list to the consumer's store and handlers in one step, as
  // every pop of a Replace would have; it returns whether it did. Its
  // argument says whether this is the initial list (no Replace before,
  // the pops' is_in_initial_list). On true, `resource_version` becomes the
  // AppliedResourceVersion() at once, in the same critical section (as
  // NoteResourceVersion would with nothing queued), and
  // the list counts as popped: a first Replace this way makes HasSynced
  // true at once. Returns false without calling `apply` when keys are
  // queued (their deltas must reach the store first; the caller then
  // Replaces as usual), and passes on `apply`'s false. Like a process
  // function, `apply` must not call into this FIFO.
  bool ReplaceApplied(absl::string_view resource_version,
                      absl::FunctionRef<bool(bool is_initial_list)> apply)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Queues kSync for every known_objects key that has no queued deltas. A
  // key with queued deltas is skipped: its queued event is newer than the
  // store's object and a Sync after it would deliver the older object. No-op
  // without known_objects.
  absl::Status Resync() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until a key is queued or the FIFO is closed and empty. Removes the
  // head key with its Deltas and calls `process` on them under the lock (see
  // the class comment). If process returns a RequeueStatus, the Deltas are
  // put back with AddIfNotPresent and Pop returns the cause; otherwise Pop
  // returns process's status. Returns the closed error (IsFifoClosed) once
  // closed and empty.
  absl::Status Pop(const ProcessFn& process) ABSL_LOCKS_EXCLUDED(mu_);

  // The producer's word that what it queued so far brings the consumer's
  // store up to `resource_version` (the reflector calls it after every
  // event, bookmark and Replace it handed over). The RV becomes the
  // AppliedResourceVersion() once every delta queued before this call has
  // been processed by Pop (at once when nothing is queued). A note before
  // the applied one (the server went back in time) clears that at once.
  void NoteResourceVersion(absl::string_view resource_version)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The newest noted resourceVersion whose deltas have all been popped and
  // processed: the state the consumer's store (an informer's indexer) is
  // known to reflect. "" before any. It may lag while the queue never
  // empties (it advances whenever the queue drains), never runs ahead.
  // Safe to call from a process function.
  std::string AppliedResourceVersion() const ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes blocked Pops; see the class comment for what closing means.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  bool IsClosed() const ABSL_LOCKS_EXCLUDED(mu_);

  // True once Add/Update/Delete/AddIfNotPresent was called before any
  // Replace, once everything the first Replace queued has been popped, or
  // once a first ReplaceApplied applied its list.
  bool HasSynced() const ABSL_LOCKS_EXCLUDED(mu_);

  // Number of keys queued.
  size_t Len() const ABSL_LOCKS_EXCLUDED(mu_);
  // The queued keys in pop order.
  std::vector<std::string> ListKeys() const ABSL_LOCKS_EXCLUDED(mu_);
  // The newest object of every queued key, in pop order.
  std::vector<ObjectPtr> List() const ABSL_LOCKS_EXCLUDED(mu_);
  // A copy of the Deltas queued for the object's key / for `key`; nullopt if
  // none are queued.
  absl::optional<Deltas> Get(const ObjectPtr& obj) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::optional<Deltas> GetByKey(absl::string_view key) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Sets applied_rv_ to noted_rv_ (the queue is empty).
  void MarkAppliedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With the queue empty: frees the table a large batch (a list) left in
  // items_.
  void ReleaseIdleCapacityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a delta to `key`'s Deltas (deduplicating deletes) and enqueues
  // the key if it had none. A producer's delta: `was_idle` (the queue was
  // empty before it) lets process_when_idle take it at once.
  void QueueActionLocked(std::string key, Delta delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueProducedLocked(std::string key, Delta delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the head key and runs `process` on its deltas (requeueing them
  // on a RequeueStatus). nullopt when the head had no deltas (skipped).
  absl::optional<absl::Status> PopHeadLocked(const ProcessFn& process)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddIfNotPresentLocked(std::string key, Deltas deltas)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a tombstone for every queued or known key that `listed` says
  // is not in a relist (with known_objects); returns how many.
  size_t QueueVanishedLocked(
      absl::FunctionRef<bool(absl::string_view key)> listed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pop's wait condition: something to pop, or closed.
  bool PopReadyLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || closed_;
  }
  bool HasSyncedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return populated_ && initial_population_count_ == 0;
  }

  KeyListerGetter* const known_objects_;
  const bool emit_delta_type_replaced_;
  const ProcessFn process_when_idle_;

  mutable absl::Mutex mu_;
  // key -> Deltas (never empty). A key is in items_ iff it is in queue_.
  absl::flat_hash_map<std::string, Deltas> items_ ABSL_GUARDED_BY(mu_);
  // Pop order; no duplicates.
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // Set by the first Replace, or by Add/Update/Delete/AddIfNotPresent if
  // they come first.
  bool populated_ ABSL_GUARDED_BY(mu_) = false;
  // Pops still owed to the first Replace before HasSynced.
  size_t initial_population_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // See NoteResourceVersion: the last RV noted, and the last one whose
  // deltas had all been processed when the queue was (or became) empty.
  std::string noted_rv_ ABSL_GUARDED_BY(mu_);
  // Its own lock, so that AppliedResourceVersion() may be called from a
  // process function (which runs under mu_). Taken after mu_.
  mutable absl::Mutex applied_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::string applied_rv_ ABSL_GUARDED_BY(applied_mu_);
};

}  // namespace informer

#endif  // INFORMER_CACHE_DELTA_FIFO_H_

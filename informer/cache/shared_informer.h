#ifndef INFORMER_CACHE_SHARED_INFORMER_H_
#define INFORMER_CACHE_SHARED_INFORMER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"
#include "informer/cache/indexer.h"
#include "informer/cache/list_stage.h"
#include "informer/cache/processor_listener.h"
#include "informer/cache/reflector.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/util/clock.h"

namespace informer {

class SharedIndexInformer;

// How a handler wants to be called.
struct HandlerOptions {
  // Periodic resync: OnUpdate(obj, obj) for every cached object at this
  // period. Unset = the informer's default_resync_period (client-go's
  // AddEventHandler); set = client-go's AddEventHandlerWithResyncPeriod, so
  // 0 means no resync for this handler, whatever the informer's default.
  // Periods below 1 s are raised to 1 s; after Start, periods below the
  // informer's resync check period are raised to it (as client-go does).
  absl::optional<absl::Duration> resync_period;
  // Called inline on the informer's distribution thread instead of on a
  // thread of its own (for an initial list staged while it downloaded, the
  // reflector's thread, which commits it: see ListStage). The handler must
  // never block and must not call AddEventHandler/RemoveEventHandler; reading
  // the indexer is fine.
  bool non_blocking = false;
  // Queued handlers: pending size at which notifications start coalescing
  // per object (see ProcessorListener).
  size_t max_pending = 1024;
};

// A handler's registration (client-go's ResourceEventHandlerRegistration).
// Owned by the informer; valid until RemoveEventHandler or the informer's
// destruction.
class HandlerRegistration {
 public:
  // True when the informer has synced and this handler has been handed every
  // object of the initial state (including the synthetic adds a handler
  // registered after start receives).
  bool HasSynced() const;
  ProcessorListener::Stats GetStats() const { return listener_->GetStats(); }
  // Blocks until this handler has processed everything queued for it.
  void WaitIdle() const { listener_->WaitIdle(); }

 private:
  friend class SharedIndexInformer;
  HandlerRegistration(const SharedIndexInformer* informer,
                      std::unique_ptr<ProcessorListener> listener)
      : informer_(informer), listener_(std::move(listener)) {}

  const SharedIndexInformer* const informer_;
  const std::unique_ptr<ProcessorListener> listener_;
};

// SharedIndexInformer: one reflector, one DeltaFIFO, one indexed cache, and
// any number of handlers (client-go's sharedIndexInformer + controller +
// sharedProcessor).
//
// Data flow: Reflector -> DeltaFIFO -> processing thread (HandleDeltas:
// update the indexer, then distribute notifications) -> each handler's
// ProcessorListener. A watch event that finds the FIFO empty is processed
// by the reflector's thread at once, as the processing thread would have
// (see ProcessLoop), so handlers and inline listeners run on either. The
// indexer is always updated before handlers hear of a change, so a handler that
// reads the cache sees at least that state.
//
// Ordering: each handler sees the events of one object in the order the
// informer applied them. Sync notifications (periodic resync, or a relist
// that found an object unchanged) go only to handlers whose resync period is
// due.
//
// Thread-safety: all methods are thread-safe. Start() once; Stop() (also
// run by the destructor) stops the reflector, drains nothing, joins every
// thread. The ListerWatcher and Clock are not owned and must outlive it.
class SharedIndexInformer {
 public:
  struct Options {
    std::string name = "informer";
    // Extra indexes; the namespace index (kNamespaceIndex) is always present.
    Indexers indexers;
    absl::Duration default_resync_period = absl::ZeroDuration();
    // Passed to the reflector (its name, resync and handler hooks are set by
    // the informer).
    Reflector::Options reflector;
    // A relist tells handlers of every object it found unchanged, as
    // client-go's does: an update with the cached object as old and new,
    // delivered as a sync (to the handlers whose resync is due, see
    // Ordering). false: handlers hear of a relist only what changed.
    // Either way the cache keeps its objects (see ListReconciler).
    bool relist_syncs_unchanged = true;
    // Called once per relist (a list into a populated cache, which the
    // ListReconciler compares with it), once its changes are in the
    // indexer and the handlers' queues: the FIFO has applied the list's
    // resourceVersion. Not called for the initial list, nor for a list
    // that failed or was refused. Why: the replaced objects are released
    // then (by the cache; a handler may hold some longer), a moment for
    // the owner to act on memory (the sidecar returns freed heap to the
    // kernel). Runs on the informer's processing thread or the
    // reflector's, with no lock of the informer held; it must not block
    // for long or call Stop.
    std::function<void()> on_relist_applied;
  };
  using TransformFunc = std::function<absl::StatusOr<ObjectPtr>(ObjectPtr)>;

  SharedIndexInformer(ListerWatcher* lw, Options options,
                      Clock* clock = RealClock());
  ~SharedIndexInformer();

  SharedIndexInformer(const SharedIndexInformer&) = delete;
  SharedIndexInformer& operator=(const SharedIndexInformer&) = delete;

  // Registers a handler (not owned; must outlive its registration). After
  // Start, the handler first receives an add (is_in_initial_list = true) for
  // every cached object, then live events.
  absl::StatusOr<HandlerRegistration*> AddEventHandler(
      ResourceEventHandler* handler, HandlerOptions options = {});
  // client-go's AddEventHandlerWithResyncPeriod: AddEventHandler with
  // options.resync_period = `resync_period`; 0 = no resync for this handler.
  absl::StatusOr<HandlerRegistration*> AddEventHandlerWithResyncPeriod(
      ResourceEventHandler* handler, absl::Duration resync_period);
  absl::Status RemoveEventHandler(HandlerRegistration* registration);

  // Before Start only (FailedPrecondition after).
  absl::Status SetTransform(TransformFunc transform);
  absl::Status SetWatchErrorHandler(
      std::function<void(const absl::Status&)> handler);
  // Any time: existing objects are indexed under the store's lock.
  absl::Status AddIndexers(const Indexers& indexers);

  // Before Start only (FailedPrecondition after): start from `objects`, the
  // state at `resource_version` (a warm restart from a snapshot), instead
  // of an initial list. Start puts them in the indexer (indexes built) and
  // hands every handler registered by then an add per object
  // (is_in_initial_list) before the reflector runs; the reflector then
  // resumes: it watches from `resource_version` (see
  // Reflector::Options::resume_resource_version). The informer reports
  // synced once it has caught up with the server: it has applied a watch
  // event or bookmark at or past the server's current resourceVersion
  // (read when it resumed), or a relist when the server no longer had
  // `resource_version` (410), which the ListReconciler turns into only
  // what changed. Until then, a watch event the cache already reflects
  // (the cached object's resourceVersion is not older, or a deletion of
  // an absent object) is dropped: a snapshot may be slightly ahead of its
  // resourceVersion. InvalidArgument for an empty resource_version or a
  // null object.
  absl::Status SetInitialState(std::vector<ObjectPtr> objects,
                               std::string resource_version);
  // A warm restart whose snapshot is still loading, before Start (instead
  // of SetInitialState first): the state to come is at `resource_version`
  // (a snapshot's header says so before its objects are read). The
  // reflector starts at once: it reads the server's current
  // resourceVersion and opens the watch from `resource_version`, so that
  // the catch-up (kube-apiserver's first bookmark comes about a second
  // after a watch starts) runs while the objects load; it applies nothing
  // until the state is in place (Reflector::Options::resume_state_pending).
  // Then exactly one of, before or after Start:
  //  - SetInitialState(objects, resource_version): the objects are
  //    installed (at Start, or at that call if later) as SetInitialState
  //    says, and only then the watch's events are applied, in order;
  //  - AbandonResume (the load failed): the watch is dropped unread, and
  //    the informer lists as a cold start does.
  // Nothing reaches the cache or the handlers before Start. Handlers added
  // after BeginResume get periodic resync only at the period fixed then
  // (the default_resync_period, or that of handlers added before).
  // InvalidArgument for an empty resource_version; FailedPrecondition
  // after Start, SetInitialState, a BeginResume or Stop.
  absl::Status BeginResume(std::string resource_version);
  // See BeginResume (FailedPrecondition without one, or once its state
  // was given); `why` is logged.
  absl::Status AbandonResume(const absl::Status& why);
  // The cache's objects and a resourceVersion they reflect at least (they
  // may include a few events past it, never miss one before it): what a
  // snapshot stores. The pointers are copied under the store's lock; the
  // objects are immutable and shared. "" before the first list is applied.
  struct StateCopy {
    std::vector<ObjectPtr> objects;
    std::string resource_version;
  };
  StateCopy CopyState() const;
  // True when this informer started from SetInitialState's state and has
  // not (yet) listed: what it serves came from the resumed watch.
  bool Resumed() const;

  // Starts the reflector, the processing thread and the handlers' threads.
  // FailedPrecondition if already started.
  absl::Status Start();
  void Stop();

  // True once the first list has been applied to the cache and delivered to
  // every handler's queue. Safe to call from any thread, including from a
  // non-blocking handler.
  bool HasSynced() const;
  // Waits (on the informer's clock) until synced, stopped or `timeout`.
  bool WaitForSync(absl::Duration timeout) const;
  // True once Stop() was called (an informer stopped before it synced never
  // will).
  bool IsStopped() const;

  const Indexer& GetIndexer() const { return indexer_; }
  // The resourceVersion the reflector last received (client-go's
  // LastSyncResourceVersion): events up to it may still be queued, not yet
  // in the indexer.
  std::string LastSyncResourceVersion() const;
  // The resourceVersion the indexer is known to reflect: every event,
  // relist and bookmark up to it has been applied to the indexer (and
  // handed to the handlers' queues). What a snapshot of the indexer or a
  // bookmark to clients may claim. "" before the first list is applied.
  std::string LastAppliedResourceVersion() const;
  Reflector::Counters GetReflectorCounters() const;
  absl::Status LastError() const;
  const std::string& name() const { return options_.name; }

 private:
  struct ListenerEntry;

  absl::Status HandleDeltas(const Deltas& deltas, bool is_in_initial_list);
  // A stage for every list: while the cache is empty (the initial list)
  // an IndexerListStage, else a ListReconciler.
  std::unique_ptr<ListStage> BeginListStage();
  // A reconciled relist's commit: DeltaFIFO::ReplaceReconciled, whose
  // unchanged objects go to DistributeUnchanged.
  bool CommitReconciledList(const std::vector<ObjectPtr>& reconciled);
  // What popping a relist's kReplaced delta of an unchanged object would
  // have told handlers (see Options::relist_syncs_unchanged).
  void DistributeUnchanged(const std::vector<ObjectPtr>& unchanged);
  // A staged list's commit: with nothing queued in the FIFO and the cache
  // still empty, adopts `staged` as the cache and hands every handler an
  // add per item, in list order, as the pops would have.
  bool CommitStagedList(Indexer* staged, const std::vector<ObjectPtr>& items,
                        absl::string_view resource_version);
  void DistributeLocked(const Notification& n, bool is_sync)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_mu_);
  bool ShouldResync();
  void ProcessLoop();
  void RefreshSynced();
  // Reflector::Options::on_replaced: a list was applied.
  void OnRelisted();
  // Calls Options::on_relist_applied if a committed relist's
  // resourceVersion has been applied (once per relist).
  void MaybeRelistApplied();
  // Records that the initial list has been popped (logged once).
  void MarkSynced();
  // DeltaFIFO::Options::process_when_idle: HandleDeltas on the reflector's
  // thread, for a watch event that found the FIFO empty.
  absl::Status ProcessWhenIdle(const Deltas& deltas, bool is_in_initial_list);
  bool SyncedOrStoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_) {
    return synced_ || stopped_;
  }
  // The reflector's options as Start (or BeginResume) finds them.
  Reflector::Options ReflectorOptionsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_mu_);
  // Points the reflector's options at the resume from initial_rv_.
  void ResumeOptions(Reflector::Options* ro)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_mu_);
  // SetInitialState's state into the indexer (indexes built), an add per
  // object to the handlers, and the informer awaiting its catch-up.
  void InstallInitialStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_mu_);
  // After BeginResume: once started and the state decided (loaded or
  // abandoned), whether it is usable, for the one caller that then calls
  // FinishResume (kDone from here); nullopt before that.
  std::optional<bool> TakeResumeDecisionLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(handle_mu_);
  // Installs the loaded state (if usable) and applies its resourceVersion
  // to the FIFO in one step, then tells the reflector. Out of handle_mu_:
  // the FIFO's lock comes first.
  void FinishResume(bool usable) ABSL_LOCKS_EXCLUDED(handle_mu_, reflector_mu_);
  // The reflector's word that the server's current resourceVersion `rv`
  // has been handed to the FIFO (see
  // Reflector::Options::on_caught_up).
  void OnCaughtUp(const std::string& rv);
  // While catching up: `d` is a watch delta the cache already reflects.
  bool AlreadyReflected(const Delta& d, const ObjectPtr& cached) const;

  ListerWatcher* const lw_;
  const Options options_;
  Clock* const clock_;
  Indexer indexer_;
  DeltaFIFO fifo_;

  // Serialises HandleDeltas with handler (de)registration, so a new handler
  // gets exactly the cache state plus every later event.
  mutable absl::Mutex handle_mu_;
  std::list<std::unique_ptr<HandlerRegistration>> registrations_
      ABSL_GUARDED_BY(handle_mu_);
  absl::flat_hash_set<ProcessorListener*> syncing_ ABSL_GUARDED_BY(handle_mu_);
  absl::Duration resync_check_period_ ABSL_GUARDED_BY(handle_mu_);
  bool started_ ABSL_GUARDED_BY(handle_mu_) = false;
  TransformFunc transform_ ABSL_GUARDED_BY(handle_mu_);
  std::function<void(const absl::Status&)> watch_error_handler_
      ABSL_GUARDED_BY(handle_mu_);

  mutable absl::Mutex sync_mu_;
  bool synced_ ABSL_GUARDED_BY(sync_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(sync_mu_) = false;
  // A resumed informer not yet caught up: synced_ waits for OnCaughtUp
  // (or a relist) instead of the FIFO's first events.
  bool awaiting_catch_up_ ABSL_GUARDED_BY(sync_mu_) = false;
  // The RV to have applied before it is caught up ("" until the reflector
  // read it).
  std::string catch_up_rv_ ABSL_GUARDED_BY(sync_mu_);
  bool resumed_ ABSL_GUARDED_BY(sync_mu_) = false;
  // Read by HandleDeltas without sync_mu_: true while awaiting_catch_up_.
  std::atomic<bool> dedupe_replay_{false};
  // A committed relist not yet reported to on_relist_applied, and the
  // resourceVersion whose application completes it. The flag lets every
  // pop check without a lock.
  std::atomic<bool> relist_pending_{false};
  std::string relist_rv_ ABSL_GUARDED_BY(sync_mu_);

  // SetInitialState's state until Start.
  std::vector<ObjectPtr> initial_objects_ ABSL_GUARDED_BY(handle_mu_);
  std::string initial_rv_ ABSL_GUARDED_BY(handle_mu_);
  // BeginResume's course: kPending (the reflector waits for the state),
  // kLoaded or kAbandoned (decided; the reflector is told once started),
  // kDone (being or been told: see FinishResume).
  enum class Resume { kNone, kPending, kLoaded, kAbandoned, kDone };
  Resume resume_ ABSL_GUARDED_BY(handle_mu_) = Resume::kNone;

  // Its own lock, not handle_mu_: the accessors must not wait for a staged
  // list's commit, which holds handle_mu_ while it hands out the list.
  mutable absl::Mutex reflector_mu_;
  std::unique_ptr<Reflector> reflector_ ABSL_GUARDED_BY(reflector_mu_);
  std::thread reflector_thread_;
  std::thread process_thread_;
};

}  // namespace informer

#endif  // INFORMER_CACHE_SHARED_INFORMER_H_

#ifndef INFORMER_CACHE_REFLECTOR_H_
#define INFORMER_CACHE_REFLECTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/list_stage.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/util/clock.h"

namespace informer {

// Reflector keeps a DeltaFIFO in step with a ListerWatcher: list (paged) ->
// one Replace, then watch from the list's resourceVersion and turn events
// into Add/Update/Delete, re-watching and re-listing as the API server
// requires (client-go's tools/cache/reflector.go).
//
// The loop is an explicit state machine (after kube-rs's watcher):
//   kList  -> list every page; success: Replace, go to kWatch. The first
//             list asks for RV "0" (paged), a relist for the last synced
//             RV WITHOUT a limit (with a limit the API server would read
//             that exact revision from etcd, an old state that cannot be
//             watched from after a restart; unpaged it serves the current
//             state, not older than RV), or, once the server has paged a
//             list, paged with resourceVersionMatch=NotOlderThan. With
//             use_watch_list, a WatchList request instead: its initial
//             events are the list's items, handed to the list's stage as
//             they are decoded (or collected), and applied as a LIST is at
//             the initial-events-end bookmark; the same stream goes on as
//             a watch. Nothing is applied before that bookmark (a deletion
//             among the initial events, which no API server sends, fails
//             the round). Any WatchList failure: a plain LIST for this round
//             (kPlainList); 422 -> plain lists for good (unless
//             watch_list_after_refusal).
//             410 or "too large RV": the next list uses RV "" (a
//             consistent read); a continue token that expired mid-list
//             restarts at once as one unpaged list. A transform error fails
//             the list (never a Replace without the object). Other errors:
//             back off, stay in kList.
//   kWatch -> open a watch from the last synced RV.
//             429 / UNAVAILABLE (connection refused): back off, stay in
//             kWatch (no relist: the RV is still valid).
//             other errors: back off, go to kList.
//   stream -> apply events. BOOKMARK advances the RV. Normal end: kWatch
//             again (no relist). ERROR 410 / an expired status: back off,
//             kList at the last RV (RV "" when the watch expired right at
//             the RV a list returned). An undecodable event: back off,
//             kList (re-watching would replay it). A cut connection: back
//             off, kWatch (the RV is still a valid resume point; if it has
//             expired the next watch says 410 and we relist). A watch that
//             ends at once with no event counts as an error (back-off), so
//             a misbehaving server cannot make us spin.
// Back-off (client-go's sliding back-off between ListAndWatch rounds): 800
// ms doubling to 30 s with jitter 1.0, reset after 2 minutes without
// failure, all on the injected Clock; never shorter than a Retry-After the
// server sent with the failure (Options::max_retry_after). Every relist waits
// it, except the two one-off immediate fallbacks above (WatchList -> LIST,
// expired continue
// -> unpaged LIST), so no answer of the server can make the loop spin.
//
// The FIFO is told each resourceVersion handed over
// (DeltaFIFO::NoteResourceVersion), so the consumer can tell which RV its
// store reflects (SharedIndexInformer::LastAppliedResourceVersion), as
// opposed to LastSyncResourceVersion(), the RV received.
//
// Thread-safety: Run() blocks on the calling thread until Stop(); Stop() and
// the accessors may be called from any thread. The ListerWatcher and the
// FIFO are not owned and must outlive the Reflector.
class Reflector {
 public:
  struct Options {
    std::string name = "reflector";
    int64_t page_size = 500;
    // Watches last a random time in [min_watch_timeout, 2*min_watch_timeout)
    // so that a fleet of informers does not re-watch in lockstep.
    absl::Duration min_watch_timeout = absl::Minutes(5);
    absl::Duration backoff_initial = absl::Milliseconds(800);
    absl::Duration backoff_max = absl::Seconds(30);
    double backoff_factor = 2.0;
    double backoff_jitter = 1.0;
    absl::Duration backoff_reset_after = absl::Minutes(2);
    // A failure whose answer carried Retry-After (429 from API Priority and
    // Fairness, 503 from a server shutting down) waits at least that long,
    // capped here, plus up to 20% at random: the server said when to come
    // back, and clients it turned away together must not return together.
    absl::Duration max_retry_after = absl::Seconds(60);
    // Periodic resync: every resync_period, if should_resync() says so, the
    // FIFO's Resync() is called. 0 disables.
    absl::Duration resync_period = absl::ZeroDuration();
    std::function<bool()> should_resync;
    // Runs on every object before it enters the FIFO (client-go's
    // SetTransform). May replace the object; an error drops the event and is
    // reported through the watch error handler.
    std::function<absl::StatusOr<ObjectPtr>(ObjectPtr)> transform;
    // Called with every list/watch failure (client-go's WatchErrorHandler).
    std::function<void(const absl::Status&)> watch_error_handler;
    // Stream the initial state (WatchList: sendInitialEvents=true,
    // resourceVersionMatch=NotOlderThan) instead of a LIST, falling back to
    // list+watch for good when the server answers that it does not support
    // it (422, as v1.24 does). Saves the API server from materialising large
    // list responses when many informers start at once.
    bool use_watch_list = false;
    // With use_watch_list: ask for WatchList again every round even after
    // a 422, falling back to a LIST for that round only (client-go with
    // WatchListClient on); false: a 422 means list+watch for good.
    bool watch_list_after_refusal = false;
    // Called after each successful list was handed to the FIFO's Replace
    // or committed by its stage.
    std::function<void()> on_replaced;
    // Called as each list starts (a LIST's first page, or a WatchList
    // once its request was answered): a stage to hand the items to as
    // they arrive and to commit once the list is complete, instead of the
    // FIFO's Replace (see ListStage), or null for a plain Replace. The
    // informer stages every list: into an empty cache an indexed copy
    // (IndexerListStage), into a populated one a ListReconciler.
    std::function<std::unique_ptr<ListStage>()> begin_list_stage;
    // Resume instead of listing: the consumer already holds the state at
    // this resourceVersion (an informer's cache loaded from a snapshot).
    // The first round reads the resourceVersion R of the API server's
    // watch cache for this resource with a LIST at resourceVersion 0 that
    // matches no object (metadata.name of none: a few hundred bytes, never
    // paged), then watches from this one: the events since it are applied
    // as any watch's. on_caught_up(R) is called once an event or bookmark
    // at or past R has been handed to the FIFO (at once when R is this
    // resourceVersion): the consumer is then as current as a list at
    // resourceVersion 0 would have made it. R is the RV of the last change
    // of this resource the server has seen, so the watch's own last event
    // reaches it; a bookmark does when that change was outside the watch's
    // namespace or selectors, or a consistent read or etcd's progress
    // notification moved the cache past it: the first watch lasts
    // resume_watch_timeout,
    // as the API server's watch cache bookmarks a watch 2 s before its end
    // (otherwise only once a minute). 410 on that watch: a relist (through
    // begin_list_stage, which for a populated cache is a ListReconciler:
    // only changes become deltas). An R older than this resourceVersion is
    // checked with a consistent read: older too (the server's etcd restored
    // from a backup), a relist with a consistent read; otherwise (a lagging
    // API server's cache) the consumer is caught up at once.
    std::string resume_resource_version;
    std::function<void(const std::string& caught_up_rv)> on_caught_up;
    absl::Duration resume_watch_timeout = absl::Seconds(3);
    // With resume_resource_version: the consumer does not hold that state
    // yet (a snapshot still loading). The resume reads the server's
    // resourceVersion and opens its watch all the same, so that the
    // server's clock for its first bookmark runs during the load, but
    // nothing reaches the FIFO (no event, no list, not the resume's own
    // ReplaceApplied) until ResumeStateReady says how it went: usable,
    // and the resume goes on as above, the watch's events read in their
    // order; or not, and the watch is dropped unread and the reflector
    // lists as a cold start does (RV "0"), the FIFO untouched. The
    // consumer applies the state to the FIFO itself
    // (DeltaFIFO::ReplaceApplied at resume_resource_version) before it
    // says usable: the reflector may be far from its gate then (a probe
    // retried while the API server is down), and the FIFO's applied
    // resourceVersion must say where the installed state is meanwhile.
    bool resume_state_pending = false;
    uint64_t random_seed = 0;  // 0: seeded from the OS
  };

  // `a` is at or past `b`. resourceVersions are opaque, but every API
  // server serves etcd revisions, which only grow: a resume needs their
  // order. Unparseable ones compare equal only when the strings are.
  static bool ResourceVersionAtLeast(absl::string_view a, absl::string_view b);

  struct Counters {
    int64_t lists = 0;
    int64_t relists = 0;
    // Lists staged while they downloaded and committed in one step (see
    // Options::begin_list_stage); the others went through Replace.
    int64_t staged_lists = 0;
    int64_t watches = 0;
    int64_t events_added = 0;
    int64_t events_modified = 0;
    int64_t events_deleted = 0;
    int64_t bookmarks = 0;
    int64_t errors = 0;
    int64_t expired = 0;
    // Response bytes the ListerWatcher received (lists and watches).
    uint64_t bytes_received = 0;
    // Errors by kind: "http_<code>" when the API server answered (e.g.
    // "http_410", "http_429"), else the status code's name ("UNAVAILABLE"
    // for a refused or cut connection, "DEADLINE_EXCEEDED" for a hung watch).
    std::map<std::string, int64_t> errors_by_kind;
  };

  Reflector(ListerWatcher* lw, DeltaFIFO* fifo, Clock* clock, Options options);
  ~Reflector();

  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void Run();
  void Stop();
  // With Options::resume_state_pending: the consumer's state at the
  // resumed resourceVersion is in place, and applied to the FIFO
  // (`usable`), or never will be (the load failed: list cold). Once; any
  // thread.
  void ResumeStateReady(bool usable) ABSL_LOCKS_EXCLUDED(mu_);

  std::string LastSyncResourceVersion() const;
  Counters GetCounters() const;
  absl::Status LastError() const;

 private:
  // kPlainList: a LIST even where use_watch_list would stream (the
  // fallback for one round after a WatchList failed).
  // kResume: Options::resume_resource_version's first round.
  enum class State { kResume, kList, kPlainList, kWatch, kStopped };

  // What one watch has seen so far.
  struct WatchRound {
    absl::Time started;
    int64_t events = 0;
    // A WatchList still streaming its initial state: a list, whose items
    // go to `stage` (Options::begin_list_stage) as they are decoded and
    // to `items` unless the stage keeps them, applied by ApplyList at the
    // initial-events-end bookmark. Dropped unapplied if the round ends
    // before it.
    bool initial = false;
    std::unique_ptr<ListStage> stage;
    std::vector<ObjectPtr> items;
  };

  // Reads the server's current RV, then kWatch from the resumed one (see
  // Options::resume_resource_version).
  State DoResume();
  // The RV a resume catches up to (see Options::resume_resource_version);
  // empty when the server is before `from` (logged): relist.
  absl::StatusOr<std::string> ProbeResumeTarget(const std::string& from);
  // Calls on_caught_up once `rv` reached the RV the resume waits for.
  void NoteCaughtUp(const std::string& rv);
  // Before anything reaches the FIFO: waits for ResumeStateReady while
  // the resume's state is pending (Options::resume_state_pending).
  // kPass: the state is in place (the FIFO reflects the resumed RV), or
  // nothing was pending; kAbandoned: it never will be, and the
  // reflector is reset to list as a cold start; kStopped.
  enum class Gate { kPass, kAbandoned, kStopped };
  Gate PassResumeGate();
  // The resume's first touch of the FIFO: the consumer holds the state at
  // Options::resume_resource_version.
  void ApplyResumedState();
  // Lists every page into one Replace, then kWatch.
  State DoList();
  // The first page's options: the RV to list at (see DoList), counted.
  ListOptions StartList();
  // Transforms a page's objects and appends them to `items`.
  absl::Status AppendPage(ObjectList page, std::vector<ObjectPtr>* items);
  // The same for one object, also handing it to `stage` when not null;
  // `items` may be null when the stage keeps the items itself.
  absl::Status AppendItem(ObjectPtr obj, std::vector<ObjectPtr>* items,
                          ListStage* stage);
  // Hands a complete list to `stage` (when not null and it commits) or to
  // the FIFO's Replace; logs the list's stages. A refused stage that keeps
  // the items itself fails the list (Aborted).
  absl::Status ApplyList(const std::vector<ObjectPtr>& items,
                         const std::string& list_rv,
                         std::unique_ptr<ListStage> stage,
                         absl::Duration downloaded);
  // Reports a failed list (`mid_list`: a later page's continue token
  // failed) and picks the next state.
  State OnListFailed(const absl::Status& status, bool mid_list);
  // Opens a watch from the last synced RV and applies its events. With
  // `watch_list`, it is a WatchList request whose streamed initial state
  // is applied as a list (ApplyList) before live events follow.
  State DoWatch(bool watch_list);
  absl::StatusOr<std::unique_ptr<WatchStream>> OpenWatch(bool watch_list);
  State OnWatchOpenFailed(bool watch_list, const absl::Status& status);
  void CountEvent(WatchEventType type);
  // Applies one event to the FIFO (or the round's initial state); a
  // non-OK result ends the watch with that status.
  absl::Status ApplyEvent(const WatchEvent& ev, WatchRound* round);
  absl::Status ApplyObjectEvent(const WatchEvent& ev, WatchRound* round);
  // One initial event of a WatchList: the list's next item.
  absl::Status AddInitialEvent(const WatchEvent& ev, WatchRound* round);
  // The initial-events-end bookmark: the round's list is complete.
  absl::Status ApplyInitialEventsEnd(const WatchEvent& ev, WatchRound* round);
  // A watch (request or stream) got 410 Expired: back off, then relist.
  State OnWatchExpired();
  // The next state once a watch has ended with `end`.
  State AfterWatch(const WatchRound& round, const absl::Status& end);
  void ResyncLoop();
  // Waits out the back-off (or until Stop). Returns false when stopped.
  bool BackOff();
  void NoteSuccess();
  void ReportError(const absl::Status& status);
  bool StoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_;
  }

  ListerWatcher* const lw_;
  DeltaFIFO* const fifo_;
  Clock* const clock_;
  const Options options_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  WatchStream* current_watch_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string last_sync_rv_ ABSL_GUARDED_BY(mu_);
  // The last RV is no longer servable (410 on a paged list / too large):
  // the next list asks for "" (a quorum read).
  bool last_rv_unavailable_ ABSL_GUARDED_BY(mu_) = false;
  bool listed_once_ ABSL_GUARDED_BY(mu_) = false;
  // The RV of the last list (or streamed initial state) applied.
  std::string listed_rv_ ABSL_GUARDED_BY(mu_);
  // A list came back in pages: the server does not serve lists from a
  // watch cache (client-go's paginatedResult), so a relist at an RV keeps
  // paging, with resourceVersionMatch=NotOlderThan.
  bool paginated_result_ ABSL_GUARDED_BY(mu_) = false;
  // The next list asks for everything at once (after a continue token
  // expired mid-list).
  bool unpaged_next_ ABSL_GUARDED_BY(mu_) = false;
  bool watch_list_unsupported_ ABSL_GUARDED_BY(mu_) = false;
  // The server's RV when the resume began, until an event or bookmark
  // reached it ("" when not waiting).
  std::string catch_up_rv_ ABSL_GUARDED_BY(mu_);
  // The next watch is the resume's first: Options::resume_watch_timeout.
  bool resume_watch_next_ ABSL_GUARDED_BY(mu_) = false;
  // Options::resume_state_pending until the gate was passed, and what
  // ResumeStateReady said (unset: not yet).
  bool resume_gate_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> resume_usable_ ABSL_GUARDED_BY(mu_);
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time last_failure_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Counters counters_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  // The Retry-After of the failure the next BackOff follows (zero: none).
  absl::Duration retry_after_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace informer

#endif  // INFORMER_CACHE_REFLECTOR_H_

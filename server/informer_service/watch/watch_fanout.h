#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_FANOUT_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_FANOUT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/shared_informer.h"
#include "informer/persist/watch_history_section.h"
#include "server/informer_service/watch/resume_token.h"
#include "server/informer_service/watch/watch_event.h"
#include "server/informer_service/watch/watch_history.h"
#include "server/informer_service/watch/watch_resume_store.h"
#include "server/informer_service/watch/watch_stream_host.h"
#include "server/informer_service/watch/watch_stream_reactor.h"
#include "server/registry/informer_registry.h"

namespace server {

// What one resource's Watch history and streams hold (for metrics).
struct WatchMemoryStats {
  std::string resource;
  size_t history_events = 0;
  // WatchHistory::bytes().
  size_t history_bytes = 0;
  // Events dropped to stay within the byte bound (not the event bound).
  uint64_t history_dropped_for_bytes = 0;
  // Over all the resource's streams (see WatchStreamReactor::MemoryStats;
  // the bytes of different streams may share object states).
  size_t pending_events = 0;
  size_t pending_bytes = 0;
  size_t inflight_bytes = 0;
};

// The one non-blocking event handler of an informer, registered when the
// first stream opens (until then the informer pays nothing for it): keeps
// the state it last dispatched per key and, once a stream has started, the
// recent history (at most `history_size` events and `history_bytes` bytes,
// each event with its object's state before: WatchHistory), and hands each
// event to every open stream of the resource. Runs inline on the
// informer's distribution thread; takes only short locks.
//
// Changes only: updates that carry the same UID and resourceVersion as the
// state last dispatched (the informer's own resyncs, objects a relist found
// unchanged) are dropped.
//
// Streams opened before the informer synced wait (a waiter thread exists
// only while such streams wait) and get their initial state once it synced,
// or end with UNAVAILABLE when the API server refuses the informer for good.
// An informer serving stale data (a snapshot the API server has not
// confirmed, see StaleState) does not make them wait: they get its state
// with INITIAL_STATE_DONE.stale, then the catching up as ordinary events,
// then FRESH once it synced.
//
// Across restarts (with a WatchResumeStore): AdoptPersisted, before the
// informer starts, takes the history a snapshot kept and continues it: the
// positions go on from the snapshot's last one, the informer's catching up
// extends the history, and tokens of the earlier runs resume at positions
// up to the last one the snapshot holds (AcceptsToken); an earlier run's
// later positions (issued after its last snapshot, before a crash) get
// RESET. Snapshots store the fan-out's own state with its history
// (CaptureForSnapshot), so the two always agree.
//
// Thread-safety: all public methods from any thread. Lock order: the
// informer's lock -> mu_ -> each stream's lock -> the host's locks. The host
// and the entry must outlive the fan-out (it holds the entry's memory).
class WatchFanout final : public informer::ResourceEventHandler,
                          public WatchStreamOwner,
                          public WatchResumeStore::Source {
 public:
  WatchFanout(WatchStreamHost* host, std::shared_ptr<InformerEntry> entry,
              uint64_t epoch);
  ~WatchFanout() override;

  // Registers the handler unless it is registered (the informer delivers
  // its existing objects inline). Open calls it: until a stream opens, the
  // fan-out costs the informer nothing per object.
  absl::Status EnsureRegistered() ABSL_LOCKS_EXCLUDED(register_mu_, mu_);

  // Takes the resource's persisted history from the resume store, if any
  // (then registers the handler at once: call it before the informer
  // starts), and serves the store from now on. No-op without a store.
  void AdoptPersisted() ABSL_LOCKS_EXCLUDED(register_mu_, mu_);
  // Whether `token` names a position of this fan-out's sequence: this
  // run's and epoch's, or an earlier run's up to its persisted last
  // position.
  bool AcceptsToken(const ResumeToken& token) ABSL_LOCKS_EXCLUDED(mu_);
  // WatchResumeStore::Source: the state and history, consistent.
  std::optional<WatchResumeStore::Capture> CaptureForSnapshot() override
      ABSL_LOCKS_EXCLUDED(mu_);

  InformerEntry* entry() const { return entry_; }
  uint64_t epoch() const { return epoch_; }

  void OnAdd(const informer::ObjectPtr& obj, bool) override;
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr& obj) override;
  void OnDelete(const informer::ObjectPtr& obj,
                bool final_state_unknown) override;

  // Attaches `stream` now if the informer has synced or serves stale
  // data, else once it has synced or turns stale.
  void Open(WatchStreamReactor* stream);
  // WatchStreamOwner: the stream is done.
  void Detach(WatchStreamReactor* stream) override;
  // Bookmarks and resyncs; returns the earliest resync due.
  absl::Time Tick(absl::Time now);
  // Lets every stream write (writes were paused).
  void KickAll();
  // The longest queue of this resource's streams right now (metrics).
  size_t MaxPending();
  // What this resource's history and streams hold right now (metrics;
  // walks every stream's queue).
  WatchMemoryStats Memory();
  // Ends every stream with UNAVAILABLE; later Opens get the same.
  void Shutdown();

 private:
  void Dispatch(const informer::ObjectPtr& obj, bool deleted, bool tombstone);
  // The objects `stream` holds now (the state through its filter), in key
  // order.
  std::vector<SharedPtr> HeldLocked(const WatchStreamReactor& stream) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The objects of the snapshot at `seq` (the state then, rebuilt from
  // the history, which must cover `seq`) that `stream` holds and whose
  // keys come after `after_key`, in key order.
  std::vector<SharedPtr> SnapshotRestLocked(const WatchStreamReactor& stream,
                                            uint64_t seq,
                                            absl::string_view after_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the stream's start (a resume, or RESET? + initial state) and
  // adds it to the fan-out. Under mu_ no event can slip between the state
  // read here and the live events the stream gets afterwards.
  // `stale`: the informer serves stale data (see StaleState).
  void AttachLocked(WatchStreamReactor* stream, const std::string& rv,
                    bool stale) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Until the sync: attaches the waiting streams as stale once the
  // informer serves stale data; at the sync, the rest, and FRESH to the
  // streams told stale.
  void WaitForSyncThenAttach();
  void AttachWaitersStale();
  // Ends the waiting streams that saw the informer fail for good.
  void EndRefusedWaiters(const absl::Status& refused);
  // The persisted history's state and events become this fan-out's.
  void SeedLocked(WatchResumeStore::Seed seed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WatchStreamHost* const host_;
  // Keeps the entry's memory (not its informer running) while the fan-out
  // exists.
  const std::shared_ptr<InformerEntry> entry_holder_;
  InformerEntry* const entry_;
  const ResumeTokenEncoder tokens_;
  const uint64_t epoch_;
  absl::Mutex register_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  informer::HandlerRegistration* registration_ ABSL_GUARDED_BY(register_mu_) =
      nullptr;
  std::thread waiter_;

  absl::Mutex mu_;
  // Events that changed something since the first stream started; the
  // tokens' sequence number.
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  // A stream has started, so tokens exist: events get sequence numbers
  // and history from now on (before, nobody could resume into them).
  bool sequencing_ ABSL_GUARDED_BY(mu_) = false;
  // The state as dispatched, per key (consistent with seq_, unlike the
  // indexer, which may be one event ahead).
  absl::flat_hash_map<std::string, SharedPtr> state_ ABSL_GUARDED_BY(mu_);
  // The last events (each with the state before it), bounded by count and
  // bytes.
  WatchHistory history_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<WatchStreamReactor*> streams_ ABSL_GUARDED_BY(mu_);
  // Streams opened before the informer synced, waiting for the sync, with
  // the informer's error count when each began waiting.
  absl::flat_hash_map<WatchStreamReactor*, int64_t> waiting_
      ABSL_GUARDED_BY(mu_);
  bool waiter_started_ ABSL_GUARDED_BY(mu_) = false;
  // The waiter saw the sync and attached the streams waiting then.
  bool waiter_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Some stream was told the informer's data was stale; FRESH went out.
  bool told_stale_ ABSL_GUARDED_BY(mu_) = false;
  bool fresh_sent_ ABSL_GUARDED_BY(mu_) = false;
  // Earlier runs whose tokens name positions of this sequence (from the
  // persisted history).
  std::vector<informer::WatchTokenAlias> aliases_ ABSL_GUARDED_BY(mu_);
  // Attached to the store (AdoptPersisted): detach when destroyed.
  bool in_store_ = false;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_FANOUT_H_

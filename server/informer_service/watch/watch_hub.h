#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_HUB_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_HUB_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/watch/watch_fanout.h"
#include "server/informer_service/watch/watch_options.h"
#include "server/informer_service/watch/watch_response_builder.h"
#include "server/informer_service/watch/watch_stream_host.h"
#include "server/registry/informer_registry.h"

namespace server {

// WatchHub serves Informer.Watch: per informer it registers ONE
// non-blocking event handler (a WatchFanout) that fans every event out to
// the open streams of that resource. Streams are gRPC callback reactors
// (ServerWriteReactor over raw ByteBuffers) with one write in flight each;
// no thread per stream.
//
// A stream sends the current state (ADDED, `initial`), one
// INITIAL_STATE_DONE, then live events in the informer's order. Each write
// carries what is queued for the stream at that moment, up to
// `max_message_bytes` (the rest follows in the next writes; an event
// larger than that goes alone). Objects entering the filter are sent as
// ADDED; leaving, as DELETED with their last matching state stamped with
// the new resourceVersion (as the API server's cacheWatcher does). When a
// stream's queue
// reaches `max_queue` its events coalesce per key; past `max_pending_keys`
// distinct keys the stream ends with RESOURCE_EXHAUSTED.
//
// Changes only: the fan-out keeps the state it last dispatched per key and
// drops updates that carry the same UID and resourceVersion (the informer's
// own resyncs, objects a relist found unchanged), so a relist reaches
// streams as its differences only (changed objects MODIFIED, vanished ones
// DELETED with `tombstone`).
//
// Resume: every event carries a token (this run's id, the fan-out's epoch
// and a per-resource sequence number; initial events and RESET also a
// position in the snapshot's key order) naming the position right after
// it. Each fan-out keeps the last `history_size` events, each with the
// state its object had before, within `history_bytes` bytes of what they
// keep alive (the oldest go first when either bound is reached). A stream
// resuming from sequence S replays the events after S through the same
// filter logic as a live stream, so
// enter/leave events are exact; resuming inside the initial state of
// snapshot S first sends the rest of that snapshot (the state at S,
// rebuilt by rolling every key touched after S back, through the request's
// filter, keys after the token's) and INITIAL_STATE_DONE. A token of
// another run or resource, a malformed one, or one older than the history
// gets RESET and a fresh initial state. With WatchOptions::resume_store,
// the history survives a restart: an earlier run's tokens up to the last
// position its snapshot kept resume (see WatchFanout::AdoptPersisted).
//
// Tokens inside a coalesced run (a slow stream's queue collapsed per key)
// name the position before the run, except the run's last event, which
// names the position after it: resuming from the middle of a run re-sends
// the run's remaining differences, never skips one.
//
// Per-stream resync (`resync_period`, >= 1 s): every period the stream
// queues a SYNC event for every object it holds.
//
// Before the informer synced, a Watch waits (no error): its initial state
// goes out once the informer synced (a per-resource waiter thread exists
// only while such streams wait). An informer serving stale data (see
// StaleState) is served at once: INITIAL_STATE_DONE carries `stale`, and
// FRESH follows once the informer caught up with the API server.
//
// Objects: each object state is serialized once per encoding and the same
// bytes (a refcounted slice) go to every stream that sends it.
//
// One background thread (started with the first stream) sends BOOKMARKs on
// quiet streams and SYNCs, waiting on `clock`.
//
// Lazy informers: a fan-out is created on the first Watch of a resource
// and dropped when the registry retires the informer (which it does only
// when no stream is open or waiting on it).
//
// Thread-safety: Open/Shutdown from any thread. The registry and clock must
// outlive the hub; every stream must be done (the gRPC server shut down and
// waited for) before the hub is destroyed.
class WatchHub : private WatchStreamHost {
 public:
  WatchHub(InformerRegistry* registry, WatchOptions options,
           informer::Clock* clock, std::string run_id);
  ~WatchHub() override;
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Starts one Watch call (errors end the call at once with their status).
  // `on_done` (may be empty) is called once, when the call is over, with
  // the status it ended with (CANCELLED if it ended without one).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Open(
      grpc::CallbackServerContext* context,
      const informer::v1::WatchRequest& request,
      std::function<void(const grpc::Status&)> on_done = {});

  // Ends every stream (also those waiting for a sync) with UNAVAILABLE
  // kShuttingDownMessage; later calls get the same at once. Idempotent.
  void Shutdown();

  // Monotonic counters for metrics (read-only; cheap to read).
  struct Counters {
    // Events written to streams, indexed by informer::v1::EventType value.
    EventTypeCounts events_out{};
    // Pending events removed by coalescing (a slow stream's queue collapsed
    // per key).
    uint64_t coalesced = 0;
    // Streams ended with RESOURCE_EXHAUSTED because they fell too far
    // behind (their pending events dropped).
    uint64_t streams_exhausted = 0;
  };
  Counters GetCounters() const;
  // The longest pending queue of any open stream right now (walks the
  // streams: for scrapes, not hot paths).
  size_t MaxPendingNow() const;
  // Per resource with a fan-out: what its history and streams hold now
  // (walks every stream's queue: for scrapes, not hot paths).
  std::vector<WatchMemoryStats> MemoryNow() const;

  // --- For tests ---
  // While paused, streams queue events but start no write.
  void SetWritesPaused(bool paused);
  // Blocks until the fan-outs together have handled at least `n` informer
  // events (adds, updates including resyncs, deletes) since construction.
  void WaitForEvents(uint64_t n) const;
  uint64_t events() const;
  // Blocks until exactly `n` streams are open (attached and not yet done).
  void WaitForOpenStreams(int n) const;
  // Blocks until exactly `n` streams wait for their informer's sync.
  void WaitForWaitingStreams(int n) const;
  // The largest pending queue any stream has held.
  size_t peak_pending() const;

 private:
  // The fan-out of `entry`, created (and its handler registered) on first
  // use, so informers the registry starts later are served too.
  absl::StatusOr<std::shared_ptr<WatchFanout>> FanoutFor(InformerEntry* entry);
  std::vector<std::shared_ptr<WatchFanout>> Fanouts() const;
  // The registry retires a lazy informer: forget its fan-out.
  void Retire(InformerEntry* entry);
  void EnsureTicker();
  void TickLoop();
  // Flushes every waiting stream once the earliest requested flush is due.
  void FlushLoop();

  // WatchStreamHost.
  const WatchOptions& options() const override { return options_; }
  informer::Clock* clock() const override { return clock_; }
  const std::string& run_id() const override { return run_id_; }
  bool writes_paused() const override { return paused_.load(); }
  bool Batching(absl::Time now) override;
  // Takes only flush_mu_ (a leaf), so streams call it under their lock.
  void Defer(WatchStreamReactor* stream, absl::Time due) override
      ABSL_LOCKS_EXCLUDED(flush_mu_);
  void Undefer(WatchStreamReactor* stream) override
      ABSL_LOCKS_EXCLUDED(flush_mu_);
  void NotePending(size_t events, size_t longest_queue) override;
  void NoteWritten(const EventTypeCounts& by_type) override;
  void NoteCoalesced(uint64_t n) override;
  void NoteExhausted() override;
  void NoteEvent() override;
  void NoteStreams(int delta) override;
  void NoteWaiting(int delta) override;
  bool Stopping() override;
  bool SleepUnlessStopping(absl::Duration d) override;
  void WakeTicker() override;

  InformerRegistry* const registry_;
  const WatchOptions options_;
  informer::Clock* const clock_;
  const std::string run_id_;
  // Read by streams under their own locks, hence not under mu_.
  std::atomic<bool> paused_{false};

  // Guards the list only: never held while calling into a fan-out or an
  // informer (a fan-out registers with its informer in its first Open).
  mutable absl::Mutex fanouts_mu_;
  // One per informer with Watch traffic; a lazy informer's fan-out is
  // dropped when the registry retires it (then it has no stream).
  std::vector<std::shared_ptr<WatchFanout>> fanouts_
      ABSL_GUARDED_BY(fanouts_mu_);
  uint64_t next_epoch_ ABSL_GUARDED_BY(fanouts_mu_) = 1;

  // The streams' filters, one object per distinct filter and fan-out.
  FilterInterner filters_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool ticker_started_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;
  // Updated per queued event / per write by every stream: atomics, not
  // mu_, and on cache lines of their own by writer: the informer's
  // distribution thread queues events (queued_, peak_pending_) while
  // gRPC's threads count writes (events_out_). Sharing a line, each write
  // took the line from the other core (seen in a profile at 250k
  // deliveries/s; see docs/benchmarks.md, section 'Fan-out').
  alignas(64) std::atomic<uint64_t> queued_{0};
  std::atomic<size_t> peak_pending_{0};
  alignas(64) std::array<std::atomic<uint64_t>,
                         std::tuple_size_v<EventTypeCounts>> events_out_{};
  alignas(64) std::atomic<uint64_t> coalesced_{0};
  std::atomic<uint64_t> exhausted_{0};
  // The rate estimate built from queued_.
  std::atomic<int64_t> rate_since_ns_{0};
  std::atomic<uint64_t> rate_base_{0};
  std::atomic<bool> busy_{false};
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread ticker_;
  int observer_id_ = -1;

  // Batching (options_.batch_window > 0): a leaf lock.
  mutable absl::Mutex flush_mu_;
  absl::Time flush_due_ ABSL_GUARDED_BY(flush_mu_) = absl::InfiniteFuture();
  // Streams waiting for their window to end (alive: see OnDone).
  absl::flat_hash_set<WatchStreamReactor*> deferred_ ABSL_GUARDED_BY(flush_mu_);
  bool flush_stop_ ABSL_GUARDED_BY(flush_mu_) = false;
  std::thread flusher_;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_HUB_H_

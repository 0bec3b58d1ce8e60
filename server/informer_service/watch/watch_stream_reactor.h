#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_REACTOR_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.pb.h"
#include "server/informer_service/watch/coalesce.h"
#include "server/informer_service/watch/resume_token.h"
#include "server/informer_service/watch/watch_event.h"
#include "server/informer_service/watch/watch_filter.h"
#include "server/informer_service/watch/watch_response_builder.h"
#include "server/informer_service/watch/watch_stream_host.h"

namespace server {

class WatchStreamReactor;

// What a stream was asked to start from.
struct WatchStart {
  bool reset = false;   // send RESET before the initial state
  bool resume = false;  // try to continue after `seq`
  uint64_t seq = 0;
  // With `resume`: the position is inside the initial state of snapshot
  // `seq`, after the key `after_key` (see ResumeToken).
  bool in_snapshot = false;
  std::string after_key;
};

// The party a stream is attached to (its fan-out): told once, from OnDone,
// that the stream is going away. Must outlive the call (the stream holds a
// shared_ptr to it).
class WatchStreamOwner {
 public:
  virtual ~WatchStreamOwner() = default;
  virtual void Detach(WatchStreamReactor* stream) = 0;
};

// One Informer.Watch call: a gRPC callback reactor (raw ByteBuffers, one
// write in flight) with a bounded, coalescing queue.
//
// A stream keeps no copy of what its client holds: a filter is a pure
// function of an object, so the client holds an object exactly when its
// state at the stream's position matches the filter. Each event therefore
// tells the stream, from the object's state before (`prev`) and after,
// whether the object was held, is held now, or both (enter, leave, change),
// which costs no per-stream map whatever the cache's size.
//
// Each write carries everything queued at that moment. When the queue
// reaches `max_queue` its live events coalesce per key (see Coalesce); past
// `max_pending_keys` distinct keys the stream ends with RESOURCE_EXHAUSTED.
//
// Lifetime: gRPC holds one reference until OnDone; the hub's flusher holds
// one while it flushes the stream; the last one deletes it.
//
// Lock order: fan-out -> WatchStreamReactor::mu_ -> the host's locks. The
// fan-out calls Start/Resume/Apply/Tick/End with its lock held; the reactor
// detaches from its owner in OnDone (holding no lock of its own), so the
// fan-out never touches a deleted stream.
class WatchStreamReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  WatchStreamReactor(WatchStreamHost* host,
                     std::shared_ptr<WatchStreamOwner> owner,
                     std::string resource,
                     std::shared_ptr<const WatchFilter> filter,
                     informer::v1::Encoding encoding, bool send_old,
                     absl::Duration resync_period, WatchStart start);

  const WatchFilter& filter() const { return *filter_; }
  // Whether a stream at `obj`'s position holds it (non-null and matching).
  bool Holds(const SharedPtr& obj) const {
    return obj != nullptr && (unfiltered_ || filter_->Matches(obj->object()));
  }
  const WatchStart& start() const { return start_; }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();

  // Queues the initial state `objs` of snapshot `seq` and
  // INITIAL_STATE_DONE (the caller holds the fan-out's lock, so no event
  // is missed or duplicated), RESET first if `reset`. Also resumes inside
  // an initial state: `objs` are then the snapshot's rest. `stale`: the
  // informer serves stale data (INITIAL_STATE_DONE says so, and the
  // stream gets FRESH later, see PushFresh).
  void StartLocked(const ResumeTokenEncoder* tokens,
                   const std::vector<SharedPtr>& objs, bool reset, uint64_t seq,
                   const std::string& rv, bool stale = false);
  // Resumes after `seq`: the client holds its view at `seq`; the fan-out
  // then replays the events after `seq` through Apply. `stale` as for
  // StartLocked (the client was told so by the stream it resumes).
  void ResumeLocked(const ResumeTokenEncoder* tokens, uint64_t seq,
                    bool stale = false);
  // Queues FRESH at `seq` (the informer caught up with the API server)
  // if this stream was told its data was stale, or `always` (a resumed
  // stream may have missed the first one). Once per stale stream.
  void PushFresh(uint64_t seq, const std::string& rv, bool always);
  // One informer event. Returns the queue's length with it, 0 if this
  // stream does not get it; the caller reports the queued events to the
  // host (WatchStreamHost::NotePending), once for all its streams.
  // `verdicts` (may be null): the event's filter verdicts, shared by the
  // streams it goes to, built from the event's states before and after.
  size_t Apply(const EventPtr& ev, FilterVerdicts* verdicts = nullptr);
  // True when this stream's resync is due at `now`.
  bool ResyncDue(absl::Time now);
  // Queues a SYNC for every object the stream holds (`objs`: the fan-out's
  // state through this stream's filter, in key order).
  void PushSyncs(absl::Time now, const std::vector<SharedPtr>& objs,
                 uint64_t seq);
  // Sends a BOOKMARK when the stream has been quiet for the interval.
  // Returns when the next resync is due.
  absl::Time Tick(absl::Time now, uint64_t seq, const std::string& rv);
  // Writes if it can (writes were paused).
  void Kick();
  // The host's flusher: the batching window this stream waited for ended.
  void Flush();
  // Events queued and not yet written (metrics).
  size_t pending_size();
  // What the stream holds right now (metrics; walks the queue).
  struct MemoryStats {
    size_t pending_events = 0;
    // The object states the queue references, each counted once
    // (StateBytes); most are shared with the history or the cache.
    size_t pending_bytes = 0;
    // The serialized write gRPC holds for the stream (one in flight at
    // most; a client that reads nothing keeps it there).
    size_t inflight_bytes = 0;
  };
  MemoryStats Memory();
  // Ends the stream with `status` (after the write in flight, if any).
  void End(absl::Status status);
  // Called once from OnDone with the status the call ended with
  // (CANCELLED if it ended without one). Set before the stream starts.
  void SetOnDone(std::function<void(const grpc::Status&)> on_done) {
    on_done_ = std::move(on_done);
  }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  ~WatchStreamReactor() override = default;

  void ScheduleResyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushLocked(PendingEvent p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends an empty event for the caller to fill.
  PendingEvent& EmplaceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces the queue's live part (after the initial state) by its
  // coalesced form; ends the stream past max_pending_keys.
  void CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what is queued if no write is in flight. With a batching
  // window, a stream that wrote less than a window ago waits for the
  // host's flusher (`force` is the flusher's call) instead.
  void MaybeWriteLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True if the batching window holds the write back.
  bool DeferLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Encodes the queue's first events into builder_, as many as fit in
  // max_message_bytes (at least one); returns how many, 0 if the stream
  // ended (an object could not be encoded).
  size_t EncodeLocked(EventTypeCounts* by_type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Encodes one event this stream made (not an as-is fan-out event);
  // OutOfRange (nothing added) if the response would exceed `cap` bytes.
  absl::Status AddOwnLocked(const PendingEvent& p, const std::string& token,
                            size_t cap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finish may not overlap a write in flight: OnWriteDone finishes then.
  void FinishIfIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WatchStreamHost* const host_;
  const WatchOptions& options_;
  // Shared: the owner (and through it the informer entry) outlives the
  // stream.
  const std::shared_ptr<WatchStreamOwner> owner_;
  const std::string resource_;
  // Shared with the streams opened with the same filter (FilterInterner).
  const std::shared_ptr<const WatchFilter> filter_;
  const bool unfiltered_;
  const informer::v1::Encoding encoding_;
  const bool send_old_;
  const absl::Duration resync_period_;
  const WatchStart start_;
  std::atomic<int> refs_{1};

  absl::Mutex mu_;
  // The fan-out's (which outlives the stream).
  const ResumeTokenEncoder* tokens_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Appended to and cleared as a whole, so a vector: its capacity is
  // reused from write to write (no allocation per queued event).
  std::vector<PendingEvent> pending_ ABSL_GUARDED_BY(mu_);
  // Reused by every write for the same reason.
  WatchResponseBuilder builder_ ABSL_GUARDED_BY(mu_);
  // pending_[0, marker_end_) is the initial state (with its markers).
  size_t marker_end_ ABSL_GUARDED_BY(mu_) = 0;
  // Told stale (INITIAL_STATE_DONE.stale) and not yet FRESH.
  bool told_stale_ ABSL_GUARDED_BY(mu_) = false;
  size_t compact_at_ ABSL_GUARDED_BY(mu_) = 0;
  // The sequence number of the last event applied / written.
  uint64_t applied_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_seq_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The queue was coalesced since the last write.
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  // Nothing was queued since the last coalescing (whose result a split
  // write may still be sending).
  bool tail_coalesced_ ABSL_GUARDED_BY(mu_) = false;
  // Waiting in the host's flush set (batching window).
  bool deferred_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  std::function<void(const grpc::Status&)> on_done_;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_REACTOR_H_

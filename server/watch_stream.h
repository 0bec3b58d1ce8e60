#ifndef SERVER_WATCH_STREAM_H_
#define SERVER_WATCH_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_registry.h"

namespace server {

// Tuning of Informer.Watch streams.
struct WatchOptions {
  // Pending events of one stream at which they start coalescing per object
  // key (to the difference between what the client was last sent and the
  // current state).
  size_t max_queue = 1024;
  // Hard cap: a stream whose coalesced queue still holds more distinct
  // object keys than this ends with RESOURCE_EXHAUSTED.
  size_t max_pending_keys = 65536;
  // A stream that wrote nothing for this long gets a BOOKMARK.
  absl::Duration bookmark_interval = absl::Seconds(5);
};

class WatchFanout;

// WatchHub serves Informer.Watch: per informer of the registry it registers
// ONE non-blocking event handler (a WatchFanout) that fans every event out
// to the open streams of that resource. Streams are gRPC callback reactors
// (ServerWriteReactor) with one write in flight each; no thread per stream.
//
// A stream sends the current state (ADDED, `initial`), one
// INITIAL_STATE_DONE, then live events in the informer's order. Each write
// carries everything queued for the stream at that moment. Objects leaving
// the filter are sent as DELETED, entering as ADDED. When a stream's queue
// reaches `max_queue` its events coalesce per key; past `max_pending_keys`
// distinct keys the stream ends with RESOURCE_EXHAUSTED. Every event carries
// a resume token (this run's id and a per-informer sequence number); this
// version keeps no history, so any resume token gets RESET and a fresh
// initial state. Errors end the call at once: unknown resource NOT_FOUND;
// bad selector, unknown index or malformed token INVALID_ARGUMENT; an
// informer not synced yet UNAVAILABLE (retry).
//
// Objects: each event's object state is wrapped once by the fan-out and
// shared by every stream (JSON is the cached Object's text; the Struct form
// is converted at most once per state). Each stream still copies the bytes
// into its own response message.
//
// One background thread (started with the first stream) sends BOOKMARKs on
// quiet streams, waiting on `clock`.
//
// Thread-safety: Open from any thread. The registry and clock must outlive
// the hub; every stream must be done (the gRPC server shut down and waited
// for) before the hub is destroyed.
class WatchHub {
 public:
  WatchHub(InformerRegistry* registry, WatchOptions options,
           informer::Clock* clock, std::string run_id);
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Starts one Watch call (errors end the call at once with their status).
  grpc::ServerWriteReactor<informer::v1::WatchResponse>* Open(
      grpc::CallbackServerContext* context,
      const informer::v1::WatchRequest* request);

  // --- For tests ---
  // While paused, streams queue events but start no write.
  void SetWritesPaused(bool paused);
  // Blocks until the fan-outs together have handled at least `n` informer
  // events (adds, updates including resyncs, deletes) since construction.
  void WaitForEvents(uint64_t n) const;
  uint64_t events() const;
  // Blocks until exactly `n` streams are open (attached and not yet done).
  void WaitForOpenStreams(int n) const;
  // The largest pending queue any stream has held.
  size_t peak_pending() const;

 private:
  friend class WatchFanout;
  friend class WatchStreamReactor;

  void EnsureTicker();
  void TickLoop();
  void NoteEvent();
  void NotePending(size_t n);
  void NoteStreams(int delta);

  InformerRegistry* const registry_;
  const WatchOptions options_;
  informer::Clock* const clock_;
  const std::string run_id_;
  std::vector<std::unique_ptr<WatchFanout>> fanouts_;  // one per entry
  // Read by streams under their own locks, hence not under mu_.
  std::atomic<bool> paused_{false};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ticker_started_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread ticker_;
};

}  // namespace server

#endif  // SERVER_WATCH_STREAM_H_

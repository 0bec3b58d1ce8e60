#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_HOST_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_HOST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "informer/util/clock.h"
#include "server/informer_service/watch/watch_event.h"
#include "server/informer_service/watch/watch_options.h"

namespace server {

class WatchStreamReactor;

// What Watch streams and fan-outs need from the hub that owns them
// (WatchHub implements it): options, clock, the batching flusher and the
// counters. Kept apart so the stream and fan-out libraries do not depend
// on the hub's.
//
// Thread-safety: every method may be called from any thread, with a
// fan-out's or a stream's lock held (the hub's locks come last).
class WatchStreamHost {
 public:
  virtual ~WatchStreamHost() = default;

  virtual const WatchOptions& options() const = 0;
  virtual informer::Clock* clock() const = 0;
  virtual const std::string& run_id() const = 0;
  // Tests: while true, streams queue events but start no write.
  virtual bool writes_paused() const = 0;

  // --- Streams ---
  // Whether the batching window applies at `now` (see WatchOptions).
  virtual bool Batching(absl::Time now) = 0;
  // A stream gathering events asks to be flushed (WatchStreamReactor::Flush)
  // at `due`, or earlier with other waiting streams.
  virtual void Defer(WatchStreamReactor* stream, absl::Time due) = 0;
  // A finished stream leaves the flush set (before it may be deleted).
  virtual void Undefer(WatchStreamReactor* stream) = 0;
  // `events` were queued, to streams whose longest queue is now
  // `longest_queue` events. Called once per fan-out event for all its
  // streams (a per-stream call was a measurable share of the dispatch).
  virtual void NotePending(size_t events, size_t longest_queue) = 0;
  virtual void NoteWritten(const EventTypeCounts& by_type) = 0;
  virtual void NoteCoalesced(uint64_t removed) = 0;
  virtual void NoteExhausted() = 0;

  // --- Fan-outs ---
  virtual void NoteEvent() = 0;
  virtual void NoteStreams(int delta) = 0;
  virtual void NoteWaiting(int delta) = 0;
  // True once the hub began stopping (no wait).
  virtual bool Stopping() = 0;
  // Waits on the clock for `d` or until the hub stops; true if stopping.
  virtual bool SleepUnlessStopping(absl::Duration d) = 0;
  // Streams' resync deadlines changed: the ticker recomputes them.
  virtual void WakeTicker() = 0;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_STREAM_HOST_H_

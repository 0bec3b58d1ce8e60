#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_OPTIONS_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_OPTIONS_H_

#include <cstddef>

#include "absl/time/time.h"

namespace server {

class WatchResumeStore;

// The default byte bound of each resource's Watch history: about 3,900
// updates of a 1.5 KB object, 970 of an 8 KB Pod (an update costs about
// twice the object's JSON plus 1.3 KB).
inline constexpr size_t kDefaultWatchHistoryBytes = size_t{16} << 20;

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
  // Events each resource's fan-out keeps so that reconnecting streams can
  // resume after their last token (0: no history, every resume is a RESET).
  size_t history_size = 10000;
  // ... and at most about this many bytes of what those events keep alive
  // (object states, see WatchHistory), whichever bound binds first; 0: no
  // history.
  size_t history_bytes = kDefaultWatchHistoryBytes;
  // Adaptive batching: a stream that wrote less than this long ago gathers
  // its events until the window after that write ends, so a busy stream
  // sends several events per message (gRPC's per-message cost dominates
  // fan-out); a stream quiet for longer writes at once. Zero: every event
  // is written as soon as no write is in flight.
  absl::Duration batch_window = absl::ZeroDuration();
  // The window applies only while the hub queues at least this many events
  // per second for its streams in total (measured over 100 ms periods), so
  // a lightly loaded sidecar keeps writing every event at once. 0: always.
  double batch_min_rate = 0;
  // No WatchResponse is larger than this (serialized): initial states,
  // coalesced backlogs and resync bursts are split over several messages,
  // so clients with gRPC's default 4 MiB receive limit get every stream.
  // An event that alone exceeds it travels alone (up to the server's
  // largest message). At least 1.
  size_t max_message_bytes = size_t{1} << 20;
  // Where each resource's history goes to and comes from a snapshot on
  // disk, so tokens survive a restart (null: they do not). Not owned; must
  // outlive the hub.
  WatchResumeStore* resume_store = nullptr;
};

// The shortest per-stream resync_period a request may ask for.
inline constexpr absl::Duration kMinStreamResyncPeriod = absl::Seconds(1);

// The status streams end with when the sidecar shuts down.
inline constexpr char kShuttingDownMessage[] =
    "sidecar shutting down, resume with your token";

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_OPTIONS_H_

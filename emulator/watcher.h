#ifndef EMULATOR_WATCHER_H_
#define EMULATOR_WATCHER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "emulator/resource_registry.h"
#include "emulator/selector.h"
#include "emulator/stored_object.h"
#include "informer/util/clock.h"

namespace emulator {

struct WatchRequest {
  std::string ns;
  LabelSelector labels;
  FieldSelector fields;
  std::string resource_version;  // "", "0" or a number
  // WatchList: initial ADDED events then a bookmark marked
  // initial_events_end.
  bool send_initial_events = false;
  // Set by the store for a watch from a future resourceVersion: events and
  // bookmarks at or before it are not sent.
  int64_t after_rv = 0;
  // Set by the store: the RV the watch starts at, which a bookmark must
  // pass to be sent (the request's RV, or for initial events the watch
  // cache's RV they are taken at).
  int64_t start_rv = 0;
};

class ObjectStore;

// Watcher is one open watch: the store queues matching events into it (under
// the store's lock) and the HTTP stream drains them.
//
// Thread-safety: all methods are thread-safe. Lock order: the store's mutex
// before a watcher's. The stream thread waits on the watcher's mutex through
// the clock, so fake-clock tests can drive bookmarks and timeouts.
class Watcher {
 public:
  enum class CloseKind {
    kOpen,
    kGraceful,  // end the stream with the terminating chunk
    kAbrupt,    // drop the connection (restart, fault)
  };

  // Directives set by fault injection (see FaultInjector); kept here so that
  // setting one wakes the stream.
  struct Directives {
    bool cut_next_event = false;  // send half the next event, then drop
    bool stalled = false;         // send nothing, keep the connection
    int malformed_lines = 0;      // write this many garbage lines first
  };

  Watcher(const ResourceInfo* resource, WatchRequest request,
          size_t queue_limit);

  const ResourceInfo& resource() const { return *resource_; }
  const WatchRequest& request() const { return request_; }

  // Blocks (through `clock`) until there are events to send, the watcher is
  // closed, a directive is pending, or `deadline`. Moves up to `max` queued
  // events into `out` unless stalled. Returns the current directives and
  // close state through the out-params (directive counters are consumed).
  void Next(informer::Clock* clock, absl::Time deadline, size_t max,
            std::vector<StoreEvent>* out, Directives* directives,
            CloseKind* close);

  // Sets directives under the lock and wakes the stream.
  void Update(const std::function<void(Directives&)>& fn);
  void Close(CloseKind kind);

  // Events queued but not yet taken (for tests and bookmarks).
  size_t QueueSize() const;

 private:
  friend class ObjectStore;
  // Called by the store with its lock held.
  void Push(StoreEvent event);

  const ResourceInfo* const resource_;
  const WatchRequest request_;
  const size_t queue_limit_;
  mutable absl::Mutex mu_;
  std::deque<StoreEvent> queue_ ABSL_GUARDED_BY(mu_);
  Directives directives_ ABSL_GUARDED_BY(mu_);
  // Set by Update so the stream re-evaluates (e.g. after a stall ends).
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  CloseKind close_ ABSL_GUARDED_BY(mu_) = CloseKind::kOpen;
};

}  // namespace emulator

#endif  // EMULATOR_WATCHER_H_

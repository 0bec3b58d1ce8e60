#ifndef SERVER_REGISTRY_STALE_STATE_H_
#define SERVER_REGISTRY_STALE_STATE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace server {

// Whether one informer serves stale data (--serve_stale_on_start): its
// cache was loaded from a snapshot on disk and the API server could not be
// reached since the start, so nothing has confirmed that state yet.
//
// The snapshot loader says "loaded from a snapshot written at T" with
// MarkLoadedFromSnapshot (the seam between the loader and the serving
// side). Readers then call Observe with what the informer shows now:
//
//   not enabled, or not loaded   -> never stale (today's behaviour);
//   synced                       -> fresh, for good (a list or watch
//                                   succeeded and the informer caught up);
//   not synced, after an error   -> stale (latched until synced): the
//                                   first list or watch attempt failed;
//   not synced, no error yet     -> not stale: the warm restart is still
//                                   catching up, Watch streams wait as for
//                                   any sync.
//
// A stale informer turns fresh only once. Observe is cheap (a mutex and a
// few fields), so readers (queries, scrapes, /readyz, the Watch fan-out)
// call it instead of a thread watching the informer.
//
// Thread-safety: all methods are thread-safe.
class StaleState {
 public:
  struct View {
    // Serving stale data now.
    bool stale = false;
    // Was stale and turned fresh (the streams that were told stale must be
    // told fresh).
    bool turned_fresh = false;
    // When the loaded snapshot was written (InfinitePast if none).
    absl::Time snapshot_written = absl::InfinitePast();
  };

  // With --serve_stale_on_start; before the informer starts.
  void Enable() ABSL_LOCKS_EXCLUDED(mu_);
  // The seam: the informer's cache was loaded from a snapshot written at
  // `written` (by the writer's clock) and is not yet confirmed by the
  // API server.
  void MarkLoadedFromSnapshot(absl::Time written) ABSL_LOCKS_EXCLUDED(mu_);
  // Updates and returns the state from what the informer shows now:
  // whether it has synced and its reflector's error count.
  View Observe(bool synced, int64_t reflector_errors) ABSL_LOCKS_EXCLUDED(mu_);
  // The state as last observed (no update).
  View Last() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  View view_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server

#endif  // SERVER_REGISTRY_STALE_STATE_H_

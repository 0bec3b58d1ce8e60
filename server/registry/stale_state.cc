#include "server/registry/stale_state.h"

namespace server {

void StaleState::Enable() {
  absl::MutexLock lock(&mu_);
  enabled_ = true;
}

void StaleState::MarkLoadedFromSnapshot(absl::Time written) {
  absl::MutexLock lock(&mu_);
  loaded_ = true;
  view_.snapshot_written = written;
}

StaleState::View StaleState::Observe(bool synced, int64_t reflector_errors) {
  absl::MutexLock lock(&mu_);
  if (!enabled_ || !loaded_ || view_.turned_fresh) return view_;
  if (synced) {
    // Only an informer that was stale turns fresh; one that caught up
    // before any failure never was stale.
    view_.turned_fresh = view_.stale;
    view_.stale = false;
    // Never stale again: later failures are those of a running informer.
    loaded_ = false;
  } else if (reflector_errors > 0) {
    view_.stale = true;
  }
  return view_;
}

StaleState::View StaleState::Last() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

}  // namespace server

#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_RESUME_STORE_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_RESUME_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "informer/object/object.h"
#include "informer/persist/watch_history_section.h"
#include "server/registry/snapshot_keeper.h"

namespace server {

// Carries each resource's Watch history between the snapshots on disk
// (SnapshotKeeper) and the Watch fan-outs, so that resume tokens survive a
// sidecar restart.
//
// Writing: each snapshot of a resource whose fan-out keeps a history
// stores the fan-out's own state (its objects, exactly as its history
// leaves them) with the history, taken under the fan-out's lock, as an
// optional "watch_history" section. At shutdown the hub goes before the
// last snapshot is written: each fan-out leaves its last capture here
// (Detach), and that is what the last snapshot stores.
//
// Loading: a snapshot's history that checks out (see
// informer::DecodeWatchHistorySection) is kept here as a seed until the
// resource's fan-out takes it (before the informer starts): the fan-out
// then continues the old run's positions, and accepts the old run's
// tokens up to the last position the snapshot holds. A history that does
// not check out is logged and dropped: that resource's old tokens get
// RESET, and nothing else changes.
//
// Thread-safety: all methods are thread-safe. Lock order: mu_ -> a
// source's locks (Capture is called under mu_, so a source detaching
// waits for it). Sources must Detach before they are destroyed.
class WatchResumeStore {
 public:
  // A fan-out's history with the state it ends at, consistent.
  struct Capture {
    std::vector<informer::ObjectPtr> objects;
    // A resourceVersion the objects reflect at least.
    std::string resource_version;
    // Events, aliases and last_seq (identity and resourceVersion are
    // filled in here).
    informer::PersistedWatchHistory history;
    // Changes whenever the history does (Captured::change_tag).
    std::string change_tag;
  };
  // What a fan-out gives the store.
  class Source {
   public:
    virtual ~Source() = default;
    // nullopt: no history to keep (no token was ever issued).
    virtual std::optional<Capture> CaptureForSnapshot() = 0;
  };
  // A loaded history and the snapshot objects it ends at.
  struct Seed {
    informer::PersistedWatchHistory history;
    std::vector<informer::ObjectPtr> objects;
  };

  WatchResumeStore() = default;
  WatchResumeStore(const WatchResumeStore&) = delete;
  WatchResumeStore& operator=(const WatchResumeStore&) = delete;

  // Makes `target` (identity and transform set) keep `resource`'s history
  // in its snapshots. The target's callbacks refer to this store, which
  // must outlive their use.
  void Wire(const std::string& resource, SnapshotKeeper::Target* target)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The history loaded for `resource`, once (nullopt: none).
  std::optional<Seed> TakeSeed(const std::string& resource)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `source` serves `resource`'s history from now on; false (nothing
  // done) for a resource no snapshot keeps (not wired).
  bool Attach(const std::string& resource, Source* source)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `source` goes away; `last` (its final capture) stands for it.
  void Detach(const std::string& resource, Source* source,
              std::optional<Capture> last) ABSL_LOCKS_EXCLUDED(mu_);

  // For tests and Wire: what a snapshot of `resource` stores now.
  std::optional<Capture> CaptureNow(const std::string& resource)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Decodes `loaded`'s history (logged if absent or unusable) and keeps it
  // as `resource`'s seed.
  void SeedFromSnapshot(const std::string& resource,
                        const informer::SnapshotIdentity& identity,
                        const informer::TransformOptions& transform,
                        const informer::LoadedSnapshot& loaded)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    Source* source = nullptr;
    std::optional<Capture> parked;
    std::optional<Seed> seed;
  };

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_RESUME_STORE_H_

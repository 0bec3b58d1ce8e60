#ifndef SERVER_KUBEAPI_RESOURCE_CACHE_H_
#define SERVER_KUBEAPI_RESOURCE_CACHE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/event_handler.h"
#include "informer/object/object.h"
#include "informer/object/wire.h"

namespace server {
namespace kubeapi {

// One change of a resource as the facade replays it to watchers.
struct Change {
  // Position in the history (consecutive, from 1).
  int64_t seq = 0;
  // The resourceVersion the cache reached with this change.
  int64_t rv = 0;
  informer::WatchEventType type = informer::WatchEventType::kAdded;
  // The object after the change (for kDeleted: its final state).
  informer::ObjectPtr object;
  // The object before the change (null for kAdded).
  informer::ObjectPtr old;
};

// ResourceCache is the facade's view of one informer: the current objects
// keyed like the API server's storage ("namespace/name", sorted) and a
// bounded history of changes keyed by resourceVersion, kept consistent with
// each other under one lock, so a list or watch can start at an exact
// point: a snapshot and "every change after it".
//
// It is fed as a non-blocking ResourceEventHandler of the informer (the
// informer's cache is updated before handlers hear of a change, so reading
// the informer's indexer could see a change the history has not recorded
// yet; keeping our own map of pointers avoids that). Initial adds fill the
// map; later notifications append to the history. Resyncs (an update with
// an unchanged resourceVersion) are ignored.
//
// ResourceVersions are the API server's (etcd revisions, parsed as
// integers; an unparsable one counts as 0). The cache's resourceVersion is
// the highest applied so far; a change whose object carries a lower one (a
// delete inferred by a relist) is recorded at the current resourceVersion.
//
// Progress: the informer also applies resourceVersions that change no
// object (bookmarks; a list's resourceVersion); AdvanceTo() makes them the
// cache's resourceVersion, so lists and watches at such a version are
// answered at once, as the API server's watch cache does.
//
// History: at most `history_limit` changes. floor() is the oldest
// resourceVersion the history can rewind to: lists at any RV in
// [floor, resource_version] and watches from any RV >= floor are exact.
//
// Thread-safety: all methods are thread-safe. `on_change` runs on the
// informer's thread after each recorded change, without the lock held; it
// must not block.
class ResourceCache final : public informer::ResourceEventHandler {
 public:
  ResourceCache(size_t history_limit, std::function<void()> on_change);

  // ResourceEventHandler (called by the informer).
  void OnAdd(const informer::ObjectPtr& obj, bool is_in_initial_list) override;
  void OnUpdate(const informer::ObjectPtr& old_obj,
                const informer::ObjectPtr& new_obj) override;
  void OnDelete(const informer::ObjectPtr& obj,
                bool final_state_unknown) override;

  int64_t resource_version() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t floor() const ABSL_LOCKS_EXCLUDED(mu_);

  // Progress without a change: the informer has applied everything up to
  // `rv` (an upstream bookmark, or a list's resourceVersion), so the state
  // the cache holds is also the state at `rv`. Raises resource_version()
  // to `rv` (never lowers it); true when it rose. The first call on a cache
  // that has recorded no change yet also raises floor() to `rv`: before it
  // the cache only knew its objects' own resourceVersions, not the list's,
  // and changes between them (deletes) were never seen.
  bool AdvanceTo(int64_t rv) ABSL_LOCKS_EXCLUDED(mu_);

  // resource_version() and next_seq() read together: a watcher whose next
  // change is `next_seq` has seen everything up to `rv`.
  struct Progress {
    int64_t rv = 0;
    int64_t next_seq = 0;
  };
  Progress GetProgress() const ABSL_LOCKS_EXCLUDED(mu_);
  // The seq the next change will get.
  int64_t next_seq() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // One object by key ("ns/name" or "name"); null when absent.
  informer::ObjectPtr Get(absl::string_view key) const ABSL_LOCKS_EXCLUDED(mu_);

  // A page of the state at `rv` (0: the current state): objects whose key
  // starts with `prefix` ("ns/" or "" for all), is greater than
  // `start_after` (a full key; "" = from the start) and satisfies `match`,
  // at most `limit` (0 = all). OutOfRange when `rv` is older than floor(),
  // FailedPrecondition when newer than resource_version().
  struct Page {
    int64_t rv = 0;
    std::vector<informer::ObjectPtr> objects;
    // More matching-or-not objects follow the page (a next page is needed).
    bool more = false;
    // Objects of the prefix after the page at `rv` (counted only when
    // `count_remaining`).
    int64_t remaining = 0;
    // Seq of the first change after the snapshot (watch from here).
    int64_t next_seq = 0;
  };
  absl::StatusOr<Page> List(
      int64_t rv, absl::string_view prefix, absl::string_view start_after,
      int64_t limit, const std::function<bool(const informer::Object&)>& match,
      bool count_remaining) const ABSL_LOCKS_EXCLUDED(mu_);

  // The seq of the first change with a resourceVersion above `rv`;
  // OutOfRange when `rv` < floor() (the changes after it are gone).
  absl::StatusOr<int64_t> SeqAfter(int64_t rv) const ABSL_LOCKS_EXCLUDED(mu_);

  // Appends the changes with seq >= `from_seq` (at most `max`) to *out.
  // OutOfRange when some of them have left the history (a watcher that fell
  // too far behind).
  absl::Status ChangesSince(int64_t from_seq, size_t max,
                            std::vector<Change>* out) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void RecordLocked(informer::WatchEventType type, informer::ObjectPtr obj,
                    informer::ObjectPtr old) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t history_limit_;
  const std::function<void()> on_change_;

  mutable absl::Mutex mu_;
  std::map<std::string, informer::ObjectPtr, std::less<>> objects_
      ABSL_GUARDED_BY(mu_);
  std::deque<Change> history_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t floor_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool advanced_ ABSL_GUARDED_BY(mu_) = false;
};

// The resourceVersion of `obj` as an integer (0 when unparsable).
int64_t ParseResourceVersion(absl::string_view rv);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_RESOURCE_CACHE_H_

#ifndef INFORMER_CACHE_TESTING_FAKE_SOURCE_H_
#define INFORMER_CACHE_TESTING_FAKE_SOURCE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/object/object.h"

namespace informer {

// FakeSource is an in-process ListerWatcher with API-server semantics
// (client-go's FakeControllerSource): a versioned store with one increasing
// resourceVersion, paged lists, watches from a resourceVersion replayed from a
// bounded history (older -> an ERROR event with a 410 Expired status, as the
// API server sends it), bookmarks, and fault injection. Informer tests and
// the informer demo run on it; the HTTP emulator in server/emulator is its
// over-the-wire counterpart.
//
// Thread-safe. Watch streams it returned may outlive neither it nor their
// own Stop(): destroy streams before the source.
class FakeSource final : public ListerWatcher {
 public:
  struct Labels : std::vector<std::pair<std::string, std::string>> {
    using vector::vector;
  };

  explicit FakeSource(size_t history_limit = 1000);
  ~FakeSource() override;

  // Mutations: each assigns the next resourceVersion (and a uid on Add) and
  // notifies watchers. Add of an existing key and Modify/Delete of a missing
  // one return an error.
  absl::StatusOr<ObjectPtr> Add(absl::string_view ns, absl::string_view name,
                                Labels labels = {},
                                absl::string_view node_name = "");
  absl::StatusOr<ObjectPtr> Modify(absl::string_view ns, absl::string_view name,
                                   Labels labels = {},
                                   absl::string_view node_name = "");
  absl::StatusOr<ObjectPtr> Delete(absl::string_view ns,
                                   absl::string_view name);

  // Current state (for comparing a cache with the source).
  std::map<std::string, ObjectPtr> Snapshot() const;
  std::string CurrentResourceVersion() const;

  // --- Fault injection ---
  // Ends every open watch normally (as timeoutSeconds does).
  void CloseWatches();
  // Breaks every open watch with `error` (a cut connection).
  void BreakWatches(absl::Status error);
  // Drops the event history: watches from any older resourceVersion now get
  // 410 Expired (an etcd compaction / API server restart).
  void CompactHistory();
  // The next `n` List (or Watch) calls fail with `error`.
  void FailLists(int n, absl::Status error);
  void FailWatches(int n, absl::Status error);
  // WatchList (sendInitialEvents) support: off by default, answering 422
  // like a v1.24 API server.
  void SetWatchListSupported(bool supported);
  // Sends a BOOKMARK at the watch cache's resourceVersion to every watcher.
  void SendBookmark();
  // The API server's watch cache keeps a resourceVersion of its own per
  // resource: its last event's, or etcd's after a consistent read made it
  // catch up. Lists at resourceVersion "0" answer with it, the others
  // (consistent, or at an RV) with etcd's (the current one), and move the
  // cache there.
  // WriteElsewhere moves etcd's resourceVersion without an event of this
  // resource (another resource's write); LagWatchCache sets the cache's
  // (another API server's cache that lags) until the next event.
  void WriteElsewhere();
  void LagWatchCache(int64_t rv);

  int64_t list_calls() const;
  int64_t watch_calls() const;
  // Watch calls that asked for sendInitialEvents (WatchList).
  int64_t watch_list_calls() const;
  int open_watches() const;
  // Blocks until at least `n` watches are open.
  void WaitForWatches(int n) const;

  // ListerWatcher.
  absl::StatusOr<ObjectList> List(const ListOptions& options) override;
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override;

 private:
  class Stream;
  struct HistoryEntry {
    int64_t rv;
    WatchEvent event;
  };

  absl::StatusOr<ObjectPtr> MutateLocked(WatchEventType type,
                                         absl::string_view ns,
                                         absl::string_view name,
                                         const Labels& labels,
                                         absl::string_view node_name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BroadcastLocked(const WatchEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister(Stream* stream);

  const size_t history_limit_;
  mutable absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t cache_rv_ ABSL_GUARDED_BY(mu_) = 1;  // see WriteElsewhere
  int64_t uid_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Oldest resourceVersion a watch may start from.
  int64_t history_floor_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, ObjectPtr> objects_ ABSL_GUARDED_BY(mu_);
  std::deque<HistoryEntry> history_ ABSL_GUARDED_BY(mu_);
  std::vector<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  bool watch_list_supported_ ABSL_GUARDED_BY(mu_) = false;
  int fail_lists_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status list_error_ ABSL_GUARDED_BY(mu_);
  int fail_watches_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status watch_error_ ABSL_GUARDED_BY(mu_);
  int64_t list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t watch_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t watch_list_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace informer

#endif  // INFORMER_CACHE_TESTING_FAKE_SOURCE_H_

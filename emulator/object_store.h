#ifndef EMULATOR_OBJECT_STORE_H_
#define EMULATOR_OBJECT_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "emulator/continue_token.h"
#include "emulator/patch.h"
#include "emulator/resource_registry.h"
#include "emulator/selector.h"
#include "emulator/stored_object.h"
#include "emulator/watcher.h"
#include "informer/util/clock.h"
#include "rapidjson/document.h"

namespace emulator {

struct ListRequest {
  std::string ns;  // empty: all namespaces (or a cluster-scoped resource)
  LabelSelector labels;
  FieldSelector fields;
  int64_t limit = 0;  // 0: no paging
  std::string continue_token;
  std::string resource_version;        // "", "0" or a number
  std::string resource_version_match;  // "", "Exact", "NotOlderThan"
};

struct ListResult {
  std::vector<StoredObjectPtr> items;  // in key order
  int64_t resource_version = 0;        // the snapshot's
  std::string continue_token;          // empty on the last page
  int64_t remaining_item_count = -1;   // -1: not reported (selectors)
};

class ObjectStore;

// ObjectStore is the emulator's versioned in-memory etcd + watch cache.
//
// - One resourceVersion counter across all resources, incremented by every
//   write; an object's metadata.resourceVersion is the counter at its write.
// - Multi-version ("etcd"): each key keeps its versions since the last
//   compaction, so paged lists continue from a consistent snapshot
//   (continue tokens carry the snapshot RV and the last key), and a list
//   with a resourceVersion and a limit (no resourceVersionMatch, or Exact)
//   is an exact read at that RV, as kube-apiserver serves it from etcd.
//   Compaction (every `compaction_interval`, to the RV of the previous
//   compaction tick, like the API server's etcd compactor; or Compact())
//   expires older continue tokens and exact RVs with 410.
// - Lists with an RV but no limit, or NotOlderThan, are served at the
//   current state (the watch cache's "not older than").
// - Per resource, a bounded history of the last `history_length` events
//   ("the watch cache"): a watch from an RV older than the history gets
//   410 Expired. Restart() starts it over at the current RV.
// - No admission, defaulting, graceful deletion, finalizers or namespace
//   existence checks: deletes are immediate.
//
// Thread-safety: all methods are thread-safe (one mutex). Ownership: the
// store does not own the registry or clock; both must outlive it.
class ObjectStore {
 public:
  struct Options {
    size_t history_length = 1000;
    absl::Duration compaction_interval = absl::Minutes(5);
    size_t watcher_queue_limit = 1 << 20;
    informer::Clock* clock = informer::RealClock();
    // Serve `resourceVersion=0` lists (without a continue token or
    // resourceVersionMatch=Exact) whole, ignoring `limit`, as a v1.24
    // kube-apiserver does when its watch cache answers them.
    bool rv0_list_ignores_limit = false;
    // Continue tokens' start keys begin with "/", as v1.37's do (v1.24's
    // are relative). Tokens of either form are accepted.
    bool continue_key_slash = false;
    // A watch from a resourceVersion newer than the store's is accepted
    // and sends the events after it once they happen, as v1.37's watch
    // cache does; otherwise it fails with DeadlineExceeded (504).
    bool watch_from_future_rv = false;
    // How long a list at a resourceVersion newer than the store's waits for
    // it before DeadlineExceeded (the watch cache waits 3 s). Real time:
    // the wait is on a condition, the store's RV reaching the request's.
    absl::Duration too_large_rv_wait = absl::ZeroDuration();
    // kube-apiserver's watch cache (--watch-cache, on by default) answers
    // with its own resourceVersion, one per resource: that of the last
    // event of the resource, or of etcd's last progress notification to
    // it. A list at resourceVersion=0, a list not older than an RV, the
    // bookmarks and the initial-events-end bookmark carry it, not the
    // store's RV (which every write of every resource moves). Off: every
    // read is etcd's, at the store's RV.
    bool per_resource_cache_rv = false;
    // kube-apiserver >= 1.31 serves consistent lists (resourceVersion "")
    // and WatchLists from the watch cache: it asks etcd for a progress
    // notification and waits for it, which brings the resource's cache
    // RV to the store's. v1.24 reads them from etcd and leaves the cache
    // as it is.
    bool consistent_reads_from_cache = false;
    // etcd's --watch-progress-notify-interval (10 min by default; kubeadm
    // sets 5 s): this often every watch cache hears etcd's revision, as
    // if the events of every other resource had reached it.
    absl::Duration progress_notify_interval = absl::Minutes(10);
  };

  explicit ObjectStore(Options options);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;
  ~ObjectStore();

  // Creates from a full object's JSON. Sets uid, resourceVersion,
  // creationTimestamp (and generation for resources that keep one); a
  // metadata.generateName without name gets a random suffix. Errors:
  // InvalidArgument (malformed, wrong kind, namespace mismatch), AlreadyExists,
  // FailedPrecondition with kInvalidPayload (no name, or an invalid one).
  absl::StatusOr<StoredObjectPtr> Create(const ResourceInfo& r,
                                         absl::string_view ns,
                                         absl::string_view json);
  // Replaces an object. A non-empty metadata.resourceVersion in `json` must
  // equal the current one (else Aborted, i.e. 409 Conflict). uid and
  // creationTimestamp are kept. NotFound when absent.
  absl::StatusOr<StoredObjectPtr> Update(const ResourceInfo& r,
                                         absl::string_view ns,
                                         absl::string_view name,
                                         absl::string_view json);
  // Patches the current object (a resourceVersion in the patch is a
  // precondition, as in the API server).
  absl::StatusOr<StoredObjectPtr> Patch(const ResourceInfo& r,
                                        absl::string_view ns,
                                        absl::string_view name, PatchType type,
                                        absl::string_view patch);
  // Returns the deleted object as the DELETED event carries it (new RV).
  absl::StatusOr<StoredObjectPtr> Delete(const ResourceInfo& r,
                                         absl::string_view ns,
                                         absl::string_view name);
  absl::StatusOr<StoredObjectPtr> Get(const ResourceInfo& r,
                                      absl::string_view ns,
                                      absl::string_view name) const;

  // A page of a consistent snapshot. Errors: OutOfRange (expired continue
  // token, with payload kContinuePayload holding a fresh inconsistent token;
  // or an Exact RV older than the compaction), DeadlineExceeded (RV newer
  // than the store's), InvalidArgument (bad token or RV).
  absl::StatusOr<ListResult> List(const ResourceInfo& r,
                                  const ListRequest& request);

  // Opens a watch. RV ""/"0" or send_initial_events: ADDED for every current
  // matching object first. Otherwise replays history after the RV;
  // OutOfRange "too old resource version: RV (oldest)" when the history no
  // longer reaches back. The caller must call StopWatch when done.
  absl::StatusOr<std::shared_ptr<Watcher>> Watch(const ResourceInfo& r,
                                                 WatchRequest request);
  void StopWatch(const std::shared_ptr<Watcher>& watcher);

  // The RV a bookmark may carry now: the store's current RV if the
  // watcher has nothing queued (so every earlier event was taken), else
  // nullopt (send the queued events first).
  absl::optional<int64_t> BookmarkRv(const Watcher& watcher) const;

  // Waits up to `timeout` (real time, on a condition) until the store's RV
  // reaches `rv`; true when it has.
  bool AwaitRv(int64_t rv, absl::Duration timeout) const;

  // Applies `fn` to every open watcher of `r` (all resources when null).
  void ForEachWatcher(const ResourceInfo* r,
                      const std::function<void(Watcher&)>& fn) const;
  int NumWatchers(const ResourceInfo* r) const;
  // Waits (real time, condition-based) until at least `n` watchers are open
  // on `r` (any resource when null). False on timeout.
  bool AwaitWatchers(const ResourceInfo* r, int n,
                     absl::Duration timeout) const;

  // etcd compaction to the current RV: older continue tokens and exact
  // lists at older RVs get 410 Expired. The watch history (the API
  // server's watch cache) is not affected, as in kube-apiserver.
  void Compact();
  // What an API server restart looks like to clients: the watch history
  // starts over at the current RV (a watch from an older RV gets 410 "too
  // old resource version: RV (current)"), and every watch is dropped
  // abruptly. Versions stay until Compact(), as etcd's do.
  void Restart();
  // Ends every watch gracefully (server shutdown).
  void CloseAllWatchers();

  int64_t CurrentRv() const;
  int64_t CompactedRv() const;
  // Keys and RVs of the live objects of `r` (all namespaces), sorted by key:
  // what integration tests compare caches against.
  std::vector<std::pair<std::string, int64_t>> Snapshot(
      const ResourceInfo& r) const;
  size_t Count(const ResourceInfo& r) const;

  // One version of a key (public for the store's helpers).
  struct Version {
    int64_t rv;
    StoredObjectPtr object;  // null: deleted at rv
  };

 private:
  // Where a list starts: a continue token's snapshot RV and key.
  struct ListPosition {
    bool has_token = false;
    int64_t token_rv = 0;
    std::string start;
  };
  struct HistoryEntry {
    EventType type;
    StoredObjectPtr object;
    StoredObjectPtr prev;  // MODIFIED/DELETED: the version before
  };
  struct ResourceState {
    std::map<std::string, std::vector<Version>> entries;  // by key
    size_t live = 0;
    std::deque<HistoryEntry> history;
    int64_t history_floor = 0;  // events with rv > floor are all in history
    // The watch cache's resourceVersion (Options::per_resource_cache_rv):
    // the store's when the cache started (first use, Restart), then each
    // event's, or the store's again at a progress notification.
    int64_t cache_rv = 0;
    std::vector<std::shared_ptr<Watcher>> watchers;
  };

  ResourceState& StateLocked(const ResourceInfo& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const ResourceState* FindStateLocked(const ResourceInfo& r) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  StoredObjectPtr CurrentLocked(const ResourceState& st,
                                const std::string& key) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Records a write: appends the version, history and notifies watchers.
  void CommitLocked(const ResourceInfo& r, ResourceState& st,
                    const std::string& key, EventType type,
                    StoredObjectPtr object, StoredObjectPtr prev)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<StoredObjectPtr> UpdateLocked(const ResourceInfo& r,
                                               absl::string_view ns,
                                               absl::string_view name,
                                               rapidjson::Document& doc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The RV a list is served at, or the API server's error for it.
  absl::StatusOr<int64_t> SnapshotRvLocked(const ResourceState& st,
                                           const ListRequest& req,
                                           const ListPosition& pos) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The RV the watch cache of `st` answers with (the store's without one).
  int64_t CacheRvLocked(const ResourceState& st) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A read that needs the watch cache at `rv` or later: as kube-apiserver
  // does, it asks etcd for a progress notification, which brings the
  // cache to the store's RV. `consistent`: a read at "the latest", which
  // only a server serving consistent reads from its cache does this for.
  void AwaitCacheLocked(ResourceState& st, int64_t rv, bool consistent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `result` (whose resource_version is the snapshot) with one page.
  void ScanLocked(const ResourceInfo& r, const ResourceState& st,
                  const ListRequest& req, const ListPosition& pos,
                  int64_t limit, ListResult* result) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static std::string RemainingMemoKey(const ResourceInfo& r,
                                      absl::string_view prefix, int64_t rv,
                                      absl::string_view start_key);
  void MaybeCompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a progress notification that fell due before a write at
  // `write_rv` (at the revision before it).
  void NoteProgressLocked(int64_t write_rv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompactToLocked(int64_t rv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compacted_rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rv_at_last_tick_ ABSL_GUARDED_BY(mu_) = 0;
  // Watch histories restart here after Compact()/Restart().
  int64_t history_reset_rv_ ABSL_GUARDED_BY(mu_) = 0;
  // etcd's last progress notification: its revision, and when the next is
  // due (each cache is at least there once it is).
  int64_t progress_rv_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_progress_ ABSL_GUARDED_BY(mu_);
  absl::Time next_compaction_ ABSL_GUARDED_BY(mu_);
  int num_watchers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);  // uids, generateName suffixes
  absl::flat_hash_map<const ResourceInfo*, std::unique_ptr<ResourceState>>
      states_ ABSL_GUARDED_BY(mu_);
  // remainingItemCount after each continue token handed out, so that the
  // next page need not count the rest of the list again (a snapshot's
  // contents never change, so the count stays right). Keyed by resource,
  // namespace prefix, snapshot RV and start key. List() holds mu_ only as
  // a reader, hence the separate mutex. Bounded: cleared when full.
  mutable absl::Mutex remaining_mu_ ABSL_ACQUIRED_AFTER(mu_);
  mutable absl::flat_hash_map<std::string, int64_t> remaining_after_
      ABSL_GUARDED_BY(remaining_mu_);
};

}  // namespace emulator

#endif  // EMULATOR_OBJECT_STORE_H_

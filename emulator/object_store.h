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
#include "informer/util/clock.h"
#include "rapidjson/document.h"
#include "emulator/patch.h"
#include "emulator/resource_registry.h"
#include "emulator/selector.h"

namespace emulator {

// One stored version of an object. Immutable and shared by the store, its
// history, snapshots and watch streams; each object's JSON text exists once.
struct StoredObject {
  // Compact JSON without kind/apiVersion, "metadata" first: exactly a list
  // item. Watch events and GETs splice kind/apiVersion in front.
  std::string body;
  // body.substr(kMetadataOffset, metadata_len) is the metadata object (for
  // metadata-only responses).
  static constexpr size_t kMetadataOffset = 12;  // strlen("{\"metadata\":")
  size_t metadata_len = 0;
  std::string ns;
  std::string name;
  std::string uid;
  int64_t rv = 0;
  std::string creation_timestamp;
  int64_t generation = 0;
  StringPairs labels;  // sorted
  StringPairs fields;  // selectable field values (metadata.name, ...), sorted

  absl::string_view metadata_json() const {
    return absl::string_view(body).substr(kMetadataOffset, metadata_len);
  }
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
};
using StoredObjectPtr = std::shared_ptr<const StoredObject>;

enum class EventType { kAdded, kModified, kDeleted, kBookmark };
absl::string_view EventTypeName(EventType type);

// One event as a watch delivers it.
struct StoreEvent {
  EventType type = EventType::kAdded;
  StoredObjectPtr object;  // null for bookmarks
  int64_t rv = 0;
  // Bookmark ending a WatchList's initial events
  // (annotation k8s.io/initial-events-end: "true").
  bool initial_events_end = false;
};

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

struct WatchRequest {
  std::string ns;
  LabelSelector labels;
  FieldSelector fields;
  std::string resource_version;  // "", "0" or a number
  // WatchList: initial ADDED events then a bookmark marked
  // initial_events_end.
  bool send_initial_events = false;
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

// ObjectStore is the emulator's versioned in-memory etcd + watch cache.
//
// - One resourceVersion counter across all resources, incremented by every
//   write; an object's metadata.resourceVersion is the counter at its write.
// - Multi-version: each key keeps its versions since the last compaction, so
//   paged lists continue from a consistent snapshot (continue tokens carry
//   the snapshot RV and the last key). Compaction (every
//   `compaction_interval`, to the RV of the previous compaction tick, like
//   the API server's etcd compactor; or Compact()/Restart()) expires older
//   continue tokens with 410.
// - Per resource, a bounded history of the last `history_length` events: a
//   watch from an RV older than the history gets 410 Expired.
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
  };

  explicit ObjectStore(Options options);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;
  ~ObjectStore();

  // Creates from a full object's JSON. Sets uid, resourceVersion,
  // creationTimestamp (and generation for resources that keep one); a
  // metadata.generateName without name gets a random suffix. Errors:
  // InvalidArgument (malformed, wrong kind, namespace mismatch), AlreadyExists,
  // FailedPrecondition (no name).
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
                                  const ListRequest& request) const;

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

  // Applies `fn` to every open watcher of `r` (all resources when null).
  void ForEachWatcher(const ResourceInfo* r,
                      const std::function<void(Watcher&)>& fn) const;
  int NumWatchers(const ResourceInfo* r) const;
  // Waits (real time, condition-based) until at least `n` watchers are open
  // on `r` (any resource when null). False on timeout.
  bool AwaitWatchers(const ResourceInfo* r, int n,
                     absl::Duration timeout) const;

  // Expires every continue token and all watch history up to now.
  void Compact();
  // What an API server restart looks like to clients: Compact(), then every
  // watch is dropped abruptly.
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

 private:
  struct Version {
    int64_t rv;
    StoredObjectPtr object;  // null: deleted at rv
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
  void MaybeCompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompactToLocked(int64_t rv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compacted_rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rv_at_last_tick_ ABSL_GUARDED_BY(mu_) = 0;
  // Watch histories restart here after Compact()/Restart().
  int64_t history_reset_rv_ ABSL_GUARDED_BY(mu_) = 0;
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

// Watch-event text for one object: {"type":T,"object":{"kind":..,...}}\n.
// `metadata_only` renders a PartialObjectMetadata.
std::string EventLine(EventType type, const ResourceInfo& r,
                      const StoredObject& object, bool metadata_only);
// Bookmark line, as the captures show.
std::string BookmarkLine(const ResourceInfo& r, int64_t rv,
                         bool initial_events_end, bool metadata_only);
// The object as a GET returns it (kind/apiVersion spliced in).
std::string ObjectJson(const ResourceInfo& r, const StoredObject& object,
                       bool metadata_only);

// Continue tokens: base64url({"v":"meta.k8s.io/v1","rv":RV,"start":KEY\0}).
std::string EncodeContinueToken(int64_t rv, absl::string_view start_key);
absl::StatusOr<std::pair<int64_t, std::string>> DecodeContinueToken(
    absl::string_view token);

}  // namespace emulator

#endif  // EMULATOR_OBJECT_STORE_H_

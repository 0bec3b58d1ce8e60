#ifndef SERVER_REGISTRY_INFORMER_REGISTRY_H_
#define SERVER_REGISTRY_INFORMER_REGISTRY_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/index.h"
#include "informer/cache/shared_informer.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/util/clock.h"
#include "server/registry/resource_resolver.h"
#include "server/registry/stale_state.h"

namespace server {

// What one informer watches and how its cache is indexed.
struct ResourceConfig {
  // The resource. As configured it may be any name kubectl accepts ("po",
  // "deploy"); with a resolver the registry replaces it by the canonical
  // name ("pods", "deployments.apps") that ListResources and health show.
  std::string resource;
  // "" = all namespaces.
  std::string namespace_;
  // Server-side filters of the informer's list and watch ("" = none).
  std::string label_selector;
  std::string field_selector;
  // Cache PartialObjectMetadata only (no spec/status).
  bool metadata_only = false;
  // Dotted field paths removed from every object at decode, on top of
  // metadata.managedFields (always dropped).
  std::vector<std::string> drop_fields;
  // Extra indexes: label keys (index "label:<key>"), dotted field paths
  // (index "field:<path>"). The "namespace" and "ownerUid" indexes are
  // always present.
  std::vector<std::string> label_indexes;
  std::vector<std::string> field_indexes;
  // Default resync period of the informer (0: none).
  absl::Duration resync_period = absl::ZeroDuration();
  // Where it was configured, for error messages ("sidecar.yaml:4:3",
  // "--resources", "lazy").
  std::string origin;
};

// Builds the ListerWatcher of one resource (the sidecar resolves the name
// through API discovery; tests return an informer::FakeSource).
using ListerWatcherFactory =
    std::function<absl::StatusOr<std::unique_ptr<informer::ListerWatcher>>(
        const ResourceConfig& config)>;

// One informer of the registry.
struct InformerEntry {
  ResourceConfig config;
  // Started on demand (lazy mode); stopped by the registry when idle.
  bool lazy = false;
  std::unique_ptr<informer::ListerWatcher> source;
  // Declared after `source`: destroyed (and so stopped) before it.
  std::unique_ptr<informer::SharedIndexInformer> informer;
  // Open Watch streams on this resource, reported by ListResources; the
  // watch hub (server/informer_service/watch/watch_hub.h) counts them up
  // and down. A lazy informer with open streams is never idle.
  std::atomic<int> streams{0};
  // Serving a snapshot the API server has not confirmed
  // (--serve_stale_on_start); see ObserveStale. Mutable: observing
  // updates it.
  mutable StaleState stale;
};

// The stale state of `entry` now, from its informer's sync and errors
// (see StaleState). Thread-safe.
StaleState::View ObserveStale(const InformerEntry& entry);

// Why `entry`'s informer has not synced, when the API server is refusing
// it in a way retrying will not fix: the informer's last error is a 400,
// 401, 403 or 404 (a field selector the resource does not support, bad or
// expired credentials, RBAC without list/watch, a resource that no longer
// exists). OK when the informer has synced, has had no error, or only
// transient ones (5xx, 429, timeouts, refused connections), which the
// reflector's back-off rides out. The informer keeps retrying either way:
// someone may fix RBAC or the configuration.
absl::Status PersistentSyncError(const InformerEntry& entry);

// A handle on an entry that keeps it alive and, for a lazy informer, in
// use: the registry stops no informer while a handle on it exists. Copies
// share the lease; the lease ends when the last copy goes.
//
// Converts implicitly to InformerEntry* for code that only touches
// configured entries (never freed before the registry). Code that may see
// lazy entries must keep the InformerRef as long as it uses the entry.
class InformerRef {
 public:
  InformerRef() = default;
  InformerEntry* get() const { return ptr_.get(); }
  InformerEntry* operator->() const { return ptr_.get(); }
  InformerEntry& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  operator InformerEntry*() const { return ptr_.get(); }  // NOLINT

 private:
  friend class InformerRegistry;
  explicit InformerRef(std::shared_ptr<InformerEntry> ptr)
      : ptr_(std::move(ptr)) {}
  std::shared_ptr<InformerEntry> ptr_;
};

// InformerRegistry owns one SharedIndexInformer per resource, each with its
// source and indexes, and finds them by any name of the resource.
//
// Configured resources: Create() builds them (nothing runs yet), Start()
// starts them, they live until Stop()/destruction.
//
// Lazy mode (Options::allow_unlisted): Find() of a resource that is not
// configured builds and starts an informer for it (default settings,
// Options::lazy_namespace), shared by every later Find() of any of its
// names. A lazy informer is idle when nobody holds an InformerRef on it and
// it has no Watch stream (InformerEntry::streams); after
// Options::lazy_idle_timeout of idleness a background thread stops it and
// the next Find() starts a fresh one. Idleness is checked every
// min(timeout/4, 30s), so a stop happens between the timeout and the
// timeout plus one check period after the last activity.
//
// Lifetime (the lease design): Find() returns an InformerRef, which counts
// as activity and keeps the entry's memory alive, so an in-flight request
// never sees a freed or stopped informer. A retired entry is never handed
// out again; its memory is released by the background thread once the last
// handle is gone (never on a request thread, and never from an informer's
// own handler thread, which could not join itself).
//
// Names: with a ResourceResolver, every spelling ("po", "pod", "Pod",
// "pods") maps to one canonical name; configured names are resolved at
// Create() (so "po" and "pods" listed together are a duplicate). Without a
// resolver names match exactly.
//
// Thread-safety: all methods are thread-safe. Observers are called without
// the registry's lock held. The clock, resolver and factory's captures must
// outlive the registry; the registry must outlive every InformerRef.
class InformerRegistry {
 public:
  struct Options {
    informer::Clock* clock = informer::RealClock();
    // Not owned; null: exact names.
    ResourceResolver* resolver = nullptr;
    // Lazy mode: start informers for resources not configured.
    bool allow_unlisted = false;
    // Namespace of lazily started informers ("" = all).
    std::string lazy_namespace;
    absl::Duration lazy_idle_timeout = absl::Minutes(5);
    // Find() of a lazy informer that has not synced waits up to this long
    // for it, so a first request is answered from a synced cache instead of
    // UNAVAILABLE.
    absl::Duration lazy_sync_wait = absl::Seconds(5);
    // The informers' reflectors: stream the initial state as a WatchList
    // (see Reflector::Options::use_watch_list and
    // watch_list_after_refusal).
    bool use_watch_list = false;
    bool watch_list_after_refusal = false;
    // Configured informers loaded from a snapshot serve it, marked stale,
    // while the API server cannot be reached (see StaleState).
    bool serve_stale_on_start = false;
  };

  // Informer life-cycle notifications (e.g. for health statuses). Each
  // callback may be empty.
  struct Observer {
    // A lazy informer synced (once per informer).
    std::function<void(InformerEntry*)> on_lazy_synced;
    // A lazy informer is being stopped for idleness: drop everything that
    // refers to it. Called before its informer stops.
    std::function<void(InformerEntry*)> on_retired;
    // An informer's relist (configured or lazy) is in its cache: once per
    // relist (SharedIndexInformer::Options::on_relist_applied), on the
    // informer's own threads, so it must not block for long.
    std::function<void(InformerEntry*)> on_relist_applied;
  };

  // InvalidArgument for an empty or duplicate resource name (after
  // resolution, naming both origins); the resolver's or factory's error
  // (with the resource and its origin named) otherwise.
  static absl::StatusOr<std::unique_ptr<InformerRegistry>> Create(
      std::vector<ResourceConfig> configs, const ListerWatcherFactory& factory,
      Options options);
  static absl::StatusOr<std::unique_ptr<InformerRegistry>> Create(
      std::vector<ResourceConfig> configs, const ListerWatcherFactory& factory,
      informer::Clock* clock = informer::RealClock()) {
    Options options;
    options.clock = clock;
    return Create(std::move(configs), factory, std::move(options));
  }

  ~InformerRegistry();
  InformerRegistry(const InformerRegistry&) = delete;
  InformerRegistry& operator=(const InformerRegistry&) = delete;

  // Starts the configured informers (and the idle checker in lazy mode).
  absl::Status Start();
  // Stops every informer; later lazy starts fail with Unavailable.
  void Stop();

  // The informer of `resource` (any of its names), starting it in lazy
  // mode. NotFound naming the available resources and whether lazy mode is
  // on; Unavailable after Stop(); the factory's error when a lazy informer
  // cannot be built.
  absl::StatusOr<InformerRef> Find(absl::string_view resource)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The running informers (configured ones and live lazy ones), sorted by
  // resource name. Holding the returned pointers keeps the entries' memory
  // (not their informers running).
  std::vector<std::shared_ptr<InformerEntry>> entries() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The configured resource names, sorted.
  std::vector<std::string> ResourceNames() const;
  // True once every configured informer has synced.
  bool AllSynced() const;
  bool lazy_mode() const { return options_.allow_unlisted; }

  // Returns an id for RemoveObserver. Removal waits for running callbacks.
  int AddObserver(Observer observer) ABSL_LOCKS_EXCLUDED(observers_mu_);
  void RemoveObserver(int id) ABSL_LOCKS_EXCLUDED(observers_mu_);

  // Lazy informers started / stopped for idleness so far (for tests and
  // metrics).
  int lazy_starts() const ABSL_LOCKS_EXCLUDED(mu_);
  int lazy_stops() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until lazy_stops() reaches `n`; false after `timeout` (real
  // time, whatever the registry's clock).
  bool WaitForLazyStops(int n, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // For tests driving a FakeClock: waits until an idle check that saw the
  // clock at `at` or later has completed (or Stop). Checks run every
  // min(timeout/4, 30s) of clock time: advance the clock by at least that.
  void WaitForIdleCheck(absl::Time at) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    std::string name;  // canonical
    bool lazy = false;
    // Null while a lazy resource is not running.
    std::shared_ptr<InformerEntry> entry;
    // Another thread is building this lazy informer: wait for it.
    bool starting = false;
    int leases = 0;
    absl::Time last_used;
    bool synced_reported = false;
  };
  struct Lease;

  explicit InformerRegistry(Options options);

  absl::StatusOr<std::shared_ptr<InformerEntry>> Build(ResourceConfig config,
                                                       bool lazy) const;
  absl::StatusOr<std::string> CanonicalName(absl::string_view name)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Builds and starts the lazy informer of `slot` (whose `starting` the
  // caller set).
  absl::StatusOr<InformerRef> StartLazy(Slot* slot, absl::string_view requested)
      ABSL_LOCKS_EXCLUDED(mu_);
  InformerRef LeaseLocked(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads only immutable state: callable with or without mu_.
  absl::Status UnknownResource(absl::string_view name,
                               absl::string_view why) const;
  void MaybeReportSynced(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration IdlePeriod() const;
  void IdleLoop(absl::Time first) ABSL_LOCKS_EXCLUDED(mu_);
  void Notify(const std::function<void(const Observer&)>& call) const
      ABSL_LOCKS_EXCLUDED(observers_mu_);

  const Options options_;
  ListerWatcherFactory factory_;
  std::vector<std::string> configured_names_;
  // Configured entries (immutable after Create).
  std::vector<std::shared_ptr<InformerEntry>> configured_;

  mutable absl::Mutex mu_;
  // Canonical name -> slot. Slots are never removed (a lease points to its
  // slot); a lazy slot without an entry is a stopped lazy informer.
  std::map<std::string, std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  // Requested name -> canonical name, for names resolved once.
  absl::flat_hash_map<std::string, std::string> aliases_ ABSL_GUARDED_BY(mu_);
  // Retired lazy entries still referenced by someone.
  std::vector<std::shared_ptr<InformerEntry>> graveyard_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int lazy_starts_ ABSL_GUARDED_BY(mu_) = 0;
  int lazy_stops_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_idle_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread idle_thread_;

  mutable absl::Mutex observers_mu_;
  std::map<int, Observer> observers_ ABSL_GUARDED_BY(observers_mu_);
  int next_observer_ ABSL_GUARDED_BY(observers_mu_) = 0;
};

}  // namespace server

#endif  // SERVER_REGISTRY_INFORMER_REGISTRY_H_

#ifndef SERVER_KUBEAPI_KUBE_API_SERVER_H_
#define SERVER_KUBEAPI_KUBE_API_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/discovery.h"
#include "server/kubeapi/api_status.h"
#include "server/kubeapi/list_options.h"
#include "server/kubeapi/request_path.h"
#include "server/kubeapi/resource_cache.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"
#include "server/security/authz.h"

struct event_base;
struct event;
struct evhttp;
struct evhttp_request;
struct evhttp_connection;
struct evbuffer;
struct ssl_ctx_st;

namespace server {
namespace kubeapi {

// KubeApiServer serves the sidecar's informer caches over the Kubernetes
// API's HTTP interface, read-only: discovery, list, get and watch in the
// v1.24 API server's JSON wire format, so that kubectl, client-go and any
// other Kubernetes client read the node's cache instead of the API server.
//
// Semantics (see docs/kube-api-facade.md): lists are served from the cache
// (resourceVersion "" is the cache's current state, not a quorum read);
// "0" ignores limit; N with NotOlderThan (or no match and no limit) waits
// up to `not_older_than_wait` for the cache to reach N, else 504 as the
// API server's watch cache answers; Exact N (or N with a limit) and
// continue tokens are served from the bounded per-resource history, else
// 410. Watches replay the history from their resourceVersion (410 Expired
// as an ERROR event beyond it), honour allowWatchBookmarks and
// timeoutSeconds. Writes get 405.
//
// Serving: one libevent (evhttp) event loop thread for every connection;
// a watch costs a connection's buffers and a cursor into the history, no
// thread. Objects are written from the cache's shared JSON without copying
// (evbuffer references). A watch whose client reads slower than the
// changes arrive pauses while its connection has `watch_buffer_limit` bytes
// queued; if the queue does not drain within `slow_watcher_grace` the watch
// is terminated (connection closed, queue freed), as the API server's
// cacher terminates watchers that cannot keep up. Memory per watch is thus
// bounded by the limit plus one event.
//
// Auth: with an Authorizer that requires tokens, requests need
// "Authorization: Bearer <token>" (401 otherwise) and are checked with the
// same per-resource/per-namespace grants as the gRPC services (403 in the
// API server's words). An informer restricted to one namespace serves only
// that namespace (403 for others).
//
// Thread-safety: Start() and Shutdown() from one thread; port() and
// open_watches() from any. The registry, authorizer and metrics registry
// are not owned and must outlive the server.
class KubeApiServer {
 public:
  struct Options {
    // host:port to listen on; port 0 picks a free port (see port()).
    std::string listen;
    // PEM files. cert+key: serve HTTPS; client_ca: also require client
    // certificates signed by it.
    std::string tls_cert_file;
    std::string tls_key_file;
    std::string tls_client_ca_file;
    // The informers to serve (not owned).
    InformerRegistry* registry = nullptr;
    // What each served resource is (group, version, kind, scope, short
    // names), usually from API discovery. Each is found in the registry by
    // CanonicalResourceName(); a resource missing there is an error.
    std::vector<informer::client::ApiResource> resources;
    // Null: everybody may read everything (but Secrets, as the gRPC side).
    const Authorizer* authorizer = nullptr;
    // Null: no metrics.
    metrics::Registry* metrics = nullptr;
    // Changes kept per resource for watches and exact lists.
    size_t history_limit = 10000;
    // A watch without timeoutSeconds ends after this long (the API
    // server's --min-request-timeout is 30 minutes).
    absl::Duration default_watch_timeout = absl::Minutes(30);
    absl::Duration bookmark_interval = absl::Minutes(1);
    // How long a list at a resourceVersion the cache has not reached waits.
    absl::Duration not_older_than_wait = absl::Seconds(3);
    // How long a request waits for a cache that has not synced yet (then
    // 503 with Retry-After).
    absl::Duration sync_wait = absl::Seconds(60);
    // A connection idle (nothing to read or write) this long is closed.
    absl::Duration idle_timeout = absl::Hours(1);
    // A watch pauses while its connection has this many bytes queued (its
    // client reads slower than changes arrive) ...
    size_t watch_buffer_limit = 1 << 20;
    // ... and is terminated when the queue has not drained this long after:
    // its connection is closed and the queued bytes freed, as the API
    // server's cacher terminates a watcher whose buffer stays full. The
    // client re-watches from the last resourceVersion it read (410 Expired
    // if that has left the history since).
    absl::Duration slow_watcher_grace = absl::Seconds(5);
    // host:port written into /api's serverAddressByClientCIDRs; default the
    // listening address.
    std::string advertised_address;
    // Lazy mode (the registry's allow_unlisted): a resource `discovery`
    // knows (with list and watch) but `resources` does not list is served
    // on its first request: its informer is started through the registry
    // (InformerRegistry::Find, off the event loop), the request waits for
    // its sync up to `lazy_sync_wait` (or the request's timeoutSeconds,
    // when shorter), else 504 in the API server's words. Discovery then
    // lists every such resource. An open watch keeps its informer from
    // being retired for idleness; lists and gets count as activity.
    bool lazy = false;
    // Not owned; needed for lazy mode.
    informer::client::Discovery* discovery = nullptr;
    absl::Duration lazy_sync_wait = absl::Seconds(60);
  };

  // InvalidArgument for a malformed listen address, TLS files that do not
  // load, or a resource the registry does not have.
  static absl::StatusOr<std::unique_ptr<KubeApiServer>> Create(Options options);

  // Whether HOST:PORT `listen` is reachable from this host only, by
  // informer::IsLoopbackHost (a name such as "127.evil.example" is not):
  // without TLS anything else is warned about at Listen.
  static bool IsLoopbackListen(absl::string_view listen);
  ~KubeApiServer();
  KubeApiServer(const KubeApiServer&) = delete;
  KubeApiServer& operator=(const KubeApiServer&) = delete;

  // Subscribes to the informers, binds and starts serving.
  absl::Status Start();
  // Ends every watch and connection and stops. Idempotent.
  void Shutdown();

  // Waits until every served informer has synced and its initial state
  // reached the facade; false on timeout.
  bool WaitForSync(absl::Duration timeout) const;

  int port() const { return port_.load(); }
  int open_watches() const ABSL_LOCKS_EXCLUDED(watch_count_mu_);
  // Waits until exactly `n` watches are open; false after `timeout`.
  bool WaitForOpenWatches(int n, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(watch_count_mu_);
  // The most bytes ever queued on one watch connection (bounded by
  // watch_buffer_limit plus one event) and the watches terminated for not
  // reading; for tests and metrics.
  size_t peak_watch_queued_bytes() const { return peak_queued_.load(); }
  int64_t slow_watchers_terminated() const { return slow_terminated_.load(); }

 private:
  struct Served;
  struct Watcher;
  struct Parked;
  struct Request;
  struct LazyStart;

 public:
  // For the close callback of a parked list (internal).
  struct ParkedHandle {
    bool* done = nullptr;
    evhttp_request* req = nullptr;
  };

 private:
  explicit KubeApiServer(Options options);

  // Start's steps, before the loop thread runs.
  void NewHttp();
  // Binds options_.listen; sets port_ and advertised_.
  absl::Status Listen();
  // Gives each served informer its ResourceCache as an event handler.
  absl::Status SubscribeCaches();
  void StartParkedTick();

  // Loop thread.
  static void OnRequest(evhttp_request* req, void* self);
  static void OnWake(int fd, short what, void* self);
  void Handle(evhttp_request* req);
  // Discovery, /version (no token needed, as the API server's
  // system:discovery role allows everybody).
  void HandleDiscovery(evhttp_request* req, const RequestPath& path,
                       const std::string& method);
  // A resource request once its Served is known: verb, query, then
  // HandleResource.
  void HandleRouted(Request& r);
  void HandleResource(Request& r);

  // Lazy mode (kube_api_lazy.cc).
  // The resources discovery lists: the configured ones, and in lazy mode
  // every one discovery knows with list and watch.
  std::vector<informer::client::ApiResource> DiscoveryResources() const;
  // Starts (off the loop) the lazy informer of `r`'s path and parks `r`
  // until it is there; false when the path names no resource to serve.
  bool RouteLazy(Request& r);
  // Worker thread: the resource discovery lists for a path (refreshing
  // discovery, at most every 10 s, when it lists none).
  absl::optional<informer::client::ApiResource> LookUpLazy(
      const std::string& group, const std::string& version,
      const std::string& resource);
  // Continues a request whose lazy informer lookup finished.
  void ResumeLazy(Request& r, absl::StatusOr<InformerRef> ref);
  // The Served of a lazily started informer (created on first use).
  Served* LazyServed(const informer::client::ApiResource& api,
                     const InformerRef& ref);
  // The registry retires an idle lazy informer: drop its Served (on the
  // loop thread; waits for it).
  void OnLazyRetired(InformerEntry* entry);
  void StartWorker();
  void StopWorker();
  // Runs `job` on the worker thread (blocking calls: registry lookups).
  void PostToWorker(std::function<void()> job);
  // Serves an authorised get, list or watch on a synced cache.
  void Dispatch(Request& r);
  // Answers `r` later: once the cache reaches `want_rv` (kWaitForSync: once
  // it has synced), or with 504/503 after `wait`.
  static constexpr int64_t kWaitForSync = -1;
  // Waiting for a lazy informer's lookup (Parked::lazy).
  static constexpr int64_t kWaitForLazy = -2;
  void Park(Request& r, int64_t want_rv, absl::Duration wait);
  void HandleGet(Request& r);
  // False when the request was parked (answered later).
  bool HandleList(Request& r);
  // Answers a list whose page the cache could not give (`error` from
  // ResourceCache::List at `rv`) with the API server's Status.
  void ReplyListError(Request& r, const absl::Status& error, int64_t rv);
  // Answers a list with `page`; `meta` is its ListMeta object.
  void ReplyList(Request& r, const ResourceCache::Page& page,
                 const std::string& meta);
  void StartWatch(Request& r);
  void Reply(evhttp_request* req, const Served* served, absl::string_view verb,
             int code, evbuffer* body,
             absl::string_view content_type = "application/json");
  void ReplyText(evhttp_request* req, const Served* served,
                 absl::string_view verb, int code, absl::string_view text,
                 absl::string_view content_type = "application/json");
  void ReplyStatus(evhttp_request* req, const Served* served,
                   absl::string_view verb, const ApiStatus& status);
  void CountRequest(const Served* served, absl::string_view verb, int code,
                    size_t bytes);
  void Wake();
  void RetryParked();
  // Raises `s`'s cache to the resourceVersion its informer has applied
  // (upstream bookmarks move it without any change); true when it rose.
  bool SyncProgress(Served* s);

  // Watch (kube_api_watch.cc).
  void Pump(Watcher* w);
  bool SendEvent(Watcher* w, absl::string_view type,
                 const informer::ObjectPtr& obj, int64_t rv_override);
  void SendBookmark(Watcher* w);
  void EndWatch(Watcher* w, const ApiStatus* error);
  void DropWatcher(Watcher* w);
  static void OnWatchClosed(evhttp_connection* conn, void* arg);
  static void OnWatchDrained(evhttp_connection* conn, void* arg);
  static void OnWatchTimeout(int fd, short what, void* arg);
  static void OnSlowWatcher(int fd, short what, void* arg);
  // Closes a watch whose client stopped reading, dropping what is queued.
  void TerminateSlowWatcher(Watcher* w);
  static void OnBookmarkTimer(int fd, short what, void* arg);

  const Options options_;
  std::vector<std::unique_ptr<Served>> served_;
  std::map<std::string, Served*> by_path_;  // "group/version/resource"
  std::atomic<int> port_{0};
  // A lock rather than an atomic so that tests can wait for a count.
  mutable absl::Mutex watch_count_mu_;
  int open_watches_ ABSL_GUARDED_BY(watch_count_mu_) = 0;
  std::atomic<size_t> peak_queued_{0};
  std::atomic<int64_t> slow_terminated_{0};

  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  event* wake_ = nullptr;
  event* tick_ = nullptr;
  ssl_ctx_st* ssl_ctx_ = nullptr;
  std::thread loop_;
  bool started_ = false;
  bool shut_down_ = false;
  std::string advertised_;

  // Loop thread only.
  std::set<Watcher*> watchers_;
  std::vector<std::unique_ptr<Parked>> parked_;
  // served_[0, configured_) are the configured resources (fixed after
  // Create); lazy ones follow and come and go on the loop thread.
  size_t configured_ = 0;

  // The worker thread (lazy mode).
  absl::Mutex worker_mu_;
  absl::CondVar worker_cv_;
  std::vector<std::function<void()>> jobs_ ABSL_GUARDED_BY(worker_mu_);
  bool worker_stop_ ABSL_GUARDED_BY(worker_mu_) = false;
  std::thread worker_;
  int observer_ = -1;
  // Worker thread only.
  absl::Time last_discovery_refresh_ = absl::InfinitePast();

  metrics::CounterFamily* requests_ = nullptr;
  metrics::CounterFamily* bytes_ = nullptr;
  metrics::GaugeFamily* watchers_gauge_ = nullptr;
  metrics::CounterFamily* slow_gauge_ = nullptr;
};

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_SERVER_H_

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
#include "absl/time/time.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/discovery.h"
#include "server/config/informer_registry.h"
#include "server/kubeapi/api_status.h"
#include "server/kubeapi/list_options.h"
#include "server/kubeapi/request_path.h"
#include "server/kubeapi/resource_cache.h"
#include "server/ops/metrics.h"
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
// queued and ends with a 410 ERROR event once it falls out of the history,
// as the API server drops slow watchers.
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
    size_t watch_buffer_limit = 1 << 20;
    // host:port written into /api's serverAddressByClientCIDRs; default the
    // listening address.
    std::string advertised_address;
  };

  // InvalidArgument for a malformed listen address, TLS files that do not
  // load, or a resource the registry does not have.
  static absl::StatusOr<std::unique_ptr<KubeApiServer>> Create(Options options);
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
  int open_watches() const { return open_watches_.load(); }

 private:
  struct Served;
  struct Watcher;
  struct Parked;
  struct Request;

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
  void HandleResource(Request& r);
  // Serves an authorised get, list or watch on a synced cache.
  void Dispatch(Request& r);
  // Answers `r` later: once the cache reaches `want_rv` (kWaitForSync: once
  // it has synced), or with 504/503 after `wait`.
  static constexpr int64_t kWaitForSync = -1;
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
  static void OnBookmarkTimer(int fd, short what, void* arg);

  const Options options_;
  std::vector<std::unique_ptr<Served>> served_;
  std::map<std::string, Served*> by_path_;  // "group/version/resource"
  std::atomic<int> port_{0};
  std::atomic<int> open_watches_{0};

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

  metrics::CounterFamily* requests_ = nullptr;
  metrics::CounterFamily* bytes_ = nullptr;
  metrics::GaugeFamily* watchers_gauge_ = nullptr;
};

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_SERVER_H_

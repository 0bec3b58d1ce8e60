#ifndef SERVER_KUBEAPI_KUBE_API_INTERNAL_H_
#define SERVER_KUBEAPI_KUBE_API_INTERNAL_H_

// KubeApiServer's private structures, shared by the files that implement
// it: kube_api_server.cc (HTTP, routing, discovery, gets), kube_api_list.cc
// (lists, and lists parked until the cache reaches a resourceVersion),
// kube_api_watch.cc (watches) and kube_api_lazy.cc (lazily started
// informers). Not an API.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/discovery.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/kubeapi/list_options.h"
#include "server/kubeapi/object_writer.h"
#include "server/kubeapi/request_path.h"
#include "server/kubeapi/resource_cache.h"
#include "server/registry/informer_registry.h"
#include "server/security/authz.h"

namespace server {
namespace kubeapi {

struct KubeApiServer::Served {
  informer::client::ApiResource api;
  // The registry's (and the tokens file's) name of the resource.
  std::string name;
  // "v1" or "group/version".
  std::string group_version;
  // The informer. A configured one is leased for the facade's life; a
  // lazy one only kept in memory (`keep`), so that it can go idle: each
  // request leases it (Request::lease) and each watch counts in its
  // `streams`.
  InformerEntry* entry = nullptr;
  InformerRef ref;
  std::shared_ptr<InformerEntry> keep;
  bool lazy = false;
  std::unique_ptr<ResourceCache> cache;
  informer::HandlerRegistration* registration = nullptr;
  // The informer's namespace ("" = all) and whether it caches metadata only.
  std::string informer_namespace;
  bool metadata_only = false;
  // Loop thread only.
  int watchers = 0;
};

// One request being handled on the loop thread.
struct KubeApiServer::Request {
  evhttp_request* req = nullptr;
  RequestPath path;
  Served* served = nullptr;
  std::string verb;
  RequestOptions opts;
  ObjectForm form;
  std::string method;
  std::string raw_query;
  // Lazy resources: the informer's lease while the request is handled, and
  // the time by which its informer must have synced (then 504).
  InformerRef lease;
  informer::client::ApiResource lazy_api;
  absl::Time deadline = absl::InfiniteFuture();
};

// A lazy informer lookup running on the worker thread.
struct KubeApiServer::LazyStart {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  // The resource discovery describes (NotFound in `result` when none).
  informer::client::ApiResource api ABSL_GUARDED_BY(mu);
  absl::StatusOr<InformerRef> result ABSL_GUARDED_BY(mu);
};

// A list waiting for the cache to reach a resourceVersion.
struct KubeApiServer::Parked {
  Request request;
  int64_t want_rv = 0;
  absl::Time deadline;
  event* timer = nullptr;
  KubeApiServer* server = nullptr;
  bool done = false;
  ParkedHandle handle;
  // Set while waiting for a lazy informer lookup (want_rv kWaitForLazy).
  std::shared_ptr<LazyStart> lazy;
};

// One watch request, its events streamed to the client as they come.
struct KubeApiServer::Watcher {
  KubeApiServer* server = nullptr;
  evhttp_request* req = nullptr;
  evhttp_connection* conn = nullptr;
  Served* served = nullptr;
  ObjectForm form;
  RequestOptions opts;
  std::string prefix;  // "ns/" or ""
  // The initial state still to send (watch from "" or "0").
  std::vector<informer::ObjectPtr> initial;
  size_t initial_sent = 0;
  // Next change to look at, and the resourceVersion delivered so far.
  int64_t seq = 0;
  int64_t rv = 0;
  // The resourceVersion the watch started from (changes at or below it
  // are not sent).
  int64_t start_rv = 0;
  // Waiting for the connection to drain.
  bool blocked = false;
  event* timeout = nullptr;
  event* bookmark = nullptr;
  // Armed while blocked: terminates the watch if the queue never drains.
  event* slow = nullptr;
};

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_INTERNAL_H_

#include "server/kubeapi/kube_api_server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "informer/util/host_port.h"
#include "informer/util/loopback.h"
#include "server/kubeapi/discovery_documents.h"
#include "server/kubeapi/kube_api_internal.h"
#include "server/kubeapi/table_writer.h"
#include "server/registry/resource_resolver.h"

namespace server {
namespace kubeapi {
namespace {

timeval DurationToTimeval(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  return absl::ToTimeval(d);
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();  // NOLINT(runtime/int)
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

bufferevent* NewTlsBufferevent(event_base* base, void* ctx) {
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ctx));
  bufferevent* bev = bufferevent_openssl_socket_new(
      base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
  if (bev != nullptr) bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  return bev;
}

absl::StatusOr<SSL_CTX*> NewTlsContext(const KubeApiServer::Options& o) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  auto fail = [ctx](const std::string& what) {
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(what);
  };
  if (SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert_file.c_str()) != 1) {
    return fail(absl::StrCat("--kube_api_tls_cert_file ", o.tls_cert_file, ": ",
                             OpenSslError()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, o.tls_key_file.c_str(),
                                  SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return fail(absl::StrCat("--kube_api_tls_key_file ", o.tls_key_file, ": ",
                             OpenSslError()));
  }
  if (!o.tls_client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, o.tls_client_ca_file.c_str(),
                                      nullptr) != 1) {
      return fail(absl::StrCat("--kube_api_tls_client_ca_file ",
                               o.tls_client_ca_file, ": ", OpenSslError()));
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  return ctx;
}

// The API server's verb for a write method.
std::string WriteVerb(absl::string_view method, bool collection) {
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return collection ? "deletecollection" : "delete";
  return absl::AsciiStrToLower(method);
}

const char* MethodName(evhttp_cmd_type cmd) {
  switch (cmd) {
    case EVHTTP_REQ_GET:
      return "GET";
    case EVHTTP_REQ_POST:
      return "POST";
    case EVHTTP_REQ_HEAD:
      return "HEAD";
    case EVHTTP_REQ_PUT:
      return "PUT";
    case EVHTTP_REQ_DELETE:
      return "DELETE";
    case EVHTTP_REQ_OPTIONS:
      return "OPTIONS";
    case EVHTTP_REQ_TRACE:
      return "TRACE";
    case EVHTTP_REQ_CONNECT:
      return "CONNECT";
    case EVHTTP_REQ_PATCH:
      return "PATCH";
  }
  return "UNKNOWN";
}

}  // namespace

KubeApiServer::KubeApiServer(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<KubeApiServer>> KubeApiServer::Create(
    Options options) {
  if (options.registry == nullptr) {
    return absl::InvalidArgumentError("kube API facade: no informer registry");
  }
  absl::StatusOr<informer::HostPort> address =
      informer::ParseHostPort(options.listen);
  if (!address.ok() || address->host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kube_api_listen=", options.listen, ": expected HOST:PORT"));
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--kube_api_tls_cert_file and --kube_api_tls_key_file go together");
  }
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--kube_api_tls_client_ca_file needs --kube_api_tls_cert_file and "
        "--kube_api_tls_key_file");
  }
  std::unique_ptr<KubeApiServer> s(new KubeApiServer(std::move(options)));
  for (const informer::client::ApiResource& api : s->options_.resources) {
    auto served = std::make_unique<Served>();
    served->api = api;
    served->name = CanonicalResourceName(api);
    served->group_version = api.GroupVersion();
    absl::StatusOr<InformerRef> ref = s->options_.registry->Find(served->name);
    if (!ref.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kube API facade: resource ", served->name, ": ",
                       ref.status().message()));
    }
    served->ref = *ref;
    served->entry = ref->get();
    served->informer_namespace = (*ref)->config.namespace_;
    served->metadata_only = (*ref)->config.metadata_only;
    std::string key =
        absl::StrCat(api.group, "/", api.version, "/", api.resource);
    if (s->by_path_.count(key) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kube API facade: resource ", served->name, " listed twice"));
    }
    s->by_path_[key] = served.get();
    s->served_.push_back(std::move(served));
  }
  s->configured_ = s->served_.size();
  if (s->options_.lazy && s->options_.discovery == nullptr) {
    return absl::InvalidArgumentError(
        "kube API facade: lazy mode needs API discovery");
  }
  if (!s->options_.tls_cert_file.empty()) {
    absl::StatusOr<SSL_CTX*> ctx = NewTlsContext(s->options_);
    if (!ctx.ok()) return ctx.status();
    s->ssl_ctx_ = *ctx;
  }
  if (s->options_.metrics != nullptr) {
    metrics::Registry* m = s->options_.metrics;
    auto requests = m->AddCounter(
        "informer_sidecar_kube_api_requests_total",
        "Kubernetes API facade requests by verb, HTTP code and resource "
        "(\"\" for discovery and health).",
        {"verb", "code", "resource"});
    auto bytes = m->AddCounter(
        "informer_sidecar_kube_api_response_bytes_total",
        "Response body bytes the Kubernetes API facade queued, by resource.",
        {"resource"});
    auto watchers =
        m->AddGauge("informer_sidecar_kube_api_watches",
                    "Open watches on the Kubernetes API facade.", {"resource"});
    auto slow = m->AddCounter(
        "informer_sidecar_kube_api_slow_watches_terminated_total",
        "Watches the Kubernetes API facade closed because their client did "
        "not read them (the queue stayed full), by resource.",
        {"resource"});
    if (!slow.ok()) return slow.status();
    s->slow_gauge_ = *slow;
    if (!requests.ok()) return requests.status();
    if (!bytes.ok()) return bytes.status();
    if (!watchers.ok()) return watchers.status();
    s->requests_ = *requests;
    s->bytes_ = *bytes;
    s->watchers_gauge_ = *watchers;
  }
  return s;
}

KubeApiServer::~KubeApiServer() {
  Shutdown();
  if (ssl_ctx_ != nullptr) SSL_CTX_free(ssl_ctx_);
}

absl::Status KubeApiServer::Start() {
  if (started_) return absl::FailedPreconditionError("already started");
  started_ = true;
  static const int kThreads = evthread_use_pthreads();
  if (kThreads != 0) return absl::InternalError("evthread_use_pthreads failed");
  base_ = event_base_new();
  if (base_ == nullptr) return absl::InternalError("event_base_new failed");
  wake_ = event_new(base_, -1, 0, &KubeApiServer::OnWake, this);
  NewHttp();
  absl::Status listening = Listen();
  if (!listening.ok()) return listening;
  absl::Status subscribed = SubscribeCaches();
  if (!subscribed.ok()) return subscribed;
  StartParkedTick();
  if (options_.lazy) StartWorker();
  loop_ =
      std::thread([this] { event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY); });
  if (options_.lazy) {
    observer_ = options_.registry->AddObserver(
        {.on_retired = [this](InformerEntry* e) { OnLazyRetired(e); }});
  }
  LOG(INFO) << "Kubernetes API facade serving " << served_.size()
            << " resources on " << (ssl_ctx_ ? "https://" : "http://")
            << advertised_;
  return absl::OkStatus();
}

void KubeApiServer::NewHttp() {
  http_ = evhttp_new(base_);
  evhttp_set_gencb(http_, &KubeApiServer::OnRequest, this);
  // Writes are let through to the handler, which answers them 405 as the
  // facade is read-only (libevent would answer 501 itself).
  evhttp_set_allowed_methods(http_, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                        EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                        EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                        EVHTTP_REQ_OPTIONS);
  evhttp_set_max_headers_size(http_, 64 * 1024);
  evhttp_set_max_body_size(http_, 1 << 20);
  timeval idle = DurationToTimeval(options_.idle_timeout);
  evhttp_set_timeout_tv(http_, &idle);
  if (ssl_ctx_ != nullptr) {
    evhttp_set_bevcb(http_, &NewTlsBufferevent, ssl_ctx_);
  }
}

bool KubeApiServer::IsLoopbackListen(absl::string_view listen) {
  absl::StatusOr<informer::HostPort> address = informer::ParseHostPort(listen);
  return address.ok() && informer::IsLoopbackHost(address->host);
}

absl::Status KubeApiServer::Listen() {
  absl::StatusOr<informer::HostPort> address =
      informer::ParseHostPort(options_.listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube_api_listen=", options_.listen, ": ",
                     address.status().message()));
  }
  const std::string& host = address->host;
  const int want_port = address->port;
  evhttp_bound_socket* sock =
      evhttp_bind_socket_with_handle(http_, host.c_str(), want_port);
  if (sock == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("--kube_api_listen=", options_.listen, ": cannot listen (",
                     strerror(errno), ")"));
  }
  // The bound port (the listen address may ask for port 0).
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(evhttp_bound_socket_get_fd(sock),
              reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6
                    ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  advertised_ = options_.advertised_address.empty()
                    ? informer::JoinHostPort(host, port_.load())
                    : options_.advertised_address;
  if (ssl_ctx_ == nullptr && !IsLoopbackListen(options_.listen)) {
    LOG(WARNING) << "--kube_api_listen=" << options_.listen
                 << " is not a loopback address and has no TLS: anybody who "
                    "can reach it reads the cache in clear text; set "
                    "--kube_api_tls_cert_file/--kube_api_tls_key_file";
  }
  return absl::OkStatus();
}

absl::Status KubeApiServer::SubscribeCaches() {
  for (auto& served : served_) {
    Served* s = served.get();
    s->cache = std::make_unique<ResourceCache>(options_.history_limit,
                                               [this] { Wake(); });
    informer::HandlerOptions ho;
    ho.non_blocking = true;
    absl::StatusOr<informer::HandlerRegistration*> reg =
        s->entry->informer->AddEventHandler(s->cache.get(), ho);
    if (!reg.ok()) return reg.status();
    s->registration = *reg;
  }
  return absl::OkStatus();
}

void KubeApiServer::StartParkedTick() {
  // Requests waiting for a cache to sync are re-checked on this tick (a
  // sync is no change the caches report), and so is the resourceVersion
  // the informers reached without changes (bookmarks).
  tick_ = event_new(
      base_, -1, EV_PERSIST,
      [](int, short, void* self) {
        auto* s = static_cast<KubeApiServer*>(self);
        for (auto& served : s->served_) s->SyncProgress(served.get());
        if (!s->parked_.empty()) s->RetryParked();
      },
      this);
  timeval tick = DurationToTimeval(absl::Milliseconds(50));
  event_add(tick_, &tick);
}

void KubeApiServer::Shutdown() {
  if (!started_ || shut_down_) return;
  shut_down_ = true;
  // A retirement being handled waits for the loop: before it stops.
  if (observer_ >= 0) options_.registry->RemoveObserver(observer_);
  observer_ = -1;
  if (loop_.joinable()) {
    // Close the watches on the loop thread, then stop it.
    event_base_once(
        base_, -1, EV_TIMEOUT,
        [](int, short, void* arg) {
          auto* self = static_cast<KubeApiServer*>(arg);
          while (!self->watchers_.empty()) {
            self->EndWatch(*self->watchers_.begin(), nullptr);
          }
          for (auto& p : self->parked_) {
            if (p->timer != nullptr) event_free(p->timer);
            // Its connection (closed by evhttp_free below) must not call
            // back into the freed entry.
            if (!p->done) {
              evhttp_connection_set_closecb(
                  evhttp_request_get_connection(p->request.req), nullptr,
                  nullptr);
            }
          }
          self->parked_.clear();
          event_base_loopexit(self->base_, nullptr);
        },
        this, nullptr);
    loop_.join();
  }
  StopWorker();
  for (auto& s : served_) {
    if (s->registration != nullptr) {
      (void)s->entry->informer->RemoveEventHandler(s->registration);
      s->registration = nullptr;
    }
  }
  if (http_ != nullptr) evhttp_free(http_);
  if (wake_ != nullptr) event_free(wake_);
  if (tick_ != nullptr) event_free(tick_);
  tick_ = nullptr;
  if (base_ != nullptr) event_base_free(base_);
  http_ = nullptr;
  wake_ = nullptr;
  base_ = nullptr;
}

int KubeApiServer::open_watches() const {
  absl::MutexLock lock(&watch_count_mu_);
  return open_watches_;
}

bool KubeApiServer::WaitForOpenWatches(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&watch_count_mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(watch_count_mu_) {
    return open_watches_ == n;
  };
  return watch_count_mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool KubeApiServer::WaitForSync(absl::Duration timeout) const {
  for (size_t i = 0; i < configured_; ++i) {
    const Served* s = served_[i].get();
    if (!s->entry->informer->WaitForSync(timeout)) return false;
    if (s->registration == nullptr) return false;
    // A non-blocking handler has seen the initial state once the informer
    // synced; WaitIdle covers the queued case too.
    s->registration->WaitIdle();
    if (!s->registration->HasSynced()) return false;
  }
  return true;
}

bool KubeApiServer::SyncProgress(Served* s) {
  // Every change up to the applied resourceVersion has reached the cache
  // (a non-blocking handler runs before the informer marks it applied).
  if (s->cache == nullptr || !s->registration->HasSynced()) return false;
  int64_t applied =
      ParseResourceVersion(s->entry->informer->LastAppliedResourceVersion());
  return applied > 0 && s->cache->AdvanceTo(applied);
}

void KubeApiServer::Wake() {
  // Thread-safe (evthread_use_pthreads): runs OnWake on the loop thread.
  event_active(wake_, EV_READ, 0);
}

void KubeApiServer::OnWake(int, short, void* self) {
  auto* s = static_cast<KubeApiServer*>(self);
  std::vector<Watcher*> all(s->watchers_.begin(), s->watchers_.end());
  for (Watcher* w : all) {
    if (s->watchers_.count(w) != 0) s->Pump(w);
  }
  s->RetryParked();
}

void KubeApiServer::OnRequest(evhttp_request* req, void* self) {
  // Without TCP_NODELAY every response after the first on a kept-alive
  // connection waits for the client's delayed ACK (about 40 ms): each page
  // of a paged list and each watch event would pay it, as kubectl and
  // client-go reuse connections. evhttp gives the socket to the connection
  // after the bufferevent callback, so it is set here, once per request.
  if (evhttp_connection* conn = evhttp_request_get_connection(req)) {
    if (bufferevent* bev = evhttp_connection_get_bufferevent(conn)) {
      const evutil_socket_t fd = bufferevent_getfd(bev);
      const int one = 1;
      if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
  }
  static_cast<KubeApiServer*>(self)->Handle(req);
}

void KubeApiServer::CountRequest(const Served* served, absl::string_view verb,
                                 int code, size_t bytes) {
  if (requests_ == nullptr) return;
  std::string resource = served != nullptr ? served->name : "";
  requests_->With({std::string(verb), absl::StrCat(code), resource})
      .Increment();
  if (bytes > 0) bytes_->With({resource}).Increment(static_cast<double>(bytes));
}

void KubeApiServer::Reply(evhttp_request* req, const Served* served,
                          absl::string_view verb, int code, evbuffer* body,
                          absl::string_view content_type) {
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  evhttp_add_header(headers, "Cache-Control", "no-cache, private");
  evhttp_add_header(headers, "Content-Type", std::string(content_type).c_str());
  CountRequest(served, verb, code, evbuffer_get_length(body));
  evhttp_send_reply(req, code, nullptr, body);
}

void KubeApiServer::ReplyText(evhttp_request* req, const Served* served,
                              absl::string_view verb, int code,
                              absl::string_view text,
                              absl::string_view content_type) {
  evbuffer* body = evbuffer_new();
  evbuffer_add(body, text.data(), text.size());
  Reply(req, served, verb, code, body, content_type);
  evbuffer_free(body);
}

void KubeApiServer::ReplyStatus(evhttp_request* req, const Served* served,
                                absl::string_view verb,
                                const ApiStatus& status) {
  if (status.retry_after_seconds > 0) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                      absl::StrCat(status.retry_after_seconds).c_str());
  }
  ReplyText(req, served, verb, status.code, status.Render());
}

void KubeApiServer::HandleDiscovery(evhttp_request* req,
                                    const RequestPath& path,
                                    const std::string& method) {
  // Discovery is readable without a token, as the API server's
  // system:discovery role allows everybody.
  absl::optional<std::string> doc;
  switch (path.type) {
    case RequestPath::Type::kVersion:
      doc = VersionDocument();
      break;
    case RequestPath::Type::kApi:
      doc = ApiVersionsDocument(advertised_);
      break;
    case RequestPath::Type::kApis:
      doc = ApiGroupListDocument(DiscoveryResources());
      break;
    case RequestPath::Type::kGroup:
      doc = ApiGroupDocument(DiscoveryResources(), path.group);
      break;
    case RequestPath::Type::kGroupVersion:
      if (path.group.empty() && path.version != "v1") break;
      doc = ApiResourceListDocument(DiscoveryResources(), path.group,
                                    path.version);
      break;
    default:
      break;
  }
  if (method != "GET" && method != "HEAD") {
    ApiStatus s = UnknownPathStatus();
    s.code = 405;
    s.reason = "MethodNotAllowed";
    s.message = absl::StrCat(method,
                             " is not supported on discovery paths: "
                             "this is informer-sidecar's read-only cache");
    s.empty_details = false;
    ReplyStatus(req, nullptr, "", s);
  } else if (!doc) {
    ReplyStatus(req, nullptr, "get", UnknownPathStatus());
  } else {
    ReplyText(req, nullptr, "get", 200, *doc);
  }
}

void KubeApiServer::Handle(evhttp_request* req) {
  const char* uri_text = evhttp_request_get_uri(req);
  evhttp_uri* uri = evhttp_uri_parse(uri_text);
  if (uri == nullptr) {
    ReplyStatus(req, nullptr, "", BadRequestStatus("malformed request URI"));
    return;
  }
  std::string raw_path =
      evhttp_uri_get_path(uri) ? evhttp_uri_get_path(uri) : "/";
  std::string raw_query =
      evhttp_uri_get_query(uri) ? evhttp_uri_get_query(uri) : "";
  evhttp_uri_free(uri);
  char* decoded = evhttp_decode_uri(raw_path.c_str());
  std::string path = decoded ? decoded : raw_path;
  free(decoded);
  std::string method = MethodName(evhttp_request_get_command(req));
  absl::optional<RequestPath> parsed = ParseRequestPath(path);
  if (!parsed) {
    ReplyStatus(req, nullptr, "", UnknownPathStatus());
    return;
  }
  Request r;
  r.req = req;
  r.path = *parsed;
  if (r.path.type == RequestPath::Type::kHealth) {
    // Lazy informers never gate readiness (as on the gRPC side).
    bool ready = true;
    for (size_t i = 0; i < configured_; ++i) {
      ready = ready && served_[i]->registration->HasSynced();
    }
    if (r.path.health == "readyz" && !ready) {
      ReplyText(req, nullptr, "get", 500,
                "[-]informer-sync failed: caches have not synced\nreadyz check "
                "failed\n",
                "text/plain; charset=utf-8");
      return;
    }
    ReplyText(req, nullptr, "get", 200, "ok", "text/plain; charset=utf-8");
    return;
  }
  if (r.path.type != RequestPath::Type::kResource) {
    HandleDiscovery(req, r.path, method);
    return;
  }
  r.method = method;
  r.raw_query = raw_query;
  auto it = by_path_.find(
      absl::StrCat(r.path.group, "/", r.path.version, "/", r.path.resource));
  if (it != by_path_.end() && !it->second->lazy) {
    r.served = it->second;
    HandleRouted(r);
  } else if (method != "GET" && method != "HEAD") {
    // A write is refused as read-only whatever it addresses, served or not
    // (Events from a sidecar that reads through this one), not 404, and
    // never starts a lazy informer.
    const std::string verb = WriteVerb(method, r.path.name.empty());
    ReplyStatus(req, nullptr, verb,
                ReadOnlyStatus(verb, r.path.resource, r.path.group));
  } else if (!options_.lazy || !RouteLazy(r)) {
    ReplyStatus(req, nullptr, "", UnknownPathStatus());
  }
}

void KubeApiServer::HandleRouted(Request& r) {
  evhttp_request* req = r.req;
  const std::string& method = r.method;
  const Served* s = r.served;
  if (!r.path.subresource.empty() ||
      (!s->api.namespaced && !r.path.namespace_.empty()) ||
      (s->api.namespaced && r.path.namespace_.empty() &&
       !r.path.name.empty())) {
    if (method != "GET" && method != "HEAD" && !r.path.resource.empty()) {
      // A write is refused as read-only whatever it addresses (Events from
      // a sidecar that reads through this one), not 404.
      const std::string verb = WriteVerb(method, r.path.name.empty());
      ReplyStatus(req, nullptr, verb,
                  ReadOnlyStatus(verb, r.path.resource, r.path.group));
      return;
    }
    ReplyStatus(req, nullptr, "", UnknownPathStatus());
    return;
  }
  bool collection = r.path.name.empty();
  if (method == "GET" || method == "HEAD") {
    r.verb = collection ? "list" : "get";
  } else {
    r.verb = WriteVerb(method, collection);
  }
  // Query.
  std::multimap<std::string, std::string> query;
  evkeyvalq params;
  TAILQ_INIT(&params);
  if (evhttp_parse_query_str(r.raw_query.c_str(), &params) != 0) {
    ReplyStatus(req, r.served, r.verb, BadRequestStatus("malformed query"));
    return;
  }
  for (evkeyval* kv = params.tqh_first; kv != nullptr; kv = kv->next.tqe_next) {
    query.emplace(kv->key, kv->value);
  }
  evhttp_clear_headers(&params);
  const char* accept =
      evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
  ApiStatus error;
  if (!ParseRequestOptions(query, r.served->api.kind, accept ? accept : "",
                           &r.opts, &error)) {
    ReplyStatus(req, r.served, r.verb, error);
    return;
  }
  if (r.opts.watch && r.verb == "list") r.verb = "watch";
  HandleResource(r);
}

void KubeApiServer::HandleResource(Request& r) {
  evhttp_request* req = r.req;
  Served* s = r.served;
  const char* auth = evhttp_find_header(evhttp_request_get_input_headers(req),
                                        "Authorization");
  std::string user = "system:anonymous";
  if (options_.authorizer != nullptr) {
    absl::StatusOr<const TokenGrant*> grant = options_.authorizer->Authenticate(
        auth ? absl::optional<absl::string_view>(auth) : absl::nullopt);
    if (!grant.ok()) {
      ReplyStatus(req, s, r.verb, UnauthorizedStatus());
      return;
    }
    if (!(*grant)->name.empty()) user = (*grant)->name;
    absl::Status read =
        options_.authorizer->CheckRead(**grant, s->name, r.path.namespace_);
    if (!read.ok()) {
      ReplyStatus(req, s, r.verb,
                  ForbiddenStatus(user, r.verb, s->api.resource, s->api.group,
                                  r.path.namespace_, r.path.name));
      return;
    }
  }
  if (r.verb != "get" && r.verb != "list" && r.verb != "watch") {
    ReplyStatus(req, s, r.verb,
                ReadOnlyStatus(r.verb, s->api.resource, s->api.group));
    return;
  }
  if (!s->informer_namespace.empty() &&
      r.path.namespace_ != s->informer_namespace) {
    ReplyStatus(
        req, s, r.verb,
        ForbiddenStatus(
            user, r.verb, s->api.resource, s->api.group, r.path.namespace_,
            r.path.name,
            absl::StrCat("the sidecar caches ", s->name, " of namespace \"",
                         s->informer_namespace, "\" only")));
    return;
  }
  r.form.kind = s->api.kind;
  r.form.api_version = s->group_version;
  r.form.cache_metadata_only = s->metadata_only;
  r.form.metadata_only = r.opts.metadata_only;
  // A Table's rows need only what a metadata-only cache has (Name, Age).
  if (s->metadata_only && !r.opts.metadata_only && !r.opts.table) {
    ReplyStatus(req, s, r.verb,
                NotAcceptableStatus(absl::StrCat(
                    "the sidecar caches only the metadata of ", s->name,
                    "; ask for it with Accept: application/json;as=",
                    r.verb == "get" ? "PartialObjectMetadata"
                                    : "PartialObjectMetadataList",
                    ";v=v1;g=meta.k8s.io")));
    return;
  }
  if (!s->registration->HasSynced()) {
    // As the API server's watch cache, requests wait for the cache to be
    // initialised (a 503 after `sync_wait`; for a lazy resource, a 504 at
    // the request's deadline).
    Park(r, kWaitForSync,
         s->lazy ? std::max(r.deadline - absl::Now(), absl::ZeroDuration())
                 : options_.sync_wait);
    return;
  }
  Dispatch(r);
}

void KubeApiServer::Dispatch(Request& r) {
  if (r.verb == "get") {
    HandleGet(r);
  } else if (r.verb == "watch") {
    StartWatch(r);
  } else {
    HandleList(r);
  }
}

void KubeApiServer::HandleGet(Request& r) {
  Served* s = r.served;
  std::string key = informer::MetaNamespaceKey(r.path.namespace_, r.path.name);
  informer::ObjectPtr obj = s->cache->Get(key);
  if (obj == nullptr) {
    ReplyStatus(r.req, s, r.verb,
                NotFoundStatus(s->api.resource, s->api.group, r.path.name));
    return;
  }
  evbuffer* body = evbuffer_new();
  if (r.opts.table) {
    AppendTable(
        r.form, {obj},
        absl::StrCat(R"({"resourceVersion":")", obj->resource_version(), "\"}"),
        r.opts.include_object, absl::Now(), body);
  } else {
    AppendObject(r.form, obj, /*type_meta=*/true, 0, body);
  }
  Reply(r.req, s, r.verb, 200, body);
  evbuffer_free(body);
}

}  // namespace kubeapi
}  // namespace server

#include "emulator/emulator.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <functional>
#include <list>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "emulator/api_status.h"
#include "emulator/emulator_http.h"
#include "emulator/gzip_encoder.h"
#include "emulator/list_options.h"
#include "emulator/pacer.h"
#include "emulator/patch.h"
#include "emulator/selector.h"
#include "emulator/tls_certs.h"
#include "glog/logging.h"
#include "httplib.h"

namespace emulator {

// httplib's ThreadPool has a fixed size and every open watch holds a worker
// for its whole life; a thread per connection never starves. Finished
// threads are reaped on the next connection; shutdown joins the rest.
class Emulator::StreamQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    absl::MutexLock lock(&mu_);
    Reap();
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([fn = std::move(fn), done] {
                          fn();
                          done->store(true);
                        }),
                        done});
  }
  void shutdown() override {
    std::list<Entry> all;
    {
      absl::MutexLock lock(&mu_);
      all.swap(threads_);
    }
    for (auto& e : all) e.thread.join();
  }

 private:
  struct Entry {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
  }
  absl::Mutex mu_;
  std::list<Entry> threads_ ABSL_GUARDED_BY(mu_);
};

namespace {

constexpr size_t kListInlineLimit = 1 << 20;  // larger lists are streamed
// Bytes per streamed chunk. Kept well under glibc's mmap threshold (128 KiB):
// larger buffers are mmapped and unmapped per chunk, and every chunk then
// pays a page fault per page it touches.
constexpr size_t kListChunkBytes = 48 << 10;

std::string ListHeader(const ResourceInfo& r, const ListResult& list,
                       bool metadata_only) {
  std::string out = metadata_only ? "{\"kind\":\"PartialObjectMetadataList\","
                                    "\"apiVersion\":\"meta.k8s.io/v1\""
                                  : absl::StrCat("{\"kind\":\"", r.kind,
                                                 "List\",\"apiVersion\":\"",
                                                 r.GroupVersion(), "\"");
  absl::StrAppend(&out, ",\"metadata\":{\"resourceVersion\":\"",
                  list.resource_version, "\"");
  if (!list.continue_token.empty()) {
    absl::StrAppend(&out, ",\"continue\":\"", list.continue_token, "\"");
  }
  // A v1.24 server drops remainingItemCount from metadata-only lists.
  if (!metadata_only && list.remaining_item_count >= 0) {
    absl::StrAppend(&out,
                    ",\"remainingItemCount\":", list.remaining_item_count);
  }
  out += "},\"items\":[";
  return out;
}

void AppendItem(std::string& out, const StoredObject& o, bool metadata_only) {
  if (metadata_only) {
    absl::StrAppend(&out,
                    "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
                    "\"meta.k8s.io/v1\",\"metadata\":",
                    o.metadata_json(), "}");
  } else {
    out.append(o.body);
  }
}

}  // namespace

Emulator::Emulator(EmulatorOptions options)
    : options_(std::move(options)),
      registry_(ResourceRegistry::WithBuiltins()) {
  ObjectStore::Options so;
  so.history_length = options_.history_length;
  so.compaction_interval = options_.compaction_interval;
  so.clock = options_.clock;
  so.rv0_list_ignores_limit = options_.watch_cache;
  so.continue_key_slash = !options_.v1_24;
  so.watch_from_future_rv = !options_.v1_24;
  so.too_large_rv_wait = options_.too_large_rv_wait;
  so.per_resource_cache_rv = options_.watch_cache;
  so.consistent_reads_from_cache = options_.watch_cache && !options_.v1_24;
  so.progress_notify_interval = options_.progress_notify_interval;
  store_ = std::make_unique<ObjectStore>(so);
}

Emulator::~Emulator() { Stop(); }

std::string Emulator::url() const {
  return absl::StrCat(options_.tls ? "https" : "http", "://", options_.host,
                      ":", port_);
}

const ResourceInfo& Emulator::Resource(absl::string_view name) const {
  const ResourceInfo* r = registry_->FindByName(name);
  CHECK(r != nullptr) << "unknown resource " << name;
  return *r;
}

absl::Status Emulator::Start() {
  absl::Status s = MakeServer();
  if (s.ok()) s = Seed();
  if (s.ok()) s = Serve();
  return s;
}

absl::Status Emulator::MakeServer() {
  if (options_.tls) {
    absl::StatusOr<TestPki> pki = GenerateTestPki(
        {"localhost", "kubernetes", "kubernetes.default"}, {"127.0.0.1"});
    if (!pki.ok()) return pki.status();
    ca_cert_pem_ = pki->ca_cert_pem;
    BIO* cert_bio =
        BIO_new_mem_buf(pki->server_cert_pem.data(),
                        static_cast<int>(pki->server_cert_pem.size()));
    BIO* key_bio =
        BIO_new_mem_buf(pki->server_key_pem.data(),
                        static_cast<int>(pki->server_key_pem.size()));
    X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
    BIO_free(cert_bio);
    BIO_free(key_bio);
    if (cert == nullptr || key == nullptr) {
      X509_free(cert);
      EVP_PKEY_free(key);
      return absl::InternalError("cannot load the generated certificate");
    }
    // SSLServer takes its own references (SSL_CTX_use_*).
    auto ssl = std::make_unique<httplib::SSLServer>(cert, key);
    X509_free(cert);
    EVP_PKEY_free(key);
    if (!ssl->is_valid()) return absl::InternalError("TLS setup failed");
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  return absl::OkStatus();
}

absl::Status Emulator::Seed() {
  if (options_.seed_pods > 0) {
    absl::Status s = SeedPods(*store_, *registry_, options_.seed_pods);
    if (!s.ok()) return s;
  }
  if (options_.seed_configmaps > 0) {
    absl::Status s =
        SeedConfigMaps(*store_, *registry_, options_.seed_configmaps);
    if (!s.ok()) return s;
  }
  if (options_.demo) {
    absl::Status s = SeedDemo(*store_, *registry_);
    if (!s.ok()) return s;
    if (options_.churn_interval > absl::ZeroDuration()) {
      churner_ =
          std::make_unique<Churner>(store_.get(), registry_.get(),
                                    options_.clock, options_.churn_interval);
      churner_->Start();
    }
  }

  return absl::OkStatus();
}

absl::Status Emulator::Serve() {
  httplib::Server& svr = *server_;
  svr.new_task_queue = [] { return new StreamQueue(); };
  // Idle keep-alive connections hold up Stop() for this long.
  svr.set_keep_alive_timeout(1);
  svr.set_read_timeout(30);
  svr.set_write_timeout(30);
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(64 << 20);
  // Compression is the API server's: a non-watch body over 128 KiB is
  // gzipped when the client asks (AcceptsGzip), a watch never. httplib's
  // own gzip is kept out because it buffers a chunked stream until its end
  // (watch events would never arrive, lists would stop streaming): the
  // header is taken off the request before httplib sees the response, and
  // the emulator compresses itself (GzipEncoder). The Request object handed
  // to handlers is a non-const local of httplib's, so the cast is sound.
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    const bool gzip = AcceptsGzip(req.get_header_value("Accept-Encoding"));
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    Handle(req, gzip, res);
    if (gzip) GzipBufferedBody(res);
  };
  svr.Get(".*", handler);
  svr.Post(".*", handler);
  svr.Put(".*", handler);
  svr.Patch(".*", handler);
  svr.Delete(".*", handler);

  if (options_.port == 0) {
    port_ = svr.bind_to_any_port(options_.host);
    if (port_ <= 0) return absl::UnavailableError("cannot bind a port");
  } else {
    if (!svr.bind_to_port(options_.host, options_.port)) {
      return absl::UnavailableError(
          absl::StrCat("cannot bind port ", options_.port));
    }
    port_ = options_.port;
  }
  listen_thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_.store(true);
  });
  // httplib's stop() only takes effect once the accept loop runs (it starts
  // within microseconds): a Stop() racing ahead of it would leave the loop
  // accepting forever and the join hanging.
  while (!server_->is_running() && !listen_returned_.load()) {
    std::this_thread::yield();
  }
  LOG(INFO) << "kube emulator serving on " << url();
  return absl::OkStatus();
}

void Emulator::Stop() {
  if (stopping_.exchange(true)) return;
  // Stalled lists hold their connection threads: release them first.
  list_stalls_.Shutdown();
  if (churner_ != nullptr) churner_->Stop();
  store_->CloseAllWatchers();
  if (server_ != nullptr) server_->stop();
  if (listen_thread_.joinable()) listen_thread_.join();
}

void Emulator::CutWatches(const ResourceInfo* resource) {
  store_->ForEachWatcher(resource, [](Watcher& w) {
    w.Update([](Watcher::Directives& d) { d.cut_next_event = true; });
  });
}

void Emulator::StallWatches(const ResourceInfo* resource) {
  store_->ForEachWatcher(resource, [](Watcher& w) {
    w.Update([](Watcher::Directives& d) { d.stalled = true; });
  });
}

void Emulator::StallLists(const ResourceInfo* resource) {
  list_stalls_.Stall(resource);
}

void Emulator::ResumeLists() { list_stalls_.Resume(); }

void Emulator::ServeStalledList(std::string body, int64_t stall,
                                httplib::Response& res) {
  auto shared = std::make_shared<std::string>(std::move(body));
  ListStalls* stalls = &list_stalls_;
  res.set_chunked_content_provider(
      "application/json",
      [shared, stall, stalls](size_t, httplib::DataSink& sink) {
        // Half the body, then silence until the stall ends; then the
        // connection drops (the answer can no longer be completed).
        if (!sink.write(shared->data(), shared->size() / 2)) return false;
        stalls->AwaitResume(stall);
        return false;
      });
}

void Emulator::ResumeWatches(const ResourceInfo* resource) {
  store_->ForEachWatcher(resource, [](Watcher& w) {
    w.Update([](Watcher::Directives& d) { d.stalled = false; });
  });
}

void Emulator::InjectMalformedEvent(const ResourceInfo* resource) {
  store_->ForEachWatcher(resource, [](Watcher& w) {
    w.Update([](Watcher::Directives& d) { ++d.malformed_lines; });
  });
}

absl::StatusOr<StoredObjectPtr> Emulator::CreateLargeObject(
    absl::string_view ns, absl::string_view name, size_t bytes) {
  std::string json = absl::StrCat(
      "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"",
      name, "\",\"namespace\":\"", ns, "\"},\"data\":{\"blob\":\"");
  json.append(bytes, 'x');
  json.append("\"}}");
  return store_->Create(Resource("configmaps"), ns, json);
}

void Emulator::Restart() { store_->Restart(); }

const EmulatorOptions::Token* Emulator::Authenticate(
    const httplib::Request& req) const {
  const std::string header = req.get_header_value("Authorization");
  absl::string_view auth = header;
  const EmulatorOptions::Token* who = nullptr;
  if (absl::ConsumePrefix(&auth, "Bearer ")) {
    for (const auto& t : options_.tokens) {
      if (t.token == auth) who = &t;
    }
  }
  return who;
}

absl::optional<EmulatorHooks::Failure> Emulator::InjectedFailure(
    absl::string_view verb, absl::string_view resource) {
  for (EmulatorHooks* hooks : hooks_) {
    absl::optional<EmulatorHooks::Failure> f = hooks->OnRequest(verb, resource);
    if (f.has_value()) return f;
  }
  return absl::nullopt;
}

bool Emulator::TakeWatchExpiry(absl::string_view resource) {
  for (EmulatorHooks* hooks : hooks_) {
    if (hooks->TakeWatchExpiry(resource)) return true;
  }
  return false;
}

bool Emulator::TakeContinueExpiry() {
  for (EmulatorHooks* hooks : hooks_) {
    if (hooks->TakeContinueExpiry()) return true;
  }
  return false;
}

void Emulator::AddHooks(EmulatorHooks* hooks) { hooks_.push_back(hooks); }

namespace {

// The API server's mux for a path no handler serves.
void PageNotFound(httplib::Response& res) {
  CommonHeaders(res);
  res.status = 404;
  res.set_content("404 page not found\n", "text/plain; charset=utf-8");
}

// GET /version: the emulated release, marked as the emulator's build.
std::string VersionJson(ServerVersion v) {
  if (v == ServerVersion::kV1_24) {
    return "{\"major\":\"1\",\"minor\":\"24\",\"gitVersion\":\"v1.24.17-"
           "emulator\",\"gitCommit\":\"\",\"gitTreeState\":\"clean\","
           "\"buildDate\":\"\",\"goVersion\":\"\",\"compiler\":\"gc\","
           "\"platform\":\"linux/amd64\"}";
  }
  return "{\"major\":\"1\",\"minor\":\"37\",\"emulationMajor\":\"1\","
         "\"emulationMinor\":\"37\",\"minCompatibilityMajor\":\"1\","
         "\"minCompatibilityMinor\":\"36\",\"gitVersion\":\"v1.37.2-"
         "emulator\",\"gitCommit\":\"\",\"gitTreeState\":\"clean\","
         "\"buildDate\":\"\",\"goVersion\":\"\",\"compiler\":\"gc\","
         "\"platform\":\"linux/amd64\"}";
}

ApiStatus FailureStatus(const EmulatorHooks::Failure& f) {
  if (f.code == 429) return TooManyRequestsStatus(f.retry_after_seconds);
  // A 410 reads as the API server's: Expired, too old resource version.
  if (f.code == 410) {
    return ExpiredStatus("injected fault: too old resource version");
  }
  ApiStatus st = InternalErrorStatus("injected fault");
  st.code = f.code;
  st.retry_after_seconds = f.retry_after_seconds;
  return st;
}

}  // namespace

bool Emulator::ServeDiscovery(const std::vector<absl::string_view>& seg,
                              bool is_get, ApiPath* api,
                              httplib::Response& res) {
  // (As before the restructure: /api and /apis check the method; /api,
  // /api/v1 and /apis/g/v consult the injected faults.)
  auto reply = [&](const std::string& body, bool check_method,
                   bool check_faults) {
    if (check_method && !is_get) {
      return ReplyStatus(res, MethodNotAllowedStatus());
    }
    if (!check_faults) return ReplyJson(res, 200, body);
    if (auto f = InjectedFailure("get", ""); f.has_value()) {
      return ReplyStatus(res, FailureStatus(*f));
    }
    ReplyJson(res, 200, body);
  };
  if (!seg.empty() && seg[0] == "api") {
    if (seg.size() == 1) {
      reply(registry_->ApiVersionsJson(absl::StrCat(options_.host, ":", port_)),
            true, true);
      return true;
    }
    api->version = std::string(seg[1]);
    api->rest = 2;
  } else if (!seg.empty() && seg[0] == "apis") {
    if (seg.size() == 1) {
      reply(registry_->ApiGroupListJson(), true, false);
      return true;
    }
    api->group = std::string(seg[1]);
    absl::optional<std::string> g = registry_->ApiGroupJson(api->group);
    if (!g.has_value()) {
      // No handler is registered under an unknown group: the server's mux
      // answers, in plain text.
      PageNotFound(res);
      return true;
    }
    if (seg.size() == 2) {
      reply(*g, false, false);
      return true;
    }
    api->version = std::string(seg[2]);
    api->rest = 3;
  } else if (seg.size() == 1 && seg[0] == "version") {
    ReplyJson(res, 200, VersionJson(server_version()));
    return true;
  } else {
    PageNotFound(res);
    return true;
  }
  if (seg.size() == api->rest) {
    absl::optional<std::string> list =
        registry_->ResourceListJson(api->group, api->version);
    if (!list.has_value()) {
      ReplyStatus(res, ResourceNotFoundStatus());
    } else {
      reply(*list, false, true);
    }
    return true;
  }
  return false;
}

bool Emulator::ParseRoute(const std::vector<absl::string_view>& seg,
                          const ApiPath& api, Route* route) const {
  std::vector<absl::string_view> s(seg.begin() + api.rest, seg.end());
  // namespaces/{ns}/{resource}[/{name}[/{sub}]], except the namespace
  // object's own subresources (namespaces/{name}/status).
  if (s.size() >= 3 && s[0] == "namespaces" && s[2] != "status" &&
      s[2] != "finalize") {
    route->ns = std::string(s[1]);
    s.erase(s.begin(), s.begin() + 2);
  }
  route->resource = registry_->Find(api.group, api.version, s[0]);
  if (route->resource == nullptr || s.size() > 3 ||
      (!route->ns.empty() && !route->resource->namespaced)) {
    return false;
  }
  if (s.size() >= 2) route->name = std::string(s[1]);
  if (s.size() == 3) {
    route->subresource = std::string(s[2]);
    const auto& subs = route->resource->subresources;
    if (std::find(subs.begin(), subs.end(), route->subresource) == subs.end()) {
      return false;
    }
  }
  // A namespaced resource addressed by name needs its namespace.
  return !(route->resource->namespaced && route->ns.empty() &&
           !route->name.empty());
}

namespace {

// The RBAC verb of a request on a resource; "" when the method does not
// apply to the path.
std::string VerbOf(const httplib::Request& req, bool named) {
  if (req.method == "GET") {
    return named ? "get" : BoolParam(req, "watch") ? "watch" : "list";
  }
  if (req.method == "POST" && !named) return "create";
  if (req.method == "PUT" && named) return "update";
  if (req.method == "PATCH" && named) return "patch";
  if (req.method == "DELETE" && named) return "delete";
  return "";
}

}  // namespace

absl::optional<ApiStatus> Emulator::Forbidden(
    const std::vector<absl::string_view>& seg, const httplib::Request& req,
    absl::string_view user) const {
  // /api/v1/[namespaces/NS/]RESOURCE[/NAME] or /apis/G/V/...
  size_t rest = 0;
  ResourceInfo named;
  if (seg.size() >= 3 && seg[0] == "api") {
    rest = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis" &&
             registry_->ApiGroupJson(seg[1]).has_value()) {
    named.group = std::string(seg[1]);
    rest = 3;
  } else {
    return absl::nullopt;
  }
  std::vector<absl::string_view> s(seg.begin() + rest, seg.end());
  std::string ns;
  if (s.size() >= 3 && s[0] == "namespaces") {
    ns = std::string(s[1]);
    s.erase(s.begin(), s.begin() + 2);
  }
  named.resource = std::string(s[0]);
  const std::string name = s.size() >= 2 ? std::string(s[1]) : "";
  const std::string verb = VerbOf(req, !name.empty());
  if (verb.empty()) return absl::nullopt;
  return ForbiddenStatus(user, verb, named, ns, name);
}

Emulator::RequestCounts Emulator::request_counts() const {
  RequestCounts counts;
  counts.list = list_requests_.load(std::memory_order_relaxed);
  counts.watch = watch_requests_.load(std::memory_order_relaxed);
  counts.other = other_requests_.load(std::memory_order_relaxed);
  return counts;
}

void Emulator::Handle(const httplib::Request& req, bool gzip,
                      httplib::Response& res) {
  const std::string& path = req.path;
  if (absl::StartsWith(path, "/_emulator/")) return HandleControl(req, res);
  if (path == "/healthz" || path == "/livez" || path == "/readyz") {
    res.set_content("ok", "text/plain; charset=utf-8");
    return;
  }
  const EmulatorOptions::Token* who = nullptr;
  if (!options_.tokens.empty()) {
    who = Authenticate(req);
    if (who == nullptr) return ReplyStatus(res, UnauthorizedStatus());
  }
  std::vector<absl::string_view> seg =
      absl::StrSplit(absl::string_view(path).substr(1), '/', absl::SkipEmpty());
  if (who != nullptr && !who->allowed) {
    // RBAC decides on the path's names before any resource is looked up
    // (an unknown resource is forbidden too); discovery is open to all.
    if (absl::optional<ApiStatus> denied = Forbidden(seg, req, who->user)) {
      return ReplyStatus(res, *denied);
    }
  }
  ApiPath api;
  if (ServeDiscovery(seg, req.method == "GET", &api, res)) {
    other_requests_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Route route;
  if (!ParseRoute(seg, api, &route)) {
    other_requests_.fetch_add(1, std::memory_order_relaxed);
    return ReplyStatus(res, ResourceNotFoundStatus());
  }
  const std::string verb = VerbOf(req, !route.name.empty());
  (verb == "list"    ? list_requests_
   : verb == "watch" ? watch_requests_
                     : other_requests_)
      .fetch_add(1, std::memory_order_relaxed);
  if (verb.empty()) return ReplyStatus(res, MethodNotAllowedStatus());
  if (auto f = InjectedFailure(verb, route.resource->resource); f.has_value()) {
    return ReplyStatus(res, FailureStatus(*f));
  }
  if (verb == "get") {
    absl::StatusOr<StoredObjectPtr> obj =
        store_->Get(*route.resource, route.ns, route.name);
    if (!obj.ok()) {
      return ReplyStatus(
          res, FromStoreError(obj.status(), *route.resource, route.name));
    }
    return ReplyJson(res, 200,
                     ObjectJson(*route.resource, **obj, MetadataOnly(req)));
  }
  if (verb == "list") return HandleList(route, req, gzip, res);
  if (verb == "watch") return HandleWatch(route, req, res);
  HandleWrite(route, verb, req, res);
}

namespace {

// A list response built in memory: `header`, then every item.
std::string InlineListBody(std::string header, size_t total,
                           const ListResult& list, bool metadata_only) {
  std::string body = std::move(header);
  body.reserve(total);
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i) body.push_back(',');
    AppendItem(body, *list.items[i], metadata_only);
  }
  body += "]}";
  return body;
}

}  // namespace

ServerVersion Emulator::server_version() const {
  return options_.v1_24 ? ServerVersion::kV1_24 : ServerVersion::kV1_37;
}

absl::optional<ApiStatus> Emulator::ParseList(const Route& route,
                                              const httplib::Request& req,
                                              ListRequest* lr) const {
  // The API server's order: the query decoded (integers: 400), then
  // ListOptions validated (422), then the selectors and the storage's own
  // checks (400).
  for (const char* key : {"limit", "timeoutSeconds"}) {
    absl::StatusOr<int64_t> v = ParseQueryInt(req.get_param_value(key));
    if (!v.ok()) return BadRequestStatus(v.status().message());
    if (absl::string_view(key) == "limit") lr->limit = *v;
  }
  ListOptions lo;
  lo.resource_version = req.get_param_value("resourceVersion");
  lo.resource_version_match = req.get_param_value("resourceVersionMatch");
  lo.continue_token = req.get_param_value("continue");
  if (!options_.v1_24) {
    lo.send_initial_events =
        ParseQueryBool(req.get_param_value("sendInitialEvents"));
  }
  std::vector<FieldError> invalid = ValidateListOptions(lo, server_version());
  if (!invalid.empty()) return InvalidListOptionsStatus(invalid);
  if (absl::Status st =
          ParseSelectors(*route.resource, req, &lr->labels, &lr->fields);
      !st.ok()) {
    return BadRequestStatus(st.message());
  }
  if (!lo.continue_token.empty() && !lo.resource_version.empty() &&
      lo.resource_version != "0") {
    return BadRequestStatus(
        "specifying resource version is not allowed when using continue");
  }
  lr->continue_token = std::move(lo.continue_token);
  lr->resource_version = std::move(lo.resource_version);
  lr->resource_version_match = std::move(lo.resource_version_match);
  return absl::nullopt;
}

void Emulator::HandleList(const Route& route, const httplib::Request& req,
                          bool gzip, httplib::Response& res) {
  const ResourceInfo& r = *route.resource;
  ListRequest lr;
  lr.ns = route.ns;
  if (absl::optional<ApiStatus> bad = ParseList(route, req, &lr)) {
    return ReplyStatus(res, *bad);
  }
  if (!lr.continue_token.empty() && TakeContinueExpiry()) {
    absl::StatusOr<std::pair<int64_t, std::string>> tok =
        DecodeContinueToken(lr.continue_token);
    std::string start = tok.ok() ? tok->second : "";
    return ReplyStatus(res,
                       ExpiredContinueStatus(EncodeContinueToken(-1, start)));
  }
  absl::StatusOr<ListResult> list = store_->List(r, lr);
  if (!list.ok()) return ReplyStatus(res, FromStoreError(list.status(), r, ""));
  const bool md = MetadataOnly(req);
  auto shared = std::make_shared<ListResult>(*std::move(list));
  std::string header = ListHeader(r, *shared, md);
  size_t total = header.size() + 2;
  for (const auto& o : shared->items) {
    total += (md ? o->metadata_len + 80 : o->body.size()) + 1;
  }
  CommonHeaders(res);
  // Each response paced on its own (the API server encodes each list on
  // its own goroutine).
  std::shared_ptr<Pacer> pacer;
  if (options_.serve_bytes_per_sec > 0) {
    pacer = std::make_shared<Pacer>(options_.serve_bytes_per_sec,
                                    kPaceBurstBytes, options_.clock);
  }
  const absl::optional<int64_t> stall = list_stalls_.Check(r);
  if (total <= kListInlineLimit || stall.has_value()) {
    std::string body = InlineListBody(std::move(header), total, *shared, md);
    if (stall.has_value()) {
      return ServeStalledList(std::move(body), *stall, res);
    }
    if (pacer != nullptr) pacer->Take(body.size());
    res.set_content(body, "application/json");
    return;
  }
  // Stream from the snapshot: the objects' texts are shared, not copied,
  // until each chunk is assembled. Larger than kGzipThresholdBytes, so
  // gzipped when asked, chunk by chunk (the list still streams).
  static_assert(kListInlineLimit > kGzipThresholdBytes);
  auto next = std::make_shared<size_t>(0);
  auto head = std::make_shared<std::string>(std::move(header));
  std::shared_ptr<GzipEncoder> encoder;
  if (gzip) {
    encoder = std::make_shared<GzipEncoder>();
    SetGzipHeaders(res);
  }
  res.set_chunked_content_provider(
      "application/json", [shared, next, head, md, encoder, pacer](
                              size_t, httplib::DataSink& sink) {
        std::string chunk;
        chunk.reserve(kListChunkBytes + 16384);
        if (*next == 0) chunk.append(*head);
        const auto& items = shared->items;
        while (*next < items.size() && chunk.size() < kListChunkBytes) {
          if (*next) chunk.push_back(',');
          AppendItem(chunk, *items[*next], md);
          ++*next;
        }
        const bool last = *next >= items.size();
        if (last) chunk += "]}";
        if (pacer != nullptr) pacer->Take(chunk.size());
        if (encoder != nullptr) {
          std::string plain = std::move(chunk);
          chunk.clear();
          encoder->Write(plain, &chunk);
          if (last) encoder->Finish(&chunk);
        }
        if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) {
          return false;
        }
        if (last) sink.done();
        return true;
      });
}

void Emulator::HandleWrite(const Route& route, const std::string& verb,
                           const httplib::Request& req,
                           httplib::Response& res) {
  const ResourceInfo& r = *route.resource;
  absl::StatusOr<StoredObjectPtr> result;
  int code = 200;
  if (verb == "create") {
    result = store_->Create(r, route.ns, req.body);
    code = 201;
  } else if (verb == "update") {
    result = store_->Update(r, route.ns, route.name, req.body);
  } else if (verb == "patch") {
    absl::StatusOr<PatchType> type =
        PatchTypeFromContentType(req.get_header_value("Content-Type"));
    if (!type.ok()) {
      return ReplyStatus(res, UnsupportedMediaTypeStatus(
                                  req.get_header_value("Content-Type")));
    }
    result = store_->Patch(r, route.ns, route.name, *type, req.body);
  } else {
    result = store_->Delete(r, route.ns, route.name);
    if (result.ok()) {
      return ReplyStatus(res, DeletedStatus(r, route.name, (*result)->uid));
    }
  }
  if (!result.ok()) {
    std::string name = route.name;
    if (name.empty()) {
      const bool invalid =
          result.status().GetPayload(kInvalidPayload).has_value();
      name = invalid ? std::string(result.status().message())
                     : NameFromKey(result.status().message());
    }
    return ReplyStatus(res, FromStoreError(result.status(), r, name));
  }
  ReplyJson(res, code, ObjectJson(r, **result, false));
}

}  // namespace emulator

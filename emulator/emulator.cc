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
#include "glog/logging.h"
#include "httplib.h"
#include "emulator/api_status.h"
#include "emulator/load_generator.h"
#include "emulator/patch.h"
#include "emulator/selector.h"
#include "emulator/tls_certs.h"

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

struct Emulator::Route {
  const ResourceInfo* resource = nullptr;
  std::string ns;
  std::string name;
  std::string subresource;
};

namespace {

constexpr size_t kListInlineLimit = 1 << 20;  // larger lists are streamed
// Bytes per streamed chunk. Kept well under glibc's mmap threshold (128 KiB):
// larger buffers are mmapped and unmapped per chunk (page faults on every
// byte, 10x slower).
constexpr size_t kListChunkBytes = 48 << 10;

std::string NewAuditId() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x",
                         absl::Uniform<uint32_t>(*gen),
                         absl::Uniform<uint32_t>(*gen) & 0xffff,
                         absl::Uniform<uint32_t>(*gen) & 0xfff,
                         (absl::Uniform<uint32_t>(*gen) & 0x3fff) | 0x8000,
                         absl::Uniform<uint64_t>(*gen) & 0xffffffffffffULL);
}

void CommonHeaders(httplib::Response& res) {
  res.set_header("Audit-Id", NewAuditId());
  res.set_header("Cache-Control", "no-cache, private");
}

void ReplyJson(httplib::Response& res, int code, const std::string& body) {
  CommonHeaders(res);
  res.status = code;
  res.set_content(body, "application/json");
}

void ReplyStatus(httplib::Response& res, const ApiStatus& status) {
  if (status.code == 429 && status.retry_after_seconds > 0) {
    res.set_header("Retry-After", absl::StrCat(status.retry_after_seconds));
  }
  ReplyJson(res, status.code, StatusJson(status));
}

bool MetadataOnly(const httplib::Request& req) {
  return absl::StrContains(req.get_header_value("Accept"),
                           "as=PartialObjectMetadata");
}

bool BoolParam(const httplib::Request& req, const char* key) {
  std::string v = req.get_param_value(key);
  return v == "1" || v == "true";
}

// The name part of a store error's key ("ns/name" or "name").
std::string NameFromKey(absl::string_view key) {
  size_t slash = key.rfind('/');
  return std::string(slash == absl::string_view::npos ? key
                                                      : key.substr(slash + 1));
}

std::string ErrorEventLine(const ApiStatus& status) {
  return absl::StrCat("{\"type\":\"ERROR\",\"object\":", StatusJson(status),
                      "}\n");
}

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
  if (options_.seed_pods > 0) {
    absl::Status s = SeedPods(*store_, *registry_, options_.seed_pods);
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

  httplib::Server& svr = *server_;
  svr.new_task_queue = [] { return new StreamQueue(); };
  // Idle keep-alive connections hold up Stop() for this long.
  svr.set_keep_alive_timeout(1);
  svr.set_read_timeout(30);
  svr.set_write_timeout(30);
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(64 << 20);
  // httplib would gzip application/json for clients that accept it, and its
  // gzip buffers a chunked stream until the end: watch events would never
  // arrive. The emulator never compresses. (The Request object handed to
  // handlers is a non-const local of httplib's, so the cast is sound.)
  svr.set_pre_routing_handler(
      [](const httplib::Request& req, httplib::Response&) {
        const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
        return httplib::Server::HandlerResponse::Unhandled;
      });
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res);
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

void Emulator::Handle(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  if (absl::StartsWith(path, "/_emulator/")) {
    HandleControl(req, res);
    return;
  }
  if (path == "/healthz" || path == "/livez" || path == "/readyz") {
    res.set_content("ok", "text/plain; charset=utf-8");
    return;
  }
  // Authentication.
  const EmulatorOptions::Token* who = nullptr;
  if (!options_.tokens.empty()) {
    const std::string header = req.get_header_value("Authorization");
    absl::string_view auth = header;
    if (absl::ConsumePrefix(&auth, "Bearer ")) {
      for (const auto& t : options_.tokens) {
        if (t.token == auth) who = &t;
      }
    }
    if (who == nullptr) {
      ReplyStatus(res, UnauthorizedStatus());
      return;
    }
  }

  // Routing.
  std::vector<absl::string_view> seg =
      absl::StrSplit(absl::string_view(path).substr(1), '/', absl::SkipEmpty());
  const bool is_get = req.method == "GET";
  std::string group, version;
  size_t rest = 0;
  if (!seg.empty() && seg[0] == "api") {
    if (seg.size() == 1) {
      if (!is_get) return ReplyStatus(res, MethodNotAllowedStatus());
      if (auto f = faults_.OnRequest("get", ""); f.has_value()) {
        return ReplyStatus(
            res, f->code == 429 ? TooManyRequestsStatus(f->retry_after_seconds)
                                : InternalErrorStatus("injected fault"));
      }
      return ReplyJson(
          res, 200,
          registry_->ApiVersionsJson(absl::StrCat(options_.host, ":", port_)));
    }
    version = std::string(seg[1]);
    rest = 2;
  } else if (!seg.empty() && seg[0] == "apis") {
    if (seg.size() == 1) {
      if (!is_get) return ReplyStatus(res, MethodNotAllowedStatus());
      return ReplyJson(res, 200, registry_->ApiGroupListJson());
    }
    group = std::string(seg[1]);
    if (seg.size() == 2) {
      absl::optional<std::string> g = registry_->ApiGroupJson(group);
      if (!g.has_value()) return ReplyStatus(res, ResourceNotFoundStatus());
      return ReplyJson(res, 200, *g);
    }
    version = std::string(seg[2]);
    rest = 3;
  } else if (seg.size() == 1 && seg[0] == "version") {
    return ReplyJson(
        res, 200,
        "{\"major\":\"1\",\"minor\":\"24\",\"gitVersion\":\"v1.24.17-"
        "emulator\",\"gitCommit\":\"\",\"gitTreeState\":\"clean\","
        "\"buildDate\":\"\",\"goVersion\":\"\",\"compiler\":\"gc\","
        "\"platform\":\"linux/amd64\"}");
  } else {
    return ReplyStatus(res, ResourceNotFoundStatus());
  }
  if (seg.size() == rest) {
    absl::optional<std::string> list =
        registry_->ResourceListJson(group, version);
    if (!list.has_value()) return ReplyStatus(res, ResourceNotFoundStatus());
    if (auto f = faults_.OnRequest("get", ""); f.has_value()) {
      return ReplyStatus(
          res, f->code == 429 ? TooManyRequestsStatus(f->retry_after_seconds)
                              : InternalErrorStatus("injected fault"));
    }
    return ReplyJson(res, 200, *list);
  }

  Route route;
  std::vector<absl::string_view> s(seg.begin() + rest, seg.end());
  // namespaces/{ns}/{resource}[/{name}[/{sub}]], except the namespace
  // object's own subresources (namespaces/{name}/status).
  if (s.size() >= 3 && s[0] == "namespaces" && s[2] != "status" &&
      s[2] != "finalize") {
    route.ns = std::string(s[1]);
    s.erase(s.begin(), s.begin() + 2);
  }
  route.resource = registry_->Find(group, version, s[0]);
  if (route.resource == nullptr || s.size() > 3 ||
      (!route.ns.empty() && !route.resource->namespaced)) {
    return ReplyStatus(res, ResourceNotFoundStatus());
  }
  if (s.size() >= 2) route.name = std::string(s[1]);
  if (s.size() == 3) {
    route.subresource = std::string(s[2]);
    const auto& subs = route.resource->subresources;
    if (std::find(subs.begin(), subs.end(), route.subresource) == subs.end()) {
      return ReplyStatus(res, ResourceNotFoundStatus());
    }
  }
  // A namespaced resource addressed by name needs its namespace.
  if (route.resource->namespaced && route.ns.empty() && !route.name.empty()) {
    return ReplyStatus(res, ResourceNotFoundStatus());
  }

  std::string verb;
  if (is_get) {
    verb = !route.name.empty()       ? "get"
           : BoolParam(req, "watch") ? "watch"
                                     : "list";
  } else if (req.method == "POST" && route.name.empty()) {
    verb = "create";
  } else if (req.method == "PUT" && !route.name.empty()) {
    verb = "update";
  } else if (req.method == "PATCH" && !route.name.empty()) {
    verb = "patch";
  } else if (req.method == "DELETE" && !route.name.empty()) {
    verb = "delete";
  } else {
    return ReplyStatus(res, MethodNotAllowedStatus());
  }
  if (who != nullptr && !who->allowed) {
    return ReplyStatus(res, ForbiddenStatus(who->user, verb, *route.resource,
                                            route.ns, route.name));
  }
  if (auto f = faults_.OnRequest(verb, route.resource->resource);
      f.has_value()) {
    if (f->code == 429) {
      return ReplyStatus(res, TooManyRequestsStatus(f->retry_after_seconds));
    }
    ApiStatus st = InternalErrorStatus("injected fault");
    st.code = f->code;
    return ReplyStatus(res, st);
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
  if (verb == "list") return HandleList(route, req, res);
  if (verb == "watch") return HandleWatch(route, req, res);
  HandleWrite(route, verb, req, res);
}

namespace {
// The labelSelector and fieldSelector query parameters shared by list and
// watch; the error's message is what the API server's 400 says.
absl::Status ParseSelectors(const ResourceInfo& r, const httplib::Request& req,
                            LabelSelector* labels, FieldSelector* fields) {
  absl::StatusOr<LabelSelector> l =
      LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!l.ok()) return l.status();
  absl::StatusOr<FieldSelector> f = FieldSelector::Parse(
      req.get_param_value("fieldSelector"), r.selectable_fields);
  if (!f.ok()) return f.status();
  *labels = *std::move(l);
  *fields = *std::move(f);
  return absl::OkStatus();
}
}  // namespace

void Emulator::HandleList(const Route& route, const httplib::Request& req,
                          httplib::Response& res) {
  const ResourceInfo& r = *route.resource;
  ListRequest lr;
  lr.ns = route.ns;
  if (absl::Status st = ParseSelectors(r, req, &lr.labels, &lr.fields);
      !st.ok()) {
    return ReplyStatus(res, BadRequestStatus(st.message()));
  }
  std::string limit = req.get_param_value("limit");
  if (!limit.empty() && !absl::SimpleAtoi(limit, &lr.limit)) {
    return ReplyStatus(res, BadRequestStatus("invalid limit"));
  }
  lr.continue_token = req.get_param_value("continue");
  lr.resource_version = req.get_param_value("resourceVersion");
  lr.resource_version_match = req.get_param_value("resourceVersionMatch");
  if (!lr.continue_token.empty() && faults_.TakeContinueExpiry()) {
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
  if (total <= kListInlineLimit) {
    std::string body = std::move(header);
    body.reserve(total);
    for (size_t i = 0; i < shared->items.size(); ++i) {
      if (i) body.push_back(',');
      AppendItem(body, *shared->items[i], md);
    }
    body += "]}";
    res.set_content(body, "application/json");
    return;
  }
  // Stream from the snapshot: the objects' texts are shared, not copied,
  // until each chunk is assembled.
  auto next = std::make_shared<size_t>(0);
  auto head = std::make_shared<std::string>(std::move(header));
  res.set_chunked_content_provider(
      "application/json",
      [shared, next, head, md](size_t, httplib::DataSink& sink) {
        std::string chunk;
        chunk.reserve(kListChunkBytes + 16384);
        if (*next == 0) chunk.append(*head);
        const auto& items = shared->items;
        while (*next < items.size() && chunk.size() < kListChunkBytes) {
          if (*next) chunk.push_back(',');
          AppendItem(chunk, *items[*next], md);
          ++*next;
        }
        if (*next >= items.size()) chunk += "]}";
        if (!sink.write(chunk.data(), chunk.size())) return false;
        if (*next >= items.size()) sink.done();
        return true;
      });
}

void Emulator::HandleWatch(const Route& route, const httplib::Request& req,
                           httplib::Response& res) {
  const ResourceInfo& r = *route.resource;
  WatchRequest wr;
  wr.ns = route.ns;
  if (absl::Status st = ParseSelectors(r, req, &wr.labels, &wr.fields);
      !st.ok()) {
    return ReplyStatus(res, BadRequestStatus(st.message()));
  }
  wr.resource_version = req.get_param_value("resourceVersion");
  const std::string rv_match = req.get_param_value("resourceVersionMatch");
  const bool bookmarks = BoolParam(req, "allowWatchBookmarks");
  if (options_.v1_24) {
    // v1.24 knows no sendInitialEvents (ignored as an unknown parameter)
    // and forbids resourceVersionMatch on watches.
    if (!rv_match.empty()) {
      return ReplyStatus(
          res, WatchListUnsupportedStatus(!wr.resource_version.empty()));
    }
  } else {
    wr.send_initial_events = BoolParam(req, "sendInitialEvents");
    if (wr.send_initial_events) {
      if (rv_match != "NotOlderThan" || !bookmarks) {
        ApiStatus st;
        st.code = 422;
        st.reason = "Invalid";
        st.message =
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents "
            "requires resourceVersionMatch=NotOlderThan and "
            "allowWatchBookmarks=true";
        st.has_details = true;
        st.details_group = "meta.k8s.io";
        st.details_kind = "ListOptions";
        return ReplyStatus(res, st);
      }
    } else if (!rv_match.empty()) {
      return ReplyStatus(
          res, WatchListUnsupportedStatus(!wr.resource_version.empty()));
    }
  }
  absl::Duration timeout = options_.default_watch_timeout;
  std::string ts = req.get_param_value("timeoutSeconds");
  int64_t secs = 0;
  if (!ts.empty()) {
    if (!absl::SimpleAtoi(ts, &secs) || secs < 0) {
      return ReplyStatus(res, BadRequestStatus("invalid timeoutSeconds"));
    }
    if (secs > 0) timeout = absl::Seconds(secs);
  }
  CommonHeaders(res);
  if (faults_.TakeWatchExpiry(r.resource)) {
    std::string line = ErrorEventLine(ExpiredStatus(
        absl::StrCat("too old resource version: ", wr.resource_version, " (",
                     store_->CurrentRv(), ")")));
    res.set_chunked_content_provider(
        "application/json", [line](size_t, httplib::DataSink& sink) {
          if (!sink.write(line.data(), line.size())) return false;
          sink.done();
          return true;
        });
    return;
  }
  absl::StatusOr<std::shared_ptr<Watcher>> opened =
      store_->Watch(r, std::move(wr));
  if (!opened.ok()) {
    if (opened.status().code() == absl::StatusCode::kOutOfRange) {
      // As the API server does: HTTP 200, then a single ERROR event.
      std::string line =
          ErrorEventLine(ExpiredStatus(opened.status().message()));
      res.set_chunked_content_provider(
          "application/json", [line](size_t, httplib::DataSink& sink) {
            if (!sink.write(line.data(), line.size())) return false;
            sink.done();
            return true;
          });
      return;
    }
    return ReplyStatus(res, FromStoreError(opened.status(), r, ""));
  }
  std::shared_ptr<Watcher> watcher = *std::move(opened);
  // Stop() closes every registered watcher after setting stopping_; one
  // registered just after that is closed here.
  if (stopping_.load()) watcher->Close(Watcher::CloseKind::kGraceful);

  informer::Clock* clock = options_.clock;
  ObjectStore* store = store_.get();
  const bool md = MetadataOnly(req);
  const absl::Duration bookmark_interval = options_.bookmark_interval;
  const absl::Time end = clock->Now() + timeout;
  res.set_chunked_content_provider(
      "application/json",
      [watcher, store, clock, md, bookmarks, bookmark_interval, end, &r](
          size_t, httplib::DataSink& sink) {
        absl::Time next_bookmark = bookmarks ? clock->Now() + bookmark_interval
                                             : absl::InfiniteFuture();
        bool stalled = false;
        std::vector<StoreEvent> events;
        while (true) {
          events.clear();
          Watcher::Directives d;
          Watcher::CloseKind close;
          absl::Time deadline =
              stalled ? absl::InfiniteFuture() : std::min(end, next_bookmark);
          watcher->Next(clock, deadline, 256, &events, &d, &close);
          if (close == Watcher::CloseKind::kAbrupt) return false;
          if (close == Watcher::CloseKind::kGraceful) {
            sink.done();
            return true;
          }
          stalled = d.stalled;
          if (stalled) continue;
          for (int i = 0; i < d.malformed_lines; ++i) {
            static constexpr absl::string_view kGarbage =
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\"\n";
            if (!sink.write(kGarbage.data(), kGarbage.size())) return false;
          }
          for (const StoreEvent& ev : events) {
            std::string line =
                ev.type == EventType::kBookmark
                    ? BookmarkLine(r, ev.rv, ev.initial_events_end, md)
                    : EventLine(ev.type, r, *ev.object, md);
            if (d.cut_next_event) {
              sink.write(line.data(), line.size() / 2);
              return false;
            }
            if (!sink.write(line.data(), line.size())) return false;
          }
          absl::Time now = clock->Now();
          if (now >= end) {
            sink.done();
            return true;
          }
          if (now >= next_bookmark) {
            absl::optional<int64_t> rv = store->BookmarkRv(*watcher);
            if (rv.has_value()) {
              std::string line = BookmarkLine(r, *rv, false, md);
              if (!sink.write(line.data(), line.size())) return false;
              next_bookmark = now + bookmark_interval;
            }
          }
        }
      },
      [watcher, store](bool) { store->StopWatch(watcher); });
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
    if (name.empty()) name = NameFromKey(result.status().message());
    return ReplyStatus(res, FromStoreError(result.status(), r, name));
  }
  ReplyJson(res, code, ObjectJson(r, **result, false));
}

void Emulator::HandleControl(const httplib::Request& req,
                             httplib::Response& res) {
  absl::string_view op =
      absl::string_view(req.path).substr(strlen("/_emulator/"));
  const ResourceInfo* resource = nullptr;
  std::string rname = req.get_param_value("resource");
  if (!rname.empty() && rname != "*") {
    resource = registry_->FindByName(rname);
    if (resource == nullptr) {
      return ReplyStatus(
          res, BadRequestStatus(absl::StrCat("unknown resource ", rname)));
    }
  }
  auto int_param = [&req](const char* key, int def) {
    int v = def;
    std::string s = req.get_param_value(key);
    if (!s.empty() && !absl::SimpleAtoi(s, &v)) v = def;
    return v;
  };
  auto ok = [&res] { ReplyJson(res, 200, "{\"ok\":true}"); };
  if (op == "throttle") {
    faults_.ThrottleNextRequests(int_param("count", 1),
                                 int_param("retry_after", 1));
    return ok();
  }
  if (op == "fail") {
    std::string verb = req.get_param_value("verb");
    faults_.FailRequests(verb.empty() ? "*" : verb,
                         resource == nullptr ? "*" : resource->resource,
                         int_param("code", 500), int_param("count", 1));
    return ok();
  }
  if (op == "expire_watch") {
    faults_.ExpireNextWatch(resource == nullptr ? "*" : resource->resource);
    return ok();
  }
  if (op == "expire_continue") {
    faults_.ExpireNextContinue();
    return ok();
  }
  if (op == "clear_faults") {
    faults_.Clear();
    ResumeWatches(nullptr);
    return ok();
  }
  if (op == "cut_watches") {
    CutWatches(resource);
    return ok();
  }
  if (op == "stall_watches") {
    StallWatches(resource);
    return ok();
  }
  if (op == "resume_watches") {
    ResumeWatches(resource);
    return ok();
  }
  if (op == "malformed_event") {
    InjectMalformedEvent(resource);
    return ok();
  }
  if (op == "restart") {
    Restart();
    return ok();
  }
  if (op == "compact") {
    store_->Compact();
    return ok();
  }
  if (op == "large_object") {
    std::string ns = req.get_param_value("namespace");
    std::string name = req.get_param_value("name");
    absl::StatusOr<StoredObjectPtr> obj = CreateLargeObject(
        ns.empty() ? "default" : ns, name.empty() ? "large" : name,
        static_cast<size_t>(int_param("bytes", (1 << 20) + 4096)));
    if (!obj.ok()) {
      return ReplyStatus(
          res, FromStoreError(obj.status(), Resource("configmaps"), name));
    }
    return ReplyJson(res, 201, ObjectJson(Resource("configmaps"), **obj, true));
  }
  if (op == "load") {
    // Blocks for the whole run (benchmarks call it from their own thread).
    LoadSpec spec;
    std::string ns = req.get_param_value("namespace");
    if (!ns.empty()) spec.ns = ns;
    spec.objects = int_param("objects", spec.objects);
    spec.object_bytes = int_param("bytes", spec.object_bytes);
    spec.rate = int_param("rate", static_cast<int>(spec.rate));
    spec.duration = absl::Milliseconds(int_param("millis", 10000));
    absl::StatusOr<LoadReport> report =
        RunLoad(*store_, *registry_, spec, options_.clock);
    if (!report.ok()) {
      return ReplyStatus(res, BadRequestStatus(report.status().ToString()));
    }
    return ReplyJson(
        res, 200,
        absl::StrCat("{\"updates\":", report->updates, ",\"seconds\":",
                     absl::ToDoubleSeconds(report->elapsed), "}"));
  }
  if (op == "watchers") {
    int min = int_param("min", 0);
    int timeout_ms = int_param("timeout_ms", 0);
    if (min > 0) {
      store_->AwaitWatchers(resource, min, absl::Milliseconds(timeout_ms));
    }
    return ReplyJson(
        res, 200,
        absl::StrCat("{\"watchers\":", store_->NumWatchers(resource), "}"));
  }
  if (op == "state") {
    if (resource == nullptr) {
      return ReplyStatus(res, BadRequestStatus("state needs ?resource="));
    }
    std::string out = absl::StrCat("{\"resourceVersion\":\"",
                                   store_->CurrentRv(), "\",\"objects\":[");
    bool first = true;
    for (const auto& [key, rv] : store_->Snapshot(*resource)) {
      absl::StrAppend(&out, first ? "" : ",", "{\"key\":\"", key,
                      "\",\"resourceVersion\":\"", rv, "\"}");
      first = false;
    }
    out += "]}";
    return ReplyJson(res, 200, out);
  }
  if (op == "ca.crt") {
    res.set_content(ca_cert_pem_, "application/x-pem-file");
    return;
  }
  ReplyStatus(res, ResourceNotFoundStatus());
}

}  // namespace emulator

#include "informer/client/resource_client.h"

#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "informer/client/watch_decoder.h"
#include "informer/object/streaming_list_decoder.h"

namespace informer {
namespace client {
namespace {

void AddParam(std::vector<std::string>* params, absl::string_view key,
              absl::string_view value) {
  if (value.empty()) return;
  params->push_back(absl::StrCat(key, "=", QueryEscape(value)));
}

std::string WithQuery(std::string path, const std::vector<std::string>& p) {
  if (p.empty()) return path;
  return absl::StrCat(path, "?", absl::StrJoin(p, "&"));
}

}  // namespace

std::string QueryEscape(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

absl::string_view PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

ResourceClient::ResourceClient(HttpTransport* transport, ApiResource resource,
                               std::string ns, ResourceClientOptions options)
    : transport_(transport),
      resource_(std::move(resource)),
      namespace_(resource_.namespaced ? std::move(ns) : std::string()),
      options_(std::move(options)) {}

std::string ResourceClient::CollectionPath() const {
  std::string path =
      resource_.group.empty()
          ? absl::StrCat("/api/", resource_.version)
          : absl::StrCat("/apis/", resource_.group, "/", resource_.version);
  if (!namespace_.empty()) {
    absl::StrAppend(&path, "/namespaces/", QueryEscape(namespace_));
  }
  absl::StrAppend(&path, "/", resource_.resource);
  return path;
}

std::string ResourceClient::ListPath(const ListOptions& o) const {
  std::vector<std::string> p;
  if (o.limit > 0) p.push_back(absl::StrCat("limit=", o.limit));
  AddParam(&p, "continue", o.continue_token);
  AddParam(&p, "resourceVersion", o.resource_version);
  AddParam(&p, "resourceVersionMatch", o.resource_version_match);
  AddParam(
      &p, "labelSelector",
      o.label_selector.empty() ? options_.label_selector : o.label_selector);
  AddParam(
      &p, "fieldSelector",
      o.field_selector.empty() ? options_.field_selector : o.field_selector);
  return WithQuery(CollectionPath(), p);
}

std::string ResourceClient::WatchPath(const WatchOptions& o) const {
  std::vector<std::string> p = {"watch=1"};
  AddParam(&p, "resourceVersion", o.resource_version);
  AddParam(&p, "resourceVersionMatch", o.resource_version_match);
  if (o.allow_watch_bookmarks) p.push_back("allowWatchBookmarks=true");
  if (o.send_initial_events) p.push_back("sendInitialEvents=true");
  if (o.timeout > absl::ZeroDuration()) {
    p.push_back(
        absl::StrCat("timeoutSeconds=", absl::ToInt64Seconds(o.timeout)));
  }
  AddParam(
      &p, "labelSelector",
      o.label_selector.empty() ? options_.label_selector : o.label_selector);
  AddParam(
      &p, "fieldSelector",
      o.field_selector.empty() ? options_.field_selector : o.field_selector);
  return WithQuery(CollectionPath(), p);
}

// A page requested ahead of the pager's call for it.
struct ResourceClient::Prefetch {
  std::string path;
  std::atomic<bool> cancel{false};
  absl::StatusOr<ObjectList> result = absl::UnknownError("not fetched");
  std::thread thread;
};

ResourceClient::~ResourceClient() {
  std::unique_ptr<Prefetch> pending;
  {
    absl::MutexLock lock(&prefetch_mu_);
    closing_ = true;
    pending = std::move(prefetch_);
  }
  if (pending != nullptr) {
    pending->cancel.store(true);
    pending->thread.join();
  }
}

absl::StatusOr<ObjectList> ResourceClient::List(const ListOptions& options) {
  std::unique_ptr<Prefetch> ready = TakePrefetch(ListPath(options));
  if (ready != nullptr) {
    ready->thread.join();
    return std::move(ready->result);
  }
  return Fetch(options, nullptr);
}

absl::StatusOr<ObjectList> ResourceClient::ListWithItems(
    const ListOptions& options, const ItemFn& on_item) {
  std::unique_ptr<Prefetch> ready = TakePrefetch(ListPath(options));
  if (ready == nullptr) return Fetch(options, nullptr, &on_item);
  ready->thread.join();
  // Decoded already, on the prefetch thread: hand the items over now.
  if (ready->result.ok()) {
    for (const ObjectPtr& item : ready->result->items) {
      absl::Status st = on_item(item);
      if (!st.ok()) {
        return absl::Status(
            st.code(), absl::StrCat("GET ", ready->path, ": ", st.message()));
      }
    }
    if (!options.keep_items) ready->result->items.clear();
  }
  return std::move(ready->result);
}

std::unique_ptr<ResourceClient::Prefetch> ResourceClient::TakePrefetch(
    const std::string& path) {
  std::unique_ptr<Prefetch> p;
  {
    absl::MutexLock lock(&prefetch_mu_);
    p = std::move(prefetch_);
    std::unique_ptr<ListOptions> next = std::move(next_prefetch_);
    // The page after the one taken goes out now, while the pager waits
    // for (or decodes) this one.
    if (p != nullptr && p->path == path && next != nullptr) {
      StartPrefetchLocked(std::move(*next));
    }
  }
  if (p == nullptr || p->path == path) return p;
  // Not what the pager asked for (it restarted, or changed its options).
  p->cancel.store(true);
  p->thread.join();
  return nullptr;
}

void ResourceClient::StartPrefetch(ListOptions next) {
  absl::MutexLock lock(&prefetch_mu_);
  if (closing_) return;
  if (prefetch_ != nullptr) {
    // Called by prefetch_'s own head: its successor waits for the pager.
    next_prefetch_ = std::make_unique<ListOptions>(std::move(next));
    return;
  }
  StartPrefetchLocked(std::move(next));
}

void ResourceClient::StartPrefetchLocked(ListOptions next) {
  if (closing_) return;
  auto p = std::make_unique<Prefetch>();
  p->path = ListPath(next);
  Prefetch* const raw = p.get();
  raw->thread = std::thread([this, raw, next = std::move(next)] {
    raw->result = Fetch(next, &raw->cancel);
  });
  prefetch_ = std::move(p);
}

absl::StatusOr<ObjectList> ResourceClient::Fetch(
    const ListOptions& options, const std::atomic<bool>* cancel,
    const ItemFn* on_item) {
  HttpRequest req;
  req.path = ListPath(options);
  if (options_.metadata_only) req.accept = kAcceptMetadataList;
  req.cancel = cancel;
  // Items are decoded while the body arrives (no buffer for the whole
  // page, decode overlapped with the server sending the rest).
  StreamingListDecoder::Options decode;
  decode.decode_threads = options_.list_decode_threads;
  if (options_.prefetch_list_pages && options.limit > 0) {
    decode.on_head = [this, &options, cancel](const ObjectList& head) {
      if (head.continue_token.empty()) return;
      if (cancel != nullptr && cancel->load()) return;
      // What a pager asks for next: the same request with the token, and
      // without resourceVersion(Match), which the API server rejects
      // alongside a continue token.
      ListOptions next = options;
      next.continue_token = head.continue_token;
      next.resource_version.clear();
      next.resource_version_match.clear();
      StartPrefetch(std::move(next));
    };
  }
  if (on_item != nullptr) {
    decode.on_item = *on_item;
    decode.keep_items = options.keep_items;
  }
  StreamingListDecoder decoder(options_.transform, decode);
  req.body_sink = [&decoder](absl::string_view chunk) {
    return decoder.Feed(chunk);
  };
  absl::StatusOr<HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) {
    if (decoder.failed()) {
      // The decoder aborted the transfer: its error says what was wrong.
      const absl::Status bad = decoder.Finish().status();
      return absl::Status(bad.code(),
                          absl::StrCat("GET ", req.path, ": ", bad.message()));
    }
    return resp.status();
  }
  bytes_received_->fetch_add(resp->bytes_received, std::memory_order_relaxed);
  absl::StatusOr<ObjectList> list = decoder.Finish();
  if (!list.ok()) {
    return absl::Status(
        list.status().code(),
        absl::StrCat("GET ", req.path, ": ", list.status().message()));
  }
  return list;
}

absl::StatusOr<std::unique_ptr<WatchStream>> ResourceClient::Watch(
    const WatchOptions& options) {
  HttpRequest req;
  req.path = WatchPath(options);
  if (options_.metadata_only) req.accept = kAcceptMetadata;
  absl::StatusOr<std::unique_ptr<HttpStream>> body =
      transport_->Stream(req, options_.watch_idle_timeout);
  if (!body.ok()) return body.status();
  // A WatchList's initial events are a list: decoded on the list's
  // workers (see WatchDecoder).
  WatchDecoder::Options decode;
  if (options.send_initial_events) {
    decode.initial_event_threads = options_.list_decode_threads;
  }
  return std::unique_ptr<WatchStream>(new WatchDecoder(
      *std::move(body), options_.transform, req.path, bytes_received_, decode));
}

absl::StatusOr<std::string> ResourceClient::Create(absl::string_view json) {
  HttpRequest req;
  req.method = "POST";
  req.path = CollectionPath();
  req.content_type = "application/json";
  req.body = std::string(json);
  absl::StatusOr<HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) return resp.status();
  return std::move(resp->body);
}

absl::StatusOr<std::string> ResourceClient::Patch(absl::string_view name,
                                                  PatchType type,
                                                  absl::string_view body) {
  HttpRequest req;
  req.method = "PATCH";
  req.path = absl::StrCat(CollectionPath(), "/", QueryEscape(name));
  req.content_type = std::string(PatchContentType(type));
  req.body = std::string(body);
  absl::StatusOr<HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) return resp.status();
  return std::move(resp->body);
}

}  // namespace client
}  // namespace informer

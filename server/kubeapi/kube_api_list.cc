// KubeApiServer: lists (paging, resourceVersion semantics, parked lists).

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/kubeapi/kube_api_internal.h"
#include "server/kubeapi/kube_api_server.h"

namespace server {
namespace kubeapi {
namespace {

void OnParkedClosed(evhttp_connection* /*conn*/, void* arg) {
  // The client left: answer nothing. libevent leaves an unanswered request
  // it detached from the closed connection to us to free.
  auto* p = static_cast<KubeApiServer::ParkedHandle*>(arg);
  *p->done = true;
  if (evhttp_request_get_connection(p->req) == nullptr) {
    evhttp_request_free(p->req);
  }
}

}  // namespace

bool KubeApiServer::HandleList(Request& r) {
  Served* s = r.served;
  const RequestOptions& o = r.opts;
  const std::string prefix =
      r.path.namespace_.empty() ? "" : absl::StrCat(r.path.namespace_, "/");
  int64_t rv = 0;  // 0: the current state
  int64_t limit = o.limit;
  std::string start_after;
  if (o.has_continue) {
    rv = o.continue_token.rv < 0 ? 0 : o.continue_token.rv;
    start_after = absl::StrCat(prefix, o.continue_token.start);
  } else if (!o.resource_version.empty() && o.rv == 0) {
    limit = 0;  // "0": any state, served whole as the watch cache does
  } else if (!o.resource_version.empty()) {
    bool exact = o.resource_version_match == "Exact" ||
                 (o.resource_version_match.empty() && limit > 0);
    int64_t current = s->cache->resource_version();
    if (o.rv > current) {
      // Wait (parked, on this thread's event loop) for the cache.
      Park(r, o.rv, options_.not_older_than_wait);
      return false;
    }
    if (exact) rv = o.rv;
  }
  const bool selectors = !o.label_selector.Empty() || !o.field_selector.Empty();
  std::function<bool(const informer::Object&)> match;
  if (selectors) {
    match = [&o](const informer::Object& obj) {
      return o.label_selector.Matches(obj) && o.field_selector.Matches(obj);
    };
  }
  absl::StatusOr<ResourceCache::Page> page =
      s->cache->List(rv, prefix, start_after, limit, match,
                     /*count_remaining=*/!selectors && limit > 0);
  if (!page.ok()) {
    if (o.has_continue) {
      ReplyStatus(r.req, s, r.verb,
                  ContinueExpiredStatus(EncodeContinue(
                      ContinueToken{-1, o.continue_token.start})));
    } else if (absl::IsOutOfRange(page.status())) {
      ReplyStatus(r.req, s, r.verb, ListTooOldStatus());
    } else {
      ReplyStatus(
          r.req, s, r.verb,
          TooLargeResourceVersionStatus(rv, s->cache->resource_version()));
    }
    return true;
  }
  std::string meta = absl::StrCat(R"({"resourceVersion":")", page->rv, "\"");
  if (page->more && !page->objects.empty()) {
    absl::string_view last = page->objects.back()->Key();
    last.remove_prefix(prefix.size());
    absl::StrAppend(&meta, R"(,"continue":")",
                    EncodeContinue(ContinueToken{page->rv, std::string(last)}),
                    "\"");
    // PartialObjectMetadataList carries no remainingItemCount (the API
    // server drops it in the conversion).
    if (!selectors && !r.form.metadata_only) {
      absl::StrAppend(&meta, R"(,"remainingItemCount":)", page->remaining);
    }
  }
  absl::StrAppend(&meta, "}");
  evbuffer* body = evbuffer_new();
  std::string head =
      r.form.metadata_only
          ? absl::StrCat(
                R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":)",
                meta, R"(,"items":[)")
          : absl::StrCat(R"({"kind":)",
                         JsonQuote(absl::StrCat(s->api.kind, "List")),
                         R"(,"apiVersion":)", JsonQuote(s->group_version),
                         R"(,"metadata":)", meta, R"(,"items":[)");
  evbuffer_add(body, head.data(), head.size());
  bool first = true;
  for (const informer::ObjectPtr& obj : page->objects) {
    if (!first) evbuffer_add(body, ",", 1);
    first = false;
    AppendObject(r.form, obj, /*type_meta=*/false, 0, body);
  }
  evbuffer_add(body, "]}", 2);
  Reply(r.req, s, r.verb, 200, body);
  evbuffer_free(body);
  return true;
}

void KubeApiServer::Park(Request& r, int64_t want_rv, absl::Duration wait) {
  auto parked = std::make_unique<Parked>();
  parked->request = r;
  parked->want_rv = want_rv;
  parked->server = this;
  parked->timer = evtimer_new(
      base_,
      [](int, short, void* arg) {
        auto* p = static_cast<Parked*>(arg);
        if (!p->done) {
          p->done = true;
          evhttp_connection_set_closecb(
              evhttp_request_get_connection(p->request.req), nullptr, nullptr);
          Served* s = p->request.served;
          p->server->ReplyStatus(
              p->request.req, s, p->request.verb,
              p->want_rv == kWaitForSync
                  ? NotReadyStatus(s->name)
                  : TooLargeResourceVersionStatus(
                        p->want_rv, s->cache->resource_version()));
        }
        p->server->RetryParked();  // frees it
      },
      parked.get());
  timeval tv = absl::ToTimeval(wait);
  evtimer_add(parked->timer, &tv);
  parked->handle.done = &parked->done;
  parked->handle.req = r.req;
  evhttp_connection_set_closecb(evhttp_request_get_connection(r.req),
                                &OnParkedClosed, &parked->handle);
  parked_.push_back(std::move(parked));
}

void KubeApiServer::RetryParked() {
  std::vector<std::unique_ptr<Parked>> waiting;
  waiting.swap(parked_);
  for (auto& p : waiting) {
    Served* s = p->request.served;
    bool ready = p->want_rv == kWaitForSync
                     ? s->registration->HasSynced()
                     : s->cache->resource_version() >= p->want_rv;
    if (!p->done && ready) {
      p->done = true;
      evhttp_connection_set_closecb(
          evhttp_request_get_connection(p->request.req), nullptr, nullptr);
      Dispatch(p->request);
    }
    if (p->done) {
      event_free(p->timer);
    } else {
      parked_.push_back(std::move(p));
    }
  }
}

}  // namespace kubeapi
}  // namespace server

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
#include "server/kubeapi/table_writer.h"

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

// Where a list reads: the state's resourceVersion (0: the current state),
// the page size and the key to start after, or that it must wait.
struct ListBounds {
  int64_t rv = 0;
  int64_t limit = 0;
  std::string start_after;
  // The cache is behind the requested resourceVersion: park the request
  // until it reaches `park_rv`.
  bool park = false;
  int64_t park_rv = 0;
};

// The API server's resourceVersion semantics for lists: a continue token
// pins its page's state; "0" is any state, served whole as the watch cache
// does; a resourceVersion with match Exact (or, unset, with a limit) pins
// that state, otherwise it is a floor ("not older than").
ListBounds ResolveListBounds(const RequestOptions& o, const std::string& prefix,
                             const ResourceCache& cache) {
  ListBounds b;
  b.limit = o.limit;
  if (o.has_continue) {
    b.rv = o.continue_token.rv < 0 ? 0 : o.continue_token.rv;
    b.start_after = absl::StrCat(prefix, o.continue_token.start);
  } else if (!o.resource_version.empty() && o.rv == 0) {
    b.limit = 0;
  } else if (!o.resource_version.empty()) {
    bool exact = o.resource_version_match == "Exact" ||
                 (o.resource_version_match.empty() && b.limit > 0);
    if (o.rv > cache.resource_version()) {
      b.park = true;
      b.park_rv = o.rv;
      return b;
    }
    if (exact) b.rv = o.rv;
  }
  return b;
}

// The list's ListMeta object: resourceVersion, and for a partial page the
// continue token and (when it can be counted) remainingItemCount.
std::string ListMeta(const ResourceCache::Page& page, const std::string& prefix,
                     bool selectors, bool metadata_only) {
  std::string meta = absl::StrCat(R"({"resourceVersion":")", page.rv, "\"");
  if (page.more && !page.objects.empty()) {
    absl::string_view last = page.objects.back()->Key();
    last.remove_prefix(prefix.size());
    absl::StrAppend(&meta, R"(,"continue":")",
                    EncodeContinue(ContinueToken{page.rv, std::string(last)}),
                    "\"");
    // PartialObjectMetadataList carries no remainingItemCount (the API
    // server drops it in the conversion).
    if (!selectors && !metadata_only) {
      absl::StrAppend(&meta, R"(,"remainingItemCount":)", page.remaining);
    }
  }
  absl::StrAppend(&meta, "}");
  return meta;
}

// The list document up to its items array's opening bracket.
std::string ListHead(const ObjectForm& form, absl::string_view kind,
                     absl::string_view group_version, const std::string& meta) {
  if (form.metadata_only) {
    return absl::StrCat(
        R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":)",
        meta, R"(,"items":[)");
  }
  return absl::StrCat(R"({"kind":)", JsonQuote(absl::StrCat(kind, "List")),
                      R"(,"apiVersion":)", JsonQuote(group_version),
                      R"(,"metadata":)", meta, R"(,"items":[)");
}

}  // namespace

bool KubeApiServer::HandleList(Request& r) {
  Served* s = r.served;
  const RequestOptions& o = r.opts;
  const std::string prefix =
      r.path.namespace_.empty() ? "" : absl::StrCat(r.path.namespace_, "/");
  // A resourceVersion the upstream reported by a bookmark only is reached
  // too (not just at the next tick).
  SyncProgress(s);
  ListBounds b = ResolveListBounds(o, prefix, *s->cache);
  if (b.park) {
    // Wait (parked, on this thread's event loop) for the cache.
    Park(r, b.park_rv, options_.not_older_than_wait);
    return false;
  }
  const bool selectors = !o.label_selector.Empty() || !o.field_selector.Empty();
  std::function<bool(const informer::Object&)> match;
  if (selectors) {
    match = [&o](const informer::Object& obj) {
      return o.label_selector.Matches(obj) && o.field_selector.Matches(obj);
    };
  }
  absl::StatusOr<ResourceCache::Page> page =
      s->cache->List(b.rv, prefix, b.start_after, b.limit, match,
                     /*count_remaining=*/!selectors && b.limit > 0);
  if (!page.ok()) {
    ReplyListError(r, page.status(), b.rv);
    return true;
  }
  ReplyList(r, *page, ListMeta(*page, prefix, selectors, r.form.metadata_only));
  return true;
}

void KubeApiServer::ReplyListError(Request& r, const absl::Status& error,
                                   int64_t rv) {
  Served* s = r.served;
  if (r.opts.has_continue) {
    // The page's state is gone: 410 with a token that lists afresh from
    // where the client was.
    ReplyStatus(r.req, s, r.verb,
                ContinueExpiredStatus(EncodeContinue(
                    ContinueToken{-1, r.opts.continue_token.start})));
  } else if (absl::IsOutOfRange(error)) {
    ReplyStatus(r.req, s, r.verb, ListTooOldStatus());
  } else {
    ReplyStatus(
        r.req, s, r.verb,
        TooLargeResourceVersionStatus(rv, s->cache->resource_version()));
  }
}

void KubeApiServer::ReplyList(Request& r, const ResourceCache::Page& page,
                              const std::string& meta) {
  Served* s = r.served;
  evbuffer* body = evbuffer_new();
  if (r.opts.table) {
    AppendTable(r.form, page.objects, meta, r.opts.include_object, absl::Now(),
                body);
    Reply(r.req, s, r.verb, 200, body);
    evbuffer_free(body);
    return;
  }
  std::string head = ListHead(r.form, s->api.kind, s->group_version, meta);
  evbuffer_add(body, head.data(), head.size());
  bool first = true;
  for (const informer::ObjectPtr& obj : page.objects) {
    if (!first) evbuffer_add(body, ",", 1);
    first = false;
    AppendObject(r.form, obj, /*type_meta=*/false, 0, body);
  }
  evbuffer_add(body, "]}", 2);
  Reply(r.req, s, r.verb, 200, body);
  evbuffer_free(body);
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
          // A lazy resource not there in time: the API server's request
          // timeout.
          const bool lazy =
              p->want_rv == kWaitForLazy || (s != nullptr && s->lazy);
          p->server->ReplyStatus(
              p->request.req, s, p->request.verb,
              p->want_rv == kWaitForLazy || (lazy && p->want_rv == kWaitForSync)
                  ? RequestTimeoutStatus()
              : p->want_rv == kWaitForSync
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
    if (p->want_rv == kWaitForLazy) {
      if (!p->done) {
        bool found = false;
        absl::StatusOr<InformerRef> ref;
        {
          absl::MutexLock lock(&p->lazy->mu);
          found = p->lazy->done;
          if (found) {
            ref = std::move(p->lazy->result);
            p->request.lazy_api = p->lazy->api;
          }
        }
        if (found) {
          p->done = true;
          evhttp_connection_set_closecb(
              evhttp_request_get_connection(p->request.req), nullptr, nullptr);
          ResumeLazy(p->request, std::move(ref));
        }
      }
      if (p->done) {
        event_free(p->timer);
      } else {
        parked_.push_back(std::move(p));
      }
      continue;
    }
    Served* s = p->request.served;
    bool ready =
        p->want_rv == kWaitForSync
            ? s->registration->HasSynced()
            : (SyncProgress(s), s->cache->resource_version() >= p->want_rv);
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

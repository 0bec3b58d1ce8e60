// KubeApiServer: watches (framing, history replay, bookmarks, timeouts,
// slow clients).

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <glog/logging.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/kubeapi/kube_api_internal.h"
#include "server/kubeapi/kube_api_server.h"

namespace server {
namespace kubeapi {
namespace {

// Changes taken from the history per pass of a watcher.
constexpr size_t kBatch = 256;

}  // namespace

void KubeApiServer::StartWatch(Request& r) {
  Served* s = r.served;
  const RequestOptions& o = r.opts;
  auto w = std::make_unique<Watcher>();
  w->server = this;
  w->req = r.req;
  w->conn = evhttp_request_get_connection(r.req);
  w->served = s;
  w->form = r.form;
  w->opts = o;
  w->prefix =
      r.path.namespace_.empty() ? "" : absl::StrCat(r.path.namespace_, "/");
  const ApiStatus* too_old = nullptr;
  ApiStatus too_old_status;
  SyncProgress(s);
  if (o.resource_version.empty() || o.rv == 0) {
    // "" and "0": the current state as ADDED events, then the changes.
    const bool selectors =
        !o.label_selector.Empty() || !o.field_selector.Empty();
    std::function<bool(const informer::Object&)> match;
    if (selectors) {
      match = [&o](const informer::Object& obj) {
        return o.label_selector.Matches(obj) && o.field_selector.Matches(obj);
      };
    }
    absl::StatusOr<ResourceCache::Page> page =
        s->cache->List(0, w->prefix, "", 0, match, false);
    w->initial = std::move(page->objects);
    w->seq = page->next_seq;
    w->rv = page->rv;
  } else {
    absl::StatusOr<int64_t> seq = s->cache->SeqAfter(o.rv);
    if (!seq.ok()) {
      too_old_status = WatchTooOldStatus(o.rv, s->cache->floor());
      too_old = &too_old_status;
    } else {
      w->seq = *seq;
    }
    w->rv = o.rv;
  }
  w->start_rv = w->rv;
  evkeyvalq* headers = evhttp_request_get_output_headers(r.req);
  evhttp_add_header(headers, "Cache-Control", "no-cache, private");
  evhttp_add_header(
      headers, "Content-Type",
      r.form.metadata_only ? "application/json" : "application/json");
  evhttp_send_reply_start(r.req, 200, "OK");
  CountRequest(s, "watch", 200, 0);
  Watcher* raw = w.release();
  watchers_.insert(raw);
  ++s->watchers;
  // A lazy informer with an open watch is never retired for idleness.
  if (s->lazy) s->entry->streams.fetch_add(1);
  {
    absl::MutexLock lock(&watch_count_mu_);
    ++open_watches_;
  }
  if (watchers_gauge_ != nullptr) watchers_gauge_->With({s->name}).Add(1);
  evhttp_connection_set_closecb(raw->conn, &KubeApiServer::OnWatchClosed, raw);
  if (too_old != nullptr) {
    EndWatch(raw, too_old);
    return;
  }
  absl::Duration timeout = o.timeout > absl::ZeroDuration()
                               ? o.timeout
                               : options_.default_watch_timeout;
  raw->timeout = evtimer_new(base_, &KubeApiServer::OnWatchTimeout, raw);
  timeval tv = absl::ToTimeval(timeout);
  evtimer_add(raw->timeout, &tv);
  if (o.allow_watch_bookmarks) {
    raw->bookmark =
        event_new(base_, -1, EV_PERSIST, &KubeApiServer::OnBookmarkTimer, raw);
    timeval every = absl::ToTimeval(options_.bookmark_interval);
    event_add(raw->bookmark, &every);
  }
  Pump(raw);
}

bool KubeApiServer::SendEvent(Watcher* w, absl::string_view type,
                              const informer::ObjectPtr& obj,
                              int64_t rv_override) {
  evbuffer* buf = evbuffer_new();
  std::string head = absl::StrCat(R"({"type":")", type, R"(","object":)");
  evbuffer_add(buf, head.data(), head.size());
  AppendObject(w->form, obj, /*type_meta=*/true, rv_override, buf);
  evbuffer_add(buf, "}\n", 2);
  size_t n = evbuffer_get_length(buf);
  evhttp_send_reply_chunk_with_cb(w->req, buf, &KubeApiServer::OnWatchDrained,
                                  w);
  evbuffer_free(buf);
  if (bytes_ != nullptr) {
    bytes_->With({w->served->name}).Increment(static_cast<double>(n));
  }
  bufferevent* bev = evhttp_connection_get_bufferevent(w->conn);
  const size_t queued =
      bev != nullptr ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
  size_t peak = peak_queued_.load();
  while (queued > peak && !peak_queued_.compare_exchange_weak(peak, queued)) {
  }
  if (queued > options_.watch_buffer_limit && !w->blocked) {
    w->blocked = true;
    if (w->slow == nullptr) {
      w->slow = evtimer_new(base_, &KubeApiServer::OnSlowWatcher, w);
    }
    timeval grace = absl::ToTimeval(options_.slow_watcher_grace);
    evtimer_add(w->slow, &grace);
  }
  return true;
}

void KubeApiServer::Pump(Watcher* w) {
  if (w->blocked) return;
  while (w->initial_sent < w->initial.size()) {
    SendEvent(w, "ADDED", w->initial[w->initial_sent++], 0);
    if (w->blocked) return;
  }
  if (!w->initial.empty()) {
    std::vector<informer::ObjectPtr>().swap(w->initial);
    w->initial_sent = 0;
  }
  const RequestOptions& o = w->opts;
  auto matches = [&o](const informer::ObjectPtr& obj) {
    return obj != nullptr && o.label_selector.Matches(*obj) &&
           o.field_selector.Matches(*obj);
  };
  std::vector<Change> changes;
  while (true) {
    changes.clear();
    absl::Status st = w->served->cache->ChangesSince(w->seq, kBatch, &changes);
    if (!st.ok()) {
      // Fell out of the history (a client reading too slowly).
      ApiStatus expired = WatchTooOldStatus(w->rv, w->served->cache->floor());
      EndWatch(w, &expired);
      return;
    }
    if (changes.empty()) return;
    for (const Change& c : changes) {
      w->seq = c.seq + 1;
      // A watch from N starts after N (the history may hold changes at or
      // below it when N was ahead of the cache).
      if (c.rv <= w->start_rv) continue;
      w->rv = std::max(w->rv, c.rv);
      if (!absl::StartsWith(c.object->Key(), w->prefix)) continue;
      bool now =
          c.type != informer::WatchEventType::kDeleted && matches(c.object);
      bool before = c.type == informer::WatchEventType::kDeleted
                        ? matches(c.object)
                        : matches(c.old);
      if (now && before) {
        SendEvent(w, "MODIFIED", c.object, 0);
      } else if (now) {
        SendEvent(w, "ADDED", c.object, 0);
      } else if (before && c.type == informer::WatchEventType::kDeleted) {
        SendEvent(w, "DELETED", c.object, 0);
      } else if (before) {
        // Left the selection: the API server sends the previous state
        // at the change's resourceVersion.
        SendEvent(w, "DELETED", c.old, c.rv);
      }
      if (w->blocked) return;
    }
  }
}

void KubeApiServer::SendBookmark(Watcher* w) {
  // A watcher that has every recorded change is at the cache's
  // resourceVersion, which upstream bookmarks move without changes.
  SyncProgress(w->served);
  ResourceCache::Progress progress = w->served->cache->GetProgress();
  if (w->seq >= progress.next_seq) w->rv = std::max(w->rv, progress.rv);
  std::string kind =
      w->form.metadata_only ? "PartialObjectMetadata" : w->form.kind;
  std::string api_version =
      w->form.metadata_only ? "meta.k8s.io/v1" : w->form.api_version;
  // The API server's bookmark is an empty object of the kind with only
  // metadata.resourceVersion set, serialised with Go's zero values.
  std::string extra =
      kind == "Pod" ? R"(,"spec":{"containers":null},"status":{})" : "";
  std::string line =
      absl::StrCat(R"({"type":"BOOKMARK","object":{"kind":)", JsonQuote(kind),
                   R"(,"apiVersion":)", JsonQuote(api_version),
                   R"(,"metadata":{"resourceVersion":")", w->rv,
                   R"(","creationTimestamp":null})", extra, "}}\n");
  evbuffer* buf = evbuffer_new();
  evbuffer_add(buf, line.data(), line.size());
  evhttp_send_reply_chunk_with_cb(w->req, buf, &KubeApiServer::OnWatchDrained,
                                  w);
  evbuffer_free(buf);
  if (bytes_ != nullptr) {
    bytes_->With({w->served->name}).Increment(static_cast<double>(line.size()));
  }
}

void KubeApiServer::EndWatch(Watcher* w, const ApiStatus* error) {
  if (error != nullptr) {
    std::string line =
        absl::StrCat(R"({"type":"ERROR","object":)", error->Render(), "}\n");
    evbuffer* buf = evbuffer_new();
    evbuffer_add(buf, line.data(), line.size());
    evhttp_send_reply_chunk(w->req, buf);
    evbuffer_free(buf);
  }
  evhttp_connection_set_closecb(w->conn, nullptr, nullptr);
  evhttp_send_reply_end(w->req);
  DropWatcher(w);
}

void KubeApiServer::DropWatcher(Watcher* w) {
  if (w->timeout != nullptr) event_free(w->timeout);
  if (w->bookmark != nullptr) event_free(w->bookmark);
  if (w->slow != nullptr) event_free(w->slow);
  watchers_.erase(w);
  --w->served->watchers;
  if (w->served->lazy) w->served->entry->streams.fetch_sub(1);
  {
    absl::MutexLock lock(&watch_count_mu_);
    --open_watches_;
  }
  if (watchers_gauge_ != nullptr) {
    watchers_gauge_->With({w->served->name}).Add(-1);
  }
  delete w;
}

void KubeApiServer::OnWatchClosed(evhttp_connection* /*conn*/, void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  // When the client goes away mid-stream, libevent detaches the unfinished
  // request from its connection and leaves it to us: ending it frees it. A
  // request still attached is freed with its connection.
  if (evhttp_request_get_connection(w->req) == nullptr) {
    evhttp_send_reply_end(w->req);
  }
  w->server->DropWatcher(w);
}

void KubeApiServer::OnWatchDrained(evhttp_connection* /*conn*/, void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  if (w->server->watchers_.count(w) == 0 || !w->blocked) return;
  w->blocked = false;
  if (w->slow != nullptr) evtimer_del(w->slow);
  w->server->Pump(w);
}

void KubeApiServer::OnWatchTimeout(int, short, void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  KubeApiServer* self = w->server;
  self->Pump(w);
  if (self->watchers_.count(w) == 0) return;
  if (w->opts.allow_watch_bookmarks && w->initial.empty() && !w->blocked) {
    self->SendBookmark(w);
  }
  self->EndWatch(w, nullptr);
}

void KubeApiServer::OnSlowWatcher(int, short, void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  if (w->blocked) w->server->TerminateSlowWatcher(w);
}

void KubeApiServer::TerminateSlowWatcher(Watcher* w) {
  // The API server's cacher closes a watcher whose buffer stays full; its
  // response then ends. Here the client is not reading, so an orderly end
  // would sit behind the queued bytes forever: close the connection and
  // free them. The client sees the stream cut and re-watches from the last
  // resourceVersion it read.
  LOG(WARNING) << "Kubernetes API facade: closing a watch of "
               << w->served->name << " whose client has not read "
               << options_.watch_buffer_limit << " queued bytes for "
               << options_.slow_watcher_grace;
  ++slow_terminated_;
  if (slow_gauge_ != nullptr) slow_gauge_->With({w->served->name}).Increment();
  evhttp_connection* conn = w->conn;
  evhttp_connection_set_closecb(conn, nullptr, nullptr);
  DropWatcher(w);
  // Frees the connection with its request (the watch) and buffers.
  evhttp_connection_free(conn);
}

void KubeApiServer::OnBookmarkTimer(int, short, void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  if (w->blocked || !w->initial.empty()) return;
  w->server->SendBookmark(w);
}

}  // namespace kubeapi
}  // namespace server

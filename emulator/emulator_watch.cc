// Emulator::HandleWatch: chunked watch streams with bookmarks, WatchList and
// the stream faults (cut, stall, malformed line) of the store's Watchers.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "emulator/api_status.h"
#include "emulator/emulator.h"
#include "emulator/emulator_http.h"
#include "httplib.h"

namespace emulator {

// What a watch request asks for besides the store's WatchRequest.
struct Emulator::WatchParams {
  bool bookmarks = false;
  absl::Duration timeout;
};

namespace {

ApiStatus SendInitialEventsInvalid() {
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
  return st;
}

// Sends one open watch's events until it ends. One call of an httplib
// chunked content provider: returns false to drop the connection.
class WatchPump {
 public:
  WatchPump(std::shared_ptr<Watcher> watcher, ObjectStore* store,
            informer::Clock* clock, const ResourceInfo* r, bool metadata_only,
            bool bookmarks, absl::Duration bookmark_interval, absl::Time end)
      : watcher_(std::move(watcher)),
        store_(store),
        clock_(clock),
        r_(r),
        md_(metadata_only),
        bookmarks_(bookmarks),
        bookmark_interval_(bookmark_interval),
        end_(end) {}

  bool Run(httplib::DataSink& sink) {
    absl::Time next_bookmark = bookmarks_ ? clock_->Now() + bookmark_interval_
                                          : absl::InfiniteFuture();
    bool stalled = false;
    std::vector<StoreEvent> events;
    while (true) {
      events.clear();
      Watcher::Directives d;
      Watcher::CloseKind close;
      absl::Time deadline =
          stalled ? absl::InfiniteFuture() : std::min(end_, next_bookmark);
      watcher_->Next(clock_, deadline, 256, &events, &d, &close);
      if (close == Watcher::CloseKind::kAbrupt) return false;
      if (close == Watcher::CloseKind::kGraceful) {
        sink.done();
        return true;
      }
      stalled = d.stalled;
      if (stalled) continue;
      if (!WriteEvents(events, d, sink)) return false;
      absl::Time now = clock_->Now();
      if (now >= end_) {
        sink.done();
        return true;
      }
      if (now >= next_bookmark) {
        absl::optional<int64_t> rv = store_->BookmarkRv(*watcher_);
        if (rv.has_value()) {
          std::string line = BookmarkLine(*r_, *rv, false, md_);
          if (!sink.write(line.data(), line.size())) return false;
          next_bookmark = now + bookmark_interval_;
        }
      }
    }
  }

 private:
  // Every event the watcher had ready goes out in one write, as the API
  // server's watch handler flushes only once its queue is empty: one
  // chunk and one send for a burst, not one per event.
  bool WriteEvents(const std::vector<StoreEvent>& events,
                   const Watcher::Directives& d, httplib::DataSink& sink) {
    std::string out;
    for (int i = 0; i < d.malformed_lines; ++i) {
      out += "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\"\n";
    }
    for (const StoreEvent& ev : events) {
      std::string line =
          ev.type == EventType::kBookmark
              ? BookmarkLine(*r_, ev.rv, ev.initial_events_end, md_)
              : EventLine(ev.type, *r_, *ev.object, md_);
      if (d.cut_next_event) {
        out.append(line, 0, line.size() / 2);
        sink.write(out.data(), out.size());
        return false;
      }
      out += line;
    }
    return out.empty() || sink.write(out.data(), out.size());
  }

  const std::shared_ptr<Watcher> watcher_;
  ObjectStore* const store_;
  informer::Clock* const clock_;
  const ResourceInfo* const r_;
  const bool md_;
  const bool bookmarks_;
  const absl::Duration bookmark_interval_;
  const absl::Time end_;
};

}  // namespace

absl::optional<ApiStatus> Emulator::ParseWatch(const Route& route,
                                               const httplib::Request& req,
                                               WatchRequest* wr,
                                               WatchParams* params) const {
  const ResourceInfo& r = *route.resource;
  wr->ns = route.ns;
  if (absl::Status st = ParseSelectors(r, req, &wr->labels, &wr->fields);
      !st.ok()) {
    return BadRequestStatus(st.message());
  }
  wr->resource_version = req.get_param_value("resourceVersion");
  const std::string rv_match = req.get_param_value("resourceVersionMatch");
  params->bookmarks = BoolParam(req, "allowWatchBookmarks");
  if (options_.v1_24) {
    // v1.24 knows no sendInitialEvents (ignored as an unknown parameter)
    // and forbids resourceVersionMatch on watches.
    if (!rv_match.empty()) {
      return WatchListUnsupportedStatus(!wr->resource_version.empty());
    }
  } else {
    wr->send_initial_events = BoolParam(req, "sendInitialEvents");
    if (wr->send_initial_events) {
      if (rv_match != "NotOlderThan" || !params->bookmarks) {
        return SendInitialEventsInvalid();
      }
    } else if (!rv_match.empty()) {
      return WatchListUnsupportedStatus(!wr->resource_version.empty());
    }
  }
  params->timeout = options_.default_watch_timeout;
  std::string ts = req.get_param_value("timeoutSeconds");
  int64_t secs = 0;
  if (!ts.empty()) {
    if (!absl::SimpleAtoi(ts, &secs) || secs < 0) {
      return BadRequestStatus("invalid timeoutSeconds");
    }
    if (secs > 0) params->timeout = absl::Seconds(secs);
  }
  return absl::nullopt;
}

void Emulator::HandleWatch(const Route& route, const httplib::Request& req,
                           httplib::Response& res) {
  const ResourceInfo& r = *route.resource;
  WatchRequest wr;
  WatchParams params;
  if (absl::optional<ApiStatus> bad = ParseWatch(route, req, &wr, &params)) {
    return ReplyStatus(res, *bad);
  }
  if (TakeWatchExpiry(r.resource)) {
    return ReplyErrorEvent(
        res, ExpiredStatus(
                 absl::StrCat("too old resource version: ", wr.resource_version,
                              " (", store_->CurrentRv(), ")")));
  }
  absl::StatusOr<std::shared_ptr<Watcher>> opened =
      store_->Watch(r, std::move(wr));
  if (!opened.ok()) {
    if (opened.status().code() == absl::StatusCode::kOutOfRange) {
      // As the API server does: HTTP 200, then a single ERROR event.
      return ReplyErrorEvent(res, ExpiredStatus(opened.status().message()));
    }
    return ReplyStatus(res, FromStoreError(opened.status(), r, ""));
  }
  std::shared_ptr<Watcher> watcher = *std::move(opened);
  // Stop() closes every registered watcher after setting stopping_; one
  // registered just after that is closed here.
  if (stopping_.load()) watcher->Close(Watcher::CloseKind::kGraceful);
  CommonHeaders(res);
  auto pump = std::make_shared<WatchPump>(
      watcher, store_.get(), options_.clock, &r, MetadataOnly(req),
      params.bookmarks, options_.bookmark_interval,
      options_.clock->Now() + params.timeout);
  ObjectStore* store = store_.get();
  res.set_chunked_content_provider(
      "application/json",
      [pump](size_t, httplib::DataSink& sink) { return pump->Run(sink); },
      [watcher, store](bool) { store->StopWatch(watcher); });
}

}  // namespace emulator

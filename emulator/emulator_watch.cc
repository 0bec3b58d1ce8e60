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
#include "emulator/list_options.h"
#include "emulator/pacer.h"
#include "httplib.h"

namespace emulator {

// What a watch request asks for besides the store's WatchRequest.
struct Emulator::WatchParams {
  bool bookmarks = false;
  absl::Duration timeout;
};

namespace {

// Sends one open watch's events until it ends. One call of an httplib
// chunked content provider: returns false to drop the connection.
class WatchPump {
 public:
  WatchPump(std::shared_ptr<Watcher> watcher, ObjectStore* store,
            informer::Clock* clock, const ResourceInfo* r, bool metadata_only,
            bool bookmarks, bool legacy_bookmarks,
            absl::Duration bookmark_interval, absl::Time end, int64_t start_rv,
            std::unique_ptr<Pacer> initial_pacer)
      : watcher_(std::move(watcher)),
        store_(store),
        clock_(clock),
        r_(r),
        md_(metadata_only),
        bookmarks_(bookmarks),
        legacy_bookmarks_(legacy_bookmarks),
        bookmark_interval_(bookmark_interval),
        end_(end),
        start_rv_(start_rv),
        initial_pacer_(std::move(initial_pacer)) {}

  // When the API server's watch cache bookmarks a watch next
  // (cacheWatcher.nextBookmarkTime): every bookmark_interval (a minute),
  // but 2 s before the watch's end if that comes first, and never once
  // that moment has passed (a watch of 2 s or less gets none). The cacher
  // dispatches bookmarks on a ticker of about a second, so a real server
  // sends each within about a second of the time computed here.
  absl::Time NextBookmark(absl::Time now) const {
    if (!bookmarks_) return absl::InfiniteFuture();
    absl::Time next = now + bookmark_interval_;
    const absl::Time pre_timeout = end_ - absl::Seconds(2);
    if (pre_timeout < next) next = pre_timeout;
    return next < now ? absl::InfiniteFuture() : next;
  }

  bool Run(httplib::DataSink& sink) {
    absl::Time next_bookmark = NextBookmark(clock_->Now());
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
        // The watch cache has nothing to bookmark until something happened
        // after the RV the watch started from.
        if (rv.has_value() && *rv <= start_rv_) {
          next_bookmark = NextBookmark(now + absl::Nanoseconds(1));
        } else if (rv.has_value()) {
          std::string line =
              BookmarkLine(*r_, *rv, false, md_, legacy_bookmarks_);
          if (!sink.write(line.data(), line.size())) return false;
          // Strictly later: the pre-timeout one is sent once.
          next_bookmark = NextBookmark(now + absl::Nanoseconds(1));
        }
      }
    }
  }

 private:
  // Every event the watcher had ready goes out in one write, as the API
  // server's watch handler flushes only once its queue is empty: one
  // chunk and one send for a burst, not one per event. The part of it up to
  // the initial-events-end bookmark is paced first, if the initial events
  // are (live events in the same burst wait for it, as they would behind
  // the initial events on a real server, but are not charged).
  bool WriteEvents(const std::vector<StoreEvent>& events,
                   const Watcher::Directives& d, httplib::DataSink& sink) {
    std::string out;
    size_t initial_bytes = 0;  // of `out`, sent before the end bookmark
    bool initial_end = false;
    for (int i = 0; i < d.malformed_lines; ++i) {
      out += "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\"\n";
    }
    for (const StoreEvent& ev : events) {
      // WatchList's end marker is a bookmark: not sent unless allowed (its
      // initial events end there all the same).
      if (ev.type == EventType::kBookmark && !bookmarks_) {
        initial_end = initial_end || ev.initial_events_end;
        continue;
      }
      std::string line = ev.type == EventType::kBookmark
                             ? BookmarkLine(*r_, ev.rv, ev.initial_events_end,
                                            md_, legacy_bookmarks_)
                             : EventLine(ev.type, *r_, *ev.object, md_);
      if (d.cut_next_event) {
        out.append(line, 0, line.size() / 2);
        sink.write(out.data(), out.size());
        return false;
      }
      out += line;
      if (!initial_end) initial_bytes = out.size();
      if (ev.initial_events_end) initial_end = true;
    }
    if (initial_pacer_ != nullptr) {
      if (initial_bytes > 0) initial_pacer_->Take(initial_bytes);
      // The live events after the bookmark go out as they happen.
      if (initial_end) initial_pacer_.reset();
    }
    return out.empty() || sink.write(out.data(), out.size());
  }

  const std::shared_ptr<Watcher> watcher_;
  ObjectStore* const store_;
  informer::Clock* const clock_;
  const ResourceInfo* const r_;
  const bool md_;
  const bool bookmarks_;
  const bool legacy_bookmarks_;  // v1.24's shape (creationTimestamp: null)
  const absl::Duration bookmark_interval_;
  const absl::Time end_;
  const int64_t start_rv_;  // bookmarks must pass it (Watcher: start_rv)
  // A WatchList's pacing until its initial-events-end bookmark is sent;
  // null once it is, and for any other watch or when unpaced.
  std::unique_ptr<Pacer> initial_pacer_;
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
  params->bookmarks = BoolParam(req, "allowWatchBookmarks");
  ListOptions lo;
  lo.watch = true;
  lo.resource_version = wr->resource_version;
  lo.resource_version_match = req.get_param_value("resourceVersionMatch");
  lo.continue_token = req.get_param_value("continue");
  // v1.24 knows no sendInitialEvents (ignored as an unknown parameter).
  if (!options_.v1_24) {
    lo.send_initial_events =
        ParseQueryBool(req.get_param_value("sendInitialEvents"));
  }
  std::vector<FieldError> invalid = ValidateListOptions(lo, server_version());
  if (!invalid.empty()) return InvalidListOptionsStatus(invalid);
  wr->send_initial_events = lo.send_initial_events.value_or(false);
  params->timeout = options_.default_watch_timeout;
  absl::StatusOr<int64_t> secs =
      ParseQueryInt(req.get_param_value("timeoutSeconds"));
  if (!secs.ok()) return BadRequestStatus(secs.status().message());
  if (*secs > 0) params->timeout = absl::Seconds(*secs);
  return absl::nullopt;
}

absl::optional<ApiStatus> Emulator::AwaitWatchListRv(
    const WatchRequest& wr) const {
  int64_t rv = 0;
  if (!wr.send_initial_events || !absl::SimpleAtoi(wr.resource_version, &rv) ||
      store_->AwaitRv(rv, options_.too_large_rv_wait)) {
    return absl::nullopt;
  }
  return TooLargeResourceVersionStatus(rv, store_->CurrentRv());
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
  const bool watch_list = wr.send_initial_events;
  if (absl::optional<ApiStatus> late = AwaitWatchListRv(wr)) {
    // As the watch cache does: the stream is open, then an ERROR event.
    return ReplyErrorEvent(res, *late);
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
  // The RV bookmarks must pass: the request's, or for initial events the
  // watch cache's they were taken at.
  const int64_t start_rv = watcher->request().start_rv;
  // Stop() closes every registered watcher after setting stopping_; one
  // registered just after that is closed here.
  if (stopping_.load()) watcher->Close(Watcher::CloseKind::kGraceful);
  CommonHeaders(res);
  // Each WatchList paced on its own, as each list response is (the API
  // server encodes each watch on its own goroutine).
  const double watch_list_rate =
      options_.serve_watch_list_bytes_per_sec.value_or(
          options_.serve_bytes_per_sec);
  std::unique_ptr<Pacer> pacer;
  if (watch_list && watch_list_rate > 0) {
    pacer = std::make_unique<Pacer>(watch_list_rate, kPaceBurstBytes,
                                    options_.clock);
  }
  auto pump = std::make_shared<WatchPump>(
      watcher, store_.get(), options_.clock, &r, MetadataOnly(req),
      params.bookmarks, options_.v1_24, options_.bookmark_interval,
      options_.clock->Now() + params.timeout, start_rv, std::move(pacer));
  ObjectStore* store = store_.get();
  res.set_chunked_content_provider(
      "application/json",
      [pump](size_t, httplib::DataSink& sink) { return pump->Run(sink); },
      [watcher, store](bool) { store->StopWatch(watcher); });
}

}  // namespace emulator

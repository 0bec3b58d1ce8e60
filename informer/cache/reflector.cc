#include "informer/cache/reflector.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "informer/object/api_error.h"

namespace informer {
namespace {

// Errors after which the watch can be re-opened from the same RV: the
// server was briefly unreachable or asked us to slow down.
bool RewatchWithoutRelist(const absl::Status& s) {
  return IsTooManyRequests(s) || absl::IsUnavailable(s) ||
         absl::IsDeadlineExceeded(s);
}

}  // namespace

Reflector::Reflector(ListerWatcher* lw, DeltaFIFO* fifo, Clock* clock,
                     Options options)
    : lw_(lw),
      fifo_(fifo),
      clock_(clock),
      options_(std::move(options)),
      resume_gate_(!options_.resume_resource_version.empty() &&
                   options_.resume_state_pending),
      backoff_(options_.backoff_initial),
      rng_(options_.random_seed != 0 ? options_.random_seed
                                     : std::random_device{}()) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Run() {
  std::thread resync;
  if (options_.resync_period > absl::ZeroDuration()) {
    resync = std::thread([this] { ResyncLoop(); });
  }
  State state =
      options_.resume_resource_version.empty() ? State::kList : State::kResume;
  while (state != State::kStopped) {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) break;
    }
    if (state == State::kResume) {
      state = DoResume();
    } else if (state == State::kPlainList) {
      state = DoList();
    } else if (state == State::kList) {
      bool watch_list = false;
      {
        absl::MutexLock lock(&mu_);
        watch_list = options_.use_watch_list && !watch_list_unsupported_;
      }
      state = watch_list ? DoWatch(/*watch_list=*/true) : DoList();
    } else {
      state = DoWatch(/*watch_list=*/false);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  if (resync.joinable()) resync.join();
}

void Reflector::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (current_watch_ != nullptr) current_watch_->Stop();
}

void Reflector::ResumeStateReady(bool usable) {
  absl::MutexLock lock(&mu_);
  if (!resume_usable_.has_value()) resume_usable_ = usable;
}

Reflector::Gate Reflector::PassResumeGate() {
  bool usable = false;
  {
    absl::MutexLock lock(&mu_);
    if (!resume_gate_) return Gate::kPass;
    auto decided = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopped_ || resume_usable_.has_value();
    };
    mu_.Await(absl::Condition(&decided));
    if (stopped_) return Gate::kStopped;
    resume_gate_ = false;
    usable = *resume_usable_;
    if (!usable) {
      // As if never resumed: the next list is a cold start's.
      catch_up_rv_.clear();
      resume_watch_next_ = false;
      last_sync_rv_.clear();
      listed_rv_.clear();
      listed_once_ = false;
      last_rv_unavailable_ = false;
    }
  }
  if (!usable) {
    LOG(WARNING) << options_.name << ": the state to resume from "
                 << options_.resume_resource_version
                 << " is not usable: listing instead";
    return Gate::kAbandoned;
  }
  // The consumer applied the state to the FIFO itself (see
  // ResumeStateReady): only the catch-up may be reached already.
  NoteCaughtUp(options_.resume_resource_version);
  return Gate::kPass;
}

void Reflector::ApplyResumedState() {
  // The consumer's store holds the state at the resumed RV already: for
  // the FIFO, a list applied out of its sight (so a later relist is no
  // initial list, and that RV is the applied resourceVersion).
  fifo_->ReplaceApplied(options_.resume_resource_version,
                        [](bool) { return true; });
}

namespace {

std::string FormatMillis(absl::Duration d) {
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

}  // namespace

bool Reflector::ResourceVersionAtLeast(absl::string_view a,
                                       absl::string_view b) {
  uint64_t x = 0;
  uint64_t y = 0;
  if (!absl::SimpleAtoi(a, &x) || !absl::SimpleAtoi(b, &y)) return a == b;
  return x >= y;
}

Reflector::State Reflector::DoResume() {
  const std::string& from = options_.resume_resource_version;
  bool pending = false;
  {
    absl::MutexLock lock(&mu_);
    pending = resume_gate_;
  }
  // Pending: the consumer applies it once the state is in place.
  if (!pending) ApplyResumedState();
  absl::StatusOr<std::string> now = ProbeResumeTarget(from);
  if (!now.ok()) {
    ReportError(now.status());
    return BackOff() ? State::kResume : State::kStopped;
  }
  const std::string& now_rv = *now;
  {
    absl::MutexLock lock(&mu_);
    last_sync_rv_ = from;
    listed_rv_ = from;
    listed_once_ = true;
    if (now_rv.empty()) {
      // Nothing of the resumed state can be trusted to be the server's.
      last_rv_unavailable_ = true;
      return State::kList;
    }
    catch_up_rv_ = now_rv;
    resume_watch_next_ = now_rv != from;
  }
  LOG(INFO) << options_.name << ": resuming from resourceVersion " << from
            << "; the server's watch cache is at " << now_rv
            << (pending ? " (the state is still loading)" : "");
  if (!pending) NoteCaughtUp(from);
  return State::kWatch;
}

absl::StatusOr<std::string> Reflector::ProbeResumeTarget(
    const std::string& from) {
  // A list of no object (metadata.name of none: a few hundred bytes, never
  // paged) at resourceVersion 0, which the API server answers from its
  // watch cache with the cache's own resourceVersion: that of the last
  // change of this resource it has seen (or of etcd's last progress
  // notification to it), not etcd's revision, which every write of every
  // resource (a Lease every few seconds) moves. Catching up to it is
  // catching up to everything the server knows of this resource, as fresh
  // as the list at resourceVersion 0 a cold start makes, and the watch's
  // own events reach it; etcd's revision would mostly be reached only by
  // a bookmark, which kube-apiserver sends no sooner than a second after
  // the watch opens.
  ListOptions probe;
  probe.resource_version = "0";
  probe.field_selector = "metadata.name=informer-sidecar.resume-probe";
  absl::StatusOr<ObjectList> cached = lw_->List(probe);
  if (!cached.ok()) return cached.status();
  if (ResourceVersionAtLeast(cached->resource_version, from)) {
    return std::move(cached->resource_version);
  }
  // The cache is behind the resumed state: another API server's that lags
  // (the snapshot was taken through a different one), or etcd restored
  // from a backup. A consistent read tells them apart.
  ListOptions consistent = probe;
  consistent.resource_version.clear();
  absl::StatusOr<ObjectList> current = lw_->List(consistent);
  if (!current.ok()) return current.status();
  if (!ResourceVersionAtLeast(current->resource_version, from)) {
    LOG(WARNING) << options_.name << ": the server is at resourceVersion "
                 << current->resource_version << ", before the resumed " << from
                 << ": relisting";
    return std::string();
  }
  // The state is newer than what that server's cache holds: nothing to
  // catch up with.
  return from;
}

void Reflector::NoteCaughtUp(const std::string& rv) {
  std::string reached;
  {
    absl::MutexLock lock(&mu_);
    if (catch_up_rv_.empty() || !ResourceVersionAtLeast(rv, catch_up_rv_)) {
      return;
    }
    reached = std::move(catch_up_rv_);
    catch_up_rv_.clear();
  }
  if (options_.on_caught_up) options_.on_caught_up(reached);
}

ListOptions Reflector::StartList() {
  std::string rv;
  bool relist = false;
  bool unpaged = false;
  bool paginated = false;
  {
    absl::MutexLock lock(&mu_);
    // client-go's relistResourceVersion: "0" first (served from the watch
    // cache), then the last synced RV, "" once that RV is unavailable.
    rv = last_rv_unavailable_ ? "" : (listed_once_ ? last_sync_rv_ : "0");
    ++counters_.lists;
    if (listed_once_) ++counters_.relists;
    relist = listed_once_;
    unpaged = unpaged_next_;
    unpaged_next_ = false;
    paginated = paginated_result_;
  }
  // A lifecycle event worth one line (relists are rare and costly).
  LOG(INFO) << options_.name << ": " << (relist ? "relisting" : "listing")
            << (rv.empty() || rv == "0" ? std::string()
                                        : " from resourceVersion " + rv);
  ListOptions opts;
  opts.resource_version = rv;
  opts.limit = unpaged ? 0 : options_.page_size;
  if (!rv.empty() && rv != "0" && !unpaged) {
    // The API server serves a list at a non-zero RV with a limit and no
    // resourceVersionMatch as an EXACT read from etcd: the state AT that
    // RV, which after a restart (new watch window) cannot be watched from
    // and would be listed again and again. Like client-go, turn paging off
    // so that the watch cache serves the current state, not older than
    // RV; a server that paged us before (no watch cache) gets the paged
    // list with resourceVersionMatch=NotOlderThan, which etcd serves at
    // the current revision.
    if (paginated) {
      opts.resource_version_match = "NotOlderThan";
    } else {
      opts.limit = 0;
    }
  }
  return opts;
}

absl::Status Reflector::AppendPage(ObjectList page,
                                   std::vector<ObjectPtr>* items) {
  if (items->empty() && !options_.transform && page.remaining_item_count == 0) {
    // The whole list in one page (e.g. from the watch cache): its vector,
    // sized by the decoder, is the list.
    *items = std::move(page.items);
    return absl::OkStatus();
  }
  if (items->empty() && page.remaining_item_count > 0) {
    // The first page says how many follow: one allocation for the list
    // (bounded, the count is the server's word).
    items->reserve(page.items.size() +
                   static_cast<size_t>(std::min<int64_t>(
                       page.remaining_item_count, int64_t{1} << 22)));
  }
  for (ObjectPtr& obj : page.items) {
    absl::Status st = AppendItem(std::move(obj), items, nullptr);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Reflector::AppendItem(ObjectPtr obj, std::vector<ObjectPtr>* items,
                                   ListStage* stage) {
  if (options_.transform) {
    absl::StatusOr<ObjectPtr> t = options_.transform(std::move(obj));
    // Skipping the object would make Replace tombstone it: the list
    // fails and is retried, as client-go's Replace fails.
    if (!t.ok()) return t.status();
    obj = *std::move(t);
  }
  if (stage != nullptr) {
    absl::Status st = stage->Add(obj);
    if (!st.ok()) return st;
  }
  if (items != nullptr) items->push_back(std::move(obj));
  return absl::OkStatus();
}

Reflector::State Reflector::OnListFailed(const absl::Status& status,
                                         bool mid_list) {
  ReportError(status);
  if (IsExpired(status) || IsTooLargeResourceVersion(status)) {
    // A continue token or RV the server can no longer serve: restart as
    // one full, consistent list ("" = a quorum read).
    absl::MutexLock lock(&mu_);
    last_rv_unavailable_ = true;
    ++counters_.expired;
    // A continue token that expired mid-list is routine (compaction
    // while paging a big list): like client-go's pager, restart at once
    // as one unpaged list, which cannot expire that way again. An RV the
    // server rejects on the first page backs off like any failure.
    if (mid_list && !stopped_) {
      unpaged_next_ = true;
      return State::kPlainList;
    }
  }
  return BackOff() ? State::kList : State::kStopped;
}

Reflector::State Reflector::DoList() {
  if (PassResumeGate() == Gate::kStopped) return State::kStopped;
  ListOptions opts = StartList();
  const absl::Time list_start = clock_->Now();
  std::vector<ObjectPtr> items;
  std::string list_rv;
  // Staged: the items go to the stage as they are decoded, while the rest
  // of the list downloads. Without a transform, `items` then takes each
  // page's own vector, sized once by the decoder: growing a second vector
  // during the download would leave its outgrown buffers as holes among
  // the objects being allocated. With one, the transformed objects are
  // collected here, so that each object is transformed exactly once.
  std::unique_ptr<ListStage> stage =
      options_.begin_list_stage ? options_.begin_list_stage() : nullptr;
  // A stage that keeps the items itself: nothing is collected here, and
  // the source lets each item go once the stage has it.
  const bool stage_keeps = stage != nullptr && stage->KeepsItems();
  opts.keep_items = !stage_keeps;
  const bool collect_staged = stage != nullptr && options_.transform;
  const ListerWatcher::ItemFn on_item = [&](const ObjectPtr& obj) {
    if (collect_staged) {
      return AppendItem(obj, stage_keeps ? nullptr : &items, stage.get());
    }
    return stage->Add(obj);
  };
  for (;;) {
    absl::StatusOr<ObjectList> page =
        stage != nullptr ? lw_->ListWithItems(opts, on_item) : lw_->List(opts);
    if (!page.ok()) {
      // A failed transform fails the list as a whole, like a bad page.
      return OnListFailed(page.status(), !opts.continue_token.empty());
    }
    std::string continue_token = std::move(page->continue_token);
    std::string page_rv = std::move(page->resource_version);
    absl::Status st = collect_staged || stage_keeps
                          ? absl::OkStatus()
                          : AppendPage(*std::move(page), &items);
    if (!st.ok()) return OnListFailed(st, /*mid_list=*/false);
    if (continue_token.empty()) {
      list_rv = std::move(page_rv);
      break;
    }
    {
      absl::MutexLock lock(&mu_);
      paginated_result_ = true;
    }
    // Later pages must come from the same snapshot: the continue token
    // carries it, and the API server rejects an RV alongside it.
    opts.continue_token = std::move(continue_token);
    opts.resource_version.clear();
    absl::MutexLock lock(&mu_);
    if (stopped_) return State::kStopped;
  }
  absl::Status st =
      ApplyList(items, list_rv, std::move(stage), clock_->Now() - list_start);
  if (!st.ok()) {
    ReportError(st);
    return BackOff() ? State::kList : State::kStopped;
  }
  fifo_->NoteResourceVersion(list_rv);
  {
    absl::MutexLock lock(&mu_);
    last_sync_rv_ = list_rv;
    listed_rv_ = list_rv;
    last_rv_unavailable_ = false;
    listed_once_ = true;
  }
  if (options_.on_replaced) options_.on_replaced();
  return State::kWatch;
}

absl::Status Reflector::ApplyList(const std::vector<ObjectPtr>& items,
                                  const std::string& list_rv,
                                  std::unique_ptr<ListStage> stage,
                                  absl::Duration downloaded) {
  const absl::Time listed = clock_->Now();
  const bool committed = stage != nullptr && stage->Commit(items, list_rv);
  const size_t count =
      stage != nullptr && stage->KeepsItems() ? stage->size() : items.size();
  if (committed) {
    absl::MutexLock lock(&mu_);
    ++counters_.staged_lists;
  } else if (stage != nullptr && stage->KeepsItems()) {
    // Its items were never collected: a Replace would empty the cache.
    return absl::AbortedError(
        absl::StrCat(options_.name, ": the list's stage refused its commit"));
  } else {
    stage.reset();  // a refused stage's cache is not kept meanwhile
    absl::Status st = fifo_->Replace(items, list_rv);
    if (!st.ok()) return st;
  }
  // With "listing" above, the stages of a (re)list in the log: download
  // and decode (overlapped; a staged list is indexed meanwhile too), then
  // Replace into the DeltaFIFO or the staged list's commit; the pops into
  // the indexer end at the informer's "cache synced".
  LOG(INFO) << options_.name << ": listed " << count
            << " objects at resourceVersion " << list_rv << " in "
            << FormatMillis(downloaded) << " (Replace "
            << FormatMillis(clock_->Now() - listed)
            << (committed ? ", staged during the download)" : ")");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WatchStream>> Reflector::OpenWatch(
    bool watch_list) {
  WatchOptions opts;
  bool relist = false;
  {
    absl::MutexLock lock(&mu_);
    opts.resource_version = last_sync_rv_;
    std::uniform_real_distribution<double> jitter(1.0, 2.0);
    opts.timeout = options_.min_watch_timeout * jitter(rng_);
    if (resume_watch_next_ && !watch_list) {
      opts.timeout = options_.resume_watch_timeout;
      resume_watch_next_ = false;
    }
    ++counters_.watches;
    if (watch_list) {
      ++counters_.lists;
      if (listed_once_) ++counters_.relists;
      relist = listed_once_;
      if (last_rv_unavailable_) opts.resource_version.clear();
    }
  }
  if (watch_list) {
    // As a LIST logs it (StartList): relists are rare and costly.
    LOG(INFO) << options_.name << ": " << (relist ? "relisting" : "listing")
              << " (WatchList)"
              << (opts.resource_version.empty()
                      ? std::string()
                      : " from resourceVersion " + opts.resource_version);
  }
  opts.allow_watch_bookmarks = true;
  if (watch_list) {
    // The initial state streamed as ADDED events, ended by a bookmark
    // annotated k8s.io/initial-events-end: no big list response to buffer
    // on either side. "" asks for a consistent (quorum) read.
    opts.send_initial_events = true;
    opts.resource_version_match = "NotOlderThan";
  }
  VLOG(1) << options_.name << ": watching from resourceVersion \""
          << opts.resource_version << "\" for "
          << absl::FormatDuration(opts.timeout);
  return lw_->Watch(opts);
}

Reflector::State Reflector::OnWatchOpenFailed(bool watch_list,
                                              const absl::Status& status) {
  ReportError(status);
  if (watch_list) {
    // Like client-go, any failure falls back to a plain LIST for this
    // round ("making progress is better than deadlocking"); a server that
    // does not know WatchList (422 Invalid, as v1.24 answers) is never
    // asked again.
    absl::MutexLock lock(&mu_);
    if ((HttpCode(status) == 422 || absl::IsInvalidArgument(status)) &&
        !options_.watch_list_after_refusal) {
      LOG(INFO) << options_.name
                << ": the API server does not support WatchList; using "
                   "list+watch";
      watch_list_unsupported_ = true;
    }
    if (IsExpired(status) || IsTooLargeResourceVersion(status)) {
      last_rv_unavailable_ = true;
    }
    return State::kPlainList;
  }
  if (IsExpired(status)) return OnWatchExpired();
  const State next =
      RewatchWithoutRelist(status) ? State::kWatch : State::kList;
  return BackOff() ? next : State::kStopped;
}

void Reflector::CountEvent(WatchEventType type) {
  // Counted on receipt, before the store sees the event: whatever a
  // consumer observes downstream (a handler, a Watch stream) has already
  // been counted, so the metrics never lag what clients were sent.
  absl::MutexLock lock(&mu_);
  switch (type) {
    case WatchEventType::kAdded:
      ++counters_.events_added;
      break;
    case WatchEventType::kModified:
      ++counters_.events_modified;
      break;
    case WatchEventType::kDeleted:
      ++counters_.events_deleted;
      break;
    case WatchEventType::kBookmark:
      ++counters_.bookmarks;
      break;
    case WatchEventType::kError:
      break;
  }
}

absl::Status Reflector::ApplyObjectEvent(const WatchEvent& ev,
                                         WatchRound* round) {
  if (round->initial) return AddInitialEvent(ev, round);
  ObjectPtr obj = ev.object;
  if (options_.transform) {
    absl::StatusOr<ObjectPtr> t = options_.transform(std::move(obj));
    if (!t.ok()) {
      ReportError(t.status());
      return absl::OkStatus();
    }
    obj = *std::move(t);
  }
  if (ev.type == WatchEventType::kAdded) return fifo_->Add(std::move(obj));
  if (ev.type == WatchEventType::kModified) {
    return fifo_->Update(std::move(obj));
  }
  return fifo_->Delete(std::move(obj));
}

absl::Status Reflector::AddInitialEvent(const WatchEvent& ev,
                                        WatchRound* round) {
  // The initial state is the server's state at one RV, sent as ADDED
  // events: a list, which goes where a LIST's items go.
  if (ev.type == WatchEventType::kDeleted) {
    return absl::FailedPreconditionError(absl::StrCat(
        options_.name, ": a deletion among a WatchList's initial events"));
  }
  // Into a populated cache the stage (a ListReconciler) takes the cache's
  // own object in place of an unchanged one, and `ev` lets the decoded
  // copy go once this returns. A transform error fails the round, as it
  // fails a LIST: applying the list without the object would delete it.
  const bool keeps = round->stage != nullptr && round->stage->KeepsItems();
  return AppendItem(ev.object, keeps ? nullptr : &round->items,
                    round->stage.get());
}

absl::Status Reflector::ApplyInitialEventsEnd(const WatchEvent& ev,
                                              WatchRound* round) {
  const std::vector<ObjectPtr> items = std::move(round->items);
  round->items.clear();
  absl::Status applied =
      ApplyList(items, ev.resource_version, std::move(round->stage),
                clock_->Now() - round->started);
  // A list not applied leaves the round initial: it ends, and the next
  // one starts over with a list.
  if (!applied.ok()) return applied;
  round->initial = false;
  absl::MutexLock lock(&mu_);
  listed_once_ = true;
  last_rv_unavailable_ = false;
  return absl::OkStatus();
}

absl::Status Reflector::ApplyEvent(const WatchEvent& ev, WatchRound* round) {
  absl::Status applied;
  switch (ev.type) {
    case WatchEventType::kAdded:
    case WatchEventType::kModified:
    case WatchEventType::kDeleted:
      applied = ApplyObjectEvent(ev, round);
      break;
    case WatchEventType::kBookmark:
      if (round->initial && ev.initial_events_end) {
        applied = ApplyInitialEventsEnd(ev, round);
      }
      break;
    case WatchEventType::kError:
      return StatusFromApiStatus(ev.status, "WATCH", options_.name);
  }
  if (!applied.ok()) return applied;
  // During a streamed initial state the RV is not a resume point until
  // the end bookmark has been applied.
  if (!round->initial && !ev.resource_version.empty()) {
    fifo_->NoteResourceVersion(ev.resource_version);
    {
      absl::MutexLock lock(&mu_);
      last_sync_rv_ = ev.resource_version;
      if (ev.initial_events_end) listed_rv_ = ev.resource_version;
    }
    NoteCaughtUp(ev.resource_version);
  }
  if (ev.type == WatchEventType::kBookmark && ev.initial_events_end &&
      options_.on_replaced) {
    options_.on_replaced();
  }
  return absl::OkStatus();
}

Reflector::State Reflector::DoWatch(bool watch_list) {
  // A WatchList is a list: the state must be decided before it starts.
  if (watch_list && PassResumeGate() == Gate::kStopped) return State::kStopped;
  // The round runs from its request, not from the gate below: a watch
  // that ran its course (timeoutSeconds) during the load ends at once
  // once read, yet is no "very short watch" (AfterWatch).
  const absl::Time opened = clock_->Now();
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = OpenWatch(watch_list);
  if (!watch.ok()) return OnWatchOpenFailed(watch_list, watch.status());
  // The resume's watch is open (its server-side clock running) while the
  // state may still be loading: its events wait, unread, until it is in
  // place; if it never will be, the watch is dropped and a list follows.
  switch (PassResumeGate()) {
    case Gate::kPass:
      break;
    case Gate::kAbandoned:
      return State::kList;
    case Gate::kStopped:
      return State::kStopped;
  }
  WatchStream* stream = watch->get();
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return State::kStopped;
    current_watch_ = stream;
  }
  WatchRound round;
  round.started = opened;
  // WatchList: the initial state is staged (or collected) in the round as
  // a list and applied when the initial-events-end bookmark arrives.
  round.initial = watch_list;
  if (watch_list && options_.begin_list_stage) {
    round.stage = options_.begin_list_stage();
  }
  absl::Status end;
  for (;;) {
    WatchEvent ev;
    end = stream->Next(&ev);
    if (!end.ok()) break;
    ++round.events;
    CountEvent(ev.type);
    end = ApplyEvent(ev, &round);
    if (!end.ok()) break;
  }
  {
    absl::MutexLock lock(&mu_);
    current_watch_ = nullptr;
    if (stopped_) return State::kStopped;
  }
  watch->reset();
  return AfterWatch(round, end);
}

Reflector::State Reflector::AfterWatch(const WatchRound& round,
                                       const absl::Status& end) {
  if (round.initial) {
    // The stream ended before the initial state was complete: nothing of
    // it was applied, so start over with a (streamed or plain) list.
    ReportError(end.ok() || absl::IsOutOfRange(end)
                    ? absl::UnavailableError(absl::StrCat(
                          options_.name,
                          ": watch-list stream ended before the initial "
                          "state was complete"))
                    : end);
    if (IsExpired(end) || IsTooLargeResourceVersion(end)) {
      absl::MutexLock lock(&mu_);
      last_rv_unavailable_ = true;
    }
    // As when the request itself fails: a plain LIST for this round.
    return State::kPlainList;
  }
  if (absl::IsOutOfRange(end)) {
    // A normal close (timeoutSeconds). One that ends at once without a
    // single event is a server misbehaving: back off rather than spin.
    if (round.events == 0 && clock_->Now() - round.started < absl::Seconds(1)) {
      ReportError(absl::UnavailableError(
          absl::StrCat(options_.name,
                       ": very short watch: ended at once "
                       "without any event")));
      return BackOff() ? State::kWatch : State::kStopped;
    }
    NoteSuccess();
    return State::kWatch;
  }
  ReportError(end);
  if (IsExpired(end)) return OnWatchExpired();
  State next = State::kWatch;
  if (IsUndecodableEvent(end)) {
    // A re-watch from the same RV would get the same event again.
    next = State::kList;
  } else if (IsTooLargeResourceVersion(end)) {
    absl::MutexLock lock(&mu_);
    last_rv_unavailable_ = true;
    next = State::kList;
  } else if (!RewatchWithoutRelist(end) && HttpCode(end) != 0) {
    // The server said something other than "slow down": start over.
    next = State::kList;
  }
  // A cut connection (no HTTP code) or 429/503: the RV is still a valid
  // resume point, so re-watch without relisting.
  return BackOff() ? next : State::kStopped;
}

Reflector::State Reflector::OnWatchExpired() {
  {
    absl::MutexLock lock(&mu_);
    ++counters_.expired;
    // The RV fell out of the server's watch window: relist at the last RV
    // (not older than it: the current state). If even the RV the last list
    // returned cannot be watched from, that list was not current (an exact
    // read of an old revision): the next one is a consistent read ("").
    if (last_sync_rv_ == listed_rv_) last_rv_unavailable_ = true;
  }
  // Every relist waits its back-off: whatever the server answers, the
  // list/watch rounds cannot spin.
  return BackOff() ? State::kList : State::kStopped;
}

void Reflector::ReportError(const absl::Status& status) {
  LOG(WARNING) << options_.name << ": " << status;
  {
    absl::MutexLock lock(&mu_);
    ++counters_.errors;
    const int http = HttpCode(status);
    ++counters_
          .errors_by_kind[http != 0 ? absl::StrCat("http_", http)
                                    : absl::StatusCodeToString(status.code())];
    last_error_ = status;
    retry_after_ = RetryAfter(status).value_or(absl::ZeroDuration());
  }
  if (options_.watch_error_handler) options_.watch_error_handler(status);
}

void Reflector::NoteSuccess() {
  absl::MutexLock lock(&mu_);
  if (clock_->Now() - last_failure_ >= options_.backoff_reset_after) {
    backoff_ = options_.backoff_initial;
  }
}

bool Reflector::BackOff() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  // client-go's exponential back-off manager: reset after a healthy spell.
  if (now - last_failure_ >= options_.backoff_reset_after) {
    backoff_ = options_.backoff_initial;
  }
  absl::Duration wait = backoff_;
  if (options_.backoff_jitter > 0) {
    std::uniform_real_distribution<double> u(0.0, options_.backoff_jitter);
    wait += wait * u(rng_);
  }
  if (retry_after_ > absl::ZeroDuration()) {
    // The server said when to come back: never sooner.
    const absl::Duration asked =
        std::min(retry_after_, options_.max_retry_after);
    std::uniform_real_distribution<double> u(0.0, 0.2);
    wait = std::max(wait, asked + asked * u(rng_));
    retry_after_ = absl::ZeroDuration();
  }
  backoff_ = std::min(backoff_ * options_.backoff_factor, options_.backoff_max);
  last_failure_ = now;
  clock_->AwaitWithDeadline(
      &mu_, absl::Condition(this, &Reflector::StoppedLocked), now + wait);
  return !stopped_;
}

void Reflector::ResyncLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (clock_->AwaitWithDeadline(
              &mu_, absl::Condition(this, &Reflector::StoppedLocked),
              clock_->Now() + options_.resync_period)) {
        return;
      }
    }
    if (!options_.should_resync || options_.should_resync()) {
      absl::Status st = fifo_->Resync();
      if (!st.ok()) LOG(WARNING) << options_.name << ": resync: " << st;
    }
  }
}

std::string Reflector::LastSyncResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return last_sync_rv_;
}

Reflector::Counters Reflector::GetCounters() const {
  Counters c;
  {
    absl::MutexLock lock(&mu_);
    c = counters_;
  }
  c.bytes_received = lw_->BytesReceived();
  return c;
}

absl::Status Reflector::LastError() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace informer

#include "server/informer_service/watch/watch_hub.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "informer/cache/index.h"
#include "informer/labels/label_selector.h"
#include "server/informer_service/watch/resume_token.h"
#include "server/informer_service/watch/watch_fanout.h"
#include "server/informer_service/watch/watch_stream_reactor.h"
#include "server/rpc/grpc_conversions.h"

namespace server {

namespace v1 = ::informer::v1;

namespace {

// Ends a call at once with an error.
class ErrorReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit ErrorReactor(const absl::Status& status,
                        std::function<void(const grpc::Status&)> on_done)
      : status_(ToGrpcStatus(status)), on_done_(std::move(on_done)) {
    Finish(status_);
  }
  void OnDone() override {
    if (on_done_) on_done_(status_);
    delete this;
  }

 private:
  const grpc::Status status_;
  const std::function<void(const grpc::Status&)> on_done_;
};

absl::StatusOr<absl::Duration> ResyncPeriod(const v1::WatchRequest& request) {
  if (!request.has_resync_period()) return absl::ZeroDuration();
  const auto& d = request.resync_period();
  if (d.seconds() < 0 || d.nanos() < 0 || d.nanos() >= 1000000000) {
    return absl::InvalidArgumentError(
        "resync_period must be a non-negative duration");
  }
  const absl::Duration period =
      absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  if (period > absl::ZeroDuration() && period < kMinStreamResyncPeriod) {
    return absl::InvalidArgumentError(
        absl::StrCat("resync_period must be 0 (none) or at least ",
                     absl::FormatDuration(kMinStreamResyncPeriod), "; got ",
                     absl::FormatDuration(period)));
  }
  return period;
}

}  // namespace

WatchHub::WatchHub(InformerRegistry* registry, WatchOptions options,
                   informer::Clock* clock, std::string run_id)
    : registry_(registry),
      options_(options),
      clock_(clock),
      run_id_(std::move(run_id)) {
  if (options_.batch_window > absl::ZeroDuration()) {
    flusher_ = std::thread([this] { FlushLoop(); });
  }
  // Fan-outs for the informers that exist now (their epochs in registry
  // order); later ones are added on first use.
  for (const auto& entry : registry_->entries()) {
    absl::StatusOr<std::shared_ptr<WatchFanout>> fanout =
        FanoutFor(entry.get());
    if (!fanout.ok()) {
      LOG(ERROR) << "cannot serve Watch on " << entry->config.resource << ": "
                 << fanout.status();
      continue;
    }
    // Before the informers start (the hub is built before them): a
    // persisted history is continued by the events they apply.
    (*fanout)->AdoptPersisted();
  }
  InformerRegistry::Observer observer;
  observer.on_retired = [this](InformerEntry* entry) { Retire(entry); };
  observer_id_ = registry_->AddObserver(std::move(observer));
}

WatchHub::~WatchHub() {
  registry_->RemoveObserver(observer_id_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  {
    absl::MutexLock lock(&flush_mu_);
    flush_stop_ = true;
  }
  if (flusher_.joinable()) flusher_.join();
  std::vector<std::shared_ptr<WatchFanout>> fanouts;
  {
    absl::MutexLock lock(&fanouts_mu_);
    fanouts.swap(fanouts_);
  }
  fanouts.clear();
}

absl::StatusOr<std::shared_ptr<WatchFanout>> WatchHub::FanoutFor(
    InformerEntry* entry) {
  absl::MutexLock lock(&fanouts_mu_);
  for (const auto& f : fanouts_) {
    if (f->entry() == entry) return f;
  }
  // The registry's own handle on the entry keeps its memory while the
  // fan-out lives (an InformerRef would keep a lazy informer busy forever).
  std::shared_ptr<InformerEntry> holder;
  for (auto& e : registry_->entries()) {
    if (e.get() == entry) holder = std::move(e);
  }
  if (holder == nullptr) {
    return absl::UnavailableError(absl::StrCat("the informer of \"",
                                               entry->config.resource,
                                               "\" is being stopped; retry"));
  }
  auto fanout = std::make_shared<WatchFanout>(
      static_cast<WatchStreamHost*>(this), std::move(holder), next_epoch_++);
  // Not registered with the informer yet: the first stream's Open does
  // that, so a resource nobody watches pays nothing per object.
  fanouts_.push_back(fanout);
  return fanout;
}

std::vector<std::shared_ptr<WatchFanout>> WatchHub::Fanouts() const {
  absl::MutexLock lock(&fanouts_mu_);
  return fanouts_;
}

void WatchHub::Retire(InformerEntry* entry) {
  std::shared_ptr<WatchFanout> retired;
  {
    absl::MutexLock lock(&fanouts_mu_);
    for (auto it = fanouts_.begin(); it != fanouts_.end(); ++it) {
      if ((*it)->entry() == entry) {
        retired = std::move(*it);
        fanouts_.erase(it);
        break;
      }
    }
  }
  // Destroyed (its handler removed) here unless the ticker holds it for a
  // moment; its tokens now get RESET (a new fan-out has a new epoch).
  retired.reset();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Open(
    grpc::CallbackServerContext*, const v1::WatchRequest& request,
    std::function<void(const grpc::Status&)> on_done) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return new ErrorReactor(absl::UnavailableError(kShuttingDownMessage),
                              std::move(on_done));
    }
  }
  if (request.resource().empty()) {
    return new ErrorReactor(absl::InvalidArgumentError("resource is required"),
                            std::move(on_done));
  }
  // The lease is held until the stream is counted on the entry (which
  // keeps a lazy informer running).
  absl::StatusOr<InformerRef> entry = registry_->Find(request.resource());
  if (!entry.ok()) return new ErrorReactor(entry.status(), std::move(on_done));
  WatchFilter filter;
  filter.namespace_ = request.namespace_();
  absl::StatusOr<informer::LabelSelector> selector =
      informer::LabelSelector::Parse(request.label_selector());
  if (!selector.ok()) {
    return new ErrorReactor(
        absl::InvalidArgumentError(
            absl::StrCat("label_selector: ", selector.status().message())),
        std::move(on_done));
  }
  filter.selector = *std::move(selector);
  if (!request.index_name().empty()) {
    informer::Indexers indexers =
        (*entry)->informer->GetIndexer().GetIndexers();
    auto it = indexers.find(request.index_name());
    if (it == indexers.end()) {
      std::vector<std::string> names;
      for (const auto& [name, fn] : indexers) names.push_back(name);
      std::sort(names.begin(), names.end());
      return new ErrorReactor(
          absl::InvalidArgumentError(
              absl::StrCat("index_name: resource \"", request.resource(),
                           "\" has no index \"", request.index_name(),
                           "\"; available: ", absl::StrJoin(names, ", "))),
          std::move(on_done));
    }
    filter.index_name = request.index_name();
    filter.index_value = request.index_value();
    filter.index_fn = it->second;
  }
  absl::StatusOr<absl::Duration> resync = ResyncPeriod(request);
  if (!resync.ok()) {
    return new ErrorReactor(resync.status(), std::move(on_done));
  }
  if (absl::Status st = ValidateEncoding(request.encoding()); !st.ok()) {
    return new ErrorReactor(st, std::move(on_done));
  }
  absl::StatusOr<std::shared_ptr<WatchFanout>> fanout = FanoutFor(*entry);
  if (!fanout.ok()) {
    return new ErrorReactor(fanout.status(), std::move(on_done));
  }

  WatchStart start;
  if (!request.resume_token().empty()) {
    absl::StatusOr<ResumeToken> token =
        DecodeResumeToken(request.resume_token());
    if (!token.ok()) {
      VLOG(1) << "watch: malformed resume_token: RESET";
      start.reset = true;
    } else if (!(*fanout)->AcceptsToken(*token)) {
      VLOG(1) << "watch: resume_token of another run or resource: RESET";
      start.reset = true;
    } else {
      start.resume = true;
      start.seq = token->seq;
      start.in_snapshot = token->in_snapshot;
      start.after_key = token->after_key;
    }
  }
  // Streams of one fan-out with the same filter share it, so an event is
  // judged once for all of them.
  std::shared_ptr<const WatchFilter> shared_filter = filters_.Intern(
      absl::StrCat((*fanout)->epoch(), "/", (*entry)->config.resource),
      request.label_selector(), std::move(filter));
  auto* stream = new WatchStreamReactor(
      this, *fanout, (*entry)->config.resource, std::move(shared_filter),
      request.encoding(), request.send_old_object(), *resync, start);
  stream->SetOnDone(std::move(on_done));
  EnsureTicker();
  (*fanout)->Open(stream);
  if (*resync > absl::ZeroDuration()) WakeTicker();
  return stream;
}

void WatchHub::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  for (const auto& f : Fanouts()) f->Shutdown();
}

void WatchHub::EnsureTicker() {
  absl::MutexLock lock(&mu_);
  if (ticker_started_ || stopping_) return;
  ticker_started_ = true;
  ticker_ = std::thread([this] { TickLoop(); });
}

void WatchHub::Defer(WatchStreamReactor* stream, absl::Time due) {
  absl::MutexLock lock(&flush_mu_);
  deferred_.insert(stream);
  flush_due_ = std::min(flush_due_, due);
}

void WatchHub::Undefer(WatchStreamReactor* stream) {
  absl::MutexLock lock(&flush_mu_);
  deferred_.erase(stream);
}

void WatchHub::FlushLoop() {
  std::vector<WatchStreamReactor*> due_streams;
  while (true) {
    {
      absl::MutexLock lock(&flush_mu_);
      while (true) {
        if (flush_stop_) return;
        const absl::Time due = flush_due_;
        if (due != absl::InfiniteFuture() && clock_->Now() >= due) break;
        // Wakes for an earlier request, at the due time, or to stop.
        auto changed = [this, due]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_) {
          return flush_stop_ || flush_due_ < due;
        };
        clock_->AwaitWithDeadline(&flush_mu_, absl::Condition(&changed), due);
      }
      flush_due_ = absl::InfiniteFuture();
      // Every waiting stream goes now, also those whose window ends a
      // little later: busy streams then share one cadence, so the flusher
      // wakes once per window rather than once per stream.
      due_streams.assign(deferred_.begin(), deferred_.end());
      deferred_.clear();
      // OnDone takes a stream out of deferred_ under flush_mu_ before
      // dropping gRPC's reference, so these are alive here.
      for (WatchStreamReactor* s : due_streams) s->Ref();
    }
    for (WatchStreamReactor* s : due_streams) {
      s->Flush();
      s->Unref();
    }
    due_streams.clear();
  }
}

void WatchHub::WakeTicker() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void WatchHub::TickLoop() {
  // Ticks at half the bookmark interval, so a quiet stream gets its
  // bookmark between one and one and a half intervals after its last write,
  // and at every stream's resync deadline.
  const absl::Duration period = options_.bookmark_interval / 2;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline =
          std::min(clock_->Now() + period, next_resync_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || wake_;
      };
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&woken), deadline);
      if (stopping_) return;
      wake_ = false;
    }
    const absl::Time now = clock_->Now();
    absl::Time next = absl::InfiniteFuture();
    for (const auto& f : Fanouts()) next = std::min(next, f->Tick(now));
    absl::MutexLock lock(&mu_);
    next_resync_ = next;
  }
}

bool WatchHub::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool WatchHub::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  clock_->AwaitWithTimeout(&mu_, absl::Condition(&stopping_), d);
  return stopping_;
}

void WatchHub::SetWritesPaused(bool paused) {
  paused_.store(paused);
  if (paused) return;
  for (const auto& f : Fanouts()) f->KickAll();
}

void WatchHub::NoteEvent() {
  absl::MutexLock lock(&mu_);
  ++events_;
}

void WatchHub::NoteWritten(const EventTypeCounts& by_type) {
  for (size_t i = 0; i < by_type.size(); ++i) {
    if (by_type[i] != 0) {
      events_out_[i].fetch_add(by_type[i], std::memory_order_relaxed);
    }
  }
}

void WatchHub::NoteCoalesced(uint64_t n) {
  coalesced_.fetch_add(n, std::memory_order_relaxed);
}

void WatchHub::NoteExhausted() {
  exhausted_.fetch_add(1, std::memory_order_relaxed);
}

WatchHub::Counters WatchHub::GetCounters() const {
  Counters c;
  for (size_t i = 0; i < c.events_out.size(); ++i) {
    c.events_out[i] = events_out_[i].load(std::memory_order_relaxed);
  }
  c.coalesced = coalesced_.load(std::memory_order_relaxed);
  c.streams_exhausted = exhausted_.load(std::memory_order_relaxed);
  return c;
}

bool WatchHub::Batching(absl::Time now) {
  if (options_.batch_window <= absl::ZeroDuration()) return false;
  if (options_.batch_min_rate <= 0) return true;
  // One caller per 100 ms period (the one that wins the exchange) turns
  // the count of queued events into a rate; the others read the verdict.
  constexpr int64_t kPeriodNs = 100 * 1000 * 1000;
  const int64_t t = absl::ToUnixNanos(now);
  int64_t since = rate_since_ns_.load(std::memory_order_relaxed);
  if (t - since >= kPeriodNs && rate_since_ns_.compare_exchange_strong(
                                    since, t, std::memory_order_relaxed)) {
    const uint64_t count = queued_.load(std::memory_order_relaxed);
    const uint64_t base = rate_base_.exchange(count, std::memory_order_relaxed);
    const double rate = static_cast<double>(count - base) * 1e9 /
                        static_cast<double>(t - since);
    busy_.store(rate >= options_.batch_min_rate, std::memory_order_relaxed);
  }
  return busy_.load(std::memory_order_relaxed);
}

void WatchHub::NotePending(size_t events, size_t longest_queue) {
  queued_.fetch_add(events, std::memory_order_relaxed);
  // A relaxed read first, so the common case (no new peak) writes nothing
  // shared.
  size_t peak = peak_pending_.load(std::memory_order_relaxed);
  while (longest_queue > peak &&
         !peak_pending_.compare_exchange_weak(peak, longest_queue,
                                              std::memory_order_relaxed)) {
  }
}

void WatchHub::WaitForEvents(uint64_t n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return events_ >= n;
  };
  mu_.Await(absl::Condition(&reached));
}

void WatchHub::NoteStreams(int delta) {
  absl::MutexLock lock(&mu_);
  open_streams_ += delta;
}

void WatchHub::NoteWaiting(int delta) {
  absl::MutexLock lock(&mu_);
  waiting_streams_ += delta;
}

void WatchHub::WaitForOpenStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return open_streams_ == n;
  };
  mu_.Await(absl::Condition(&reached));
}

void WatchHub::WaitForWaitingStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting_streams_ == n;
  };
  mu_.Await(absl::Condition(&reached));
}

uint64_t WatchHub::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

size_t WatchHub::MaxPendingNow() const {
  size_t max = 0;
  for (const auto& f : Fanouts()) max = std::max(max, f->MaxPending());
  return max;
}

std::vector<WatchMemoryStats> WatchHub::MemoryNow() const {
  std::vector<WatchMemoryStats> out;
  for (const auto& f : Fanouts()) out.push_back(f->Memory());
  return out;
}

size_t WatchHub::peak_pending() const {
  return peak_pending_.load(std::memory_order_relaxed);
}

}  // namespace server

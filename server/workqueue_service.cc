#include "server/workqueue_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/duration.pb.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"
#include "informer/object/object.h"
#include "informer/workqueue/rate_limiter.h"
#include "informer/workqueue/rate_limiting_queue.h"
#include "informer/cache/shared_informer.h"
#include "informer/workqueue/workqueue_metrics.h"
#include "server/rpc/grpc_conversions.h"
#include "informer/labels/label_selector.h"

namespace server {

namespace v1 = ::informer::v1;

namespace {

constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxKeyLength = 1024;
constexpr int64_t kMaxStreamCredit = 10000;
constexpr size_t kMaxPendingRejections = 10000;
constexpr absl::Duration kDefaultBaseDelay = absl::Milliseconds(5);
constexpr absl::Duration kDefaultMaxDelay = absl::Seconds(1000);
constexpr double kDefaultQps = 10;
constexpr int kDefaultBurst = 100;
constexpr absl::Duration kDefaultLeaseTimeout = absl::Minutes(5);
constexpr absl::Duration kMinResyncPeriod = absl::Seconds(1);
constexpr absl::Duration kMaxDelay = absl::Hours(24);

// A proto Duration as absl, or InvalidArgument naming `field`.
absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  const bool bad_sign =
      (d.seconds() > 0 && d.nanos() < 0) || (d.seconds() < 0 && d.nanos() > 0);
  if (bad_sign || d.nanos() <= -1000000000 || d.nanos() >= 1000000000) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": malformed google.protobuf.Duration"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' ||
          c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

absl::Status ValidateKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("key is required");
  if (key.size() > kMaxKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: longer than ", kMaxKeyLength, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status NoQueue(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("work queue \"", name,
                                          "\" does not exist (CreateQueue it "
                                          "first; idle queues are removed)"));
}

// A validated declaration with every default filled in. `request` is the
// normalized form compared for idempotency.
struct QueueSpec {
  v1::CreateQueueRequest request;
  LabelSelector selector;
  uint32_t event_mask = 0;  // bit (1 << QueueEvent)
  absl::Duration resync_period = absl::ZeroDuration();
  absl::Duration base_delay;
  absl::Duration max_delay;
  double qps = 0;
  int burst = 0;
  absl::Duration lease_timeout;
};

absl::StatusOr<QueueSpec> Normalize(const v1::CreateQueueRequest& in) {
  QueueSpec spec;
  if (in.name().empty()) return absl::InvalidArgumentError("name is required");
  if (!ValidName(in.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: \"", in.name(), "\" must be 1 to ", kMaxNameLength,
                     " characters of [a-z0-9._-]"));
  }
  if (in.resource().empty()) {
    return absl::InvalidArgumentError("resource is required");
  }
  absl::StatusOr<LabelSelector> selector =
      LabelSelector::Parse(in.label_selector());
  if (!selector.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label_selector: ", selector.status().message()));
  }
  spec.selector = *std::move(selector);
  std::set<int> events;
  for (int i = 0; i < in.events_size(); ++i) {
    const int e = in.events(i);
    if (e <= v1::QUEUE_EVENT_UNSPECIFIED || e > v1::QUEUE_EVENT_SYNC) {
      return absl::InvalidArgumentError(absl::StrCat(
          "events[", i, "]: must be ADDED, MODIFIED, DELETED or SYNC"));
    }
    if (!events.insert(e).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("events[", i, "]: duplicate ", v1::QueueEvent_Name(e)));
    }
  }
  if (events.empty()) {
    events = {v1::QUEUE_EVENT_ADDED, v1::QUEUE_EVENT_MODIFIED,
              v1::QUEUE_EVENT_DELETED, v1::QUEUE_EVENT_SYNC};
  }
  for (int e : events) spec.event_mask |= 1u << e;

  absl::StatusOr<absl::Duration> resync =
      FromProto(in.resync_period(), "resync_period");
  if (!resync.ok()) return resync.status();
  if (*resync < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("resync_period: must not be negative");
  }
  if (*resync > absl::ZeroDuration()) {
    if (*resync < kMinResyncPeriod) {
      return absl::InvalidArgumentError("resync_period: the minimum is 1s");
    }
    if (!(spec.event_mask & (1u << v1::QUEUE_EVENT_SYNC))) {
      return absl::InvalidArgumentError(
          "resync_period: set, but events does not include QUEUE_EVENT_SYNC");
    }
  }
  spec.resync_period = *resync;

  const v1::RateLimiter& rl = in.rate_limiter();
  absl::StatusOr<absl::Duration> base =
      FromProto(rl.base_delay(), "rate_limiter.base_delay");
  if (!base.ok()) return base.status();
  absl::StatusOr<absl::Duration> max =
      FromProto(rl.max_delay(), "rate_limiter.max_delay");
  if (!max.ok()) return max.status();
  if (*base < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "rate_limiter.base_delay: must not be negative");
  }
  if (*max < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "rate_limiter.max_delay: must not be negative");
  }
  spec.base_delay = *base == absl::ZeroDuration() ? kDefaultBaseDelay : *base;
  spec.max_delay = *max == absl::ZeroDuration() ? kDefaultMaxDelay : *max;
  if (spec.max_delay < spec.base_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rate_limiter.max_delay: ", absl::FormatDuration(spec.max_delay),
        " is below base_delay ", absl::FormatDuration(spec.base_delay)));
  }
  if (!(rl.qps() >= 0) || std::isinf(rl.qps())) {
    return absl::InvalidArgumentError(
        "rate_limiter.qps: must be a finite number >= 0");
  }
  if (rl.burst() < 0) {
    return absl::InvalidArgumentError(
        "rate_limiter.burst: must not be negative");
  }
  spec.qps = rl.qps() == 0 ? kDefaultQps : rl.qps();
  spec.burst = rl.burst() == 0 ? kDefaultBurst : rl.burst();

  absl::StatusOr<absl::Duration> lease =
      FromProto(in.lease_timeout(), "lease_timeout");
  if (!lease.ok()) return lease.status();
  if (*lease < absl::ZeroDuration() || *lease > kMaxDelay) {
    return absl::InvalidArgumentError(
        "lease_timeout: must be between 0 (default 5m) and 24h");
  }
  spec.lease_timeout =
      *lease == absl::ZeroDuration() ? kDefaultLeaseTimeout : *lease;

  v1::CreateQueueRequest& n = spec.request;
  n.set_name(in.name());
  n.set_resource(in.resource());
  n.set_namespace_(in.namespace_());
  n.set_label_selector(in.label_selector());
  for (int e : events) n.add_events(static_cast<v1::QueueEvent>(e));
  ToProto(spec.resync_period, n.mutable_resync_period());
  ToProto(spec.base_delay, n.mutable_rate_limiter()->mutable_base_delay());
  ToProto(spec.max_delay, n.mutable_rate_limiter()->mutable_max_delay());
  n.mutable_rate_limiter()->set_qps(spec.qps);
  n.mutable_rate_limiter()->set_burst(spec.burst);
  ToProto(spec.lease_timeout, n.mutable_lease_timeout());
  return spec;
}

// The first field in which two normalized declarations differ, or "".
std::string FirstDifference(const v1::CreateQueueRequest& a,
                            const v1::CreateQueueRequest& b) {
  if (a.resource() != b.resource()) return "resource";
  if (a.namespace_() != b.namespace_()) return "namespace";
  if (a.label_selector() != b.label_selector()) return "label_selector";
  if (std::vector<int>(a.events().begin(), a.events().end()) !=
      std::vector<int>(b.events().begin(), b.events().end())) {
    return "events";
  }
  if (a.resync_period().SerializeAsString() !=
      b.resync_period().SerializeAsString()) {
    return "resync_period";
  }
  if (a.rate_limiter().base_delay().SerializeAsString() !=
      b.rate_limiter().base_delay().SerializeAsString()) {
    return "rate_limiter.base_delay";
  }
  if (a.rate_limiter().max_delay().SerializeAsString() !=
      b.rate_limiter().max_delay().SerializeAsString()) {
    return "rate_limiter.max_delay";
  }
  if (a.rate_limiter().qps() != b.rate_limiter().qps()) {
    return "rate_limiter.qps";
  }
  if (a.rate_limiter().burst() != b.rate_limiter().burst()) {
    return "rate_limiter.burst";
  }
  if (a.lease_timeout().SerializeAsString() !=
      b.lease_timeout().SerializeAsString()) {
    return "lease_timeout";
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------
// LeaseStream: one worker's Lease call.
//
// Reads one request at a time (apply results, add credit, read the next);
// writes whatever is pending (leases, rejections, expiries) in one message
// with one write in flight. The queue calls the Queue*/EndByQueue methods
// holding its own mutex (queue -> stream lock order); the stream calls into
// the queue only without holding its mutex.
class LeaseStream final
    : public grpc::ServerBidiReactor<v1::LeaseRequest, v1::LeaseResponse> {
 public:
  LeaseStream(WorkQueueService* service,
              const grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The client is gone; OnDone follows and returns the leases.
      ended_ = true;
      end_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
    }
    if (ended_) {
      FinishIfIdleLocked();
      return;
    }
    MaybeWriteLocked();
  }
  void OnCancel() override { End(absl::CancelledError("cancelled")); }
  void OnDone() override;

  // --- Called by the queue with its mutex held ---
  void QueueLease(v1::Lease lease) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    *pending_.add_leases() = std::move(lease);
    MaybeWriteLocked();
  }
  void QueueExpired(uint64_t lease_id) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    pending_.add_expired_lease_ids(lease_id);
    MaybeWriteLocked();
  }
  // The queue was deleted or removed: ends the call. The queue has already
  // forgotten this stream.
  void EndByQueue(const absl::Status& status) { End(status); }

  const std::string& worker() const { return worker_; }

 private:
  // Handles one request; an error ends the stream.
  absl::Status Handle(const v1::LeaseRequest& request);

  void End(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    end_status_ = ToGrpcStatus(status);
    FinishIfIdleLocked();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || writing_) return;
    if (pending_.leases_size() == 0 && pending_.rejected_size() == 0 &&
        pending_.expired_lease_ids_size() == 0) {
      return;
    }
    response_.Clear();
    response_.Swap(&pending_);
    writing_ = true;
    StartWrite(&response_);
  }

  // Finish may not overlap a write in flight: OnWriteDone finishes then.
  void FinishIfIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    finished_ = true;
    pending_.Clear();
    Finish(end_status_);
  }

  WorkQueueService* const service_;
  // Valid until OnDone (the call outlives its reactor's work).
  const grpc::CallbackServerContext* const context_;
  // Set by the first read; only the reactor's read path and OnDone (after
  // every other callback) touch it, never concurrently.
  std::shared_ptr<ManagedQueue> queue_;
  std::string worker_;
  v1::LeaseRequest request_;

  absl::Mutex mu_;
  v1::LeaseResponse pending_ ABSL_GUARDED_BY(mu_);
  v1::LeaseResponse response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// ManagedQueue: one named queue (see the service's class comment).
class ManagedQueue final : public informer::ResourceEventHandler {
 public:
  ManagedQueue(WorkQueueService* service, QueueSpec spec, InformerRef entry)
      : service_(service),
        spec_(std::move(spec)),
        entry_(std::move(entry)),
        clock_(service->clock_),
        metrics_(std::make_shared<informer::InMemoryWorkQueueMetrics>(
            spec_.request.name(), clock_)) {
    std::vector<std::unique_ptr<informer::RateLimiter>> limiters;
    limiters.push_back(
        std::make_unique<informer::ItemExponentialFailureRateLimiter>(
            spec_.base_delay, spec_.max_delay));
    limiters.push_back(std::make_unique<informer::BucketRateLimiter>(
        clock_, spec_.qps, spec_.burst));
    informer::WorkQueueOptions options;
    options.name = spec_.request.name();
    options.clock = clock_;
    options.metrics = metrics_;
    queue_ = informer::NewRateLimitingQueue(
        std::make_unique<informer::MaxOfRateLimiter>(std::move(limiters)),
        std::move(options));
    absl::MutexLock lock(&mu_);
    last_activity_ = clock_->Now();
    if (spec_.resync_period > absl::ZeroDuration()) {
      next_resync_ = last_activity_ + spec_.resync_period;
    }
  }

  ~ManagedQueue() override { Shutdown(absl::CancelledError("shutting down")); }

  // Registers the informer handler (which adds the keys of the cache as it
  // is now) and starts the dispatcher.
  absl::Status Start() {
    dispatcher_ = std::thread([this] { DispatchLoop(); });
    informer::HandlerOptions options;
    options.non_blocking = true;
    absl::StatusOr<informer::HandlerRegistration*> reg =
        entry_->informer->AddEventHandler(this, options);
    if (!reg.ok()) return reg.status();
    absl::MutexLock lock(&mu_);
    registration_ = *reg;
    return absl::OkStatus();
  }

  // Ends every stream with `status`, removes the handler, stops the queue
  // and the dispatcher. Idempotent.
  void Shutdown(const absl::Status& status) {
    informer::HandlerRegistration* registration = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      registration = registration_;
      registration_ = nullptr;
      for (LeaseStream* s : order_) s->EndByQueue(status);
      streams_.clear();
      order_.clear();
      leases_.clear();
      deadlines_.clear();
      total_credit_ = 0;
    }
    if (registration != nullptr) {
      absl::Status st = entry_->informer->RemoveEventHandler(registration);
      if (!st.ok()) LOG(WARNING) << "work queue " << name() << ": " << st;
    }
    queue_->ShutDown();
    if (dispatcher_.joinable()) dispatcher_.join();
  }

  const std::string& name() const { return spec_.request.name(); }
  const QueueSpec& spec() const { return spec_; }

  // --- Informer handler: inline on the informer's thread, never blocks ---
  void OnAdd(const informer::ObjectPtr& obj, bool) override {
    if (Wants(v1::QUEUE_EVENT_ADDED) && Matches(*obj)) queue_->Add(obj->Key());
  }
  void OnUpdate(const informer::ObjectPtr& old_obj,
                const informer::ObjectPtr& obj) override {
    const bool sync = old_obj == obj ||
                      old_obj->resource_version() == obj->resource_version();
    if (!Wants(sync ? v1::QUEUE_EVENT_SYNC : v1::QUEUE_EVENT_MODIFIED)) return;
    if (Matches(*obj) || Matches(*old_obj)) queue_->Add(obj->Key());
  }
  void OnDelete(const informer::ObjectPtr& obj, bool) override {
    if (Wants(v1::QUEUE_EVENT_DELETED) && Matches(*obj)) {
      queue_->Add(obj->Key());
    }
  }

  // --- Streams ---
  absl::Status Attach(LeaseStream* stream) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return NoQueue(name());
    streams_.try_emplace(stream);
    order_.push_back(stream);
    last_activity_ = clock_->Now();
    return absl::OkStatus();
  }

  // Returns every lease of `stream` to the queue. Idempotent.
  void Detach(LeaseStream* stream) {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    total_credit_ -= it->second.credit;
    for (uint64_t id : it->second.leases) {
      auto l = leases_.find(id);
      if (l == leases_.end()) continue;
      deadlines_.erase({l->second.deadline, id});
      queue_->Done(l->second.key);
      queue_->Add(l->second.key);
      ++returned_;
      leases_.erase(l);
    }
    streams_.erase(it);
    order_.erase(std::find(order_.begin(), order_.end(), stream));
    last_activity_ = clock_->Now();
    if (streams_.empty()) service_->Kick();  // the idle clock starts
  }

  absl::Status AddCredit(LeaseStream* stream, int32_t credit) {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return NoQueue(name());
    if (it->second.credit + credit > kMaxStreamCredit) {
      return absl::InvalidArgumentError(
          absl::StrCat("credit: the stream's unused credit would exceed ",
                       kMaxStreamCredit));
    }
    it->second.credit += credit;
    total_credit_ += credit;
    return absl::OkStatus();
  }

  // Applies one result; a FailedPrecondition is reported to the worker.
  absl::Status Complete(LeaseStream* stream, uint64_t id,
                        v1::LeaseOutcome outcome) {
    absl::MutexLock lock(&mu_);
    last_activity_ = clock_->Now();
    auto l = leases_.find(id);
    if (l == leases_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease ", id, " of queue \"", name(),
          "\" is not held: unknown, already completed, or expired (its key "
          "went back to the queue and may be leased to another worker)"));
    }
    if (l->second.stream != stream) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease ", id, " of queue \"", name(),
                       "\" is held by another Lease stream"));
    }
    const std::string key = std::move(l->second.key);
    deadlines_.erase({l->second.deadline, id});
    leases_.erase(l);
    streams_[stream].leases.erase(id);
    switch (outcome) {
      case v1::LEASE_OUTCOME_FAIL:
        ++failures_;
        queue_->AddRateLimited(key);
        break;
      case v1::LEASE_OUTCOME_FORGET:
        queue_->Forget(key);
        break;
      default:
        break;
    }
    queue_->Done(key);
    ++completed_;
    return absl::OkStatus();
  }

  void NoteActivity() {
    absl::MutexLock lock(&mu_);
    last_activity_ = clock_->Now();
  }

  informer::RateLimitingQueue& queue() { return *queue_; }

  // --- Janitor ---
  // Returns timed-out leases; runs a due resync. Returns the next time
  // something is due (InfiniteFuture: nothing).
  absl::Time Tick(absl::Time now, absl::Duration idle_timeout) {
    bool resync = false;
    absl::Time next = absl::InfiniteFuture();
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return next;
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        const uint64_t id = deadlines_.begin()->second;
        deadlines_.erase(deadlines_.begin());
        auto l = leases_.find(id);
        if (l == leases_.end()) continue;
        LOG(INFO) << "work queue " << name() << ": lease " << id << " of \""
                  << l->second.key << "\" timed out (worker \""
                  << l->second.stream->worker() << "\"); back to the queue";
        streams_[l->second.stream].leases.erase(id);
        l->second.stream->QueueExpired(id);
        queue_->Done(l->second.key);
        queue_->Add(l->second.key);
        ++expired_;
        leases_.erase(l);
      }
      if (!deadlines_.empty()) next = deadlines_.begin()->first;
      if (next_resync_ != absl::InfiniteFuture() && now >= next_resync_) {
        resync = true;
        next_resync_ = now + spec_.resync_period;
      }
      next = std::min(next, next_resync_);
      if (streams_.empty() && idle_timeout > absl::ZeroDuration()) {
        next = std::min(next, last_activity_ + idle_timeout);
      }
    }
    if (resync && entry_->informer->HasSynced()) {
      // Outside mu_: listing the cache takes the indexer's lock only.
      for (const informer::ObjectPtr& obj :
           entry_->informer->GetIndexer().List()) {
        if (Matches(*obj)) queue_->Add(obj->Key());
      }
    }
    return next;
  }

  // Marks the queue stopped if it has been idle for `idle_timeout` (so no
  // stream can attach any more) and returns true.
  bool StopIfIdle(absl::Time now, absl::Duration idle_timeout) {
    if (idle_timeout <= absl::ZeroDuration()) return false;
    absl::MutexLock lock(&mu_);
    if (stopped_ || !streams_.empty()) return false;
    return now - last_activity_ >= idle_timeout;
  }

  void FillStats(v1::QueueStats* out) {
    const informer::WorkQueueMetricsSnapshot m = metrics_->Snapshot();
    out->set_name(name());
    out->set_resource(spec_.request.resource());
    out->set_depth(queue_->Len());
    out->set_waiting(queue_->NumWaiting());
    out->set_adds(m.adds);
    out->set_retries(m.retries);
    absl::MutexLock lock(&mu_);
    out->set_in_flight(static_cast<int64_t>(leases_.size()));
    out->set_workers(static_cast<int32_t>(streams_.size()));
    out->set_failures(failures_);
    out->set_expired(expired_);
    out->set_returned(returned_);
    out->set_completed(completed_);
  }

 private:
  struct StreamState {
    int64_t credit = 0;
    absl::flat_hash_set<uint64_t> leases;
  };
  struct LeaseInfo {
    std::string key;
    LeaseStream* stream;
    absl::Time deadline;
  };

  bool Wants(v1::QueueEvent e) const { return spec_.event_mask & (1u << e); }
  bool Matches(const informer::Object& obj) const {
    if (!spec_.request.namespace_().empty() &&
        obj.namespace_() != spec_.request.namespace_()) {
      return false;
    }
    return spec_.selector.Matches(obj);
  }

  bool HasCreditOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || total_credit_ > 0;
  }

  // The dispatcher: waits for credit, takes a key (blocking Get), grants it.
  void DispatchLoop() {
    std::string key;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &ManagedQueue::HasCreditOrStopped));
        if (stopped_) return;
      }
      if (!queue_->Get(&key)) return;  // shut down
      absl::MutexLock lock(&mu_);
      if (stopped_) {
        queue_->Done(key);
        return;
      }
      if (total_credit_ == 0) {
        // The streams with credit went away while Get waited: put the key
        // back (it then counts in `depth` again) rather than hold it.
        queue_->Done(key);
        queue_->Add(key);
        continue;
      }
      GrantLocked(key);
    }
  }

  void GrantLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Round robin over the streams with credit.
    LeaseStream* stream = nullptr;
    for (size_t i = 0; i < order_.size(); ++i) {
      LeaseStream* s = order_[(next_stream_ + i) % order_.size()];
      if (streams_[s].credit > 0) {
        stream = s;
        next_stream_ = (next_stream_ + i + 1) % order_.size();
        break;
      }
    }
    CHECK(stream != nullptr) << "total credit without a stream with credit";
    StreamState& state = streams_[stream];
    --state.credit;
    --total_credit_;
    const uint64_t id = ++next_lease_id_;
    const absl::Time deadline = clock_->Now() + spec_.lease_timeout;
    const bool was_empty = deadlines_.empty();
    leases_[id] = LeaseInfo{key, stream, deadline};
    deadlines_.insert({deadline, id});
    state.leases.insert(id);
    v1::Lease lease;
    lease.set_lease_id(id);
    lease.set_key(key);
    const size_t slash = key.find('/');
    if (slash == std::string::npos) {
      lease.set_name(key);
    } else {
      lease.set_namespace_(key.substr(0, slash));
      lease.set_name(key.substr(slash + 1));
    }
    lease.set_failures(queue_->NumRequeues(key));
    ToProto(spec_.lease_timeout, lease.mutable_timeout());
    stream->QueueLease(std::move(lease));
    // A first deadline may be earlier than what the janitor waits for.
    if (was_empty) service_->Kick();
  }

  WorkQueueService* const service_;
  const QueueSpec spec_;
  // Keeps a lazy informer running as long as the queue exists.
  const InformerRef entry_;
  informer::Clock* const clock_;
  const std::shared_ptr<informer::InMemoryWorkQueueMetrics> metrics_;
  std::unique_ptr<informer::RateLimitingQueue> queue_;
  std::thread dispatcher_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  informer::HandlerRegistration* registration_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<LeaseStream*, StreamState> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<LeaseStream*> order_ ABSL_GUARDED_BY(mu_);
  size_t next_stream_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_credit_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, LeaseInfo> leases_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> deadlines_ ABSL_GUARDED_BY(mu_);
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_);
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t returned_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------------------
// LeaseStream methods that need ManagedQueue.

void LeaseStream::OnReadDone(bool ok) {
  if (!ok) {
    // The worker closed its side (or the call broke): nothing more can be
    // completed on this stream, so its leases go back now, before the
    // status tells the worker the stream is over.
    if (queue_ != nullptr) queue_->Detach(this);
    End(absl::OkStatus());
    return;
  }
  absl::Status st = Handle(request_);
  if (!st.ok()) {
    End(st);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    if (static_cast<size_t>(pending_.rejected_size()) > kMaxPendingRejections) {
      ended_ = true;
      end_status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "too many rejected results pending");
      FinishIfIdleLocked();
      return;
    }
  }
  StartRead(&request_);
}

absl::Status LeaseStream::Handle(const v1::LeaseRequest& request) {
  if (queue_ == nullptr) {
    if (request.queue().empty()) {
      return absl::InvalidArgumentError(
          "queue is required in the first LeaseRequest");
    }
    absl::StatusOr<std::shared_ptr<ManagedQueue>> q =
        service_->Find(request.queue());
    if (!q.ok()) return q.status();
    if (grpc::Status auth = service_->AuthorizeQueue(*context_, **q);
        !auth.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(auth.error_code()),
                          auth.error_message());
    }
    // Before Attach: the janitor's log reads it once the queue knows us.
    worker_ = request.worker();
    if (absl::Status st = (*q)->Attach(this); !st.ok()) return st;
    queue_ = *std::move(q);
  } else if (!request.queue().empty() && request.queue() != queue_->name()) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue: this stream works on \"", queue_->name(),
                     "\", not \"", request.queue(), "\""));
  }
  if (request.credit() < 0) {
    return absl::InvalidArgumentError("credit: must not be negative");
  }
  for (int i = 0; i < request.results_size(); ++i) {
    const v1::LeaseResult& r = request.results(i);
    if (r.lease_id() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("results[", i, "].lease_id is required"));
    }
    if (r.outcome() != v1::LEASE_OUTCOME_DONE &&
        r.outcome() != v1::LEASE_OUTCOME_FAIL &&
        r.outcome() != v1::LEASE_OUTCOME_FORGET) {
      return absl::InvalidArgumentError(absl::StrCat(
          "results[", i, "].outcome: must be DONE, FAIL or FORGET"));
    }
  }
  for (const v1::LeaseResult& r : request.results()) {
    absl::Status st = queue_->Complete(this, r.lease_id(), r.outcome());
    if (!st.ok()) {
      absl::MutexLock lock(&mu_);
      v1::RejectedResult* rej = pending_.add_rejected();
      rej->set_lease_id(r.lease_id());
      rej->set_code(static_cast<int32_t>(st.code()));
      rej->set_message(std::string(st.message()));
      MaybeWriteLocked();
    }
  }
  if (request.results_size() > 0) service_->NoteResults(request.results_size());
  if (request.credit() > 0) {
    if (absl::Status st = queue_->AddCredit(this, request.credit()); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

void LeaseStream::OnDone() {
  if (queue_ != nullptr) queue_->Detach(this);
  delete this;
}

// ---------------------------------------------------------------------------
// WorkQueueService

WorkQueueService::WorkQueueService(InformerRegistry* registry, Options options,
                                   informer::Clock* clock)
    : registry_(registry), options_(options), clock_(clock) {
  janitor_ = std::thread([this] { JanitorLoop(); });
}

WorkQueueService::~WorkQueueService() {
  {
    absl::MutexLock lock(&janitor_mu_);
    stopping_ = true;
  }
  janitor_.join();
  std::map<std::string, std::shared_ptr<ManagedQueue>, std::less<>> queues;
  {
    absl::MutexLock lock(&mu_);
    queues.swap(queues_);
  }
  for (auto& [name, q] : queues) {
    q->Shutdown(absl::UnavailableError("the sidecar is shutting down"));
  }
}

absl::StatusOr<std::shared_ptr<ManagedQueue>> WorkQueueService::Find(
    absl::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return NoQueue(name);
  return it->second;
}

absl::StatusOr<bool> WorkQueueService::Create(
    const v1::CreateQueueRequest& request) {
  absl::StatusOr<QueueSpec> spec = Normalize(request);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<InformerRef> entry = registry_->Find(request.resource());
  if (!entry.ok()) return entry.status();
  std::shared_ptr<ManagedQueue> queue;
  {
    // Held while the queue is built, so concurrent identical declarations
    // create it once.
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(request.name());
    if (it != queues_.end()) {
      const std::string diff =
          FirstDifference(it->second->spec().request, spec->request);
      if (!diff.empty()) {
        return absl::AlreadyExistsError(
            absl::StrCat("work queue \"", request.name(),
                         "\" already exists with a different ", diff,
                         " (DeleteQueue it first, or use another name)"));
      }
      it->second->NoteActivity();
      return false;
    }
    if (static_cast<int>(queues_.size()) >= options_.max_queues) {
      return absl::ResourceExhaustedError(
          absl::StrCat("at most ", options_.max_queues,
                       " work queues may exist; delete unused ones"));
    }
    queue = std::make_shared<ManagedQueue>(this, *std::move(spec), *entry);
    if (absl::Status st = queue->Start(); !st.ok()) {
      queue->Shutdown(st);
      return st;
    }
    queues_.emplace(request.name(), queue);
  }
  LOG(INFO) << "work queue " << request.name() << " created on "
            << request.resource();
  Kick();
  return true;
}

absl::Status WorkQueueService::Delete(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("name is required");
  std::shared_ptr<ManagedQueue> queue;
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(name);
    if (it == queues_.end()) return NoQueue(name);
    queue = std::move(it->second);
    queues_.erase(it);
  }
  queue->Shutdown(absl::NotFoundError(
      absl::StrCat("work queue \"", name, "\" was deleted")));
  LOG(INFO) << "work queue " << name << " deleted";
  return absl::OkStatus();
}

absl::Status WorkQueueService::Add(absl::string_view queue,
                                   absl::string_view key,
                                   absl::Duration delay) {
  if (queue.empty()) return absl::InvalidArgumentError("queue is required");
  if (absl::Status st = ValidateKey(key); !st.ok()) return st;
  if (delay > kMaxDelay) {
    return absl::InvalidArgumentError("delay: at most 24h");
  }
  absl::StatusOr<std::shared_ptr<ManagedQueue>> q = Find(queue);
  if (!q.ok()) return q.status();
  (*q)->NoteActivity();
  if (delay <= absl::ZeroDuration()) {
    (*q)->queue().Add(key);
  } else {
    (*q)->queue().AddAfter(key, delay);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StatsResponse> WorkQueueService::GetStats(
    absl::string_view queue) {
  std::vector<std::shared_ptr<ManagedQueue>> queues;
  if (!queue.empty()) {
    absl::StatusOr<std::shared_ptr<ManagedQueue>> q = Find(queue);
    if (!q.ok()) return q.status();
    queues.push_back(*std::move(q));
  } else {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, q] : queues_) queues.push_back(q);
  }
  v1::StatsResponse response;
  for (const auto& q : queues) q->FillStats(response.add_queues());
  return response;
}

grpc::Status WorkQueueService::AuthorizeQueue(
    const grpc::ServerContextBase& context, const ManagedQueue& queue) const {
  return AuthorizeRead(options_.authorizer, context,
                       queue.spec().request.resource(),
                       queue.spec().request.namespace_());
}

grpc::Status WorkQueueService::AuthorizeQueueNamed(
    const grpc::ServerContextBase& context, absl::string_view name) {
  if (options_.authorizer == nullptr) return grpc::Status::OK;
  if (grpc::Status st = AuthorizeCall(options_.authorizer, context); !st.ok()) {
    return st;
  }
  absl::StatusOr<std::shared_ptr<ManagedQueue>> q = Find(name);
  if (!q.ok()) return ToGrpcStatus(q.status());
  return AuthorizeQueue(context, **q);
}

grpc::Status WorkQueueService::CreateQueue(
    grpc::ServerContext* context, const v1::CreateQueueRequest* request,
    v1::CreateQueueResponse* response) {
  if (grpc::Status st = AuthorizeRead(options_.authorizer, *context,
                                      request->resource(),
                                      request->namespace_());
      !st.ok()) {
    return st;
  }
  absl::StatusOr<bool> created = Create(*request);
  if (!created.ok()) return ToGrpcStatus(created.status());
  response->set_created(*created);
  return grpc::Status::OK;
}

grpc::Status WorkQueueService::DeleteQueue(
    grpc::ServerContext* context, const v1::DeleteQueueRequest* request,
    v1::DeleteQueueResponse*) {
  if (grpc::Status st = AuthorizeQueueNamed(*context, request->name());
      !st.ok()) {
    return st;
  }
  return ToGrpcStatus(Delete(request->name()));
}

grpc::ServerBidiReactor<v1::LeaseRequest, v1::LeaseResponse>*
WorkQueueService::Lease(grpc::CallbackServerContext* context) {
  // Authentication now; the queue's resource is checked on the first
  // message, which names the queue.
  if (grpc::Status st = AuthorizeCall(options_.authorizer, *context);
      !st.ok()) {
    return RefuseBidiStream<v1::LeaseRequest, v1::LeaseResponse>(st);
  }
  return new LeaseStream(this, context);
}

grpc::Status WorkQueueService::AddAfter(grpc::ServerContext* context,
                                        const v1::AddAfterRequest* request,
                                        v1::AddAfterResponse*) {
  if (!request->queue().empty()) {
    if (grpc::Status st = AuthorizeQueueNamed(*context, request->queue());
        !st.ok()) {
      return st;
    }
  }
  absl::StatusOr<absl::Duration> delay = FromProto(request->delay(), "delay");
  if (!delay.ok()) return ToGrpcStatus(delay.status());
  return ToGrpcStatus(Add(request->queue(), request->key(), *delay));
}

grpc::Status WorkQueueService::Forget(grpc::ServerContext* context,
                                      const v1::ForgetRequest* request,
                                      v1::ForgetResponse*) {
  if (request->queue().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("queue is required"));
  }
  if (grpc::Status st = AuthorizeQueueNamed(*context, request->queue());
      !st.ok()) {
    return st;
  }
  if (absl::Status st = ValidateKey(request->key()); !st.ok()) {
    return ToGrpcStatus(st);
  }
  absl::StatusOr<std::shared_ptr<ManagedQueue>> q = Find(request->queue());
  if (!q.ok()) return ToGrpcStatus(q.status());
  (*q)->NoteActivity();
  (*q)->queue().Forget(request->key());
  return grpc::Status::OK;
}

grpc::Status WorkQueueService::Stats(grpc::ServerContext* context,
                                     const v1::StatsRequest* request,
                                     v1::StatsResponse* response) {
  if (grpc::Status st =
          request->queue().empty()
              ? AuthorizeCall(options_.authorizer, *context)
              : AuthorizeQueueNamed(*context, request->queue());
      !st.ok()) {
    return st;
  }
  absl::StatusOr<v1::StatsResponse> stats = GetStats(request->queue());
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  if (options_.authorizer != nullptr && request->queue().empty()) {
    // Only the queues this caller may use.
    for (const v1::QueueStats& q : stats->queues()) {
      if (AuthorizeQueueNamed(*context, q.name()).ok()) {
        *response->add_queues() = q;
      }
    }
    return grpc::Status::OK;
  }
  *response = *std::move(stats);
  return grpc::Status::OK;
}

void WorkQueueService::Kick() {
  absl::MutexLock lock(&janitor_mu_);
  kicked_ = true;
}

void WorkQueueService::JanitorLoop() {
  while (true) {
    {
      absl::MutexLock lock(&janitor_mu_);
      if (stopping_) return;
      // Cleared before the pass: a kick during the pass makes the wait
      // below return at once.
      kicked_ = false;
    }
    const absl::Time now = clock_->Now();
    absl::Time next = absl::InfiniteFuture();
    std::vector<std::shared_ptr<ManagedQueue>> idle;
    std::vector<std::shared_ptr<ManagedQueue>> queues;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = queues_.begin(); it != queues_.end();) {
        if (it->second->StopIfIdle(now, options_.idle_timeout)) {
          idle.push_back(std::move(it->second));
          it = queues_.erase(it);
        } else {
          queues.push_back(it->second);
          ++it;
        }
      }
    }
    for (const auto& q : idle) {
      LOG(INFO) << "work queue " << q->name() << " removed after "
                << absl::FormatDuration(options_.idle_timeout)
                << " without workers or activity";
      q->Shutdown(NoQueue(q->name()));
    }
    for (const auto& q : queues) {
      next = std::min(next, q->Tick(now, options_.idle_timeout));
    }
    absl::MutexLock lock(&janitor_mu_);
    idle_removals_ += idle.size();
    ++passes_;
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(janitor_mu_) {
      return kicked_ || stopping_;
    };
    clock_->AwaitWithDeadline(&janitor_mu_, absl::Condition(&wake), next);
  }
}

void WorkQueueService::NoteResults(uint64_t n) {
  absl::MutexLock lock(&results_mu_);
  results_ += n;
}

void WorkQueueService::WaitForResults(uint64_t n) const {
  absl::MutexLock lock(&results_mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(results_mu_) {
    return results_ >= n;
  };
  results_mu_.Await(absl::Condition(&reached));
}

void WorkQueueService::WaitForIdleRemovals(uint64_t n) const {
  absl::MutexLock lock(&janitor_mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(janitor_mu_) {
    return idle_removals_ >= n;
  };
  janitor_mu_.Await(absl::Condition(&reached));
}

void WorkQueueService::WaitForJanitorPasses(uint64_t n) const {
  absl::MutexLock lock(&janitor_mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(janitor_mu_) {
    return passes_ >= n;
  };
  janitor_mu_.Await(absl::Condition(&reached));
}

uint64_t WorkQueueService::janitor_passes() const {
  absl::MutexLock lock(&janitor_mu_);
  return passes_;
}

}  // namespace server

#include "server/workqueue_service/workqueue_managed_queue.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "informer/workqueue/rate_limiter.h"
#include "server/workqueue_service/workqueue_lease_stream.h"
#include "server/workqueue_service/workqueue_service.h"

namespace server {

namespace v1 = ::informer::v1;
using workqueue_internal::kMaxStreamCredit;
using workqueue_internal::NoQueue;
using workqueue_internal::QueueSpec;
using workqueue_internal::ToProto;

ManagedQueue::ManagedQueue(WorkQueueService* service, QueueSpec spec,
                           InformerRef entry)
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

absl::Status ManagedQueue::Start() {
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

void ManagedQueue::Shutdown(const absl::Status& status) {
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

void ManagedQueue::OnUpdate(const informer::ObjectPtr& old_obj,
                            const informer::ObjectPtr& obj) {
  const bool sync =
      old_obj == obj || old_obj->resource_version() == obj->resource_version();
  if (!Wants(sync ? v1::QUEUE_EVENT_SYNC : v1::QUEUE_EVENT_MODIFIED)) return;
  if (Matches(*obj) || Matches(*old_obj)) queue_->Add(obj->Key());
}

absl::Status ManagedQueue::Attach(LeaseStream* stream) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return NoQueue(name());
  streams_.try_emplace(stream);
  order_.push_back(stream);
  last_activity_ = clock_->Now();
  return absl::OkStatus();
}

void ManagedQueue::Detach(LeaseStream* stream) {
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

absl::Status ManagedQueue::AddCredit(LeaseStream* stream, int32_t credit) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return NoQueue(name());
  if (it->second.credit + credit > kMaxStreamCredit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "credit: the stream's unused credit would exceed ", kMaxStreamCredit));
  }
  it->second.credit += credit;
  total_credit_ += credit;
  return absl::OkStatus();
}

absl::Status ManagedQueue::Complete(LeaseStream* stream, uint64_t id,
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

absl::Time ManagedQueue::Tick(absl::Time now, absl::Duration idle_timeout) {
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

bool ManagedQueue::StopIfIdle(absl::Time now, absl::Duration idle_timeout) {
  if (idle_timeout <= absl::ZeroDuration()) return false;
  absl::MutexLock lock(&mu_);
  if (stopped_ || !streams_.empty()) return false;
  return now - last_activity_ >= idle_timeout;
}

void ManagedQueue::FillStats(v1::QueueStats* out) {
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

void ManagedQueue::DispatchLoop() {
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

void ManagedQueue::GrantLocked(const std::string& key) {
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

}  // namespace server

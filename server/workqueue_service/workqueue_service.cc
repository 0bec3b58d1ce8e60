#include "server/workqueue_service/workqueue_service.h"

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
#include "informer/cache/shared_informer.h"
#include "informer/labels/label_selector.h"
#include "informer/object/object.h"
#include "informer/workqueue/rate_limiter.h"
#include "informer/workqueue/rate_limiting_queue.h"
#include "informer/workqueue/workqueue_metrics.h"
#include "server/rpc/grpc_conversions.h"
#include "server/workqueue_service/workqueue_lease_stream.h"
#include "server/workqueue_service/workqueue_managed_queue.h"
#include "server/workqueue_service/workqueue_spec.h"

namespace server {

namespace v1 = ::informer::v1;
using workqueue_internal::FirstDifference;
using workqueue_internal::FromProto;
using workqueue_internal::kMaxDelay;
using workqueue_internal::NoQueue;
using workqueue_internal::Normalize;
using workqueue_internal::QueueSpec;
using workqueue_internal::ValidateKey;

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
  if (grpc::Status st =
          AuthorizeRead(options_.authorizer, *context, request->resource(),
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
  if (grpc::Status st = request->queue().empty()
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
#include "server/workqueue_service/workqueue_lease_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/workqueue_service/workqueue_managed_queue.h"
#include "server/workqueue_service/workqueue_service.h"
#include "server/workqueue_service/workqueue_spec.h"

namespace server {

namespace v1 = ::informer::v1;
using workqueue_internal::kMaxPendingRejections;

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

}  // namespace server

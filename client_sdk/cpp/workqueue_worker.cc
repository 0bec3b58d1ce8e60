#include "client_sdk/cpp/workqueue_worker.h"

#include <deque>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "client_sdk/cpp/grpc_status.h"

namespace client_sdk {

using informer::v1::Lease;
using informer::v1::LeaseRequest;
using informer::v1::LeaseResponse;

WorkQueueWorker::WorkQueueWorker(
    std::shared_ptr<grpc::ChannelInterface> channel, std::string queue,
    std::string worker_name)
    : stub_(informer::v1::WorkQueue::NewStub(std::move(channel))),
      queue_(std::move(queue)),
      worker_name_(std::move(worker_name)) {}

absl::Status WorkQueueWorker::Run(const ProcessFunc& process) {
  if (queue_.empty()) return absl::InvalidArgumentError("queue: required");
  grpc::ClientContext ctx;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    ctx_ = &ctx;
  }
  auto stream = stub_->Lease(&ctx);
  LeaseRequest first;
  first.set_queue(queue_);
  first.set_worker(worker_name_);
  first.set_credit(1);
  bool ok = stream->Write(first);
  // Leases received but not processed yet (the sidecar sends at most the
  // credit granted, so at most one), and ids it expired meanwhile.
  std::deque<Lease> pending;
  absl::flat_hash_set<uint64_t> expired;
  LeaseResponse response;
  while (ok) {
    if (pending.empty()) {
      if (!stream->Read(&response)) break;
      for (uint64_t id : response.expired_lease_ids()) expired.insert(id);
      for (const Lease& lease : response.leases()) pending.push_back(lease);
      absl::MutexLock lock(&mu_);
      rejected_ += response.rejected_size();
      continue;
    }
    Lease lease = std::move(pending.front());
    pending.pop_front();
    LeaseRequest next;
    next.set_credit(1);
    if (expired.erase(lease.lease_id()) > 0) {
      absl::MutexLock lock(&mu_);
      ++skipped_expired_;
    } else {
      absl::Status st = process(lease);
      informer::v1::LeaseResult* result = next.add_results();
      result->set_lease_id(lease.lease_id());
      result->set_outcome(st.ok() ? informer::v1::LEASE_OUTCOME_FORGET
                                  : informer::v1::LEASE_OUTCOME_FAIL);
      absl::MutexLock lock(&mu_);
      ++processed_;
      if (!st.ok()) ++failed_;
    }
    ok = stream->Write(next);
  }
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu_);
  ctx_ = nullptr;
  if (stopped_) return absl::OkStatus();
  return status.ok() ? absl::UnavailableError("lease stream ended")
                     : FromGrpcStatus(status);
}

void WorkQueueWorker::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

int64_t WorkQueueWorker::processed() const {
  absl::MutexLock lock(&mu_);
  return processed_;
}
int64_t WorkQueueWorker::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}
int64_t WorkQueueWorker::rejected() const {
  absl::MutexLock lock(&mu_);
  return rejected_;
}
int64_t WorkQueueWorker::skipped_expired() const {
  absl::MutexLock lock(&mu_);
  return skipped_expired_;
}

}  // namespace client_sdk

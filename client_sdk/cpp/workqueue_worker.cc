#include "client_sdk/cpp/workqueue_worker.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client_sdk/cpp/grpc_status.h"
#include "glog/logging.h"

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
  bool delivered = false;
  absl::Status status = RunStream(
      process, [] {}, &delivered);
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::OkStatus();
  // Run's contract: only Stop returns OK.
  return status.ok() ? absl::UnavailableError("lease stream ended") : status;
}

absl::Status WorkQueueWorker::RunWithReconnect(
    const ProcessFunc& process, const ReconnectOptions& options) {
  if (queue_.empty()) return absl::InvalidArgumentError("queue: required");
  absl::Duration backoff = options.initial_backoff;
  int64_t failures = 0;
  absl::Status last_reported;
  auto recovered = [&] {
    if (failures == 0) return;
    LOG(WARNING) << "WorkQueueWorker(" << queue_
                 << "): lease stream works again after " << failures
                 << " failed attempt(s)";
    const int64_t failed = failures;
    failures = 0;
    if (options.error_handler != nullptr) {
      options.error_handler->OnRecovered(failed);
    }
  };
  while (true) {
    bool delivered = false;
    absl::Status status = RunStream(process, recovered, &delivered);
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return absl::OkStatus();
    }
    if (delivered) backoff = options.initial_backoff;
    ++failures;
    StreamError error;
    error.status = status;
    error.failures = failures;
    error.retry_in = backoff;
    // WARNING when an outage starts or its cause changes, repeats at INFO.
    const std::string message = absl::StrCat(
        "WorkQueueWorker(", queue_,
        "): lease stream failed: ", status.ToString(), " (", failures,
        " in a row; retrying in ", absl::FormatDuration(backoff), ")");
    if (failures > 1 && status == last_reported) {
      LOG(INFO) << message;
    } else {
      LOG(WARNING) << message;
    }
    last_reported = status;
    if (options.error_handler != nullptr) {
      options.error_handler->OnError(error);
    }
    absl::MutexLock lock(&mu_);
    options.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopped_), backoff);
    if (stopped_) return absl::OkStatus();
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

void WorkQueueWorker::ReadLoop(
    grpc::ClientReaderWriter<LeaseRequest, LeaseResponse>* stream) {
  LeaseResponse response;
  while (stream->Read(&response)) {
    absl::MutexLock lock(&mu_);
    ++responses_;
    rejected_ += response.rejected_size();
    for (uint64_t id : response.expired_lease_ids()) expired_.insert(id);
    for (const Lease& lease : response.leases()) pending_.push_back(lease);
  }
  absl::MutexLock lock(&mu_);
  read_done_ = true;
}

absl::Status WorkQueueWorker::RunStream(
    const ProcessFunc& process, const std::function<void()>& on_first_response,
    bool* delivered) {
  grpc::ClientContext ctx;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    ctx_ = &ctx;
    pending_.clear();
    expired_.clear();
    read_done_ = false;
    responses_ = 0;
  }
  auto stream = stub_->Lease(&ctx);
  LeaseRequest first;
  first.set_queue(queue_);
  first.set_worker(worker_name_);
  // One slot, free: `process` runs on this thread, between streams too.
  first.set_credit(1);
  bool ok = stream->Write(first);
  std::thread reader([this, s = stream.get()] { ReadLoop(s); });
  while (ok) {
    Lease lease;
    bool expired_already = false;
    bool first_response = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, delivered]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !pending_.empty() || read_done_ || stopped_ ||
               (responses_ > 0 && !*delivered);
      };
      mu_.Await(absl::Condition(&ready));
      if (responses_ > 0 && !*delivered) {
        *delivered = true;
        first_response = true;
      } else if (stopped_ || pending_.empty()) {
        break;  // stopped, or the stream ended
      } else {
        lease = std::move(pending_.front());
        pending_.pop_front();
        expired_already = expired_.erase(lease.lease_id()) > 0;
        if (expired_already) ++skipped_expired_;
      }
    }
    if (first_response) {
      on_first_response();
      continue;
    }
    LeaseRequest next;
    next.set_credit(1);
    if (!expired_already) {
      absl::Status st = process(lease);
      absl::MutexLock lock(&mu_);
      ++processed_;
      if (!st.ok()) ++failed_;
      // Expired while `process` ran: the key is someone else's by now.
      if (expired_.erase(lease.lease_id()) == 0) {
        informer::v1::LeaseResult* result = next.add_results();
        result->set_lease_id(lease.lease_id());
        result->set_outcome(st.ok() ? informer::v1::LEASE_OUTCOME_FORGET
                                    : informer::v1::LEASE_OUTCOME_FAIL);
      }
    }
    ok = stream->Write(next);
  }
  stream->WritesDone();
  // The reader ends when the stream does: Stop cancels it, and a stream a
  // write failed on is over already (cancelling it here would hide the
  // sidecar's status behind CANCELLED).
  reader.join();
  grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu_);
  ctx_ = nullptr;
  return FromGrpcStatus(status);
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
bool WorkQueueWorker::IsExpired(uint64_t lease_id) const {
  absl::MutexLock lock(&mu_);
  return expired_.contains(lease_id);
}

}  // namespace client_sdk

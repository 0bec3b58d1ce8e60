#ifndef SERVER_WORKQUEUE_SERVICE_WORKQUEUE_LEASE_STREAM_H_
#define SERVER_WORKQUEUE_SERVICE_WORKQUEUE_LEASE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"
#include "server/rpc/grpc_conversions.h"

namespace server {

class ManagedQueue;
class WorkQueueService;

// LeaseStream: one worker's Lease call.
//
// Reads one request at a time (apply results, add credit, read the next);
// writes whatever is pending (leases, rejections, expiries) in one message
// with one write in flight. The queue calls the Queue*/EndByQueue methods
// holding its own mutex (queue -> stream lock order); the stream calls into
// the queue only without holding its mutex.
class LeaseStream final
    : public grpc::ServerBidiReactor<informer::v1::LeaseRequest,
                                     informer::v1::LeaseResponse> {
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
  void QueueLease(informer::v1::Lease lease) {
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
  absl::Status Handle(const informer::v1::LeaseRequest& request);

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
  informer::v1::LeaseRequest request_;

  absl::Mutex mu_;
  informer::v1::LeaseResponse pending_ ABSL_GUARDED_BY(mu_);
  informer::v1::LeaseResponse response_
      ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server

#endif  // SERVER_WORKQUEUE_SERVICE_WORKQUEUE_LEASE_STREAM_H_

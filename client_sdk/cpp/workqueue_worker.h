#ifndef CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_
#define CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

namespace client_sdk {

// WorkQueueWorker runs a worker loop on one of the sidecar's remote work
// queues: it holds a WorkQueue.Lease stream with one slot of credit,
// calls `process` for each leased key, and reports FORGET when it returns OK
// (done, back-off reset) or FAIL otherwise (retried after the queue's
// rate-limited back-off). Leases the sidecar reports expired before their
// turn are skipped (their key went back to the queue); a lease that expires
// while `process` runs gets its result rejected by the sidecar, which is
// harmless (counted in rejected()).
//
// Threading: Run blocks the calling thread, which also runs `process`, one
// key at a time; Stop may be called from any thread (or from `process`).
class WorkQueueWorker {
 public:
  using ProcessFunc = std::function<absl::Status(const informer::v1::Lease&)>;

  WorkQueueWorker(std::shared_ptr<grpc::ChannelInterface> channel,
                  std::string queue, std::string worker_name = "");
  WorkQueueWorker(const WorkQueueWorker&) = delete;
  WorkQueueWorker& operator=(const WorkQueueWorker&) = delete;

  // Runs until Stop (returns OK) or until the stream fails (returns its
  // status, e.g. NOT_FOUND for an unknown queue). Call at most once.
  absl::Status Run(const ProcessFunc& process);
  void Stop();

  int64_t processed() const;
  int64_t failed() const;
  int64_t rejected() const;
  int64_t skipped_expired() const;

 private:
  std::unique_ptr<informer::v1::WorkQueue::Stub> stub_;
  const std::string queue_;
  const std::string worker_name_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t processed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t skipped_expired_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_

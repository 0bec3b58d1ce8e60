#ifndef CLIENT_SDK_CPP_WORKQUEUE_CLIENT_H_
#define CLIENT_SDK_CPP_WORKQUEUE_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

namespace client_sdk {

// A remote work queue's declaration (informer.v1.CreateQueueRequest in C++
// terms). Zero durations, qps and burst, and empty strings and events, mean
// the sidecar's defaults.
struct QueueSpec {
  std::string name;
  // The resource whose informer feeds the queue ("pods", ...).
  std::string resource;
  std::string namespace_;
  std::string label_selector;
  // Which informer events enqueue a key; empty: all.
  std::vector<informer::v1::QueueEvent> events;
  // Enqueue every matching key this often (needs QUEUE_EVENT_SYNC).
  absl::Duration resync_period = absl::ZeroDuration();
  // Retry pacing of failed keys (client-go's defaults: 5ms, 1000s, 10/s,
  // 100).
  absl::Duration base_delay = absl::ZeroDuration();
  absl::Duration max_delay = absl::ZeroDuration();
  double qps = 0;
  int32_t burst = 0;
  // How long a worker may hold a key (default 5 minutes).
  absl::Duration lease_timeout = absl::ZeroDuration();
};

// WorkQueueClient: the sidecar's unary WorkQueue calls (declare, delete,
// add a key, forget a key's failures, stats) with absl::Status errors (the
// sidecar's gRPC code and message); WorkQueueWorker holds the Lease stream.
// Each call has the deadline given at construction. Thread-safe (stateless
// apart from the stub); shares the channel it is given.
class WorkQueueClient {
 public:
  explicit WorkQueueClient(std::shared_ptr<grpc::ChannelInterface> channel,
                           absl::Duration timeout = absl::Seconds(30));

  // Declares a queue. Idempotent: true if this call created it, false if
  // an identical queue existed (a different declaration: AlreadyExists).
  absl::StatusOr<bool> CreateQueue(const QueueSpec& spec);
  // Removes a queue; its Lease streams end with NOT_FOUND.
  absl::Status DeleteQueue(absl::string_view name);
  // Adds `key` to `queue` now, or after `delay` when positive.
  absl::Status AddAfter(absl::string_view queue, absl::string_view key,
                        absl::Duration delay = absl::ZeroDuration());
  // Resets the failure count (back-off) of `key` in `queue`.
  absl::Status Forget(absl::string_view queue, absl::string_view key);
  // Stats of `queue`, or of every queue (sorted by name) when empty.
  absl::StatusOr<std::vector<informer::v1::QueueStats>> Stats(
      absl::string_view queue = "");

 private:
  void Prepare(grpc::ClientContext* ctx) const;

  std::unique_ptr<informer::v1::WorkQueue::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_WORKQUEUE_CLIENT_H_

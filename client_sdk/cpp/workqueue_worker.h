#ifndef CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_
#define CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/stream_error.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

namespace client_sdk {

// WorkQueueWorker runs a worker loop on one of the sidecar's remote work
// queues: it holds a WorkQueue.Lease stream with one slot of credit,
// calls `process` for each leased key, and reports FORGET when it returns OK
// (done, back-off reset) or FAIL otherwise (retried after the queue's
// rate-limited back-off). A lease the sidecar reports expired (its key went
// back to the queue) is not reported: skipped if it expired before its
// turn, its result dropped if it expired while `process` ran (the stream is
// read on a second thread meanwhile); either way the slot is granted again.
//
// Two loops:
//  - Run: one stream. Returns OK after Stop, or the status the stream
//    ended with (e.g. NOT_FOUND for an unknown queue, UNAVAILABLE when the
//    sidecar went away): the caller decides whether to run again.
//  - RunWithReconnect: the Python and Node.js workers' contract. A stream
//    that ends is reported to ReconnectOptions::error_handler (OnError with
//    its status, OK when the sidecar ended it without an error, the count
//    of consecutive failures and the back-off) and reopened after
//    an exponential back-off, whatever its code (a queue may be declared
//    after its workers start); the first stream that delivers after
//    failures is reported once (OnRecovered). A lease whose stream broke is
//    not reported (the sidecar gave its key back). Returns OK after Stop.
//
// Threading: Run/RunWithReconnect block the calling thread, which also runs
// `process` and the error handler, one key at a time; a second internal
// thread reads the stream. Stop may be called from any thread (or from
// `process` or the error handler). Call Run or RunWithReconnect at most
// once in all.
class WorkQueueWorker {
 public:
  using ProcessFunc = std::function<absl::Status(const informer::v1::Lease&)>;

  struct ReconnectOptions {
    // Back-off between streams: doubles from `initial_backoff` up to
    // `max_backoff`; starts over once a stream delivered.
    absl::Duration initial_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(30);
    // Not owned; must outlive the call.
    informer::Clock* clock = informer::RealClock();
    // Told about failed streams and recoveries (not owned, may be null).
    StreamErrorHandler* error_handler = nullptr;
  };

  WorkQueueWorker(std::shared_ptr<grpc::ChannelInterface> channel,
                  std::string queue, std::string worker_name = "");
  WorkQueueWorker(const WorkQueueWorker&) = delete;
  WorkQueueWorker& operator=(const WorkQueueWorker&) = delete;

  // One stream: runs until Stop (returns OK) or until the stream fails
  // (returns its status, e.g. NOT_FOUND for an unknown queue).
  absl::Status Run(const ProcessFunc& process);
  // Streams again and again, with back-off, until Stop (returns OK).
  // InvalidArgument for an empty queue name.
  absl::Status RunWithReconnect(const ProcessFunc& process,
                                const ReconnectOptions& options);
  void Stop();

  int64_t processed() const;
  int64_t failed() const;
  int64_t rejected() const;
  int64_t skipped_expired() const;
  // True if the current stream was told lease `lease_id` expired.
  bool IsExpired(uint64_t lease_id) const;

 private:
  // Runs one stream until it ends or Stop; returns its gRPC status (OK when
  // the sidecar ended it without an error, or after Stop: callers check
  // stopped_). `delivered` tells whether it received anything;
  // `on_first_response` runs (on the calling thread) when it first does.
  absl::Status RunStream(const ProcessFunc& process,
                         const std::function<void()>& on_first_response,
                         bool* delivered);
  // Reads the stream into pending_/expired_ until it ends.
  void ReadLoop(grpc::ClientReaderWriter<informer::v1::LeaseRequest,
                                         informer::v1::LeaseResponse>* stream);

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
  // The current stream, as its reader thread saw it: leases not processed
  // yet, ids it expired, whether it ended, responses so far.
  std::deque<informer::v1::Lease> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> expired_ ABSL_GUARDED_BY(mu_);
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  int64_t responses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_WORKQUEUE_WORKER_H_

#ifndef SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SERVICE_H_
#define SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"
#include "server/registry/informer_registry.h"
#include "server/security/authz.h"

namespace server {

class ManagedQueue;
class LeaseStream;

// Service-wide settings of informer.v1.WorkQueue.
struct WorkQueueServiceOptions {
  // A queue with no Lease stream and no activity (Lease stream opened or
  // closed, lease completed, AddAfter, Forget, CreateQueue) for this long is
  // removed. Zero or less: never.
  absl::Duration idle_timeout = absl::Minutes(10);
  // CreateQueue beyond this many queues is RESOURCE_EXHAUSTED.
  int max_queues = 256;
  // Bearer-token authorization (server/security/authz.h); null allows
  // everything. A queue is reachable by a caller that may read its resource in
  // its namespace: CreateQueue checks the declaration, every other call (and a
  // Lease stream's first message) the named queue's; Stats of all queues
  // lists only those. Not owned; must outlive the service.
  const Authorizer* authorizer = nullptr;
};

// WorkQueueService serves informer.v1.WorkQueue (proto/informer/v1/
// workqueue.proto): named, rate-limited work queues fed by the registry's
// informers, leased to remote workers with client-go's "one worker per key"
// guarantee.
//
// Per queue:
//   - an informer::RateLimitingQueue holds the keys (dirty/processing sets,
//     delays, back-off; the per-key exclusivity is the in-process queue's
//     `processing` set: a key is Get from it when leased and Done when the
//     lease ends);
//   - a non-blocking handler on the resource's SharedIndexInformer Adds the
//     key of every matching event (an Add is a short lock; the informer is
//     never blocked);
//   - ONE dispatcher thread moves keys from the queue to the Lease streams
//     that have credit: it waits until some stream has credit, then blocks
//     in the queue's Get, then grants the key (round robin over streams
//     with credit; should every stream with credit have left while Get
//     waited, the key goes back to the queue) and hands the Lease to the
//     stream's writer. The blocking
//     Get therefore never runs on a gRPC thread, and a queue nobody works
//     on never takes a key out (so its keys are not held by anyone).
// Lease streams are callback reactors (ServerBidiReactor): one read and one
// write in flight, leases queued per stream (bounded by its credit), no
// thread per stream.
// One janitor thread for the whole service, waiting on the injected clock,
// returns timed-out leases to their queues, runs periodic resyncs and
// removes idle queues.
//
// Lease life cycle: granted -> completed by its stream (DONE, FAIL: retried
// rate-limited, FORGET: back-off reset) | timed out (key Added back at once;
// the stream is told in `expired_lease_ids`) | its stream ended (key Added
// back at once). A result for a lease that is no longer held (completed,
// expired) or held by another stream is answered in the stream with a
// FAILED_PRECONDITION RejectedResult; the stream goes on.
//
// Lock order: service mu_ -> queue mutex -> stream mutex; janitor_mu_ and
// the in-process queue's locks are leaves.
//
// Thread-safety: RPCs and the C++ methods from any thread. The registry
// and clock must outlive the service; the gRPC server must be shut down
// (and its calls done) before the service is destroyed. Destruction removes
// every queue (and its informer handler), so the registry's informers must
// still exist then.
class WorkQueueService final
    : public informer::v1::WorkQueue::WithCallbackMethod_Lease<
          informer::v1::WorkQueue::Service> {
 public:
  using Options = WorkQueueServiceOptions;

  WorkQueueService(InformerRegistry* registry, Options options,
                   informer::Clock* clock = informer::RealClock());
  ~WorkQueueService() override;
  WorkQueueService(const WorkQueueService&) = delete;
  WorkQueueService& operator=(const WorkQueueService&) = delete;

  grpc::Status CreateQueue(
      grpc::ServerContext* context,
      const informer::v1::CreateQueueRequest* request,
      informer::v1::CreateQueueResponse* response) override;
  grpc::Status DeleteQueue(
      grpc::ServerContext* context,
      const informer::v1::DeleteQueueRequest* request,
      informer::v1::DeleteQueueResponse* response) override;
  grpc::ServerBidiReactor<informer::v1::LeaseRequest,
                          informer::v1::LeaseResponse>*
  Lease(grpc::CallbackServerContext* context) override;
  grpc::Status AddAfter(grpc::ServerContext* context,
                        const informer::v1::AddAfterRequest* request,
                        informer::v1::AddAfterResponse* response) override;
  grpc::Status Forget(grpc::ServerContext* context,
                      const informer::v1::ForgetRequest* request,
                      informer::v1::ForgetResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context,
                     const informer::v1::StatsRequest* request,
                     informer::v1::StatsResponse* response) override;

  // The C++ forms of the RPCs (same validation and errors).
  absl::StatusOr<bool> Create(const informer::v1::CreateQueueRequest& request);
  absl::Status Delete(absl::string_view name);
  absl::Status Add(absl::string_view queue, absl::string_view key,
                   absl::Duration delay = absl::ZeroDuration());
  absl::StatusOr<informer::v1::StatsResponse> GetStats(absl::string_view queue);

  // --- For tests ---
  // Blocks until Lease streams have handled at least `n` LeaseResults
  // (applied or rejected) since construction.
  void WaitForResults(uint64_t n) const;
  // Blocks until at least `n` queues were removed for being idle.
  void WaitForIdleRemovals(uint64_t n) const;
  // Blocks until the janitor has finished at least `n` passes (one runs
  // after every wake-up, e.g. a FakeClock advance past a deadline).
  void WaitForJanitorPasses(uint64_t n) const;
  uint64_t janitor_passes() const;

 private:
  friend class LeaseStream;
  friend class ManagedQueue;

  // The live queue named `name`, or NotFound.
  absl::StatusOr<std::shared_ptr<ManagedQueue>> Find(absl::string_view name);
  // The caller may use `queue` (its resource in its namespace).
  grpc::Status AuthorizeQueue(const grpc::ServerContextBase& context,
                              const ManagedQueue& queue) const;
  // Authentication, then AuthorizeQueue on the queue named `name` (NotFound
  // when absent, after authentication).
  grpc::Status AuthorizeQueueNamed(const grpc::ServerContextBase& context,
                                   absl::string_view name);
  void Kick();
  void JanitorLoop();
  void NoteResults(uint64_t n);

  InformerRegistry* const registry_;
  const Options options_;
  informer::Clock* const clock_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ManagedQueue>, std::less<>> queues_
      ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex janitor_mu_;
  bool kicked_ ABSL_GUARDED_BY(janitor_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(janitor_mu_) = false;
  uint64_t passes_ ABSL_GUARDED_BY(janitor_mu_) = 0;
  uint64_t idle_removals_ ABSL_GUARDED_BY(janitor_mu_) = 0;
  std::thread janitor_;

  mutable absl::Mutex results_mu_;
  uint64_t results_ ABSL_GUARDED_BY(results_mu_) = 0;
};

}  // namespace server

#endif  // SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SERVICE_H_

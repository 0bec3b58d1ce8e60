#ifndef SERVER_WORKQUEUE_SERVICE_WORKQUEUE_MANAGED_QUEUE_H_
#define SERVER_WORKQUEUE_SERVICE_WORKQUEUE_MANAGED_QUEUE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/shared_informer.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"
#include "informer/workqueue/rate_limiting_queue.h"
#include "informer/workqueue/workqueue_metrics.h"
#include "proto/informer/v1/workqueue.pb.h"
#include "server/registry/informer_registry.h"
#include "server/workqueue_service/workqueue_spec.h"

namespace server {

class LeaseStream;
class WorkQueueService;

// ManagedQueue is one named queue of WorkQueueService (see its class comment
// for the model): the in-process rate-limiting queue, the informer handler
// that feeds it, the Lease streams attached to it with their credit and
// leases, and the dispatcher thread that grants keys to streams with credit.
//
// Thread-safety: every method may be called from any thread. Lock order:
// the queue's mutex, then a stream's (the queue calls LeaseStream::Queue*
// and EndByQueue holding its own; streams call the queue holding none).
// Ownership: shared by the service's registry of queues and by the streams
// attached to it; Shutdown (or the destructor) ends the streams, removes the
// informer handler and joins the dispatcher.
class ManagedQueue final : public informer::ResourceEventHandler {
 public:
  ManagedQueue(WorkQueueService* service, workqueue_internal::QueueSpec spec,
               InformerRef entry);

  ~ManagedQueue() override { Shutdown(absl::CancelledError("shutting down")); }

  // Registers the informer handler (which adds the keys of the cache as it
  // is now) and starts the dispatcher.
  absl::Status Start();

  // Ends every stream with `status`, removes the handler, stops the queue
  // and the dispatcher. Idempotent.
  void Shutdown(const absl::Status& status);

  const std::string& name() const { return spec_.request.name(); }
  const workqueue_internal::QueueSpec& spec() const { return spec_; }

  // --- Informer handler: inline on the informer's thread, never blocks ---
  void OnAdd(const informer::ObjectPtr& obj, bool) override {
    if (Wants(informer::v1::QUEUE_EVENT_ADDED) && Matches(*obj))
      queue_->Add(obj->Key());
  }
  void OnUpdate(const informer::ObjectPtr& old_obj,
                const informer::ObjectPtr& obj) override;
  void OnDelete(const informer::ObjectPtr& obj, bool) override {
    if (Wants(informer::v1::QUEUE_EVENT_DELETED) && Matches(*obj)) {
      queue_->Add(obj->Key());
    }
  }

  // --- Streams ---
  absl::Status Attach(LeaseStream* stream);

  // Returns every lease of `stream` to the queue. Idempotent.
  void Detach(LeaseStream* stream);

  absl::Status AddCredit(LeaseStream* stream, int32_t credit);

  // Applies one result; a FailedPrecondition is reported to the worker.
  absl::Status Complete(LeaseStream* stream, uint64_t id,
                        informer::v1::LeaseOutcome outcome);

  void NoteActivity() {
    absl::MutexLock lock(&mu_);
    last_activity_ = clock_->Now();
  }

  informer::RateLimitingQueue& queue() { return *queue_; }

  // --- Janitor ---
  // Returns timed-out leases; runs a due resync. Returns the next time
  // something is due (InfiniteFuture: nothing).
  absl::Time Tick(absl::Time now, absl::Duration idle_timeout);

  // Marks the queue stopped if it has been idle for `idle_timeout` (so no
  // stream can attach any more) and returns true.
  bool StopIfIdle(absl::Time now, absl::Duration idle_timeout);

  void FillStats(informer::v1::QueueStats* out);

 private:
  struct StreamState {
    int64_t credit = 0;
    absl::flat_hash_set<uint64_t> leases;
  };
  struct LeaseInfo {
    std::string key;
    LeaseStream* stream;
    absl::Time deadline;
  };

  bool Wants(informer::v1::QueueEvent e) const {
    return spec_.event_mask & (1u << e);
  }
  bool Matches(const informer::Object& obj) const {
    if (!spec_.request.namespace_().empty() &&
        obj.namespace_() != spec_.request.namespace_()) {
      return false;
    }
    return spec_.selector.Matches(obj);
  }

  bool HasCreditOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || total_credit_ > 0;
  }

  // The dispatcher: waits for credit, takes a key (blocking Get), grants it.
  void DispatchLoop();

  void GrantLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkQueueService* const service_;
  const workqueue_internal::QueueSpec spec_;
  // Keeps a lazy informer running as long as the queue exists.
  const InformerRef entry_;
  informer::Clock* const clock_;
  const std::shared_ptr<informer::InMemoryWorkQueueMetrics> metrics_;
  std::unique_ptr<informer::RateLimitingQueue> queue_;
  std::thread dispatcher_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  informer::HandlerRegistration* registration_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<LeaseStream*, StreamState> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<LeaseStream*> order_ ABSL_GUARDED_BY(mu_);
  size_t next_stream_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_credit_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, LeaseInfo> leases_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> deadlines_ ABSL_GUARDED_BY(mu_);
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_);
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t returned_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace server

#endif  // SERVER_WORKQUEUE_SERVICE_WORKQUEUE_MANAGED_QUEUE_H_

#ifndef CLIENT_SDK_CPP_REMOTE_INFORMER_H_
#define CLIENT_SDK_CPP_REMOTE_INFORMER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/grpc_status.h"
#include "informer/util/clock.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace client_sdk {

// Why a Watch stream of a RemoteInformer failed (see StreamErrorHandler).
struct StreamError {
  // The gRPC status the stream ended with, as an absl::Status of the same
  // code number and message: e.g. NOT_FOUND for an unknown resource,
  // UNAVAILABLE while the sidecar is away, RESOURCE_EXHAUSTED for a reader
  // too slow for the sidecar's queue. OK when the sidecar ended the stream
  // without an error (the informer reconnects all the same).
  absl::Status status;
  // Consecutive failed streams, this one included (1 for the first failure
  // after a working stream).
  int64_t failures = 0;
  // How long until the informer tries again.
  absl::Duration retry_in;
};

// Told when a RemoteInformer's stream fails and when it works again. Called
// on the informer's reader thread, in order with the event handlers; must
// not block for long. RemoteInformer::Stop may not be called from it (it
// joins that thread); to give up on a permanent error, signal another
// thread to call Stop.
class StreamErrorHandler {
 public:
  virtual ~StreamErrorHandler() = default;
  // Every failed stream, before the back-off wait.
  virtual void OnError(const StreamError& error) = 0;
  // Once, when a stream delivers data after `failures` failed ones.
  virtual void OnRecovered(int64_t failures) { (void)failures; }
};

// RemoteInformer is an informer whose source is the sidecar's Informer.Watch
// stream: it keeps a local mirror of one resource's objects (optionally
// filtered by namespace, label selector and a sidecar index value) in the
// core's informer::Indexer, with local indexes, and notifies registered
// informer::ResourceEventHandlers of every change.
//
// Story handlers see: OnAdd(obj, is_initial) for each object of the first
// initial state and for objects that appear later, OnUpdate(old, new) for
// changes (and for SYNC events of a resync, with old == new content),
// OnDelete(obj, final_state_unknown) for deletes (final_state_unknown is the
// sidecar's `tombstone`, or true for objects dropped by a reconciliation).
// A key is never added twice without a delete in between.
//
// Reconnects: when the stream ends (sidecar restart, network failure,
// RESOURCE_EXHAUSTED), the informer logs it (WARNING when an outage starts
// or its cause changes, repeats at INFO), tells
// Options::error_handler (OnError) and reconnects after an exponential
// back-off (on the injected clock), resuming from the last resume token it
// applied. It relies on the sidecar's token contract: every event's token,
// the initial state's included, resumes right after that event, so a stream
// cut in the middle of an initial state resumes with the rest of it. It
// never gives up by itself.
// If the sidecar cannot honour the token it sends RESET and a fresh initial
// state; the informer then reconciles: objects whose resourceVersion changed
// are reported as updates, new ones as adds, and at INITIAL_STATE_DONE the
// mirror's objects the fresh state did not contain are deleted (reported with
// final_state_unknown = true). Unchanged objects are not reported again.
//
// Threading: one reader thread per informer (started by Start) runs the
// blocking Watch stream, applies events to the mirror and calls the handlers
// in stream order; handlers run on that thread and must not block for long.
// Get/List/ByIndex/HasSynced/WaitForSync may be called from any thread.
// Handlers and indexers must be added before Start. Handlers are not owned
// and must outlive the informer (or its Stop).
class RemoteInformer {
 public:
  struct Options {
    // The resource ("pods", "deployments.apps", ...). Required.
    std::string resource;
    // Filters, passed to WatchRequest as is (empty = none).
    std::string namespace_;
    std::string label_selector;
    std::string index_name;
    std::string index_value;
    // Local indexes of the mirror (e.g. FieldIndexName("spec.nodeName") ->
    // FieldIndexFunc("spec.nodeName")).
    informer::Indexers indexers;
    // Back-off between reconnects: doubles from `initial_backoff` up to
    // `max_backoff`; reset once a stream delivered an event.
    absl::Duration initial_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(30);
    // Not owned; must outlive the informer.
    informer::Clock* clock = informer::RealClock();
    // Told about failed streams and recoveries (not owned, may be null;
    // must outlive the informer or its Stop).
    StreamErrorHandler* error_handler = nullptr;
  };

  RemoteInformer(std::shared_ptr<grpc::ChannelInterface> channel,
                 Options options);
  // Stops (see Stop).
  ~RemoteInformer();
  RemoteInformer(const RemoteInformer&) = delete;
  RemoteInformer& operator=(const RemoteInformer&) = delete;

  // Registers a handler (not owned). Only before Start.
  void AddEventHandler(informer::ResourceEventHandler* handler);

  // Starts the reader thread. InvalidArgument for an empty resource;
  // FailedPrecondition if already started.
  absl::Status Start();
  // Cancels the stream and joins the reader thread; no handler runs after
  // it returns. Idempotent.
  void Stop();

  // True once the first initial state was applied completely; stays true
  // across reconnects.
  bool HasSynced() const;
  // Waits (on the injected clock) until HasSynced or `timeout`.
  bool WaitForSync(absl::Duration timeout);

  // The mirror. Get returns null when absent.
  informer::ObjectPtr Get(absl::string_view ns, absl::string_view name) const;
  std::vector<informer::ObjectPtr> List() const;
  // NotFound for an index not in Options::indexers.
  absl::StatusOr<std::vector<informer::ObjectPtr>> ByIndex(
      absl::string_view index_name, absl::string_view value) const;

  // Observability for tests and logs.
  std::string resume_token() const;
  // Streams opened so far (1 after the first connect).
  int64_t connects() const;
  // RESET events received.
  int64_t resets() const;
  // Initial states applied completely: 1 after the first sync, one more per
  // reconciliation (after a RESET or a reconnect without token).
  int64_t sync_generation() const;
  // Waits (on the injected clock) until sync_generation() >= `generation`.
  bool WaitForSyncGeneration(int64_t generation, absl::Duration timeout);
  // Status of the last stream that ended (OK before any ended).
  absl::Status last_stream_status() const;
  // Consecutive failed streams; 0 while the stream works.
  int64_t failures() const;

 private:
  void Run();
  // Opens one Watch stream and applies its events until it ends; returns
  // how it ended, or nullopt when Stop was called.
  std::optional<grpc::Status> RunStream(int64_t* failures);
  void ReportFailure(const grpc::Status& status, int64_t failures,
                     absl::Duration retry_in);
  // Applies one event to the mirror and notifies the handlers. Reader
  // thread only.
  void Apply(const informer::v1::Event& event);
  void NotifyAdd(const informer::ObjectPtr& obj, bool initial);
  void NotifyUpdate(const informer::ObjectPtr& old_obj,
                    const informer::ObjectPtr& new_obj);
  void NotifyDelete(const informer::ObjectPtr& obj, bool unknown);

  const Options options_;
  std::unique_ptr<informer::v1::Informer::Stub> stub_;
  informer::Indexer mirror_;

  // Reader-thread state (no lock: only the reader thread touches it).
  // True from a RESET (or a connect without token) until the following
  // INITIAL_STATE_DONE: initial ADDEDs are reconciled against the mirror.
  bool reconciling_ = false;
  absl::flat_hash_set<std::string> reconcile_seen_;
  // The failure last reported, to log repeats at INFO.
  absl::Status last_reported_;
  // Copy of handlers_ taken when the reader thread starts (handlers are
  // fixed by then), so handlers run without holding mu_.
  std::vector<informer::ResourceEventHandler*> active_handlers_;

  mutable absl::Mutex mu_;
  std::vector<informer::ResourceEventHandler*> handlers_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  std::string token_ ABSL_GUARDED_BY(mu_);
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t resets_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sync_generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  // The open stream's context, so Stop can cancel it.
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_REMOTE_INFORMER_H_

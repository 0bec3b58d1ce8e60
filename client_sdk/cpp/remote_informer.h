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
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/grpc_status.h"
#include "client_sdk/cpp/stream_error.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace client_sdk {

// The codes that end a RemoteInformer's Watch for good (StreamError::final).
bool IsFinalWatchCode(absl::StatusCode code);

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
// A key is never added twice without a delete in between; an event that
// repeats what the mirror holds (an ADDED or MODIFIED of the same JSON, a
// DELETED of a key not held: resuming inside a coalesced batch repeats
// some) calls no handler.
//
// Reconnects: when the stream ends (sidecar restart, network failure,
// RESOURCE_EXHAUSTED), the informer logs it (WARNING when an outage starts
// or its cause changes, repeats at INFO), tells
// Options::error_handler (OnError) and reconnects after an exponential
// back-off (on the injected clock), resuming from the last resume token it
// applied. It relies on the sidecar's token contract: every event's token,
// the initial state's included, resumes right after that event, so a stream
// cut in the middle of an initial state resumes with the rest of it.
// NOT_FOUND, PERMISSION_DENIED and INVALID_ARGUMENT are final: reported once
// (StreamError::final, logged at ERROR), no stream follows, and WaitForSync
// returns false at once if the informer had not synced.
// If the sidecar cannot honour the token it sends RESET and a fresh initial
// state, which the informer collects (the mirror keeps its content) and
// reconciles at INITIAL_STATE_DONE: the mirror's objects the fresh state
// does not contain are deleted first (final_state_unknown = true), then
// changed objects are reported as updates and new ones as adds (is_initial
// false), in key order. Unchanged objects are not reported again. The
// Python and Node.js SDKs tell the same story (client_sdk/conformance).
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
  // True while the sidecar serves stale data: it started from its disk
  // cache (--serve_stale_on_start) and has not reached the API server yet.
  // Set by a stale INITIAL_STATE_DONE, cleared by FRESH (or a fresh
  // INITIAL_STATE_DONE). The mirror is usable meanwhile; the changes since
  // the cache arrive as ordinary events.
  bool IsStale() const;

  // The mirror. Get returns null when absent.
  informer::ObjectPtr Get(absl::string_view ns, absl::string_view name) const;
  std::vector<informer::ObjectPtr> List() const;
  // Every mirrored key ("namespace/name", or "name" when cluster-scoped),
  // sorted.
  std::vector<std::string> Keys() const;
  // NotFound for an index not in Options::indexers.
  absl::StatusOr<std::vector<informer::ObjectPtr>> ByIndex(
      absl::string_view index_name, absl::string_view value) const;
  // The values index `index_name` holds mirrored objects under, sorted (a
  // value whose last object left is gone). NotFound for an index not in
  // Options::indexers.
  absl::StatusOr<std::vector<std::string>> IndexValues(
      absl::string_view index_name) const;

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
  // True once a final error ended the stream for good.
  bool gave_up() const;

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
  // Applies an ADDED, MODIFIED, SYNC or DELETED event. Reader thread only.
  void ApplyObject(const informer::v1::Event& event,
                   const informer::ObjectPtr& obj);
  // Replaces the mirror with relist_, telling handlers the differences.
  void Reconcile();

  const Options options_;
  std::unique_ptr<informer::v1::Informer::Stub> stub_;
  informer::Indexer mirror_;

  // Reader-thread state (no lock: only the reader thread touches it).
  // True from a RESET (or an initial ADDED over a synced mirror) until the
  // following INITIAL_STATE_DONE: the fresh initial state is collected in
  // relist_ (key -> object) and reconciled with the mirror at its end.
  bool relisting_ = false;
  absl::flat_hash_map<std::string, informer::ObjectPtr> relist_;
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
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  std::string token_ ABSL_GUARDED_BY(mu_);
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t resets_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sync_generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  bool gave_up_ ABSL_GUARDED_BY(mu_) = false;
  // The open stream's context, so Stop can cancel it.
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_REMOTE_INFORMER_H_

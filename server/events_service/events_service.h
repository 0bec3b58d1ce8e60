#ifndef SERVER_EVENTS_SERVICE_EVENTS_SERVICE_H_
#define SERVER_EVENTS_SERVICE_EVENTS_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "informer/record/event_recorder.h"
#include "proto/informer/v1/events.grpc.pb.h"
#include "server/security/authz.h"

namespace server {

struct EventsServiceOptions {
  // source.component and reportingComponent of every event (the sidecar's
  // --event_component).
  std::string component = "informer-sidecar";
  // source.host and reportingInstance ($POD_NAME, else the hostname).
  std::string host;
  // Events queued per Watch stream; past it the oldest queued ones are lost
  // (and counted on the next message).
  size_t watch_queue_length = 256;
  // Who may record (see server/security/authz.h); null: everybody. Record and
  // RecordStream need a token with recordEvents whose namespaces include
  // the object's namespace (events about cluster-scoped objects: all
  // namespaces); Watch shows every event, so it needs recordEvents for all
  // namespaces. Not owned; must outlive the service.
  const Authorizer* authorizer = nullptr;
};

class EventsWatchHub;

// EventsService serves informer.v1.Events (proto/informer/v1/events.proto)
// over an EventBroadcaster that the caller has started recording to a sink
// (StartRecordingToSink: correlation, spam filter, retries).
//
// Record / RecordStream validate each request (INVALID_ARGUMENT naming the
// field), then hand the event to one EventRecorder (source = `component`,
// `host`). Handing over never blocks the gRPC thread: the broadcaster's
// incoming queue is bounded (1000 by default) and when it is full, because
// the sink cannot keep up with the API server, the event is refused with
// RESOURCE_EXHAUSTED (the caller knows it was not recorded and may retry
// later) instead of the call waiting or the event vanishing silently.
// After Shutdown() recording answers UNAVAILABLE.
//
// Watch streams every event the broadcaster distributes from the moment the
// stream is open; the stream's initial metadata is sent once it is (a client
// that waits for it knows later events will be streamed). The service registers
// ONE broadcaster watcher (one thread) that fans out to every stream; each
// stream is a callback reactor with one write in flight and a queue of
// `watch_queue_length` events. When a stream's queue is full its oldest queued
// event is dropped and counted (`lost_before` on the next message), so a slow
// or stalled reader loses events but never delays the sink or other streams.
//
// Thread-safety: all methods are thread-safe. Ownership: `broadcaster` must
// outlive the service; the gRPC server serving it must be shut down (every
// call done) before the service is destroyed.
class EventsService final : public informer::v1::Events::CallbackService {
 public:
  EventsService(informer::EventBroadcaster* broadcaster,
                EventsServiceOptions options);
  ~EventsService() override;
  EventsService(const EventsService&) = delete;
  EventsService& operator=(const EventsService&) = delete;

  grpc::ServerUnaryReactor* Record(
      grpc::CallbackServerContext* context,
      const informer::v1::RecordEventRequest* request,
      informer::v1::RecordEventResponse* response) override;
  grpc::ServerReadReactor<informer::v1::RecordEventRequest>* RecordStream(
      grpc::CallbackServerContext* context,
      informer::v1::RecordEventStreamResponse* response) override;
  grpc::ServerWriteReactor<informer::v1::WatchEventsResponse>* Watch(
      grpc::CallbackServerContext* context,
      const informer::v1::WatchEventsRequest* request) override;

  // Refuses further records (UNAVAILABLE) and ends every Watch stream with
  // UNAVAILABLE, so that a server shutdown need not wait for them.
  // Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Validates and records one event: the logic of Record, without the
  // caller's authorization (for in-process callers).
  absl::Status RecordOne(const informer::v1::RecordEventRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Validation, then the caller's authorization, then RecordOne.
  grpc::Status RecordCall(const grpc::ServerContextBase& context,
                          const informer::v1::RecordEventRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- For tests ---
  // Blocks until the Watch fan-out has handled `n` events since the service
  // started (it runs on its own broadcaster watcher thread, so an event the
  // sink already wrote may not have reached it yet).
  void WaitForEventsFannedOut(uint64_t n) const;
  // Blocks until exactly `n` Watch streams are open.
  void WaitForWatchStreams(int n) const;
  // Pauses (or resumes) writes of the Watch stream opened `stream_number`-th
  // (0-based, in opening order): it keeps queueing but sends nothing.
  void SetWatchStreamPaused(int stream_number, bool paused);

 private:
  informer::EventBroadcaster* const broadcaster_;
  const EventsServiceOptions options_;
  const std::unique_ptr<informer::EventRecorder> recorder_;
  const std::shared_ptr<EventsWatchHub> hub_;
  std::shared_ptr<informer::EventWatch> watch_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// Checks a RecordEventRequest; INVALID_ARGUMENT whose message starts with
// the offending field ("object.kind: required").
absl::Status ValidateRecordEventRequest(
    const informer::v1::RecordEventRequest& request);

}  // namespace server

#endif  // SERVER_EVENTS_SERVICE_EVENTS_SERVICE_H_

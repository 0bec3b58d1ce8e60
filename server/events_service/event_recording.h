#ifndef SERVER_EVENTS_SERVICE_EVENT_RECORDING_H_
#define SERVER_EVENTS_SERVICE_EVENT_RECORDING_H_

// The sidecar's event recording pipeline, as main.cc wires it:
//
//   EventsService (gRPC) -> EventRecorder -> EventBroadcaster
//       -> SinkRecorder (correlator, spam filter, retries) -> ApiEventSink
//       -> the API server (POST / PATCH core/v1 events)
//       -> glog (VLOG(2)), and the service's Watch streams
//
// Who the events are from: `component` (source.component and
// reportingComponent) defaults to DefaultEventComponent(), `host`
// (source.host and reportingInstance) to DefaultEventHost().

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "informer/client/http_transport.h"
#include "informer/record/event_recorder.h"
#include "informer/record/event_sink.h"
#include "informer/util/clock.h"
#include "server/events_service/events_service.h"

namespace server {

// Reads an environment variable (tests substitute their own).
using GetEnvFn = std::function<absl::optional<std::string>(absl::string_view)>;
GetEnvFn ProcessEnv();

// The app's name, for events' source component:
//   1. $APP_NAME when set and non-empty (set it in the pod spec, e.g. from
//      the app.kubernetes.io/name label through the downward API);
//   2. else the workload's name derived from $POD_NAME (downward API
//      metadata.name): a Deployment's pod "web-7d4b9c8f5-xz2lq" -> "web"
//      (pod-template hash and random suffix, both from Kubernetes' name
//      alphabet), a DaemonSet's or Job's "agent-x7k2p" -> "agent", a
//      StatefulSet's "db-0" -> "db"; a name with no such suffix as is;
//   3. else "informer-sidecar".
std::string DefaultEventComponent(const GetEnvFn& getenv = ProcessEnv());

// The instance, for events' source host: $POD_NAME when set (the pod, as
// kubectl describe shows "From: component, host"), else the hostname
// (which is also the pod name in a pod), else "unknown".
std::string DefaultEventHost(const GetEnvFn& getenv = ProcessEnv());

struct EventRecordingOptions {
  // Empty: DefaultEventComponent() / DefaultEventHost().
  std::string component;
  std::string host;
  informer::SinkRetryOptions retry;
  // Events the broadcaster queues before the sink (incoming), and again in
  // the sink's own queue. Distribution waits for the sink's queue rather
  // than dropping, so when the API server cannot keep up the incoming queue
  // fills and Record answers RESOURCE_EXHAUSTED: an event is either refused
  // or eventually tried, never silently dropped.
  size_t queue_length = 1000;
  // Events queued per Watch stream.
  size_t watch_queue_length = 256;
  // Who may record and watch (EventsServiceOptions::authorizer); null:
  // everybody. Must outlive the EventRecording.
  const Authorizer* authorizer = nullptr;
  informer::Clock* clock = informer::RealClock();
};

// Owns the sink, the broadcaster (recording to the sink and to glog) and
// the gRPC service. Thread-safe. `transport` must outlive it.
class EventRecording {
 public:
  EventRecording(informer::client::HttpTransport* transport,
                 EventRecordingOptions options);
  // Flushes without a time limit if Flush() was not called.
  ~EventRecording();
  EventRecording(const EventRecording&) = delete;
  EventRecording& operator=(const EventRecording&) = delete;

  // Add to SidecarServer::Options::services.
  EventsService* service() { return service_.get(); }
  const std::string& component() const { return component_; }
  const std::string& host() const { return host_; }

  // Refuses further events and ends Watch streams (call when the sidecar
  // starts shutting down, before the gRPC server's grace period).
  void StopAccepting();

  // StopAccepting(), then writes the queued events to the API server
  // (pending retry pauses are cut short: each remaining write is tried
  // once) and stops the broadcaster. True when that finished within
  // `timeout`; false otherwise: the flush goes on in the background (a
  // request to an unresponsive API server lasts up to the transport's
  // request timeout) and the destructor would wait for it, so a caller
  // that must exit promptly exits without destroying this object.
  bool Flush(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string component_;
  const std::string host_;
  informer::ApiEventSink sink_;
  // Ours rather than StartRecordingToSink's, so that Flush can cut its retry
  // pauses BEFORE the broadcaster delivers what is queued (in wait mode the
  // delivery waits for the sink, whose retries could otherwise take
  // minutes per event).
  informer::SinkRecorder sink_recorder_;
  informer::EventBroadcaster broadcaster_;
  std::unique_ptr<EventsService> service_;
  absl::Mutex mu_;
  std::thread flusher_ ABSL_GUARDED_BY(mu_);
  absl::Notification flushed_;
};

}  // namespace server

#endif  // SERVER_EVENTS_SERVICE_EVENT_RECORDING_H_

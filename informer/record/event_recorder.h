#ifndef INFORMER_RECORD_EVENT_RECORDER_H_
#define INFORMER_RECORD_EVENT_RECORDER_H_

// Recording Kubernetes Events, as client-go's tools/record:
//
//   EventBroadcaster broadcaster(options);
//   broadcaster.StartStructuredLogging(2);
//   broadcaster.StartRecordingToSink(&sink);
//   std::unique_ptr<EventRecorder> recorder =
//       broadcaster.NewRecorder("my-controller", "node-1");
//   recorder->Eventf(pod_ref, kEventTypeWarning, "BackOff", "restarting %s",
//                    container);
//
// EventRecorder builds a core/v1 Event and hands it to the broadcaster
// without ever blocking the caller: when the incoming queue is full the
// event is dropped (and an error returned), as client-go does.
//
// EventBroadcaster fans the events out (a Broadcaster, by default 1000
// queued incoming and 1000 per watcher, dropping for a full watcher) to
// watchers, each with its own thread: a handler, a log function, glog, or a
// sink reached through an EventCorrelator with retries (see event_sink.h).
//
// Thread-safety: all methods of both classes are thread-safe.
// Ownership: the clock and any sink must outlive the broadcaster; recorders
// and EventWatch handles must not be used after the broadcaster is
// destroyed.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/record/broadcaster.h"
#include "informer/record/event_correlator.h"
#include "informer/record/event_sink.h"
#include "informer/util/clock.h"

namespace informer {

using EventPtr = std::shared_ptr<const Event>;
using EventBroadcasterCore = Broadcaster<EventPtr>;

struct EventBroadcasterOptions {
  size_t incoming_queue_length = 1000;
  size_t watcher_queue_length = 1000;
  FullQueueBehavior full_queue_behavior = FullQueueBehavior::kDropIfFull;
  CorrelatorOptions correlator;  // for StartRecordingToSink
  SinkRetryOptions retry;        // for StartRecordingToSink
  Clock* clock = RealClock();
};

// Annotations attached to an event (AnnotatedEventf).
using EventAnnotations = std::vector<std::pair<std::string, std::string>>;

// Records events from one source (component, host). Thread-safe.
class EventRecorder {
 public:
  // InvalidArgument (nothing sent) when `type` is not Normal or Warning or
  // `reason` is empty; Unavailable when the event was dropped because the
  // broadcaster's queue is full or it has shut down.
  absl::Status Event(const ObjectReference& object, absl::string_view type,
                     absl::string_view reason, absl::string_view message);

  template <typename... Args>
  absl::Status Eventf(const ObjectReference& object, absl::string_view type,
                      absl::string_view reason,
                      const absl::FormatSpec<Args...>& format,
                      const Args&... args) {
    return Generate(object, {}, type, reason, absl::StrFormat(format, args...));
  }

  template <typename... Args>
  absl::Status AnnotatedEventf(const ObjectReference& object,
                               EventAnnotations annotations,
                               absl::string_view type, absl::string_view reason,
                               const absl::FormatSpec<Args...>& format,
                               const Args&... args) {
    return Generate(object, std::move(annotations), type, reason,
                    absl::StrFormat(format, args...));
  }

 private:
  friend class EventBroadcaster;
  EventRecorder(EventBroadcasterCore* broadcaster, Clock* clock,
                std::string component, std::string host)
      : broadcaster_(broadcaster),
        clock_(clock),
        component_(std::move(component)),
        host_(std::move(host)) {}

  absl::Status Generate(const ObjectReference& object,
                        EventAnnotations annotations, absl::string_view type,
                        absl::string_view reason, std::string message);

  EventBroadcasterCore* const broadcaster_;
  Clock* const clock_;
  const std::string component_;
  const std::string host_;
};

// One started watcher (handler, logging or sink). Stop() ends delivery to
// it (events already queued for it are still handled); its thread is joined
// by EventBroadcaster::Shutdown().
class EventWatch {
 public:
  void Stop();

 private:
  friend class EventBroadcaster;
  std::unique_ptr<EventBroadcasterCore::Watcher> watcher_;
  std::unique_ptr<SinkRecorder> sink_recorder_;  // StartRecordingToSink only
  std::thread thread_;
};

class EventBroadcaster {
 public:
  explicit EventBroadcaster(EventBroadcasterOptions options = {});
  ~EventBroadcaster();  // Shutdown()
  EventBroadcaster(const EventBroadcaster&) = delete;
  EventBroadcaster& operator=(const EventBroadcaster&) = delete;

  // Calls `handler` on a dedicated thread for every event recorded after
  // this returns.
  std::shared_ptr<EventWatch> StartEventWatcher(
      std::function<void(const Event&)> handler);
  // Writes events to `sink` through a new EventCorrelator, with retries.
  std::shared_ptr<EventWatch> StartRecordingToSink(EventSink* sink);
  // Calls `logf` with one line per event:
  //   Event(Pod demo/web-0): type: 'Warning' reason: 'BackOff' <message>
  std::shared_ptr<EventWatch> StartLogging(
      std::function<void(absl::string_view line)> logf);
  // Logs every event with VLOG(verbosity).
  std::shared_ptr<EventWatch> StartStructuredLogging(int verbosity);

  std::unique_ptr<EventRecorder> NewRecorder(std::string component,
                                             std::string host);

  // Delivers what is queued, ends every watcher (pending sink retries are
  // abandoned) and joins their threads. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::shared_ptr<EventWatch> Start(std::function<void(const Event&)> handler,
                                    std::unique_ptr<SinkRecorder> sink_recorder)
      ABSL_LOCKS_EXCLUDED(mu_);

  const EventBroadcasterOptions options_;
  EventBroadcasterCore broadcaster_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<EventWatch>> watches_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace informer

#endif  // INFORMER_RECORD_EVENT_RECORDER_H_

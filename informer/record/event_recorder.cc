#include "informer/record/event_recorder.h"

#include <glog/logging.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace informer {
namespace {

BroadcasterOptions CoreOptions(const EventBroadcasterOptions& o) {
  BroadcasterOptions b;
  b.incoming_queue_length = o.incoming_queue_length;
  b.watcher_queue_length = o.watcher_queue_length;
  b.full_queue_behavior = o.full_queue_behavior;
  return b;
}

std::string ObjectName(const ObjectReference& o) {
  return o.namespace_.empty() ? o.name
                              : absl::StrCat(o.namespace_, "/", o.name);
}

}  // namespace

absl::Status EventRecorder::Event(const ObjectReference& object,
                                  absl::string_view type,
                                  absl::string_view reason,
                                  absl::string_view message) {
  return Generate(object, {}, type, reason, std::string(message));
}

absl::Status EventRecorder::Generate(const ObjectReference& object,
                                     EventAnnotations annotations,
                                     absl::string_view type,
                                     absl::string_view reason,
                                     std::string message) {
  if (type != kEventTypeNormal && type != kEventTypeWarning) {
    return absl::InvalidArgumentError(absl::StrCat(
        "event type must be Normal or Warning, got \"", type, "\""));
  }
  if (reason.empty()) {
    return absl::InvalidArgumentError("event reason must not be empty");
  }
  const absl::Time now = clock_->Now();
  auto event = std::make_shared<::informer::Event>();
  event->name = UniqueEventName(object.name, now);
  // Events live in their object's namespace; cluster-scoped objects' events
  // go to "default", as in client-go.
  event->namespace_ = object.namespace_.empty() ? "default" : object.namespace_;
  event->annotations = std::move(annotations);
  event->involved_object = object;
  event->reason = std::string(reason);
  event->message = std::move(message);
  event->type = std::string(type);
  event->source_component = component_;
  event->source_host = host_;
  event->reporting_component = component_;
  event->reporting_instance = host_;
  event->first_timestamp = now;
  event->last_timestamp = now;
  event->count = 1;
  if (!broadcaster_->ActionOrDrop(std::move(event))) {
    LOG(ERROR) << "unable to record event about " << ObjectName(object)
               << ": too many queued events or shutting down; dropped";
    return absl::UnavailableError(
        "event dropped: queue full or broadcaster shut down");
  }
  return absl::OkStatus();
}

void EventWatch::Stop() {
  watcher_->Stop();
  if (sink_recorder_ != nullptr) sink_recorder_->Cancel();
}

EventBroadcaster::EventBroadcaster(EventBroadcasterOptions options)
    : options_(options), broadcaster_(CoreOptions(options)) {}

EventBroadcaster::~EventBroadcaster() { Shutdown(); }

std::shared_ptr<EventWatch> EventBroadcaster::Start(
    std::function<void(const ::informer::Event&)> handler,
    std::unique_ptr<SinkRecorder> sink_recorder) {
  auto watch = std::make_shared<EventWatch>();
  watch->watcher_ = broadcaster_.Watch();
  watch->sink_recorder_ = std::move(sink_recorder);
  EventBroadcasterCore::Watcher* watcher = watch->watcher_.get();
  watch->thread_ = std::thread([watcher, handler = std::move(handler)] {
    while (absl::optional<EventPtr> event = watcher->Next()) {
      handler(**event);
    }
  });
  {
    absl::MutexLock lock(&mu_);
    if (!shut_down_) {
      watches_.push_back(watch);
      return watch;
    }
  }
  // Started during or after Shutdown(): the watcher is already closed, so
  // the thread ends at once; nobody else will join it.
  watch->thread_.join();
  return watch;
}

std::shared_ptr<EventWatch> EventBroadcaster::StartEventWatcher(
    std::function<void(const ::informer::Event&)> handler) {
  return Start(std::move(handler), nullptr);
}

std::shared_ptr<EventWatch> EventBroadcaster::StartRecordingToSink(
    EventSink* sink) {
  auto recorder = std::make_unique<SinkRecorder>(
      sink, options_.clock, options_.correlator, options_.retry);
  SinkRecorder* r = recorder.get();
  return Start([r](const ::informer::Event& e) { r->Record(e); },
               std::move(recorder));
}

std::shared_ptr<EventWatch> EventBroadcaster::StartLogging(
    std::function<void(absl::string_view line)> logf) {
  return Start(
      [logf = std::move(logf)](const ::informer::Event& e) {
        logf(absl::StrCat("Event(", e.involved_object.kind, " ",
                          ObjectName(e.involved_object), "): type: '", e.type,
                          "' reason: '", e.reason, "' ", e.message));
      },
      nullptr);
}

std::shared_ptr<EventWatch> EventBroadcaster::StartStructuredLogging(
    int verbosity) {
  return Start(
      [verbosity](const ::informer::Event& e) {
        VLOG(verbosity) << "Event occurred object=\""
                        << ObjectName(e.involved_object) << "\" kind=\""
                        << e.involved_object.kind << "\" apiVersion=\""
                        << e.involved_object.api_version << "\" type=\""
                        << e.type << "\" reason=\"" << e.reason
                        << "\" message=\"" << e.message << "\"";
      },
      nullptr);
}

std::unique_ptr<EventRecorder> EventBroadcaster::NewRecorder(
    std::string component, std::string host) {
  return std::unique_ptr<EventRecorder>(new EventRecorder(
      &broadcaster_, options_.clock, std::move(component), std::move(host)));
}

void EventBroadcaster::Shutdown() {
  // Sink retries are cut short first (each event still queued then gets one
  // try, without pauses): in wait mode, delivering the queue to a watcher
  // stuck in a retry pause would otherwise hold Shutdown up for minutes.
  {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<EventWatch>& w : watches_) {
      if (w->sink_recorder_ != nullptr) w->sink_recorder_->Cancel();
    }
  }
  // Queued events reach the watchers; a watch started meanwhile is
  // cancelled below.
  broadcaster_.Shutdown();
  std::vector<std::shared_ptr<EventWatch>> watches;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    watches.swap(watches_);
  }
  for (const std::shared_ptr<EventWatch>& w : watches) {
    if (w->sink_recorder_ != nullptr) w->sink_recorder_->Cancel();
  }
  for (const std::shared_ptr<EventWatch>& w : watches) {
    if (w->thread_.joinable()) w->thread_.join();
  }
}

}  // namespace informer

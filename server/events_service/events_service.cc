#include "server/events_service/events_service.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "informer/record/event_correlator.h"
#include "server/rpc/grpc_conversions.h"

namespace server {

namespace v1 = ::informer::v1;

namespace {

// Kubernetes' limit on an Event's reason in events.k8s.io/v1; core/v1 does
// not check it, but a longer reason is certainly a mistake.
constexpr size_t kMaxReasonBytes = 128;

v1::ObjectReference ToProto(const informer::ObjectReference& o) {
  v1::ObjectReference out;
  out.set_kind(o.kind);
  out.set_namespace_(o.namespace_);
  out.set_name(o.name);
  out.set_uid(o.uid);
  out.set_api_version(o.api_version);
  out.set_field_path(o.field_path);
  return out;
}

std::shared_ptr<const v1::RecordedEvent> ToProto(const informer::Event& e) {
  auto out = std::make_shared<v1::RecordedEvent>();
  out->set_namespace_(e.namespace_);
  out->set_name(e.name);
  *out->mutable_object() = ToProto(e.involved_object);
  out->set_type(e.type);
  out->set_reason(e.reason);
  out->set_message(e.message);
  out->set_source_component(e.source_component);
  out->set_source_host(e.source_host);
  const int64_t nanos = absl::ToUnixNanos(e.last_timestamp);
  out->mutable_time()->set_seconds(nanos / 1000000000);
  out->mutable_time()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

informer::ObjectReference FromProto(const v1::ObjectReference& o) {
  informer::ObjectReference out;
  out.kind = o.kind();
  out.namespace_ = o.namespace_();
  out.name = o.name();
  out.uid = o.uid();
  out.api_version = o.api_version();
  out.field_path = o.field_path();
  return out;
}

// Ends a Watch call at once.
class WatchErrorReactor final
    : public grpc::ServerWriteReactor<v1::WatchEventsResponse> {
 public:
  explicit WatchErrorReactor(grpc::Status status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

class EventsWatchReactor;

// The fan-out from the service's one broadcaster watcher to the open Watch
// streams. Shared (shared_ptr) by the service, the broadcaster watcher's
// handler (which may run until the broadcaster shuts down, after the
// service is gone) and the streams.
//
// Lock order: EventsWatchHub::mu_ -> EventsWatchReactor::mu_. The hub calls
// into streams with its lock held; a stream detaches itself in OnDone
// holding no lock of its own, so the hub never touches a deleted stream.
class EventsWatchHub {
 public:
  explicit EventsWatchHub(size_t queue_length) : queue_length_(queue_length) {}

  size_t queue_length() const { return queue_length_; }

  // Registers a stream; false once closed.
  bool Attach(EventsWatchReactor* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void Detach(EventsWatchReactor* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Hands `event` to every stream (the broadcaster watcher's thread).
  void Deliver(const informer::Event& event) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every stream with UNAVAILABLE and refuses new ones.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  void WaitForStreams(int n) const ABSL_LOCKS_EXCLUDED(mu_);
  void WaitForDelivered(uint64_t n) const ABSL_LOCKS_EXCLUDED(mu_);
  void SetPaused(int number, bool paused) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t queue_length_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Open streams and their opening number.
  absl::flat_hash_map<EventsWatchReactor*, int> streams_ ABSL_GUARDED_BY(mu_);
  int next_number_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<int> paused_ ABSL_GUARDED_BY(mu_);
};

// One Watch stream: one write in flight, a bounded queue that drops its
// oldest entry when full and reports the count on the next message.
class EventsWatchReactor final
    : public grpc::ServerWriteReactor<v1::WatchEventsResponse> {
 public:
  explicit EventsWatchReactor(std::shared_ptr<EventsWatchHub> hub)
      : hub_(std::move(hub)) {
    {
      // Initial metadata tells the client the stream is registered: events
      // recorded after it arrives are streamed. Sent before Attach, as no
      // other thread can reach the stream yet.
      absl::MutexLock lock(&mu_);
      StartSendInitialMetadata();
    }
    if (!hub_->Attach(this)) {
      absl::MutexLock lock(&mu_);
      EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "the sidecar is shutting down"));
    }
  }

  // Called by the hub with its lock held.
  void Push(const std::shared_ptr<const v1::RecordedEvent>& event) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    if (queue_.size() >= hub_->queue_length()) {
      // Keep the newest: drop the oldest and carry its loss (and any loss
      // it carried) to the entry that now comes first.
      const int64_t lost = queue_.front().lost_before + 1;
      queue_.pop_front();
      if (!queue_.empty()) {
        queue_.front().lost_before += lost;
      } else {
        carried_lost_ += lost;
      }
    }
    queue_.push_back(Item{event, carried_lost_});
    carried_lost_ = 0;
    MaybeWriteLocked();
  }

  void SetPaused(bool paused) {
    absl::MutexLock lock(&mu_);
    paused_ = paused;
    MaybeWriteLocked();
  }

  void End(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    EndLocked(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The client went away; OnCancel/OnDone follow.
      EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    }
    if (ended_) {
      // Ended while this write was in flight: finish now.
      FinishIfIdleLocked();
      return;
    }
    MaybeWriteLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    hub_->Detach(this);
    delete this;
  }

 private:
  struct Item {
    std::shared_ptr<const v1::RecordedEvent> event;
    int64_t lost_before = 0;
  };

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || writing_ || paused_ || queue_.empty()) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    response_.Clear();
    *response_.mutable_event() = *item.event;
    response_.set_lost_before(item.lost_before);
    writing_ = true;
    StartWrite(&response_);
  }

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_) return;
    ended_ = true;
    queue_.clear();
    end_status_ = std::move(status);
    FinishIfIdleLocked();
  }

  // Finish may not overlap a write in flight: OnWriteDone finishes then.
  void FinishIfIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    finished_ = true;
    Finish(end_status_);
  }

  const std::shared_ptr<EventsWatchHub> hub_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // Lost while the queue was empty (queue length 1 and a write pending).
  int64_t carried_lost_ ABSL_GUARDED_BY(mu_) = 0;
  v1::WatchEventsResponse response_ ABSL_GUARDED_BY(mu_);  // in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

bool EventsWatchHub::Attach(EventsWatchReactor* stream) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  const int number = next_number_++;
  streams_[stream] = number;
  // A paused number set before the stream opened applies at once. Called
  // from the stream's constructor: it is not yet handed to gRPC, so no
  // other thread can reach it.
  if (paused_.contains(number)) stream->SetPaused(true);
  return true;
}

void EventsWatchHub::Detach(EventsWatchReactor* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void EventsWatchHub::Deliver(const informer::Event& event) {
  // Converted once, shared by every stream's queue.
  std::shared_ptr<const v1::RecordedEvent> shared = ToProto(event);
  absl::MutexLock lock(&mu_);
  for (const auto& entry : streams_) entry.first->Push(shared);
  ++delivered_;
}

void EventsWatchHub::WaitForDelivered(uint64_t n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return delivered_ >= n;
  };
  mu_.Await(absl::Condition(&reached));
}

void EventsWatchHub::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (const auto& entry : streams_) {
    entry.first->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                  "the sidecar is shutting down"));
  }
}

void EventsWatchHub::WaitForStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(streams_.size()) == n;
  };
  mu_.Await(absl::Condition(&reached));
}

void EventsWatchHub::SetPaused(int number, bool paused) {
  absl::MutexLock lock(&mu_);
  if (paused) {
    paused_.insert(number);
  } else {
    paused_.erase(number);
  }
  for (const auto& entry : streams_) {
    if (entry.second == number) entry.first->SetPaused(paused);
  }
}

absl::Status ValidateRecordEventRequest(const v1::RecordEventRequest& request) {
  if (!request.has_object()) {
    return absl::InvalidArgumentError(
        "object: required (the object the event is about: kind, name, ...)");
  }
  if (request.object().kind().empty()) {
    return absl::InvalidArgumentError("object.kind: required (e.g. \"Pod\")");
  }
  if (request.object().name().empty()) {
    return absl::InvalidArgumentError("object.name: required");
  }
  if (request.type() != informer::kEventTypeNormal &&
      request.type() != informer::kEventTypeWarning) {
    return absl::InvalidArgumentError(
        absl::StrCat("type: must be \"Normal\" or \"Warning\", got \"",
                     request.type(), "\""));
  }
  if (request.reason().empty()) {
    return absl::InvalidArgumentError(
        "reason: required (a short UpperCamelCase word, e.g. \"BackOff\")");
  }
  if (request.reason().size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason: longer than ", kMaxReasonBytes, " bytes (",
                     request.reason().size(), ")"));
  }
  return absl::OkStatus();
}

EventsService::EventsService(informer::EventBroadcaster* broadcaster,
                             EventsServiceOptions options)
    : broadcaster_(broadcaster),
      options_(std::move(options)),
      recorder_(broadcaster_->NewRecorder(options_.component, options_.host)),
      hub_(std::make_shared<EventsWatchHub>(
          options_.watch_queue_length > 0 ? options_.watch_queue_length : 1)) {
  // The handler holds the hub, not the service: the broadcaster may still
  // deliver events queued for this watcher after the service is gone.
  watch_ = broadcaster_->StartEventWatcher(
      [hub = hub_](const informer::Event& event) { hub->Deliver(event); });
}

EventsService::~EventsService() {
  Shutdown();
  watch_->Stop();
}

void EventsService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  hub_->Close();
}

absl::Status EventsService::RecordOne(const v1::RecordEventRequest& request) {
  if (absl::Status st = ValidateRecordEventRequest(request); !st.ok()) {
    return st;
  }
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::UnavailableError(
          "the sidecar is shutting down; the event was not recorded");
    }
  }
  absl::Status st =
      recorder_->Event(FromProto(request.object()), request.type(),
                       request.reason(), request.message());
  if (st.ok()) return st;
  if (st.code() == absl::StatusCode::kUnavailable) {
    // The recorder refuses rather than waits when the broadcaster's queue is
    // full (the sink is behind the API server) or it has shut down.
    absl::MutexLock lock(&mu_);
    if (shut_down_) return st;
    return absl::ResourceExhaustedError(
        "too many events waiting for the API server; the event was not "
        "recorded (retry later)");
  }
  return st;
}

grpc::Status EventsService::RecordCall(const grpc::ServerContextBase& context,
                                       const v1::RecordEventRequest& request) {
  if (absl::Status st = ValidateRecordEventRequest(request); !st.ok()) {
    return ToGrpcStatus(st);
  }
  if (grpc::Status st = AuthorizeRecordEvents(options_.authorizer, context,
                                              request.object().namespace_());
      !st.ok()) {
    return st;
  }
  return ToGrpcStatus(RecordOne(request));
}

grpc::ServerUnaryReactor* EventsService::Record(
    grpc::CallbackServerContext* context, const v1::RecordEventRequest* request,
    v1::RecordEventResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(RecordCall(*context, *request));
  return reactor;
}

namespace {

// RecordStream: reads every request, records each, answers a summary.
class RecordStreamReactor final
    : public grpc::ServerReadReactor<v1::RecordEventRequest> {
 public:
  RecordStreamReactor(EventsService* service,
                      grpc::CallbackServerContext* context,
                      v1::RecordEventStreamResponse* response)
      : service_(service), context_(context), response_(response) {
    StartRead(&request_);
  }

  // gRPC calls OnReadDone and OnDone one at a time for a reactor, so the
  // fields need no lock.
  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (or went away): answer the summary.
      Finish(grpc::Status::OK);
      return;
    }
    grpc::Status st = service_->RecordCall(*context_, request_);
    if (st.ok()) {
      response_->set_accepted(response_->accepted() + 1);
    } else {
      if (!response_->has_first_error()) {
        v1::RecordEventError* error = response_->mutable_first_error();
        error->set_index(index_);
        error->set_code(static_cast<int32_t>(st.error_code()));
        error->set_message(st.error_message());
      }
      response_->set_rejected(response_->rejected() + 1);
    }
    ++index_;
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  EventsService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::RecordEventStreamResponse* const response_;
  v1::RecordEventRequest request_;
  int64_t index_ = 0;
};

}  // namespace

grpc::ServerReadReactor<v1::RecordEventRequest>* EventsService::RecordStream(
    grpc::CallbackServerContext* context,
    v1::RecordEventStreamResponse* response) {
  return new RecordStreamReactor(this, context, response);
}

grpc::ServerWriteReactor<v1::WatchEventsResponse>* EventsService::Watch(
    grpc::CallbackServerContext* context, const v1::WatchEventsRequest*) {
  // Every event, whatever its namespace: all namespaces needed.
  if (grpc::Status st = AuthorizeRecordEvents(options_.authorizer, *context,
                                              /*ns=*/"");
      !st.ok()) {
    return new WatchErrorReactor(st);
  }
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return new WatchErrorReactor(grpc::Status(
          grpc::StatusCode::UNAVAILABLE, "the sidecar is shutting down"));
    }
  }
  return new EventsWatchReactor(hub_);
}

void EventsService::WaitForEventsFannedOut(uint64_t n) const {
  hub_->WaitForDelivered(n);
}

void EventsService::WaitForWatchStreams(int n) const {
  hub_->WaitForStreams(n);
}

void EventsService::SetWatchStreamPaused(int stream_number, bool paused) {
  hub_->SetPaused(stream_number, paused);
}

}  // namespace server

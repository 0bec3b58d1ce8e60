#include "informer/record/event_sink.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "informer/client/resource_client.h"
#include "informer/object/api_error.h"

namespace informer {
namespace {

client::ApiResource EventsResource() {
  client::ApiResource r;
  r.group = "";
  r.version = "v1";
  r.resource = "events";
  r.singular = "event";
  r.kind = "Event";
  r.namespaced = true;
  return r;
}

}  // namespace

ApiEventSink::ApiEventSink(client::HttpTransport* transport)
    : transport_(transport) {}

absl::StatusOr<std::string> ApiEventSink::Create(absl::string_view event_json) {
  absl::StatusOr<Event> event = EventFromJson(event_json);
  if (!event.ok()) return event.status();
  if (event->namespace_.empty()) {
    return absl::InvalidArgumentError("event: metadata.namespace is empty");
  }
  client::ResourceClient events(transport_, EventsResource(),
                                event->namespace_);
  return events.Create(event_json);
}

absl::StatusOr<std::string> ApiEventSink::Patch(absl::string_view ns,
                                                absl::string_view name,
                                                absl::string_view patch_json) {
  client::ResourceClient events(transport_, EventsResource(), std::string(ns));
  return events.Patch(name, client::PatchType::kStrategicMerge, patch_json);
}

bool IsRetryableSinkError(const absl::Status& status) {
  if (status.ok()) return false;
  const int code = HttpCode(status);
  if (code == 0) {
    // No HTTP answer: the request did not get through (refused, reset, DNS,
    // TLS, timeout), worth retrying as client-go's recordEvent does; a
    // request we could not even build will not build next time either.
    return status.code() != absl::StatusCode::kInvalidArgument;
  }
  // The server answered. A POST it answered may have been committed (a 5xx
  // or a timeout after the write), so a retry could create a second Event:
  // client-go treats every answered error as final. Only a server that asks
  // to be asked again (429 or 5xx with Retry-After, which client-go's REST
  // client retries before recordEvent ever sees the error) gets another try.
  const bool may_ask_again = code == 429 || code >= 500;
  return may_ask_again && RetryAfter(status).has_value();
}

absl::Duration SinkRetryPause(const absl::Status& status, int tries,
                              const SinkRetryOptions& options, double jitter) {
  // Never zero: a zero wait would not park on the clock, which tests rely on
  // to step time.
  const absl::Duration min_pause = absl::Milliseconds(1);
  if (absl::optional<absl::Duration> server = RetryAfter(status)) {
    return std::min(std::max(*server, min_pause), options.max_retry_after);
  }
  absl::Duration pause = options.retry_interval;
  // The first pause is a random fraction, so that recorders failing together
  // do not retry in lockstep.
  if (tries == 1) pause = pause * jitter;
  return std::max(min_pause, pause);
}

SinkRecorder::SinkRecorder(EventSink* sink, Clock* clock,
                           CorrelatorOptions correlator, SinkRetryOptions retry)
    : sink_(sink),
      clock_(clock),
      retry_(retry),
      correlator_(clock, correlator) {}

void SinkRecorder::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

absl::Status SinkRecorder::WriteOnce(Event event, const std::string& patch,
                                     Event* stored) {
  absl::StatusOr<std::string> answer = absl::UnknownError("not sent");
  if (!patch.empty()) {
    answer = sink_->Patch(event.namespace_, event.name, patch);
  }
  // Only a 404 from the server means the event to update is gone (client-go's
  // IsKeyNotFoundError).
  if (patch.empty() || (!answer.ok() && HttpCode(answer.status()) == 404)) {
    // A new event, or the one to update is gone (expired): create it.
    event.resource_version.clear();
    answer = sink_->Create(EventToJson(event));
  }
  if (!answer.ok()) return answer.status();
  absl::StatusOr<Event> parsed = EventFromJson(*answer);
  *stored = parsed.ok() ? *std::move(parsed) : std::move(event);
  return absl::OkStatus();
}

void SinkRecorder::LogRejection(const Event& event,
                                const absl::Status& status) {
  // A server that refuses every write (a read-only Kubernetes API facade
  // answers 405, an RBAC rule 403) would otherwise log one warning per
  // event, forever; once per reason says the same.
  const std::string reason =
      absl::StrCat(HttpCode(status), " ", Reason(status), " ",
                   absl::StatusCodeToString(status.code()));
  if (logged_rejections_.insert(reason).second) {
    LOG(WARNING) << "event " << event.namespace_ << "/" << event.name
                 << " rejected, not retrying: " << status
                 << " (further events rejected for the same reason are "
                    "dropped without a warning until a write succeeds)";
  } else {
    VLOG(1) << "event " << event.namespace_ << "/" << event.name
            << " rejected, not retrying: " << status;
  }
}

RecordOutcome SinkRecorder::Record(const Event& event) {
  CorrelationResult result = correlator_.Correlate(event);
  if (result.skip) return RecordOutcome::kSkipped;
  for (int tries = 1;; ++tries) {
    Event stored;
    absl::Status status = WriteOnce(result.event, result.patch, &stored);
    if (status.ok()) {
      correlator_.UpdateState(stored);
      logged_rejections_.clear();  // a new rejection is news again
      return RecordOutcome::kWritten;
    }
    if (!IsRetryableSinkError(status)) {
      LogRejection(result.event, status);
      return RecordOutcome::kRejected;
    }
    if (tries >= retry_.max_tries) {
      LOG(ERROR) << "unable to write event " << result.event.namespace_ << "/"
                 << result.event.name << " after " << tries
                 << " tries, dropping it: " << status;
      return RecordOutcome::kGaveUp;
    }
    const absl::Duration pause =
        SinkRetryPause(status, tries, retry_, absl::Uniform(bitgen_, 0.0, 1.0));
    absl::MutexLock lock(&mu_);
    if (cancelled_) return RecordOutcome::kCancelled;
    if (clock_->AwaitWithDeadline(&mu_, absl::Condition(&cancelled_),
                                  clock_->Now() + pause)) {
      return RecordOutcome::kCancelled;
    }
  }
}

}  // namespace informer

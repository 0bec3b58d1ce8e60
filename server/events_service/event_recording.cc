#include "server/events_service/event_recording.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "informer/record/event_correlator.h"

namespace server {
namespace {

// Kubernetes' alphabet for generated name parts (rand.SafeEncodeString:
// no vowels, no 0/1/3, so no words and no look-alikes): pod-template
// hashes and generateName suffixes use it.
constexpr absl::string_view kSafeAlphabet = "bcdfghjklmnpqrstvwxz2456789";

bool IsSafeEncoded(absl::string_view s, size_t min_len, size_t max_len) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (char c : s) {
    if (kSafeAlphabet.find(c) == absl::string_view::npos) return false;
  }
  return true;
}

bool IsDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "web-7d4b9c8f5-xz2lq" -> "web", "agent-x7k2p" -> "agent", "db-0" -> "db".
std::string WorkloadName(absl::string_view pod) {
  std::vector<absl::string_view> parts = absl::StrSplit(pod, '-');
  if (parts.size() >= 3 && IsSafeEncoded(parts.back(), 5, 5) &&
      IsSafeEncoded(parts[parts.size() - 2], 6, 10)) {
    parts.resize(parts.size() - 2);  // Deployment: <rs hash>-<suffix>
  } else if (parts.size() >= 2 &&
             (IsSafeEncoded(parts.back(), 5, 5) || IsDigits(parts.back()))) {
    parts.pop_back();  // DaemonSet/Job suffix, or StatefulSet ordinal
  }
  return absl::StrJoin(parts, "-");
}

}  // namespace

GetEnvFn ProcessEnv() {
  return [](absl::string_view name) -> absl::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return absl::nullopt;
    return std::string(v);
  };
}

std::string DefaultEventComponent(const GetEnvFn& getenv) {
  if (absl::optional<std::string> app = getenv("APP_NAME");
      app.has_value() && !app->empty()) {
    return *app;
  }
  if (absl::optional<std::string> pod = getenv("POD_NAME");
      pod.has_value() && !pod->empty()) {
    return WorkloadName(*pod);
  }
  return "informer-sidecar";
}

std::string DefaultEventHost(const GetEnvFn& getenv) {
  if (absl::optional<std::string> pod = getenv("POD_NAME");
      pod.has_value() && !pod->empty()) {
    return *pod;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    return name;
  }
  return "unknown";
}

namespace {

informer::EventBroadcasterOptions BroadcasterOptions(
    const EventRecordingOptions& o) {
  informer::EventBroadcasterOptions b;
  b.incoming_queue_length = o.queue_length;
  b.watcher_queue_length = o.queue_length;
  // Back-pressure instead of drops (see EventRecordingOptions). The other
  // watchers (glog, the Watch fan-out) never block, so only the sink can
  // make distribution wait.
  b.full_queue_behavior = informer::FullQueueBehavior::kWaitIfFull;
  b.clock = o.clock;
  return b;
}

}  // namespace

EventRecording::EventRecording(informer::client::HttpTransport* transport,
                               EventRecordingOptions options)
    : component_(options.component.empty() ? DefaultEventComponent()
                                           : options.component),
      host_(options.host.empty() ? DefaultEventHost() : options.host),
      sink_(transport),
      sink_recorder_(&sink_, options.clock, informer::CorrelatorOptions(),
                     options.retry),
      broadcaster_(BroadcasterOptions(options)) {
  // One thread, in order, as StartRecordingToSink would.
  broadcaster_.StartEventWatcher(
      [r = &sink_recorder_](const informer::Event& e) { r->Record(e); });
  broadcaster_.StartStructuredLogging(2);
  EventsServiceOptions service_options;
  service_options.component = component_;
  service_options.host = host_;
  service_options.watch_queue_length = options.watch_queue_length;
  service_options.authorizer = options.authorizer;
  service_ = std::make_unique<EventsService>(&broadcaster_, service_options);
}

EventRecording::~EventRecording() {
  Flush(absl::InfiniteDuration());
  absl::MutexLock lock(&mu_);
  if (flusher_.joinable()) flusher_.join();
}

void EventRecording::StopAccepting() { service_->Shutdown(); }

bool EventRecording::Flush(absl::Duration timeout) {
  StopAccepting();
  {
    absl::MutexLock lock(&mu_);
    if (!flusher_.joinable()) {
      flusher_ = std::thread([this] {
        // Queued events get one try each, no more pauses; then the
        // broadcaster delivers the queue and ends.
        sink_recorder_.Cancel();
        broadcaster_.Shutdown();
        flushed_.Notify();
      });
    }
  }
  return flushed_.WaitForNotificationWithTimeout(timeout);
}

}  // namespace server

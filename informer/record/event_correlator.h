#ifndef INFORMER_RECORD_EVENT_CORRELATOR_H_
#define INFORMER_RECORD_EVENT_CORRELATOR_H_

// The core/v1 Event the recorder builds, and EventCorrelator: client-go's
// tools/record correlation (events_cache.go) that keeps event volume down
// before events reach the API server:
//
//  1. Aggregation: events with the same source, involved object, type and
//     reason but different messages are "similar". Once `max_events` (10)
//     distinct messages were seen for one such group within
//     `max_interval` (10 minutes) of each other, further ones are replaced
//     by a single event whose message starts with
//     "(combined from similar events): ".
//  2. Deduplication: an event identical to one already recorded (same key
//     including the message, or the same aggregate) becomes the recorded
//     event with `count` + 1 and a new lastTimestamp, to be sent as a
//     strategic-merge PATCH of the existing object.
//  3. Spam filter: a token bucket per source + involved object (burst 25,
//     refilled at one token per 5 minutes); an event finding no token is
//     skipped.
// Each of the three caches is an LRU of `lru_max_entries` (4096) keys.
//
// Thread-safety: all methods are thread-safe.
// Time: every timestamp and the token buckets use the injected Clock, which
// must outlive the correlator.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace informer {

inline constexpr char kEventTypeNormal[] = "Normal";
inline constexpr char kEventTypeWarning[] = "Warning";

// core/v1 ObjectReference: the object an event is about.
struct ObjectReference {
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string api_version;
  std::string resource_version;
  std::string field_path;
};

// The fields of a core/v1 Event that the recorder and correlator use.
struct Event {
  std::string name;
  std::string namespace_;
  std::string resource_version;
  std::vector<std::pair<std::string, std::string>> annotations;
  ObjectReference involved_object;
  std::string reason;
  std::string message;
  std::string source_component;
  std::string source_host;
  absl::Time first_timestamp = absl::UnixEpoch();
  absl::Time last_timestamp = absl::UnixEpoch();
  int32_t count = 0;
  std::string type;
  std::string reporting_component;
  std::string reporting_instance;
};

// Kubernetes' RFC 3339 form, seconds precision, UTC: "2023-11-14T22:13:20Z".
std::string FormatKubeTime(absl::Time t);

// "<object_name>.<hex>" where hex is `now` in Unix nanoseconds, bumped so
// that it is strictly increasing within the process: names stay unique even
// when many events share one (fake) clock reading.
std::string UniqueEventName(absl::string_view object_name, absl::Time now);

// The Event as core/v1 JSON (kind/apiVersion included).
std::string EventToJson(const Event& event);
// Parses core/v1 Event JSON (e.g. the API server's answer). InvalidArgument
// when it is not a JSON object.
absl::StatusOr<Event> EventFromJson(absl::string_view json);

struct CorrelatorOptions {
  size_t lru_max_entries = 4096;
  // Aggregation: distinct messages per group before combining, and how long
  // a group stays open after its last event.
  int max_events = 10;
  absl::Duration max_interval = absl::Minutes(10);
  // Spam filter token bucket.
  int burst = 25;
  absl::Duration refill_period = absl::Minutes(5);  // one token per period
};

struct CorrelationResult {
  // The event to write (possibly aggregated and/or deduplicated).
  Event event;
  // Non-empty when the event updates an existing one: the strategic-merge
  // patch (count, lastTimestamp, message) to send instead of a POST.
  std::string patch;
  // True when the spam filter held the event back: send nothing.
  bool skip = false;
};

class EventCorrelator {
 public:
  explicit EventCorrelator(Clock* clock, CorrelatorOptions options = {});
  ~EventCorrelator();
  EventCorrelator(const EventCorrelator&) = delete;
  EventCorrelator& operator=(const EventCorrelator&) = delete;

  CorrelationResult Correlate(Event event) ABSL_LOCKS_EXCLUDED(mu_);

  // Records what the API server stored (its name, resourceVersion, count,
  // firstTimestamp) after a successful write, so later duplicates patch it.
  void UpdateState(const Event& stored) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Caches;

  Clock* const clock_;
  const CorrelatorOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<Caches> caches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace informer

#endif  // INFORMER_RECORD_EVENT_CORRELATOR_H_

#ifndef INFORMER_RECORD_EVENT_SINK_H_
#define INFORMER_RECORD_EVENT_SINK_H_

// Where recorded events go, and how they get there.
//
// EventSink is the write side for core/v1 Events (client-go's
// record.EventSink): create a new Event, or strategic-merge-patch an existing
// one. ApiEventSink implements it over the Kubernetes API client.
//
// SinkRecorder is client-go's recordToSink: each event runs through an
// EventCorrelator (aggregation, deduplication, spam filter), is PATCHed when
// it updates an event already written (falling back to a POST when the
// server answers the PATCH with 404) or POSTed otherwise.
//
// Retries follow client-go's recordEvent: a write is retried only when it
// never got an answer from the server (connection refused or reset, DNS,
// TLS, timeout), up to `max_tries` tries with `retry_interval` between them
// (the first pause is a random fraction of it, so many recorders failing
// together do not retry in lockstep). An answered failure is final, whatever
// its code (5xx, 429, 409 Conflict or AlreadyExists, 4xx): the server may
// have committed the POST before failing, and a retry would create a
// duplicate Event. The one exception is an answer that asks for a retry:
// 429 or 5xx with a Retry-After header (e.g. API Priority and Fairness
// throttling). client-go's REST client retries those itself for any verb;
// our transport retries only GETs, so the recorder does it, waiting no
// sooner than the server asked. A Retry-After longer than `max_retry_after`
// is cut to it, so that one throttled event cannot stall the sink (and fill
// the broadcaster's queue) for an unbounded time; such a retry counts
// against `max_tries` like any other.
//
// Caveat, shared with client-go: a transport failure after the request was
// written (connection reset while waiting for the answer, client timeout)
// also counts as "no answer" and is retried, although the server may have
// committed the POST; the transport does not report whether the whole
// request reached the server.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/client/http_transport.h"
#include "informer/record/event_correlator.h"
#include "informer/util/clock.h"

namespace informer {

// Thread-safety: implementations must be thread-safe.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // POSTs a core/v1 Event (JSON, metadata.namespace set); returns the stored
  // Event's JSON.
  virtual absl::StatusOr<std::string> Create(absl::string_view event_json) = 0;
  // Strategic-merge PATCH of the Event `ns`/`name`; returns the stored
  // Event's JSON.
  virtual absl::StatusOr<std::string> Patch(absl::string_view ns,
                                            absl::string_view name,
                                            absl::string_view patch_json) = 0;
};

// core/v1 events through the API client. Thread-safe; `transport` must
// outlive the sink.
class ApiEventSink final : public EventSink {
 public:
  explicit ApiEventSink(client::HttpTransport* transport);

  absl::StatusOr<std::string> Create(absl::string_view event_json) override;
  absl::StatusOr<std::string> Patch(absl::string_view ns,
                                    absl::string_view name,
                                    absl::string_view patch_json) override;

 private:
  client::HttpTransport* const transport_;
};

struct SinkRetryOptions {
  int max_tries = 12;
  absl::Duration retry_interval = absl::Seconds(10);
  // Longest server-requested (Retry-After) wait honoured as such.
  absl::Duration max_retry_after = absl::Minutes(1);
};

// The pause before retry number `tries` + 1 after `status`: the server's
// Retry-After when it sent one (at least 1ms, at most
// `options.max_retry_after`), else `options.retry_interval` scaled by
// `jitter` (in [0, 1], used for the first retry only; at least 1ms).
absl::Duration SinkRetryPause(const absl::Status& status, int tries,
                              const SinkRetryOptions& options, double jitter);

// True when the write should be tried again: it got no HTTP answer (and was
// not malformed: INVALID_ARGUMENT without an HTTP code is final), or the
// server answered 429 or 5xx with a Retry-After. Every other answer is final.
bool IsRetryableSinkError(const absl::Status& status);

enum class RecordOutcome {
  kWritten,    // created or patched
  kSkipped,    // held back by the spam filter
  kRejected,   // the server refused it for good (not retried)
  kGaveUp,     // every try failed
  kCancelled,  // Cancel() ended the retries
};

// Thread-safety: Record() from one thread at a time (the correlator's state
// is per recorder; client-go runs one per sink watcher); Cancel() from any
// thread. `sink` and `clock` must outlive the recorder.
class SinkRecorder {
 public:
  SinkRecorder(EventSink* sink, Clock* clock, CorrelatorOptions correlator = {},
               SinkRetryOptions retry = {});

  // Correlates and writes `event`, waiting on the clock between tries.
  RecordOutcome Record(const Event& event) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends a pending retry wait; later Records try each write once.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One write: PATCH when `patch` is set (POST if the event is gone), else
  // POST. On success *stored is the server's event.
  absl::Status WriteOnce(Event event, const std::string& patch, Event* stored);

  // Logs a final rejection: a warning the first time for its reason (HTTP
  // code and Status reason) since the last successful write, VLOG(1) after.
  void LogRejection(const Event& event, const absl::Status& status);

  EventSink* const sink_;
  Clock* const clock_;
  const SinkRetryOptions retry_;
  EventCorrelator correlator_;
  absl::BitGen bitgen_;  // Record() is single-threaded
  // The reasons of rejections already logged (Record() is single-threaded).
  absl::flat_hash_set<std::string> logged_rejections_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace informer

#endif  // INFORMER_RECORD_EVENT_SINK_H_

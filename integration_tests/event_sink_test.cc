#include "informer/record/event_sink.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/http_transport.h"
#include "informer/object/api_error.h"
#include "informer/record/event_correlator.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

Event MakeEvent(absl::Time now, const std::string& reason,
                const std::string& message) {
  Event e;
  e.involved_object.kind = "Pod";
  e.involved_object.namespace_ = "demo";
  e.involved_object.name = "web-0";
  e.involved_object.uid = "u1";
  e.involved_object.api_version = "v1";
  e.name = UniqueEventName("web-0", now);
  e.namespace_ = "demo";
  e.reason = reason;
  e.message = message;
  e.type = kEventTypeWarning;
  e.source_component = "ctrl";
  e.source_host = "node-1";
  e.first_timestamp = now;
  e.last_timestamp = now;
  e.count = 1;
  return e;
}

absl::Status HttpError(int code, absl::string_view reason = "") {
  std::string body;
  if (!reason.empty()) {
    body = absl::StrCat(
        R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":")",
        reason, R"(","code":)", code, "}");
  }
  return StatusFromHttpResponse(code, "POST", "/api/v1/namespaces/demo/events",
                                body);
}

// A sink answering from a script of statuses (OK echoes the event back).
class ScriptedSink : public EventSink {
 public:
  void Push(absl::Status s) {
    absl::MutexLock lock(&mu_);
    script_.push_back(std::move(s));
  }
  absl::StatusOr<std::string> Create(absl::string_view json) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("create");
    return Answer(std::string(json));
  }
  absl::StatusOr<std::string> Patch(absl::string_view ns,
                                    absl::string_view name,
                                    absl::string_view patch) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("patch ", ns, "/", name));
    return Answer(std::string(patch));
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::StatusOr<std::string> Answer(std::string body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (script_.empty()) return body;
    absl::Status s = script_.front();
    script_.erase(script_.begin());
    if (s.ok()) return body;
    return s;
  }
  absl::Mutex mu_;
  std::vector<absl::Status> script_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// Runs Record on a thread, stepping the fake clock through `waits` retry
// pauses; returns the outcome.
RecordOutcome RecordWithWaits(SinkRecorder& recorder, FakeClock& clock,
                              const Event& event, int waits,
                              std::vector<absl::Duration>* pauses = nullptr) {
  RecordOutcome outcome = RecordOutcome::kCancelled;
  std::thread t([&] { outcome = recorder.Record(event); });
  for (int i = 0; i < waits; ++i) {
    absl::Time deadline = clock.WaitForWaiters(1);
    if (pauses != nullptr) pauses->push_back(deadline - clock.Now());
    clock.SetTime(deadline);
  }
  t.join();
  return outcome;
}

absl::Status Throttled(int code, absl::string_view retry_after) {
  return StatusFromHttpResponse(code, "POST", "/api/v1/namespaces/demo/events",
                                "", retry_after);
}

absl::Status Unreachable() {
  return ConnectionError("POST", "/api/v1/namespaces/demo/events",
                         "Connection reset by peer");
}

TEST(IsRetryableSinkErrorTest, RetriesOnlyUnansweredOrRetryAfterRequests) {
  // The request never got an answer: try again.
  EXPECT_TRUE(IsRetryableSinkError(Unreachable()));
  EXPECT_TRUE(IsRetryableSinkError(absl::UnavailableError("refused")));
  // The server asked to be asked again later.
  EXPECT_TRUE(IsRetryableSinkError(Throttled(429, "3")));
  EXPECT_TRUE(IsRetryableSinkError(Throttled(503, "1")));
  EXPECT_TRUE(IsRetryableSinkError(Throttled(500, "1")));
  // Any other answer is final: the server may have committed the POST (a
  // 5xx after the write), so a retry could create a duplicate Event.
  EXPECT_FALSE(IsRetryableSinkError(HttpError(500)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(503)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(504)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(429)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(409, "Conflict")));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(409, "AlreadyExists")));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(400)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(403)));
  EXPECT_FALSE(IsRetryableSinkError(HttpError(422)));
  // Retry-After only means "retry" on 429 and 5xx, as in client-go's REST
  // client; a 409 that carried one is still final.
  EXPECT_FALSE(IsRetryableSinkError(Throttled(409, "1")));
  // A request that could not be built will not build next time either.
  EXPECT_FALSE(IsRetryableSinkError(absl::InvalidArgumentError("bad json")));
  EXPECT_FALSE(IsRetryableSinkError(absl::OkStatus()));
}

// The outcome of Record when no retry wait is allowed: Cancel() first, so a
// write the recorder would retry ends as kCancelled instead of parking on the
// clock (the test then fails instead of hanging).
RecordOutcome RecordWithoutRetry(SinkRecorder& recorder, const Event& event) {
  recorder.Cancel();
  return recorder.Record(event);
}

TEST(SinkRecorderTest, AnsweredFailuresAreNotRetried) {
  const std::vector<absl::Status> answers = {HttpError(500),
                                             HttpError(503),
                                             HttpError(504),
                                             HttpError(429),
                                             HttpError(409, "Conflict"),
                                             HttpError(409, "AlreadyExists")};
  for (const absl::Status& answer : answers) {
    FakeClock clock;
    ScriptedSink sink;
    sink.Push(answer);
    SinkRecorder recorder(&sink, &clock);
    EXPECT_EQ(RecordWithoutRetry(recorder, MakeEvent(clock.Now(), "R", "m")),
              RecordOutcome::kRejected)
        << answer;
    EXPECT_EQ(sink.calls().size(), 1u) << answer;
  }
}

TEST(SinkRecorderTest, RetriesConnectionFailuresWithPausesOnTheClock) {
  FakeClock clock;
  ScriptedSink sink;
  sink.Push(Unreachable());
  sink.Push(Unreachable());
  SinkRecorder recorder(&sink, &clock);
  std::vector<absl::Duration> pauses;
  EXPECT_EQ(RecordWithWaits(recorder, clock, MakeEvent(clock.Now(), "R", "m"),
                            2, &pauses),
            RecordOutcome::kWritten);
  EXPECT_EQ(sink.calls().size(), 3u);
  ASSERT_EQ(pauses.size(), 2u);
  EXPECT_GT(pauses[0], absl::ZeroDuration());
  EXPECT_LE(pauses[0], absl::Seconds(10));
  EXPECT_EQ(pauses[1], absl::Seconds(10));
}

TEST(SinkRetryPauseTest, ServerRetryAfterReplacesThePause) {
  SinkRetryOptions options;  // 10s interval, Retry-After capped at 1 minute
  EXPECT_EQ(SinkRetryPause(Throttled(429, "30"), 1, options, 0.5),
            absl::Seconds(30));
  EXPECT_EQ(SinkRetryPause(Throttled(429, "30"), 5, options, 0.5),
            absl::Seconds(30));
  EXPECT_EQ(SinkRetryPause(Throttled(503, "2"), 3, options, 0.5),
            absl::Seconds(2));
  // Longer than the cap: the cap. Zero: the smallest pause that parks.
  EXPECT_EQ(SinkRetryPause(Throttled(429, "3600"), 1, options, 0.5),
            absl::Minutes(1));
  EXPECT_EQ(SinkRetryPause(Throttled(429, "0"), 1, options, 0.5),
            absl::Milliseconds(1));
  // No Retry-After: the interval, jittered on the first retry only.
  EXPECT_EQ(SinkRetryPause(Throttled(429, ""), 1, options, 0.5),
            absl::Seconds(5));
  EXPECT_EQ(SinkRetryPause(HttpError(500), 2, options, 0.5), absl::Seconds(10));
  EXPECT_EQ(SinkRetryPause(HttpError(500), 1, options, 0.0),
            absl::Milliseconds(1));
}

TEST(SinkRecorderTest, HonoursRetryAfterOfA429) {
  FakeClock clock;
  ScriptedSink sink;
  sink.Push(Throttled(429, "30"));
  sink.Push(Throttled(429, "45"));
  SinkRecorder recorder(&sink, &clock);
  std::vector<absl::Duration> pauses;
  EXPECT_EQ(RecordWithWaits(recorder, clock, MakeEvent(clock.Now(), "R", "m"),
                            2, &pauses),
            RecordOutcome::kWritten);
  // Without Retry-After the first pause would be at most 10s.
  EXPECT_EQ(pauses, std::vector<absl::Duration>(
                        {absl::Seconds(30), absl::Seconds(45)}));
  EXPECT_EQ(sink.calls().size(), 3u);
}

TEST(SinkRecorderTest, GivesUpAfterTwelveTries) {
  FakeClock clock;
  ScriptedSink sink;
  for (int i = 0; i < 12; ++i) sink.Push(Unreachable());
  SinkRecorder recorder(&sink, &clock);
  EXPECT_EQ(
      RecordWithWaits(recorder, clock, MakeEvent(clock.Now(), "R", "m"), 11),
      RecordOutcome::kGaveUp);
  EXPECT_EQ(sink.calls().size(), 12u);
}

TEST(SinkRecorderTest, DoesNotRetryClientErrors) {
  FakeClock clock;
  ScriptedSink sink;
  sink.Push(HttpError(403));
  SinkRecorder recorder(&sink, &clock);
  EXPECT_EQ(recorder.Record(MakeEvent(clock.Now(), "R", "m")),
            RecordOutcome::kRejected);
  EXPECT_EQ(sink.calls().size(), 1u);
}

TEST(SinkRecorderTest, RepeatedEventIsPatchedAndRecreatedWhenGone) {
  FakeClock clock;
  ScriptedSink sink;
  SinkRecorder recorder(&sink, &clock);
  const Event e = MakeEvent(clock.Now(), "R", "m");
  EXPECT_EQ(recorder.Record(e), RecordOutcome::kWritten);
  EXPECT_EQ(recorder.Record(e), RecordOutcome::kWritten);
  sink.Push(HttpError(404, "NotFound"));
  EXPECT_EQ(recorder.Record(e), RecordOutcome::kWritten);
  const std::string patch = absl::StrCat("patch demo/", e.name);
  EXPECT_EQ(sink.calls(),
            std::vector<std::string>({"create", patch, patch, "create"}));
}

TEST(SinkRecorderTest, CancelEndsARetryWait) {
  FakeClock clock;
  ScriptedSink sink;
  sink.Push(Unreachable());
  SinkRecorder recorder(&sink, &clock);
  RecordOutcome outcome = RecordOutcome::kWritten;
  std::thread t(
      [&] { outcome = recorder.Record(MakeEvent(clock.Now(), "R", "m")); });
  clock.WaitForWaiters(1);
  recorder.Cancel();
  t.join();
  EXPECT_EQ(outcome, RecordOutcome::kCancelled);
}

// Counts the writes that pass through to another sink.
class CountingSink : public EventSink {
 public:
  explicit CountingSink(EventSink* next) : next_(next) {}
  absl::StatusOr<std::string> Create(absl::string_view json) override {
    creates_.fetch_add(1);
    return next_->Create(json);
  }
  absl::StatusOr<std::string> Patch(absl::string_view ns,
                                    absl::string_view name,
                                    absl::string_view patch) override {
    return next_->Patch(ns, name, patch);
  }
  int creates() const { return creates_.load(); }

 private:
  EventSink* const next_;
  std::atomic<int> creates_{0};
};

class ApiEventSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulator::EmulatorOptions options;
    emu_ = std::make_unique<emulator::EmulatorWithFaults>(options);
    ASSERT_TRUE(emu_->Start().ok());
    client::RestConfig config;
    config.server = emu_->url();
    auto t = client::HttpTransport::Create(
        config,
        std::make_unique<client::StaticCredentialProvider>(
            client::Credentials()),
        RealClock());
    ASSERT_TRUE(t.ok()) << t.status();
    transport_ = *std::move(t);
    sink_ = std::make_unique<ApiEventSink>(transport_.get());
  }

  std::vector<Event> ServerEvents() {
    emulator::ListRequest request;
    request.ns = "demo";
    auto list = emu_->store().List(emu_->Resource("events"), request);
    EXPECT_TRUE(list.ok()) << list.status();
    std::vector<Event> out;
    if (!list.ok()) return out;
    for (const auto& item : list->items) {
      absl::StatusOr<Event> e = EventFromJson(item->body);
      EXPECT_TRUE(e.ok());
      if (e.ok()) out.push_back(*e);
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<emulator::EmulatorWithFaults> emu_;
  std::unique_ptr<client::HttpTransport> transport_;
  std::unique_ptr<ApiEventSink> sink_;
};

TEST_F(ApiEventSinkTest, TwelveIdenticalEventsBecomeOneWithCountTwelve) {
  SinkRecorder recorder(sink_.get(), &clock_);
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_EQ(recorder.Record(MakeEvent(clock_.Now(), "BackOff", "restarting")),
              RecordOutcome::kWritten);
  }
  std::vector<Event> events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].count, 12);
  EXPECT_EQ(events[0].reason, "BackOff");
  EXPECT_EQ(events[0].message, "restarting");
  EXPECT_EQ(events[0].type, "Warning");
  EXPECT_EQ(events[0].involved_object.name, "web-0");
  EXPECT_EQ(events[0].source_component, "ctrl");
  EXPECT_EQ(events[0].last_timestamp - events[0].first_timestamp,
            absl::Seconds(11));
  EXPECT_FALSE(events[0].resource_version.empty());
}

TEST_F(ApiEventSinkTest, FifteenSimilarEventsAreAggregated) {
  SinkRecorder recorder(sink_.get(), &clock_);
  for (int i = 0; i < 15; ++i) {
    ASSERT_EQ(recorder.Record(MakeEvent(clock_.Now(), "FailedMount",
                                        absl::StrCat("volume ", i))),
              RecordOutcome::kWritten);
  }
  std::vector<Event> events = ServerEvents();
  // Nine events as they were, then one combined event counting the rest.
  ASSERT_EQ(events.size(), 10u);
  int combined = 0;
  for (const Event& e : events) {
    if (absl::StartsWith(e.message, "(combined from similar events): ")) {
      ++combined;
      EXPECT_EQ(e.count, 6);
      EXPECT_EQ(e.message, "(combined from similar events): volume 14");
    } else {
      EXPECT_EQ(e.count, 1);
    }
  }
  EXPECT_EQ(combined, 1);
}

TEST_F(ApiEventSinkTest, ServerErrorAnswerIsFinal) {
  // The API server answered 500: it may have stored the Event before
  // failing, so the recorder drops it rather than risk a duplicate.
  emu_->faults().FailRequests("create", "events", 500, 1);
  CountingSink counting(sink_.get());
  SinkRecorder recorder(&counting, &clock_);
  EXPECT_EQ(
      RecordWithoutRetry(recorder, MakeEvent(clock_.Now(), "Started", "ok")),
      RecordOutcome::kRejected);
  EXPECT_EQ(counting.creates(), 1);
  EXPECT_TRUE(ServerEvents().empty());
  // The next event goes through.
  SinkRecorder next(sink_.get(), &clock_);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(next.Record(MakeEvent(clock_.Now(), "Pulled", "ok")),
            RecordOutcome::kWritten);
  ASSERT_EQ(ServerEvents().size(), 1u);
  EXPECT_EQ(ServerEvents()[0].reason, "Pulled");
}

TEST_F(ApiEventSinkTest, AlreadyExistsIsFinalAndCreatesNoDuplicate) {
  const Event event = MakeEvent(clock_.Now(), "Started", "ok");
  SinkRecorder first(sink_.get(), &clock_);
  ASSERT_EQ(first.Record(event), RecordOutcome::kWritten);
  // A second recorder (no correlation state) POSTs the same Event name: the
  // API server answers 409 AlreadyExists.
  CountingSink counting(sink_.get());
  SinkRecorder second(&counting, &clock_);
  EXPECT_EQ(RecordWithoutRetry(second, event), RecordOutcome::kRejected);
  EXPECT_EQ(counting.creates(), 1);
  EXPECT_EQ(ServerEvents().size(), 1u);
}

TEST_F(ApiEventSinkTest, UnreachableServerIsRetried) {
  // A port nothing listens on any more: the POST never reaches a server.
  emulator::Emulator gone{emulator::EmulatorOptions()};
  ASSERT_TRUE(gone.Start().ok());
  client::RestConfig config;
  config.server = gone.url();
  gone.Stop();
  auto transport = client::HttpTransport::Create(
      config,
      std::make_unique<client::StaticCredentialProvider>(client::Credentials()),
      RealClock());
  ASSERT_TRUE(transport.ok()) << transport.status();
  ApiEventSink dead(transport->get());
  CountingSink counting(&dead);
  SinkRecorder recorder(&counting, &clock_);
  RecordOutcome outcome = RecordOutcome::kWritten;
  std::thread t(
      [&] { outcome = recorder.Record(MakeEvent(clock_.Now(), "R", "m")); });
  // Parked on the clock for the retry pause: it means to try again.
  clock_.WaitForWaiters(1);
  EXPECT_EQ(counting.creates(), 1);
  recorder.Cancel();
  t.join();
  EXPECT_EQ(outcome, RecordOutcome::kCancelled);
}

TEST_F(ApiEventSinkTest, WaitsForTheServersRetryAfterWhenThrottled) {
  // The emulator answers the POST with 429 and Retry-After: 7; the
  // transport does not retry POSTs, so the recorder must wait those 7s.
  emu_->faults().ThrottleNextRequests(1, 7);
  SinkRecorder recorder(sink_.get(), &clock_);
  std::vector<absl::Duration> pauses;
  EXPECT_EQ(
      RecordWithWaits(recorder, clock_,
                      MakeEvent(clock_.Now(), "Started", "ok"), 1, &pauses),
      RecordOutcome::kWritten);
  EXPECT_EQ(pauses, std::vector<absl::Duration>({absl::Seconds(7)}));
  std::vector<Event> events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "Started");
}

TEST_F(ApiEventSinkTest, BurstBeyondTheSpamFilterIsHeldBack) {
  SinkRecorder recorder(sink_.get(), &clock_);
  int written = 0, skipped = 0;
  for (int i = 0; i < 30; ++i) {
    RecordOutcome o = recorder.Record(
        MakeEvent(clock_.Now(), absl::StrCat("Reason", i), "m"));
    if (o == RecordOutcome::kWritten) ++written;
    if (o == RecordOutcome::kSkipped) ++skipped;
  }
  EXPECT_EQ(written, 25);
  EXPECT_EQ(skipped, 5);
  EXPECT_EQ(ServerEvents().size(), 25u);
}

}  // namespace
}  // namespace informer

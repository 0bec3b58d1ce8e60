#include "informer/record/event_recorder.h"

#include <glog/logging.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "emulator/emulator.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/http_transport.h"
#include "informer/record/event_correlator.h"
#include "informer/record/event_sink.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

ObjectReference Pod() {
  ObjectReference o;
  o.kind = "Pod";
  o.namespace_ = "demo";
  o.name = "web-0";
  o.uid = "6f1c";
  o.api_version = "v1";
  o.resource_version = "812";
  o.field_path = "spec.containers{app}";
  return o;
}

// Collects what a watcher's handler receives.
class Collector {
 public:
  std::function<void(const Event&)> Handler() {
    return [this](const Event& e) {
      absl::MutexLock lock(&mu_);
      events_.push_back(e);
    };
  }
  std::vector<Event> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

EventBroadcasterOptions WithClock(Clock* clock) {
  EventBroadcasterOptions o;
  o.clock = clock;
  return o;
}

TEST(EventBroadcasterOptionsTest, RecorderQueuesHoldAThousandEvents) {
  EventBroadcasterOptions o;
  EXPECT_EQ(o.incoming_queue_length, 1000u);
  EXPECT_EQ(o.watcher_queue_length, 1000u);
  EXPECT_EQ(o.full_queue_behavior, FullQueueBehavior::kDropIfFull);
}

TEST(EventRecorderTest, BuildsACoreV1EventForTheObject) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  Collector got;
  broadcaster.StartEventWatcher(got.Handler());
  std::unique_ptr<EventRecorder> recorder =
      broadcaster.NewRecorder("my-ctrl", "node-1");
  ASSERT_TRUE(recorder
                  ->Eventf(Pod(), kEventTypeWarning, "BackOff",
                           "restarting %s (%d)", "app", 3)
                  .ok());
  broadcaster.Shutdown();
  std::vector<Event> events = got.events();
  ASSERT_EQ(events.size(), 1u);
  const Event& e = events[0];
  EXPECT_TRUE(absl::StartsWith(e.name, "web-0.")) << e.name;
  EXPECT_GT(e.name.size(), std::string("web-0.").size());
  EXPECT_EQ(e.namespace_, "demo");
  EXPECT_EQ(e.type, "Warning");
  EXPECT_EQ(e.reason, "BackOff");
  EXPECT_EQ(e.message, "restarting app (3)");
  EXPECT_EQ(e.count, 1);
  EXPECT_EQ(e.first_timestamp, clock.Now());
  EXPECT_EQ(e.last_timestamp, clock.Now());
  EXPECT_EQ(e.source_component, "my-ctrl");
  EXPECT_EQ(e.source_host, "node-1");
  EXPECT_EQ(e.reporting_component, "my-ctrl");
  EXPECT_EQ(e.reporting_instance, "node-1");
  EXPECT_EQ(e.involved_object.kind, "Pod");
  EXPECT_EQ(e.involved_object.uid, "6f1c");
  EXPECT_EQ(e.involved_object.api_version, "v1");
  EXPECT_EQ(e.involved_object.resource_version, "812");
  EXPECT_EQ(e.involved_object.field_path, "spec.containers{app}");
  const std::string json = EventToJson(e);
  EXPECT_NE(json.find(absl::StrCat("\"lastTimestamp\":\"",
                                   FormatKubeTime(clock.Now()), "\"")),
            std::string::npos);
}

TEST(EventRecorderTest, InvalidTypeOrEmptyReasonIsRejectedAndNotSent) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  Collector got;
  broadcaster.StartEventWatcher(got.Handler());
  std::unique_ptr<EventRecorder> recorder = broadcaster.NewRecorder("c", "h");
  EXPECT_EQ(recorder->Event(Pod(), "Info", "Started", "m").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(recorder->Event(Pod(), "", "Started", "m").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(recorder->Event(Pod(), kEventTypeNormal, "", "m").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(recorder->Event(Pod(), kEventTypeNormal, "Started", "m").ok());
  broadcaster.Shutdown();
  std::vector<Event> events = got.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "Started");
}

TEST(EventRecorderTest, AnnotatedEventCarriesAnnotations) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  Collector got;
  broadcaster.StartEventWatcher(got.Handler());
  std::unique_ptr<EventRecorder> recorder = broadcaster.NewRecorder("c", "h");
  ASSERT_TRUE(recorder
                  ->AnnotatedEventf(Pod(), {{"team", "infra"}},
                                    kEventTypeNormal, "Scaled", "to %d", 5)
                  .ok());
  broadcaster.Shutdown();
  std::vector<Event> events = got.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].annotations, EventAnnotations({{"team", "infra"}}));
  EXPECT_EQ(events[0].message, "to 5");
}

TEST(EventRecorderTest, ClusterScopedObjectsEventsGoToTheDefaultNamespace) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  Collector got;
  broadcaster.StartEventWatcher(got.Handler());
  ObjectReference node;
  node.kind = "Node";
  node.name = "node-1";
  ASSERT_TRUE(broadcaster.NewRecorder("c", "h")
                  ->Event(node, kEventTypeNormal, "Ready", "ready")
                  .ok());
  broadcaster.Shutdown();
  ASSERT_EQ(got.events().size(), 1u);
  EXPECT_EQ(got.events()[0].namespace_, "default");
}

TEST(EventRecorderTest, NeverBlocksTheCallerWhenQueuesAreFull) {
  FakeClock clock;
  EventBroadcasterOptions options = WithClock(&clock);
  options.incoming_queue_length = 2;
  options.watcher_queue_length = 1;
  options.full_queue_behavior = FullQueueBehavior::kWaitIfFull;
  EventBroadcaster broadcaster(options);
  absl::Notification release;
  Collector got;
  auto handler = got.Handler();
  broadcaster.StartEventWatcher([&](const Event& e) {
    release.WaitForNotification();  // a stuck watcher
    handler(e);
  });
  std::unique_ptr<EventRecorder> recorder = broadcaster.NewRecorder("c", "h");
  int dropped = 0;
  for (int i = 0; i < 20; ++i) {
    absl::Status s =
        recorder->Event(Pod(), kEventTypeNormal, absl::StrCat("R", i), "m");
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
      ++dropped;
    }
  }
  // At most: one in the handler, one in the watcher queue, one held by
  // distribution, two incoming.
  EXPECT_GE(dropped, 15);
  release.Notify();
  broadcaster.Shutdown();
  EXPECT_EQ(got.events().size(), static_cast<size_t>(20 - dropped));
}

TEST(EventBroadcasterTest, StartLoggingWritesOneLinePerEvent) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  absl::Mutex mu;
  std::vector<std::string> lines;
  broadcaster.StartLogging([&](absl::string_view line) {
    absl::MutexLock lock(&mu);
    lines.emplace_back(line);
  });
  ASSERT_TRUE(broadcaster.NewRecorder("c", "h")
                  ->Event(Pod(), kEventTypeWarning, "BackOff", "restarting")
                  .ok());
  broadcaster.Shutdown();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(lines, std::vector<std::string>(
                       {"Event(Pod demo/web-0): type: 'Warning' reason: "
                        "'BackOff' restarting"}));
}

class CapturingSink : public google::LogSink {
 public:
  void send(google::LogSeverity, const char*, const char*, int, const std::tm*,
            const char* message, size_t len) override {
    absl::MutexLock lock(&mu_);
    messages_.emplace_back(message, len);
  }
  std::vector<std::string> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

TEST(EventBroadcasterTest, StructuredLoggingUsesTheGivenVerbosity) {
  FakeClock clock;
  CapturingSink sink;
  google::AddLogSink(&sink);
  const int saved_v = FLAGS_v;
  FLAGS_v = 3;
  {
    EventBroadcaster broadcaster(WithClock(&clock));
    broadcaster.StartStructuredLogging(3);  // shown at -v=3
    broadcaster.StartStructuredLogging(4);  // not shown
    ASSERT_TRUE(broadcaster.NewRecorder("c", "h")
                    ->Event(Pod(), kEventTypeNormal, "Pulled", "image pulled")
                    .ok());
    broadcaster.Shutdown();
  }
  FLAGS_v = saved_v;
  google::RemoveLogSink(&sink);
  int found = 0;
  for (const std::string& m : sink.messages()) {
    if (absl::StrContains(m, "Event occurred")) {
      ++found;
      EXPECT_TRUE(absl::StrContains(m, "object=\"demo/web-0\"")) << m;
      EXPECT_TRUE(absl::StrContains(m, "reason=\"Pulled\"")) << m;
      EXPECT_TRUE(absl::StrContains(m, "message=\"image pulled\"")) << m;
    }
  }
  EXPECT_EQ(found, 1);
}

TEST(EventBroadcasterTest, StoppedWatcherGetsNoLaterEvents) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  Collector stopped, live;
  std::shared_ptr<EventWatch> w =
      broadcaster.StartEventWatcher(stopped.Handler());
  broadcaster.StartEventWatcher(live.Handler());
  w->Stop();
  ASSERT_TRUE(broadcaster.NewRecorder("c", "h")
                  ->Event(Pod(), kEventTypeNormal, "Started", "m")
                  .ok());
  broadcaster.Shutdown();
  EXPECT_TRUE(stopped.events().empty());
  EXPECT_EQ(live.events().size(), 1u);
}

// Remembers the sink calls; every write succeeds and echoes the body.
class RecordingSink : public EventSink {
 public:
  absl::StatusOr<std::string> Create(absl::string_view json) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("create");
    return std::string(json);
  }
  absl::StatusOr<std::string> Patch(absl::string_view, absl::string_view,
                                    absl::string_view patch) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("patch ", patch));
    return std::string(patch);
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

TEST(EventBroadcasterTest, RecordingToSinkCorrelatesRepeatedEvents) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  RecordingSink sink;
  broadcaster.StartRecordingToSink(&sink);
  std::unique_ptr<EventRecorder> recorder = broadcaster.NewRecorder("c", "h");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        recorder->Event(Pod(), kEventTypeWarning, "BackOff", "restarting")
            .ok());
  }
  broadcaster.Shutdown();
  std::vector<std::string> calls = sink.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0], "create");
  EXPECT_TRUE(absl::StartsWith(calls[1], "patch {\"count\":2,")) << calls[1];
  EXPECT_TRUE(absl::StartsWith(calls[2], "patch {\"count\":3,")) << calls[2];
}

TEST(EventBroadcasterTest, ShutdownEndsPendingSinkRetries) {
  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  class FailingSink : public EventSink {
   public:
    absl::StatusOr<std::string> Create(absl::string_view) override {
      return absl::UnavailableError("connection refused");
    }
    absl::StatusOr<std::string> Patch(absl::string_view, absl::string_view,
                                      absl::string_view) override {
      return absl::UnavailableError("connection refused");
    }
  } sink;
  broadcaster.StartRecordingToSink(&sink);
  ASSERT_TRUE(broadcaster.NewRecorder("c", "h")
                  ->Event(Pod(), kEventTypeNormal, "Started", "m")
                  .ok());
  clock.WaitForWaiters(1);  // the sink watcher is waiting to retry
  broadcaster.Shutdown();   // returns without the clock moving
  EXPECT_EQ(clock.NumWaiters(), 0);
}

// In wait mode a full watcher queue holds up distribution; a sink watcher
// stuck in a retry pause must not hold up Shutdown: retries are cut first,
// and every queued event still gets one try.
TEST(EventBroadcasterTest, ShutdownInWaitModeIsNotHeldUpByRetryPauses) {
  FakeClock clock;
  EventBroadcasterOptions options = WithClock(&clock);
  options.full_queue_behavior = FullQueueBehavior::kWaitIfFull;
  options.watcher_queue_length = 1;
  EventBroadcaster broadcaster(options);
  class FailingSink : public EventSink {
   public:
    absl::StatusOr<std::string> Create(absl::string_view) override {
      absl::MutexLock lock(&mu_);
      ++creates_;
      return absl::UnavailableError("connection refused");
    }
    absl::StatusOr<std::string> Patch(absl::string_view, absl::string_view,
                                      absl::string_view) override {
      return absl::UnavailableError("connection refused");
    }
    int creates() {
      absl::MutexLock lock(&mu_);
      return creates_;
    }

   private:
    absl::Mutex mu_;
    int creates_ ABSL_GUARDED_BY(mu_) = 0;
  } sink;
  broadcaster.StartRecordingToSink(&sink);
  std::unique_ptr<EventRecorder> recorder = broadcaster.NewRecorder("c", "h");
  for (const char* reason : {"A", "B", "C", "D"}) {
    ASSERT_TRUE(recorder->Event(Pod(), kEventTypeNormal, reason, "m").ok());
  }
  clock.WaitForWaiters(1);  // the sink watcher waits to retry "A"
  broadcaster.Shutdown();   // returns without the clock moving
  EXPECT_EQ(clock.NumWaiters(), 0);
  EXPECT_GE(sink.creates(), 4) << "every queued event was tried";
}

TEST(EventBroadcasterTest, RecordsToTheApiServerEndToEnd) {
  emulator::Emulator emu{emulator::EmulatorOptions()};
  ASSERT_TRUE(emu.Start().ok());
  client::RestConfig config;
  config.server = emu.url();
  auto transport = client::HttpTransport::Create(
      config,
      std::make_unique<client::StaticCredentialProvider>(client::Credentials()),
      RealClock());
  ASSERT_TRUE(transport.ok()) << transport.status();
  ApiEventSink sink(transport->get());

  FakeClock clock;
  EventBroadcaster broadcaster(WithClock(&clock));
  broadcaster.StartRecordingToSink(&sink);
  std::unique_ptr<EventRecorder> recorder =
      broadcaster.NewRecorder("my-ctrl", "node-1");
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(recorder
                    ->Eventf(Pod(), kEventTypeWarning, "BackOff",
                             "restarting %s", "app")
                    .ok());
  }
  broadcaster.Shutdown();

  emulator::ListRequest request;
  request.ns = "demo";
  auto list = emu.store().List(emu.Resource("events"), request);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1u);
  absl::StatusOr<Event> stored = EventFromJson(list->items[0]->body);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->count, 12);
  EXPECT_TRUE(absl::StartsWith(stored->name, "web-0."));
  EXPECT_EQ(stored->message, "restarting app");
  EXPECT_EQ(stored->involved_object.field_path, "spec.containers{app}");
  EXPECT_EQ(stored->source_component, "my-ctrl");
  EXPECT_EQ(stored->reporting_instance, "node-1");
  EXPECT_EQ(stored->first_timestamp, clock.Now());
}

}  // namespace
}  // namespace informer

#include "server/events_service/event_recording.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/http_transport.h"
#include "informer/record/event_correlator.h"
#include "informer/util/clock.h"

namespace server {
namespace {

GetEnvFn Env(std::map<std::string, std::string> vars) {
  return [vars](absl::string_view name) -> absl::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return absl::nullopt;
    return it->second;
  };
}

TEST(DefaultEventComponentTest, PrefersAppNameThenTheWorkloadOfThePod) {
  EXPECT_EQ(DefaultEventComponent(
                Env({{"APP_NAME", "billing"}, {"POD_NAME", "web-0"}})),
            "billing");
  // Deployment pod: <deployment>-<pod-template hash>-<suffix>.
  EXPECT_EQ(DefaultEventComponent(Env({{"POD_NAME", "web-7d4b9c8f5-xz2lq"}})),
            "web");
  EXPECT_EQ(
      DefaultEventComponent(Env({{"POD_NAME", "my-api-5f6b7c9d48-t9zxw"}})),
      "my-api");
  // DaemonSet or Job pod, StatefulSet pod.
  EXPECT_EQ(DefaultEventComponent(Env({{"POD_NAME", "agent-x7k2p"}})), "agent");
  EXPECT_EQ(DefaultEventComponent(Env({{"POD_NAME", "db-12"}})), "db");
  // Nothing generated-looking: the name as is ("store" has vowels, so it is
  // not a generated suffix).
  EXPECT_EQ(DefaultEventComponent(Env({{"POD_NAME", "blob-store"}})),
            "blob-store");
  EXPECT_EQ(DefaultEventComponent(Env({{"POD_NAME", "standalone"}})),
            "standalone");
  EXPECT_EQ(DefaultEventComponent(Env({{"APP_NAME", ""}})), "informer-sidecar");
  EXPECT_EQ(DefaultEventComponent(Env({})), "informer-sidecar");
}

TEST(DefaultEventHostTest, PodNameElseHostname) {
  EXPECT_EQ(DefaultEventHost(Env({{"POD_NAME", "web-7d4b9c8f5-xz2lq"}})),
            "web-7d4b9c8f5-xz2lq");
  const std::string host = DefaultEventHost(Env({}));
  EXPECT_FALSE(host.empty());
  EXPECT_NE(host, "web-7d4b9c8f5-xz2lq");
}

TEST(EventRecordingTest, FlushWritesQueuedEventsToTheApiServer) {
  emulator::EmulatorWithFaults emu(emulator::EmulatorOptions{});
  ASSERT_TRUE(emu.Start().ok());
  informer::client::RestConfig config;
  config.server = emu.url();
  auto transport = informer::client::HttpTransport::Create(
      config,
      std::make_unique<informer::client::StaticCredentialProvider>(
          informer::client::Credentials()),
      informer::RealClock());
  ASSERT_TRUE(transport.ok()) << transport.status();
  EventRecordingOptions options;
  options.component = "my-app";
  options.host = "node-a";
  EventRecording recording(transport->get(), options);
  EXPECT_EQ(recording.component(), "my-app");
  for (int i = 0; i < 20; ++i) {
    informer::v1::RecordEventRequest r;
    r.mutable_object()->set_kind("Pod");
    r.mutable_object()->set_namespace_("demo");
    r.mutable_object()->set_name(absl::StrCat("web-", i));
    r.set_type("Normal");
    r.set_reason("Started");
    ASSERT_TRUE(recording.service()->RecordOne(r).ok());
  }
  ASSERT_TRUE(recording.Flush(absl::Seconds(30)));
  // Everything queued before the flush is on the server now.
  emulator::ListRequest list_request;
  list_request.ns = "demo";
  auto list = emu.store().List(emu.Resource("events"), list_request);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 20u);
  absl::StatusOr<informer::Event> e =
      informer::EventFromJson(list->items[0]->body);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->source_component, "my-app");
  EXPECT_EQ(e->source_host, "node-a");
  // After the flush nothing more is accepted.
  informer::v1::RecordEventRequest late;
  late.mutable_object()->set_kind("Pod");
  late.mutable_object()->set_name("x");
  late.set_type("Normal");
  late.set_reason("Late");
  EXPECT_EQ(recording.service()->RecordOne(late).code(),
            absl::StatusCode::kUnavailable);
}

TEST(EventRecordingTest, AStuckSinkMakesRecordRefuseNotDrop) {
  emulator::EmulatorWithFaults emu(emulator::EmulatorOptions{});
  ASSERT_TRUE(emu.Start().ok());
  // Every event write is throttled (429 with Retry-After); the sink then
  // waits on the fake clock, which never moves: it is stuck.
  emu.faults().ThrottleNextRequests(1000000, 10);
  informer::client::RestConfig config;
  config.server = emu.url();
  auto transport = informer::client::HttpTransport::Create(
      config,
      std::make_unique<informer::client::StaticCredentialProvider>(
          informer::client::Credentials()),
      informer::RealClock());
  ASSERT_TRUE(transport.ok()) << transport.status();
  informer::FakeClock clock;
  EventRecordingOptions options;
  options.component = "my-app";
  options.host = "node-a";
  options.queue_length = 2;
  options.clock = &clock;
  EventRecording recording(transport->get(), options);
  auto request = [](int i) {
    informer::v1::RecordEventRequest r;
    r.mutable_object()->set_kind("Pod");
    r.mutable_object()->set_namespace_("demo");
    r.mutable_object()->set_name(absl::StrCat("web-", i));
    r.set_type("Warning");
    r.set_reason("Failed");
    return r;
  };
  ASSERT_TRUE(recording.service()->RecordOne(request(0)).ok());
  clock.WaitForWaiters(1);  // the sink is in its retry pause
  int accepted = 1;
  absl::Status refused;
  for (int i = 1; i < 100 && refused.ok(); ++i) {
    refused = recording.service()->RecordOne(request(i));
    if (refused.ok()) ++accepted;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  // The incoming queue and the sink's (2 each), one waiting in
  // distribution, one in the sink; the other watchers may lag by one.
  EXPECT_LE(accepted, 8);
  // The flush cuts the pause short and tries each queued event once.
  EXPECT_TRUE(recording.Flush(absl::Seconds(30)));
}

}  // namespace
}  // namespace server

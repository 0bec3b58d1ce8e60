// informer.v1.Events end to end: the real informer_sidecar binary records
// Kubernetes Events into the real kube_emulator binary (both child
// processes, reached over a unix socket and a kubeconfig). What lands is read
// back through the emulator's HTTP API by an informer on events, so every
// wait is for a notification (no polling, no sleeps).

#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/record/event_correlator.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/events.grpc.pb.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;
using ::informer::client::HttpRequest;
using ::informer::client::HttpResponse;

constexpr char kPodName[] = "checkout-7d4b9c8f5-xz2lq";

// The API server's view of the events in one namespace, kept by an
// informer, with waits on its notifications.
class ServerEvents {
 public:
  explicit ServerEvents(informer::client::ResourceClient* events)
      : informer_(events, Options()) {
    handler_.add = [this](const informer::ObjectPtr& o, bool) { Put(o); };
    handler_.update = [this](const informer::ObjectPtr&,
                             const informer::ObjectPtr& o) { Put(o); };
  }
  ~ServerEvents() { informer_.Stop(); }

  absl::Status Start() {
    if (absl::Status st = informer_.AddEventHandler(&handler_).status();
        !st.ok()) {
      return st;
    }
    if (absl::Status st = informer_.Start(); !st.ok()) return st;
    if (!informer_.WaitForSync(absl::Seconds(60))) {
      return absl::DeadlineExceededError("events informer did not sync");
    }
    return absl::OkStatus();
  }

  // Waits until `pred` holds for the stored events (name -> Event). The
  // deadline is a safety net, not the expected path.
  template <typename Pred>
  bool Await(Pred pred, absl::Duration safety_net = absl::Seconds(60)) {
    absl::MutexLock lock(&mu_);
    auto cond = [this, &pred]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pred(events_);
    };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), safety_net);
  }

  std::map<std::string, informer::Event> Snapshot() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  // Events about the object named `name`.
  static std::vector<informer::Event> About(
      const std::map<std::string, informer::Event>& events,
      const std::string& name) {
    std::vector<informer::Event> out;
    for (const auto& entry : events) {
      if (entry.second.involved_object.name == name) {
        out.push_back(entry.second);
      }
    }
    return out;
  }

 private:
  static informer::SharedIndexInformer::Options Options() {
    informer::SharedIndexInformer::Options o;
    o.name = "e2e-events";
    return o;
  }

  void Put(const informer::ObjectPtr& o) {
    absl::StatusOr<informer::Event> e =
        informer::EventFromJson(o->json().str());
    if (!e.ok()) return;
    absl::MutexLock lock(&mu_);
    events_[e->name] = *std::move(e);
  }

  informer::SharedIndexInformer informer_;
  informer::ResourceEventHandlerFuncs handler_;
  absl::Mutex mu_;
  std::map<std::string, informer::Event> events_ ABSL_GUARDED_BY(mu_);
};

class EventsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> emulator_binary = FindEmulatorBinary("");
    ASSERT_TRUE(emulator_binary.ok()) << emulator_binary.status();
    absl::StatusOr<std::unique_ptr<EmulatorProcess>> emu =
        EmulatorProcess::Start(*emulator_binary, {}, /*quiet=*/true);
    ASSERT_TRUE(emu.ok()) << emu.status();
    emulator_ = *std::move(emu);

    informer::client::RestConfig config;
    config.server = emulator_->url();
    absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
        informer::client::KubeClient::Create(config);
    ASSERT_TRUE(kube.ok()) << kube.status();
    kube_ = *std::move(kube);
    absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> events =
        kube_->ForResource("events", "demo");
    ASSERT_TRUE(events.ok()) << events.status();
    events_client_ = *std::move(events);
    server_events_ = std::make_unique<ServerEvents>(events_client_.get());
    ASSERT_TRUE(server_events_->Start().ok());
  }

  void TearDown() override {
    sidecar_.reset();
    server_events_.reset();
    events_client_.reset();
    kube_.reset();
    emulator_.reset();
  }

  // Starts the sidecar (lazy mode: no informers, so the event writes are
  // its only API requests) with POD_NAME set as the downward API would.
  void StartSidecar(std::vector<std::string> flags) {
    absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    absl::StatusOr<std::string> kubeconfig =
        WriteKubeconfig(tmp, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    SidecarProcess::Options options;
    options.flags = std::move(flags);
    options.flags.push_back("--kubeconfig=" + *kubeconfig);
    options.env.push_back(absl::StrCat("POD_NAME=", kPodName));
    absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
        SidecarProcess::Start(*binary, std::move(options));
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    stub_ = v1::Events::NewStub(sidecar_->NewChannel());
  }

  grpc::Status Record(const v1::RecordEventRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::RecordEventResponse response;
    return stub_->Record(&context, request, &response);
  }

  // An API request to the emulator (fault injection).
  void Control(const std::string& op) {
    HttpRequest request;
    request.method = "POST";
    request.path = "/_emulator/" + op;
    absl::StatusOr<HttpResponse> r = kube_->transport()->Do(request);
    ASSERT_TRUE(r.ok()) << op << ": " << r.status();
  }

  static v1::RecordEventRequest Request(const std::string& name,
                                        const std::string& reason,
                                        const std::string& message = "m") {
    v1::RecordEventRequest r;
    r.mutable_object()->set_kind("Pod");
    r.mutable_object()->set_namespace_("demo");
    r.mutable_object()->set_name(name);
    r.mutable_object()->set_uid("uid-" + name);
    r.mutable_object()->set_api_version("v1");
    r.set_type("Warning");
    r.set_reason(reason);
    r.set_message(message);
    return r;
  }

  std::unique_ptr<EmulatorProcess> emulator_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  std::unique_ptr<informer::client::ResourceClient> events_client_;
  std::unique_ptr<ServerEvents> server_events_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::unique_ptr<v1::Events::Stub> stub_;
};

TEST_F(EventsE2eTest, EventsLandWithTheirFieldsAndRepeatsBecomeACount) {
  StartSidecar({});
  v1::RecordEventRequest request =
      Request("web-0", "BackOff", "Back-off restarting failed container");
  request.mutable_object()->set_field_path("spec.containers{web}");
  ASSERT_TRUE(Record(request).ok());
  ASSERT_TRUE(server_events_->Await([](const auto& events) {
    return ServerEvents::About(events, "web-0").size() == 1;
  }));
  informer::Event e =
      ServerEvents::About(server_events_->Snapshot(), "web-0")[0];
  EXPECT_EQ(e.namespace_, "demo");
  EXPECT_EQ(e.involved_object.kind, "Pod");
  EXPECT_EQ(e.involved_object.namespace_, "demo");
  EXPECT_EQ(e.involved_object.uid, "uid-web-0");
  EXPECT_EQ(e.involved_object.api_version, "v1");
  EXPECT_EQ(e.involved_object.field_path, "spec.containers{web}");
  EXPECT_EQ(e.type, "Warning");
  EXPECT_EQ(e.reason, "BackOff");
  EXPECT_EQ(e.message, "Back-off restarting failed container");
  // No --event_component: the workload name from POD_NAME; the host is the
  // pod.
  EXPECT_EQ(e.source_component, "checkout");
  EXPECT_EQ(e.source_host, kPodName);
  EXPECT_EQ(e.reporting_component, "checkout");
  EXPECT_EQ(e.reporting_instance, kPodName);
  EXPECT_EQ(e.count, 1);
  EXPECT_FALSE(e.resource_version.empty());

  // The same event four more times: one Event, count 5 (PATCHed).
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Record(request).ok());
  ASSERT_TRUE(server_events_->Await([](const auto& events) {
    std::vector<informer::Event> about = ServerEvents::About(events, "web-0");
    return about.size() == 1 && about[0].count == 5;
  })) << "count: "
      << ServerEvents::About(server_events_->Snapshot(), "web-0")[0].count;
  e = ServerEvents::About(server_events_->Snapshot(), "web-0")[0];
  EXPECT_EQ(e.message, "Back-off restarting failed container");
  EXPECT_GE(e.last_timestamp, e.first_timestamp);

  // Bad input never reaches the API server.
  grpc::Status bad = Record(Request("web-0", ""));
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message().rfind("reason: ", 0), 0u)
      << bad.error_message();

  // SIGTERM: a clean exit (events flushed, within the bounded time).
  EXPECT_EQ(sidecar_->Terminate(), 0);
}

TEST_F(EventsE2eTest, ABurstBeyondTheSpamFilterIsHeldBack) {
  StartSidecar({"--event_component=burst-test"});
  // 30 distinct events about one object in one stream: the spam filter's
  // bucket (per source and object) holds 25.
  grpc::ClientContext context;
  v1::RecordEventStreamResponse summary;
  auto writer = stub_->RecordStream(&context, &summary);
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(writer->Write(Request("web-0", absl::StrCat("Reason", i))));
  }
  ASSERT_TRUE(writer->WritesDone());
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(summary.accepted(), 30);  // accepted; the filter acts later
  // Another object has its own bucket, and the sink writes in order: once
  // this lands, all 30 were handled.
  ASSERT_TRUE(Record(Request("web-1", "Marker")).ok());
  ASSERT_TRUE(server_events_->Await([](const auto& events) {
    return ServerEvents::About(events, "web-1").size() == 1;
  }));
  const auto events = server_events_->Snapshot();
  std::vector<informer::Event> about = ServerEvents::About(events, "web-0");
  EXPECT_EQ(about.size(), 25u);
  for (const informer::Event& e : about) {
    EXPECT_EQ(e.source_component, "burst-test");
  }
}

TEST_F(EventsE2eTest, AnAnsweredServerErrorIsNotRetried) {
  StartSidecar({"--event_retry_interval=100ms"});
  // The next event write gets 500 Internal Server Error. A real API server
  // may answer so after it stored the Event, so the sink must not POST it
  // again (client-go's recordEvent does not either): it is dropped.
  Control("fail?verb=create&resource=events&code=500&count=1");
  ASSERT_TRUE(Record(Request("web-0", "Started", "answered 500")).ok());
  // The sink writes in order: once the next event is stored, the first one
  // has had its only try.
  ASSERT_TRUE(Record(Request("web-1", "Started")).ok());
  ASSERT_TRUE(server_events_->Await([](const auto& events) {
    return ServerEvents::About(events, "web-1").size() == 1;
  }));
  EXPECT_TRUE(ServerEvents::About(server_events_->Snapshot(), "web-0").empty());
}

TEST_F(EventsE2eTest, A429RetryAfterIsHonoured) {
  // The retry interval is far longer than the test's safety net, so only
  // honouring the server's Retry-After (1s) gets the event through in time.
  StartSidecar({"--event_retry_interval=300s"});
  // The next two API requests (the event's first two tries) get 429 with
  // Retry-After: 1.
  Control("throttle?count=2&retry_after=1");
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Record(Request("web-0", "Throttled", "eventually")).ok());
  ASSERT_TRUE(server_events_->Await(
      [](const auto& events) {
        return ServerEvents::About(events, "web-0").size() == 1;
      },
      absl::Seconds(60)));
  // Two waits of the server's second: not sooner than asked.
  EXPECT_GE(absl::Now() - start, absl::Seconds(2));
}

TEST_F(EventsE2eTest, WatchShowsRecordedEvents) {
  StartSidecar({"--event_component=watch-test"});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto watch = stub_->Watch(&context, v1::WatchEventsRequest());
  // The headers arrive once the stream is registered with the sidecar.
  watch->WaitForInitialMetadata();
  ASSERT_TRUE(Record(Request("web-0", "Recorded")).ok());
  v1::WatchEventsResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.event().reason(), "Recorded");
  EXPECT_EQ(response.event().object().name(), "web-0");
  EXPECT_EQ(response.event().source_component(), "watch-test");
  EXPECT_EQ(response.event().source_host(), kPodName);
  EXPECT_EQ(response.lost_before(), 0);
  context.TryCancel();
}

}  // namespace
}  // namespace integration

#include "server/events_service/events_service.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/record/event_correlator.h"
#include "informer/record/event_recorder.h"
#include "informer/record/event_sink.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/events.grpc.pb.h"
#include "server/security/authz.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

// Stores events like the API server (by name), so that PATCHes of a count
// answer the whole updated event. Create can be held back (Block) to stall
// the sink.
class FakeSink : public informer::EventSink {
 public:
  absl::StatusOr<std::string> Create(absl::string_view json) override {
    absl::MutexLock lock(&mu_);
    ++entered_;
    mu_.Await(absl::Condition(
        +[](bool* blocked) { return !*blocked; }, &blocked_));
    absl::StatusOr<informer::Event> e = informer::EventFromJson(json);
    if (!e.ok()) return e.status();
    e->resource_version = absl::StrCat(++rv_);
    events_[e->name] = *e;
    created_.push_back(*e);
    return informer::EventToJson(*e);
  }

  absl::StatusOr<std::string> Patch(absl::string_view, absl::string_view name,
                                    absl::string_view patch) override {
    absl::MutexLock lock(&mu_);
    auto it = events_.find(std::string(name));
    if (it == events_.end()) return absl::NotFoundError("no such event");
    absl::StatusOr<informer::Event> p = informer::EventFromJson(patch);
    if (!p.ok()) return p.status();
    it->second.count = p->count;
    it->second.last_timestamp = p->last_timestamp;
    if (!p->message.empty()) it->second.message = p->message;
    ++patches_;
    return informer::EventToJson(it->second);
  }

  void Block(bool blocked) {
    absl::MutexLock lock(&mu_);
    blocked_ = blocked;
  }
  // Waits (up to 30s of real time, as a safety net) until `n` Create calls
  // have started.
  bool WaitForEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return entered_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }
  // Waits until `n` events were created and `patches` patches applied.
  bool WaitFor(int n, int patches = 0) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n, patches]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(created_.size()) >= n && patches_ >= patches;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }
  std::vector<informer::Event> created() {
    absl::MutexLock lock(&mu_);
    return created_;
  }
  std::vector<informer::Event> stored() {
    absl::MutexLock lock(&mu_);
    std::vector<informer::Event> out;
    for (const auto& entry : events_) out.push_back(entry.second);
    return out;
  }

 private:
  absl::Mutex mu_;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int rv_ ABSL_GUARDED_BY(mu_) = 0;
  int patches_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, informer::Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<informer::Event> created_ ABSL_GUARDED_BY(mu_);
};

v1::RecordEventRequest Request(const std::string& name,
                               const std::string& reason,
                               const std::string& message = "m",
                               const std::string& type = "Warning") {
  v1::RecordEventRequest r;
  r.mutable_object()->set_kind("Pod");
  r.mutable_object()->set_namespace_("demo");
  r.mutable_object()->set_name(name);
  r.mutable_object()->set_uid("uid-" + name);
  r.mutable_object()->set_api_version("v1");
  r.mutable_object()->set_field_path("spec.containers{web}");
  r.set_type(type);
  r.set_reason(reason);
  r.set_message(message);
  return r;
}

class EventsServiceTest : public ::testing::Test {
 protected:
  // Builds the broadcaster (recording to the fake sink), the service and a
  // loopback server. Tests tweak the options first.
  void Start() {
    broadcaster_options_.clock = &clock_;
    broadcaster_ =
        std::make_unique<informer::EventBroadcaster>(broadcaster_options_);
    broadcaster_->StartRecordingToSink(&sink_);
    service_options_.component = "my-app";
    service_options_.host = "my-app-7d4b9-xz2";
    service_ =
        std::make_unique<EventsService>(broadcaster_.get(), service_options_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Events::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    service_.reset();
    if (broadcaster_ != nullptr) broadcaster_->Shutdown();
  }

  grpc::Status Record(const v1::RecordEventRequest& request,
                      const std::string& token = "") {
    grpc::ClientContext context;
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::RecordEventResponse response;
    return stub_->Record(&context, request, &response);
  }

  std::unique_ptr<grpc::ClientReader<v1::WatchEventsResponse>> OpenWatch(
      grpc::ClientContext* context, const std::string& token = "") {
    if (!token.empty()) {
      context->AddMetadata("authorization", "Bearer " + token);
    }
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(60));
    return stub_->Watch(context, v1::WatchEventsRequest());
  }

  informer::FakeClock clock_;
  FakeSink sink_;
  informer::EventBroadcasterOptions broadcaster_options_;
  EventsServiceOptions service_options_;
  std::unique_ptr<informer::EventBroadcaster> broadcaster_;
  std::unique_ptr<EventsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Events::Stub> stub_;
};

TEST_F(EventsServiceTest, RecordFillsTheSourceAndReachesTheSink) {
  Start();
  ASSERT_TRUE(Record(Request("web-0", "BackOff", "restarting web")).ok());
  ASSERT_TRUE(sink_.WaitFor(1));
  const informer::Event e = sink_.created().at(0);
  EXPECT_EQ(e.namespace_, "demo");
  EXPECT_TRUE(absl::StartsWith(e.name, "web-0.")) << e.name;
  EXPECT_EQ(e.involved_object.kind, "Pod");
  EXPECT_EQ(e.involved_object.namespace_, "demo");
  EXPECT_EQ(e.involved_object.name, "web-0");
  EXPECT_EQ(e.involved_object.uid, "uid-web-0");
  EXPECT_EQ(e.involved_object.api_version, "v1");
  EXPECT_EQ(e.involved_object.field_path, "spec.containers{web}");
  EXPECT_EQ(e.type, "Warning");
  EXPECT_EQ(e.reason, "BackOff");
  EXPECT_EQ(e.message, "restarting web");
  EXPECT_EQ(e.source_component, "my-app");
  EXPECT_EQ(e.source_host, "my-app-7d4b9-xz2");
  EXPECT_EQ(e.reporting_component, "my-app");
  EXPECT_EQ(e.reporting_instance, "my-app-7d4b9-xz2");
  EXPECT_EQ(e.count, 1);
  EXPECT_EQ(e.first_timestamp, clock_.Now());
  EXPECT_EQ(e.last_timestamp, clock_.Now());
}

TEST_F(EventsServiceTest, ClusterScopedObjectsEventsGoToDefault) {
  Start();
  v1::RecordEventRequest r = Request("node-1", "NodeReady", "", "Normal");
  r.mutable_object()->set_kind("Node");
  r.mutable_object()->clear_namespace_();
  ASSERT_TRUE(Record(r).ok());
  ASSERT_TRUE(sink_.WaitFor(1));
  EXPECT_EQ(sink_.created().at(0).namespace_, "default");
  EXPECT_EQ(sink_.created().at(0).type, "Normal");
}

TEST_F(EventsServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  Start();
  struct Case {
    v1::RecordEventRequest request;
    std::string field;
  };
  std::vector<Case> cases;
  {
    v1::RecordEventRequest r = Request("web-0", "R");
    r.clear_object();
    cases.push_back({r, "object: "});
  }
  {
    v1::RecordEventRequest r = Request("web-0", "R");
    r.mutable_object()->clear_kind();
    cases.push_back({r, "object.kind: "});
  }
  {
    v1::RecordEventRequest r = Request("web-0", "R");
    r.mutable_object()->clear_name();
    cases.push_back({r, "object.name: "});
  }
  cases.push_back({Request("web-0", "R", "m", "Info"), "type: "});
  cases.push_back({Request("web-0", "R", "m", "warning"), "type: "});
  cases.push_back({Request("web-0", "R", "m", ""), "type: "});
  cases.push_back({Request("web-0", ""), "reason: "});
  cases.push_back({Request("web-0", std::string(129, 'R')), "reason: "});
  for (const Case& c : cases) {
    grpc::Status st = Record(c.request);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.field << ": " << st.error_message();
    EXPECT_TRUE(absl::StartsWith(st.error_message(), c.field))
        << st.error_message();
  }
  // Nothing invalid reached the sink: the first event it gets is this one.
  ASSERT_TRUE(Record(Request("web-0", "Valid")).ok());
  ASSERT_TRUE(sink_.WaitFor(1));
  std::vector<informer::Event> created = sink_.created();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].reason, "Valid");
}

TEST_F(EventsServiceTest, RepeatedEventsBecomeOneWithACount) {
  Start();
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(Record(Request("web-0", "BackOff", "restarting")).ok());
  }
  ASSERT_TRUE(sink_.WaitFor(1, /*patches=*/3));
  std::vector<informer::Event> stored = sink_.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].count, 4);
  EXPECT_EQ(stored[0].last_timestamp - stored[0].first_timestamp,
            absl::Seconds(3));
}

TEST_F(EventsServiceTest, SpamFilterHoldsBackABurstUntilTokensRefill) {
  Start();
  // 30 different reasons about one object: the bucket holds 25 tokens.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(Record(Request("web-0", absl::StrCat("Reason", i))).ok());
  }
  // Another object has its own bucket; the sink handles events in order, so
  // once this one is written every earlier one was handled.
  ASSERT_TRUE(Record(Request("web-1", "Marker")).ok());
  ASSERT_TRUE(sink_.WaitFor(26));
  std::vector<informer::Event> created = sink_.created();
  ASSERT_EQ(created.size(), 26u);
  for (int i = 0; i < 25; ++i) {
    EXPECT_EQ(created[i].reason, absl::StrCat("Reason", i));
  }
  EXPECT_EQ(created[25].involved_object.name, "web-1");
  // One token per 5 minutes of the (fake) clock.
  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(Record(Request("web-0", "AfterRefill")).ok());
  ASSERT_TRUE(Record(Request("web-0", "NoTokenLeft")).ok());
  ASSERT_TRUE(Record(Request("web-1", "Marker2")).ok());
  ASSERT_TRUE(sink_.WaitFor(28));
  created = sink_.created();
  ASSERT_EQ(created.size(), 28u);
  EXPECT_EQ(created[26].reason, "AfterRefill");
  EXPECT_EQ(created[27].reason, "Marker2");
}

TEST_F(EventsServiceTest, FullQueueIsResourceExhaustedNotABlockedCall) {
  // The sink's watcher holds one event, distribution waits for it, and the
  // incoming queue holds two: with the sink stalled, at most a handful of
  // events can be accepted before Record refuses.
  broadcaster_options_.incoming_queue_length = 2;
  broadcaster_options_.watcher_queue_length = 1;
  broadcaster_options_.full_queue_behavior =
      informer::FullQueueBehavior::kWaitIfFull;
  Start();
  sink_.Block(true);
  ASSERT_TRUE(Record(Request("web-0", "First")).ok());
  ASSERT_TRUE(sink_.WaitForEntered(1));
  int accepted = 1;
  int exhausted = 0;
  for (int i = 0; i < 20; ++i) {
    grpc::Status st = Record(Request("web-0", absl::StrCat("Reason", i)));
    if (st.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << st.error_message();
      EXPECT_TRUE(absl::StrContains(st.error_message(), "not recorded"))
          << st.error_message();
      ++exhausted;
    }
  }
  EXPECT_GT(exhausted, 0);
  // In the sink, its watcher queue, in distribution, in the incoming queue
  // (2), and the service's own Watch watcher may hold one more in flight.
  EXPECT_LE(accepted, 6);
  // Nothing accepted is lost once the sink catches up.
  sink_.Block(false);
  ASSERT_TRUE(sink_.WaitFor(accepted));
  ASSERT_TRUE(Record(Request("web-1", "AfterStall")).ok());
  ASSERT_TRUE(sink_.WaitFor(accepted + 1));
  EXPECT_EQ(sink_.created().size(), static_cast<size_t>(accepted + 1));
}

TEST_F(EventsServiceTest, RecordStreamSummarisesABurst) {
  Start();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1::RecordEventStreamResponse summary;
  std::unique_ptr<grpc::ClientWriter<v1::RecordEventRequest>> writer =
      stub_->RecordStream(&context, &summary);
  for (int i = 0; i < 6; ++i) {
    v1::RecordEventRequest r = Request("web-0", absl::StrCat("Reason", i));
    if (i == 2) r.set_type("Fatal");
    if (i == 4) r.clear_reason();
    ASSERT_TRUE(writer->Write(r));
  }
  ASSERT_TRUE(writer->WritesDone());
  grpc::Status st = writer->Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(summary.accepted(), 4);
  EXPECT_EQ(summary.rejected(), 2);
  ASSERT_TRUE(summary.has_first_error());
  EXPECT_EQ(summary.first_error().index(), 2);
  EXPECT_EQ(summary.first_error().code(),
            static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_TRUE(absl::StartsWith(summary.first_error().message(), "type: "))
      << summary.first_error().message();
  ASSERT_TRUE(sink_.WaitFor(4));
  std::vector<informer::Event> created = sink_.created();
  ASSERT_EQ(created.size(), 4u);
  EXPECT_EQ(created[0].reason, "Reason0");
  EXPECT_EQ(created[1].reason, "Reason1");
  EXPECT_EQ(created[2].reason, "Reason3");
  EXPECT_EQ(created[3].reason, "Reason5");
}

TEST_F(EventsServiceTest, RecordStreamOfValidEventsHasNoError) {
  Start();
  grpc::ClientContext context;
  v1::RecordEventStreamResponse summary;
  auto writer = stub_->RecordStream(&context, &summary);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(writer->Write(Request("web-0", absl::StrCat("R", i))));
  }
  ASSERT_TRUE(writer->WritesDone());
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(summary.accepted(), 3);
  EXPECT_EQ(summary.rejected(), 0);
  EXPECT_FALSE(summary.has_first_error());
}

TEST_F(EventsServiceTest, WatchStreamsEventsRecordedAfterItOpened) {
  Start();
  // Recorded before any Watch: not streamed.
  ASSERT_TRUE(Record(Request("web-0", "Before")).ok());
  service_->WaitForEventsFannedOut(1);
  grpc::ClientContext c1, c2;
  auto w1 = OpenWatch(&c1);
  auto w2 = OpenWatch(&c2);
  service_->WaitForWatchStreams(2);
  clock_.Advance(absl::Seconds(2));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        Record(Request("web-0", "BackOff", absl::StrCat("try ", i))).ok());
  }
  for (auto* w : {w1.get(), w2.get()}) {
    for (int i = 0; i < 3; ++i) {
      v1::WatchEventsResponse r;
      ASSERT_TRUE(w->Read(&r));
      EXPECT_EQ(r.lost_before(), 0);
      EXPECT_EQ(r.event().reason(), "BackOff");
      EXPECT_EQ(r.event().message(), absl::StrCat("try ", i));
      EXPECT_EQ(r.event().type(), "Warning");
      EXPECT_EQ(r.event().namespace_(), "demo");
      EXPECT_TRUE(absl::StartsWith(r.event().name(), "web-0."));
      EXPECT_EQ(r.event().object().kind(), "Pod");
      EXPECT_EQ(r.event().object().name(), "web-0");
      EXPECT_EQ(r.event().object().uid(), "uid-web-0");
      EXPECT_EQ(r.event().source_component(), "my-app");
      EXPECT_EQ(r.event().source_host(), "my-app-7d4b9-xz2");
      EXPECT_EQ(r.event().time().seconds(), absl::ToUnixSeconds(clock_.Now()));
    }
  }
  // Shutdown ends the streams (so a server shutdown need not wait) and
  // refuses further records.
  service_->Shutdown();
  v1::WatchEventsResponse r;
  EXPECT_FALSE(w1->Read(&r));
  EXPECT_EQ(w1->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(w2->Read(&r));
  EXPECT_EQ(w2->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Record(Request("web-0", "Late")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext c3;
  auto w3 = OpenWatch(&c3);
  EXPECT_FALSE(w3->Read(&r));
  EXPECT_EQ(w3->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(EventsServiceTest, SlowWatcherLosesOldestEventsWithACount) {
  service_options_.watch_queue_length = 4;
  Start();
  grpc::ClientContext slow_context, fast_context;
  auto slow = OpenWatch(&slow_context);
  service_->WaitForWatchStreams(1);
  auto fast = OpenWatch(&fast_context);
  service_->WaitForWatchStreams(2);
  service_->SetWatchStreamPaused(0, true);  // `slow` sends nothing
  // The others (a stream read as events come, and the sink) get everything
  // meanwhile. (Read in step: a burst of 10 would overflow even a reading
  // stream's queue of 4 while its first write is in flight.)
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(Record(Request("web-0", absl::StrCat("R", i))).ok());
    v1::WatchEventsResponse r;
    ASSERT_TRUE(fast->Read(&r));
    EXPECT_EQ(r.event().reason(), absl::StrCat("R", i));
    EXPECT_EQ(r.lost_before(), 0);
  }
  ASSERT_TRUE(sink_.WaitFor(10));
  // The slow stream kept the newest 4 and says it lost 6 before them.
  service_->SetWatchStreamPaused(0, false);
  for (int i = 7; i <= 10; ++i) {
    v1::WatchEventsResponse r;
    ASSERT_TRUE(slow->Read(&r));
    EXPECT_EQ(r.event().reason(), absl::StrCat("R", i));
    EXPECT_EQ(r.lost_before(), i == 7 ? 6 : 0);
  }
  // And it carries on normally.
  ASSERT_TRUE(Record(Request("web-0", "R11")).ok());
  v1::WatchEventsResponse r;
  ASSERT_TRUE(slow->Read(&r));
  EXPECT_EQ(r.event().reason(), "R11");
  EXPECT_EQ(r.lost_before(), 0);
  slow_context.TryCancel();
  fast_context.TryCancel();
  service_->WaitForWatchStreams(0);
}

TEST_F(EventsServiceTest, WatchHeadersMeanTheStreamIsRegistered) {
  Start();
  grpc::ClientContext context;
  auto w = OpenWatch(&context);
  w->WaitForInitialMetadata();
  ASSERT_TRUE(Record(Request("web-0", "AfterHeaders")).ok());
  v1::WatchEventsResponse r;
  ASSERT_TRUE(w->Read(&r));
  EXPECT_EQ(r.event().reason(), "AfterHeaders");
  context.TryCancel();
}

TEST_F(EventsServiceTest, TokensNeedRecordEventsInTheObjectsNamespace) {
  absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
      Authorizer::FromTokensYaml(
          "tokens:\n"
          "- {name: recorder, token: rec-token, resources: [pods],\n"
          "   namespaces: [demo], recordEvents: true}\n"
          "- {name: reader, token: read-token, resources: [pods]}\n"
          "- {name: admin, token: admin-token, resources: ['*'],\n"
          "   recordEvents: true}\n",
          "tokens.yaml", "", Authorizer::Options());
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  service_options_.authorizer = authorizer->get();
  Start();
  EXPECT_EQ(Record(Request("web-0", "R")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Record(Request("web-0", "R"), "read-token").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::RecordEventRequest other_ns = Request("web-0", "R");
  other_ns.mutable_object()->set_namespace_("prod");
  EXPECT_EQ(Record(other_ns, "rec-token").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Record(Request("web-0", "Allowed"), "rec-token").ok());
  ASSERT_TRUE(Record(other_ns, "admin-token").ok());
  ASSERT_TRUE(sink_.WaitFor(2));
  EXPECT_EQ(sink_.created().size(), 2u);
  // In a stream, each event is checked.
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer rec-token");
    v1::RecordEventStreamResponse summary;
    auto writer = stub_->RecordStream(&context, &summary);
    ASSERT_TRUE(writer->Write(Request("web-0", "InDemo")));
    ASSERT_TRUE(writer->Write(other_ns));
    ASSERT_TRUE(writer->WritesDone());
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(summary.accepted(), 1);
    EXPECT_EQ(summary.first_error().index(), 1);
    EXPECT_EQ(summary.first_error().code(),
              static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  }
  // Watch shows every namespace's events: only for all-namespace grants.
  v1::WatchEventsResponse r;
  {
    grpc::ClientContext context;
    auto w = OpenWatch(&context, "rec-token");
    EXPECT_FALSE(w->Read(&r));
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  grpc::ClientContext context;
  auto w = OpenWatch(&context, "admin-token");
  w->WaitForInitialMetadata();
  ASSERT_TRUE(Record(Request("web-0", "Watched"), "admin-token").ok());
  // An event recorded just before the Watch opened may still be on its way
  // through the broadcaster and arrive first; the admin's Watch must reach
  // the new one.
  bool watched = false;
  while (!watched && w->Read(&r)) watched = r.event().reason() == "Watched";
  EXPECT_TRUE(watched);
  context.TryCancel();
}

TEST_F(EventsServiceTest, CancelledWatchIsDetached) {
  Start();
  {
    grpc::ClientContext context;
    auto w = OpenWatch(&context);
    service_->WaitForWatchStreams(1);
    context.TryCancel();
    v1::WatchEventsResponse r;
    EXPECT_FALSE(w->Read(&r));
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  service_->WaitForWatchStreams(0);
  // Recording still works with no stream attached.
  ASSERT_TRUE(Record(Request("web-0", "R")).ok());
  ASSERT_TRUE(sink_.WaitFor(1));
}

}  // namespace
}  // namespace server

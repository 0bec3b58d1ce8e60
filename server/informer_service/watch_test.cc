#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "informer/cache/index.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/informer_service.h"
#include "server/informer_service/watch/watch_hub.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using Labels = informer::FakeSource::Labels;
using ::testing::HasSubstr;

// Replays a stream's events into the client's view of the objects.
struct ClientState {
  std::map<std::string, std::string> objects;  // key -> json
  std::vector<v1::Event> events;

  void Apply(const v1::Event& e) {
    events.push_back(e);
    if (!e.has_object()) return;
    auto obj = informer::Object::Parse(e.object().json());
    ASSERT_TRUE(obj.ok()) << obj.status();
    const std::string key = (*obj)->Key();
    switch (e.type()) {
      case v1::EVENT_TYPE_ADDED:
        EXPECT_EQ(objects.count(key), 0u) << "ADDED twice: " << key;
        objects[key] = e.object().json();
        break;
      case v1::EVENT_TYPE_MODIFIED:
        EXPECT_EQ(objects.count(key), 1u) << "MODIFIED unknown: " << key;
        objects[key] = e.object().json();
        break;
      case v1::EVENT_TYPE_DELETED:
        EXPECT_EQ(objects.count(key), 1u) << "DELETED unknown: " << key;
        objects.erase(key);
        break;
      default:
        break;
    }
  }
};

class WatchStreamTest : public ::testing::Test {
 protected:
  // With `start_informers` false the service is up before the informer
  // starts (StartInformers() later).
  void Start(WatchOptions watch = {}, bool start_informers = true) {
    ListerWatcherFactory factory = [this](const ResourceConfig&)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      auto source = std::make_unique<informer::FakeSource>();
      source_ = source.get();
      return source;
    };
    auto registry = InformerRegistry::Create(
        {{.resource = "pods", .label_indexes = {"app"}}}, factory);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    for (const auto& [ns, name, app] : seed_) {
      ASSERT_TRUE(source_->Add(ns, name, Labels{{"app", app}}).ok());
    }
    entry_ = *registry_->Find("pods");
    if (start_informers) StartInformers();
    InformerService::Options options;
    options.watch = watch;
    service_ =
        std::make_unique<InformerService>(registry_.get(), options, &clock_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void StartInformers() {
    ASSERT_TRUE(registry_->Start().ok());
    ASSERT_TRUE(entry_->informer->WaitForSync(absl::Seconds(30)));
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
    }
    service_.reset();
    if (registry_ != nullptr) registry_->Stop();
  }

  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader;
  };

  std::unique_ptr<Call> Open(v1::WatchRequest req) {
    auto call = std::make_unique<Call>();
    // A stuck stream fails the test instead of hanging it.
    call->ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(60));
    call->reader = stub_->Watch(&call->ctx, req);
    return call;
  }

  static v1::WatchRequest Pods() {
    v1::WatchRequest req;
    req.set_resource("pods");
    return req;
  }

  // Reads one message into `state`; false when the stream ended.
  static bool ReadOne(Call* call, ClientState* state,
                      v1::WatchResponse* out = nullptr) {
    v1::WatchResponse resp;
    if (!call->reader->Read(&resp)) return false;
    for (const v1::Event& e : resp.events()) state->Apply(e);
    if (out != nullptr) *out = resp;
    return true;
  }

  // Reads until INITIAL_STATE_DONE.
  static void ReadInitial(Call* call, ClientState* state) {
    while (true) {
      ASSERT_TRUE(ReadOne(call, state));
      if (state->events.back().type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
        return;
      }
    }
  }

  // Reads until the client holds `n` more events than now.
  static void ReadEvents(Call* call, ClientState* state, size_t n) {
    const size_t want = state->events.size() + n;
    while (state->events.size() < want) ASSERT_TRUE(ReadOne(call, state));
  }

  static grpc::Status Finish(Call* call) {
    v1::WatchResponse resp;
    while (call->reader->Read(&resp)) {
    }
    return call->reader->Finish();
  }

  std::map<std::string, std::string> SourceState() {
    std::map<std::string, std::string> out;
    for (const auto& [key, obj] : source_->Snapshot()) {
      out[key] = obj->json().str();
    }
    return out;
  }

  struct Seed {
    std::string ns, name, app;
  };
  std::vector<Seed> seed_ = {{"default", "a", "web"},
                             {"default", "b", "db"},
                             {"kube-system", "c", "web"}};
  informer::FakeClock clock_;
  informer::FakeSource* source_ = nullptr;
  std::unique_ptr<InformerRegistry> registry_;
  InformerEntry* entry_ = nullptr;
  std::unique_ptr<InformerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(WatchStreamTest, InitialStateThenMarkerInOneMessage) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  v1::WatchResponse first;
  ASSERT_TRUE(ReadOne(call.get(), &state, &first));
  // Everything was queued before the first write: one message.
  ASSERT_EQ(first.events_size(), 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(first.events(i).type(), v1::EVENT_TYPE_ADDED);
    EXPECT_TRUE(first.events(i).initial());
    EXPECT_FALSE(first.events(i).resume_token().empty());
    EXPECT_FALSE(first.events(i).resource_version().empty());
  }
  EXPECT_EQ(first.events(3).type(), v1::EVENT_TYPE_INITIAL_STATE_DONE);
  EXPECT_EQ(first.events(3).resource_version(),
            entry_->informer->LastSyncResourceVersion());
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, NoPerObjectWorkUntilAStreamOpens) {
  Start();
  // Synced, and nobody watches: the fan-out has handled nothing.
  EXPECT_EQ(service_->watch_hub().events(), 0u);
  std::vector<WatchMemoryStats> memory = service_->watch_hub().MemoryNow();
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].history_events, 0u);

  // The first stream gets the whole cache; the catch-up is not history.
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  EXPECT_EQ(state.objects, SourceState());
  EXPECT_EQ(service_->watch_hub().MemoryNow()[0].history_events, 0u);
  const std::string done_token = state.events.back().resume_token();
  ClientState again = state;

  // Live events after it are, and a stream resumes from its token.
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "api"}}).ok());
  ReadEvents(call.get(), &state, 1);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(service_->watch_hub().MemoryNow()[0].history_events, 1u);
  call->ctx.TryCancel();
  Finish(call.get());

  v1::WatchRequest req = Pods();
  req.set_resume_token(done_token);
  auto resumed = Open(req);
  ReadEvents(resumed.get(), &again, 1);
  EXPECT_EQ(again.events.back().type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(again.objects, SourceState());
}

TEST_F(WatchStreamTest, StreamsOpenedWhileTheCacheChangesMissNothing) {
  // The first streams register the fan-out with the informer while
  // events flow: every stream must end up with exactly the source's
  // state, whichever stream registered and whenever.
  Start();
  constexpr int kStreams = 6;
  std::thread writer([this] {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(source_->Add("default", absl::StrCat("w", i)).ok());
    }
    for (int i = 0; i < 300; ++i) {
      const std::string name = absl::StrCat("w", i % 20);
      if (i % 10 == 0) {
        // Deleted and created again: a new object under the same name.
        ASSERT_TRUE(source_->Delete("default", name).ok());
        ASSERT_TRUE(source_->Add("default", name).ok());
      } else {
        ASSERT_TRUE(source_
                        ->Modify("default", name,
                                 Labels{{"app", "web"}, {"i", absl::StrCat(i)}})
                        .ok());
      }
    }
    ASSERT_TRUE(source_->Add("default", "zz-end").ok());
  });
  std::vector<ClientState> states(kStreams);
  std::vector<std::thread> readers;
  for (int k = 0; k < kStreams; ++k) {
    readers.emplace_back([this, k, &states] {
      auto call = Open(Pods());
      ClientState& state = states[k];
      ReadInitial(call.get(), &state);
      while (state.objects.count("default/zz-end") == 0) {
        ASSERT_TRUE(ReadOne(call.get(), &state));
      }
      call->ctx.TryCancel();
      Finish(call.get());
    });
  }
  writer.join();
  for (std::thread& t : readers) t.join();
  const std::map<std::string, std::string> want = SourceState();
  for (int k = 0; k < kStreams; ++k) {
    EXPECT_EQ(states[k].objects, want) << "stream " << k;
  }
}

TEST_F(WatchStreamTest, NamespaceFilterLimitsInitialState) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_namespace_("kube-system");
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  ASSERT_EQ(state.objects.size(), 1u);
  EXPECT_EQ(state.objects.begin()->first, "kube-system/c");
  // Live events of other namespaces are not sent.
  ASSERT_TRUE(source_->Add("default", "x").ok());
  ASSERT_TRUE(source_->Add("kube-system", "y").ok());
  ReadEvents(call.get(), &state, 1);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(state.objects.count("kube-system/y"), 1u);
  EXPECT_EQ(state.objects.count("default/x"), 0u);
}

TEST_F(WatchStreamTest, LiveEventsInOrderWithOldObject) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_send_old_object(true);
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::string a_before = state.objects["default/a"];
  auto added = source_->Add("default", "n", Labels{{"app", "x"}});
  ASSERT_TRUE(added.ok());
  auto modified = source_->Modify("default", "a", Labels{{"app", "v2"}});
  ASSERT_TRUE(modified.ok());
  auto deleted = source_->Delete("default", "b");
  ASSERT_TRUE(deleted.ok());
  ReadEvents(call.get(), &state, 3);
  const size_t base = state.events.size() - 3;
  const v1::Event& e1 = state.events[base];
  const v1::Event& e2 = state.events[base + 1];
  const v1::Event& e3 = state.events[base + 2];
  EXPECT_EQ(e1.type(), v1::EVENT_TYPE_ADDED);
  EXPECT_FALSE(e1.initial());
  EXPECT_EQ(e1.resource_version(), (*added)->resource_version());
  EXPECT_EQ(e2.type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(e2.resource_version(), (*modified)->resource_version());
  EXPECT_EQ(e2.old_object().json(), a_before);
  EXPECT_EQ(e3.type(), v1::EVENT_TYPE_DELETED);
  EXPECT_FALSE(e3.tombstone());
  EXPECT_NE(e1.resume_token(), e3.resume_token());
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, DeleteInferredByRelistIsFlaggedTombstone) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  // Cut the informer off, delete while it cannot see, and drop the history:
  // the informer only learns of the delete from its next list.
  const absl::Status cut = absl::UnavailableError("cut");
  source_->FailWatches(1 << 30, cut);
  source_->FailLists(1 << 30, cut);
  source_->BreakWatches(cut);
  ASSERT_TRUE(source_->Delete("default", "b").ok());
  source_->CompactHistory();
  source_->FailLists(0, absl::OkStatus());
  source_->FailWatches(0, absl::OkStatus());
  ReadEvents(call.get(), &state, 1);
  const v1::Event& e = state.events.back();
  EXPECT_EQ(e.type(), v1::EVENT_TYPE_DELETED);
  EXPECT_TRUE(e.tombstone());
  EXPECT_TRUE(absl::StrContains(e.object().json(), R"("name":"b")"));
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, StructEncodingForInitialAndLiveEvents) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_encoding(v1::ENCODING_STRUCT);
  req.set_send_old_object(true);
  auto call = Open(req);
  v1::WatchResponse first;
  ASSERT_TRUE(call->reader->Read(&first));
  ASSERT_EQ(first.events_size(), 4);
  const auto name_of = [](const v1::Object& o) {
    return o.struct_()
        .fields()
        .at("metadata")
        .struct_value()
        .fields()
        .at("name")
        .string_value();
  };
  EXPECT_TRUE(first.events(0).object().has_struct_());
  EXPECT_EQ(name_of(first.events(0).object()), "a");
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "v2"}}).ok());
  v1::WatchResponse live;
  ASSERT_TRUE(call->reader->Read(&live));
  ASSERT_EQ(live.events_size(), 1);
  EXPECT_EQ(live.events(0).type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(name_of(live.events(0).object()), "a");
  EXPECT_EQ(name_of(live.events(0).old_object()), "a");
  EXPECT_NE(live.events(0).object().DebugString(),
            live.events(0).old_object().DebugString());
}

TEST_F(WatchStreamTest, OneEventReachesEveryMatchingStream) {
  Start();
  auto all = Open(Pods());
  v1::WatchRequest web_req = Pods();
  web_req.set_label_selector("app=web");
  auto web = Open(web_req);
  v1::WatchRequest db_req = Pods();
  db_req.set_label_selector("app=db");
  auto db = Open(db_req);
  ClientState all_state, web_state, db_state;
  ReadInitial(all.get(), &all_state);
  ReadInitial(web.get(), &web_state);
  ReadInitial(db.get(), &db_state);
  service_->watch_hub().WaitForOpenStreams(3);
  ASSERT_TRUE(source_->Add("default", "w2", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source_->Add("default", "d2", Labels{{"app", "db"}}).ok());
  ReadEvents(all.get(), &all_state, 2);
  ReadEvents(web.get(), &web_state, 1);
  ReadEvents(db.get(), &db_state, 1);
  EXPECT_EQ(all_state.objects, SourceState());
  EXPECT_EQ(web_state.objects.count("default/w2"), 1u);
  EXPECT_EQ(web_state.objects.count("default/d2"), 0u);
  EXPECT_EQ(db_state.objects.count("default/d2"), 1u);
  EXPECT_EQ(db_state.objects.count("default/w2"), 0u);
}

TEST_F(WatchStreamTest, LabelSelectorEnterAndLeave) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_label_selector("app in (web)");
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  EXPECT_EQ(state.objects.size(), 2u);  // a and c
  ASSERT_TRUE(source_->Modify("default", "b", Labels{{"app", "web"}}).ok());
  ReadEvents(call.get(), &state, 1);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(state.objects.count("default/b"), 1u);
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "db"}}).ok());
  ReadEvents(call.get(), &state, 1);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_DELETED);
  EXPECT_EQ(state.objects.count("default/a"), 0u);
  EXPECT_EQ(state.objects.size(), 2u);  // b and c
}

// Streams opened with the same filter share one filter object, judged
// once per event for all of them: each still gets its own enter and leave
// events, as do streams with other filters beside them.
TEST_F(WatchStreamTest, StreamsSharingAFilterEachGetTheirEnterAndLeave) {
  Start();
  v1::WatchRequest web_req = Pods();
  web_req.set_label_selector("app=web");
  v1::WatchRequest web_in_req = Pods();
  web_in_req.set_label_selector("app in (web)");  // same set, other text
  v1::WatchRequest db_req = Pods();
  db_req.set_label_selector("app=db");
  std::vector<v1::WatchRequest> reqs = {web_req, web_req, web_in_req, db_req};
  std::vector<std::unique_ptr<Call>> calls;
  std::vector<ClientState> states(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    calls.push_back(Open(reqs[i]));
    ReadInitial(calls[i].get(), &states[i]);
  }
  service_->watch_hub().WaitForOpenStreams(reqs.size());
  // b enters app=web, then a leaves it for app=db.
  ASSERT_TRUE(source_->Modify("default", "b", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "db"}}).ok());
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const size_t initial = states[i].events.size();
    ReadEvents(calls[i].get(), &states[i], 2);
    ASSERT_EQ(states[i].events.size(), initial + 2);
    EXPECT_EQ(states[i].events[initial].type(), v1::EVENT_TYPE_ADDED);
    EXPECT_EQ(states[i].events[initial + 1].type(), v1::EVENT_TYPE_DELETED);
    EXPECT_EQ(states[i].objects.count("default/b"), 1u);
    EXPECT_EQ(states[i].objects.count("default/a"), 0u);
  }
  // app=db: b left it (it held b), then a entered it.
  const size_t initial = states[3].events.size();
  ReadEvents(calls[3].get(), &states[3], 2);
  ASSERT_EQ(states[3].events.size(), initial + 2);
  EXPECT_EQ(states[3].events[initial].type(), v1::EVENT_TYPE_DELETED);
  EXPECT_EQ(states[3].events[initial + 1].type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(states[3].objects.count("default/a"), 1u);
  EXPECT_EQ(states[3].objects.count("default/b"), 0u);
}

TEST_F(WatchStreamTest, IndexFilter) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_index_name(informer::LabelIndexName("app"));
  req.set_index_value("db");
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  ASSERT_EQ(state.objects.size(), 1u);
  EXPECT_EQ(state.objects.count("default/b"), 1u);
  ASSERT_TRUE(source_->Add("default", "d", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source_->Add("default", "e", Labels{{"app", "db"}}).ok());
  ReadEvents(call.get(), &state, 1);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(state.objects.count("default/e"), 1u);
  EXPECT_EQ(state.objects.count("default/d"), 0u);
}

TEST_F(WatchStreamTest, EventsQueuedDuringAWriteGoOutInOneMessage) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const uint64_t before = service_->watch_hub().events();
  service_->watch_hub().SetWritesPaused(true);
  ASSERT_TRUE(source_->Add("default", "p1").ok());
  ASSERT_TRUE(source_->Add("default", "p2").ok());
  ASSERT_TRUE(source_->Modify("default", "p1", Labels{{"k", "v"}}).ok());
  service_->watch_hub().WaitForEvents(before + 3);
  service_->watch_hub().SetWritesPaused(false);
  v1::WatchResponse resp;
  ASSERT_TRUE(ReadOne(call.get(), &state, &resp));
  ASSERT_EQ(resp.events_size(), 3);
  // Per object, in the informer's order (its DeltaFIFO may hand over p1's
  // add and update together, before or after p2's add).
  std::map<std::string, std::vector<v1::EventType>> by_name;
  for (const v1::Event& e : resp.events()) {
    auto obj = informer::Object::Parse(e.object().json());
    ASSERT_TRUE(obj.ok());
    by_name[std::string((*obj)->name())].push_back(e.type());
  }
  EXPECT_EQ(by_name["p1"], (std::vector<v1::EventType>{
                               v1::EVENT_TYPE_ADDED, v1::EVENT_TYPE_MODIFIED}));
  EXPECT_EQ(by_name["p2"], (std::vector<v1::EventType>{v1::EVENT_TYPE_ADDED}));
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, BatchWindowGathersABusyStreamAndWritesAQuietOneAtOnce) {
  Start({.batch_window = absl::Milliseconds(5)});
  auto call = Open(Pods());
  ClientState state;
  // The stream counts as busy from its creation: its initial state goes out
  // when the window ends (the clock is fake: advance it until it does).
  absl::Notification initial;
  std::thread reader([&] {
    ReadInitial(call.get(), &state);
    initial.Notify();
  });
  for (int i = 0; i < 100 && !initial.HasBeenNotified(); ++i) {
    clock_.WaitForWaiters(1);
    clock_.Advance(absl::Milliseconds(5));
  }
  reader.join();
  ASSERT_TRUE(initial.HasBeenNotified());

  // Quiet for longer than the window: an event is written at once, without
  // the clock moving.
  clock_.Advance(absl::Milliseconds(10));
  ASSERT_TRUE(source_->Add("default", "p0").ok());
  v1::WatchResponse first;
  ASSERT_TRUE(ReadOne(call.get(), &state, &first));
  ASSERT_EQ(first.events_size(), 1);

  // Busy: three events within the window after that write wait for it to
  // end, then go out together.
  const uint64_t before = service_->watch_hub().events();
  ASSERT_TRUE(source_->Add("default", "p1").ok());
  ASSERT_TRUE(source_->Add("default", "p2").ok());
  ASSERT_TRUE(source_->Add("default", "p3").ok());
  service_->watch_hub().WaitForEvents(before + 3);
  v1::WatchResponse resp;
  bool read_ok = false;
  absl::Notification got;
  std::thread reader2([&] {
    read_ok = ReadOne(call.get(), &state, &resp);
    got.Notify();
  });
  EXPECT_FALSE(got.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "written before the window ended";
  clock_.Advance(absl::Milliseconds(5));
  reader2.join();
  ASSERT_TRUE(read_ok);
  EXPECT_EQ(resp.events_size(), 3);
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, BatchWindowEngagesOnlyAboveTheMinimumRate) {
  Start({.batch_window = absl::Milliseconds(5), .batch_min_rate = 100});
  auto call = Open(Pods());
  ClientState state;
  // Lightly loaded: the initial state and every event go out at once,
  // each as its own message, although they follow each other within the
  // window (the fake clock never moves here).
  ReadInitial(call.get(), &state);
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(source_->Add("default", absl::StrCat("q", i)).ok());
    v1::WatchResponse resp;
    ASSERT_TRUE(ReadOne(call.get(), &state, &resp));
    ASSERT_EQ(resp.events_size(), 1) << "event " << i;
  }
  // 25 events in one 100 ms period is 250/s, above the 100/s threshold:
  // from the next period on, a stream that just wrote gathers events.
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(source_->Add("default", "r0").ok());  // window over: at once
  v1::WatchResponse first;
  ASSERT_TRUE(ReadOne(call.get(), &state, &first));
  ASSERT_EQ(first.events_size(), 1);
  const uint64_t before = service_->watch_hub().events();
  ASSERT_TRUE(source_->Add("default", "r1").ok());
  ASSERT_TRUE(source_->Add("default", "r2").ok());
  service_->watch_hub().WaitForEvents(before + 2);
  v1::WatchResponse batch;
  bool read_ok = false;
  absl::Notification got;
  std::thread reader([&] {
    read_ok = ReadOne(call.get(), &state, &batch);
    got.Notify();
  });
  EXPECT_FALSE(got.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "written before the window ended";
  clock_.Advance(absl::Milliseconds(5));
  reader.join();
  ASSERT_TRUE(read_ok);
  EXPECT_EQ(batch.events_size(), 2);
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, SlowReaderCoalescesWithinBoundAndConverges) {
  Start({.max_queue = 8, .max_pending_keys = 100});
  v1::WatchRequest req = Pods();
  req.set_send_old_object(true);
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::string a_sent = state.objects["default/a"];
  const uint64_t before = service_->watch_hub().events();
  service_->watch_hub().SetWritesPaused(true);
  uint64_t n = 0;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(source_
                    ->Modify("default", "a",
                             Labels{{"app", "web"}, {"i", absl::StrCat(i)}})
                    .ok());
    ASSERT_TRUE(source_
                    ->Modify("kube-system", "c",
                             Labels{{"app", "web"}, {"i", absl::StrCat(i)}})
                    .ok());
    n += 2;
  }
  // Added then deleted, never sent: vanishes.
  ASSERT_TRUE(source_->Add("default", "ghost").ok());
  ASSERT_TRUE(source_->Delete("default", "ghost").ok());
  // Deleted then re-created (new UID): stays a DELETED and an ADDED.
  ASSERT_TRUE(source_->Delete("default", "b").ok());
  ASSERT_TRUE(source_->Add("default", "b", Labels{{"app", "db2"}}).ok());
  n += 4;
  service_->watch_hub().WaitForEvents(before + n);
  EXPECT_LE(service_->watch_hub().peak_pending(), 8u);
  service_->watch_hub().SetWritesPaused(false);
  const size_t first_live = state.events.size();
  while (state.objects != SourceState()) {
    ASSERT_TRUE(ReadOne(call.get(), &state));
  }
  std::vector<v1::Event> live(state.events.begin() + first_live,
                              state.events.end());
  // At most one MODIFIED per object, whose old object is what was sent.
  int modified_a = 0, deleted_b = 0, added_b = 0;
  for (const v1::Event& e : live) {
    EXPECT_EQ(e.object().json().find("ghost"), std::string::npos);
    if (e.type() == v1::EVENT_TYPE_MODIFIED &&
        absl::StrContains(e.object().json(), R"("name":"a")")) {
      ++modified_a;
      EXPECT_EQ(e.old_object().json(), a_sent);
    }
    if (absl::StrContains(e.object().json(), R"("name":"b")")) {
      if (e.type() == v1::EVENT_TYPE_DELETED) ++deleted_b;
      if (e.type() == v1::EVENT_TYPE_ADDED) ++added_b;
    }
  }
  EXPECT_EQ(modified_a, 1);
  EXPECT_EQ(deleted_b, 1);
  EXPECT_EQ(added_b, 1);
  EXPECT_LT(live.size(), 10u);
}

TEST_F(WatchStreamTest, ResourceExhaustedPastHardCap) {
  Start({.max_queue = 8, .max_pending_keys = 4});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const uint64_t before = service_->watch_hub().events();
  service_->watch_hub().SetWritesPaused(true);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(source_->Add("default", absl::StrCat("many-", i)).ok());
  }
  service_->watch_hub().WaitForEvents(before + 20);
  service_->watch_hub().SetWritesPaused(false);
  grpc::Status st = Finish(call.get());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "resume_token"))
      << st.error_message();
  service_->watch_hub().WaitForOpenStreams(0);
}

TEST_F(WatchStreamTest, ForeignResumeTokenGetsResetThenFreshState) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_resume_token(absl::WebSafeBase64Escape("w1/another-run/42"));
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  ASSERT_GE(state.events.size(), 2u);
  EXPECT_EQ(state.events.front().type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(state.events.back().type(), v1::EVENT_TYPE_INITIAL_STATE_DONE);
  EXPECT_EQ(state.objects, SourceState());
}

TEST_F(WatchStreamTest, RequestErrors) {
  Start();
  {
    v1::WatchRequest req = Pods();
    req.set_resource("widgets");
    auto call = Open(req);
    grpc::Status st = Finish(call.get());
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "pods"));
  }
  {
    v1::WatchRequest req = Pods();
    req.set_label_selector("app in (");
    auto call = Open(req);
    EXPECT_EQ(Finish(call.get()).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    v1::WatchRequest req = Pods();
    req.set_index_name("nope");
    auto call = Open(req);
    EXPECT_EQ(Finish(call.get()).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // A newer client's encoding: refused, not silently JSON.
    v1::WatchRequest req = Pods();
    req.set_encoding(static_cast<v1::Encoding>(9));
    auto call = Open(req);
    grpc::Status st = Finish(call.get());
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "encoding"));
  }
  for (int64_t nanos : {int64_t{-1000000000}, int64_t{500000000}}) {
    v1::WatchRequest req = Pods();
    req.mutable_resync_period()->set_seconds(nanos / 1000000000);
    req.mutable_resync_period()->set_nanos(nanos % 1000000000);
    auto call = Open(req);
    grpc::Status st = Finish(call.get());
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << nanos;
    EXPECT_TRUE(absl::StrContains(st.error_message(), "resync_period"))
        << st.error_message();
  }
}

TEST_F(WatchStreamTest, CancellationRemovesTheStream) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  auto streams = [this] {
    grpc::ClientContext ctx;
    v1::ListResourcesResponse resp;
    EXPECT_TRUE(
        stub_->ListResources(&ctx, v1::ListResourcesRequest(), &resp).ok());
    return resp.resources(0).streams();
  };
  EXPECT_EQ(streams(), 1);
  call->ctx.TryCancel();
  EXPECT_EQ(Finish(call.get()).error_code(), grpc::StatusCode::CANCELLED);
  service_->watch_hub().WaitForOpenStreams(0);
  EXPECT_EQ(streams(), 0);
}

TEST_F(WatchStreamTest, QuietStreamGetsBookmark) {
  Start({.bookmark_interval = absl::Seconds(10)});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  v1::WatchResponse resp;
  bool read_ok = false;
  absl::Notification got;
  std::thread reader([&] {
    read_ok = ReadOne(call.get(), &state, &resp);
    got.Notify();
  });
  // The ticker skips a stream whose last write has not completed yet (slow
  // under ASan on a loaded machine), so keep advancing time, one tick at a
  // time, until the bookmark arrives.
  const absl::Time deadline = absl::Now() + absl::Seconds(50);
  while (!got.WaitForNotificationWithTimeout(absl::Milliseconds(5)) &&
         absl::Now() < deadline) {
    clock_.WaitForWaiters(1);  // the bookmark ticker
    clock_.Advance(absl::Seconds(10));
  }
  reader.join();
  ASSERT_TRUE(read_ok);
  ASSERT_EQ(resp.events_size(), 1);
  EXPECT_EQ(resp.events(0).type(), v1::EVENT_TYPE_BOOKMARK);
  EXPECT_EQ(resp.events(0).resource_version(),
            entry_->informer->LastSyncResourceVersion());
  EXPECT_FALSE(resp.events(0).resume_token().empty());
  EXPECT_FALSE(resp.events(0).has_object());
}

// The token of the stream's last event, decoded ("w2/run/epoch/seq").
std::vector<std::string> TokenParts(const std::string& token) {
  std::string raw;
  EXPECT_TRUE(absl::WebSafeBase64Unescape(token, &raw));
  return absl::StrSplit(raw, '/');
}

std::vector<v1::EventType> Types(const std::vector<v1::Event>& events) {
  std::vector<v1::EventType> out;
  for (const v1::Event& e : events) out.push_back(e.type());
  return out;
}

TEST_F(WatchStreamTest, ResumeWithinHistoryContinuesExactlyAfterTheToken) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "v2"}}).ok());
  ReadEvents(call.get(), &state, 1);
  // The client processed up to here, then lost the connection.
  const std::string token = state.events.back().resume_token();
  ClientState resumed;
  resumed.objects = state.objects;
  ASSERT_TRUE(source_->Add("default", "d", Labels{{"app", "web"}}).ok());
  ReadEvents(call.get(), &state, 1);
  call->ctx.TryCancel();
  Finish(call.get());
  // More changes while no stream is open.
  const uint64_t before = service_->watch_hub().events();
  ASSERT_TRUE(source_->Delete("default", "b").ok());
  ASSERT_TRUE(source_->Modify("kube-system", "c", Labels{{"app", "db"}}).ok());
  service_->watch_hub().WaitForEvents(before + 2);

  v1::WatchRequest req = Pods();
  req.set_resume_token(token);
  auto again = Open(req);
  ReadEvents(again.get(), &resumed, 3);
  EXPECT_EQ(
      Types(resumed.events),
      (std::vector<v1::EventType>{v1::EVENT_TYPE_ADDED, v1::EVENT_TYPE_DELETED,
                                  v1::EVENT_TYPE_MODIFIED}));
  for (const v1::Event& e : resumed.events) EXPECT_FALSE(e.initial());
  EXPECT_EQ(resumed.objects, SourceState());
  // Live events continue after the replay.
  ASSERT_TRUE(source_->Add("default", "e").ok());
  ReadEvents(again.get(), &resumed, 1);
  EXPECT_EQ(resumed.events.back().type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(resumed.objects, SourceState());
}

TEST_F(WatchStreamTest, ResumeReappliesTheFilterWithEnterAndLeave) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_label_selector("app=web");
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  ASSERT_EQ(state.objects.size(), 2u);  // default/a, kube-system/c
  const std::string token = state.events.back().resume_token();
  call->ctx.TryCancel();
  Finish(call.get());
  const uint64_t before = service_->watch_hub().events();
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "db"}}).ok());
  ASSERT_TRUE(source_->Modify("default", "b", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(
      source_->Modify("default", "b", Labels{{"app", "web"}, {"x", "1"}}).ok());
  ASSERT_TRUE(source_->Modify("kube-system", "c", Labels{{"app", "db"}}).ok());
  ASSERT_TRUE(source_->Modify("kube-system", "c", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source_->Add("default", "z", Labels{{"app", "db"}}).ok());
  service_->watch_hub().WaitForEvents(before + 6);

  req.set_resume_token(token);
  auto again = Open(req);
  ClientState resumed;
  resumed.objects = state.objects;
  ReadEvents(again.get(), &resumed, 5);
  EXPECT_EQ(
      Types(resumed.events),
      (std::vector<v1::EventType>{v1::EVENT_TYPE_DELETED,   // a left
                                  v1::EVENT_TYPE_ADDED,     // b entered
                                  v1::EVENT_TYPE_MODIFIED,  // b changed inside
                                  v1::EVENT_TYPE_DELETED,   // c left
                                  v1::EVENT_TYPE_ADDED}));  // c came back
  std::map<std::string, std::string> want;
  for (const auto& [key, json] : SourceState()) {
    if (absl::StrContains(json, R"("app":"web")")) want[key] = json;
  }
  EXPECT_EQ(resumed.objects, want);
  EXPECT_EQ(resumed.objects.size(), 2u);  // default/b, kube-system/c
}

TEST_F(WatchStreamTest, TokenOlderThanTheHistoryGetsResetAndFreshState) {
  Start({.history_size = 2});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::string token = state.events.back().resume_token();
  call->ctx.TryCancel();
  Finish(call.get());
  const uint64_t before = service_->watch_hub().events();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(source_->Add("default", absl::StrCat("n", i)).ok());
  }
  service_->watch_hub().WaitForEvents(before + 3);
  v1::WatchRequest req = Pods();
  req.set_resume_token(token);
  auto again = Open(req);
  ClientState fresh;
  ReadInitial(again.get(), &fresh);
  EXPECT_EQ(fresh.events.front().type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(fresh.objects, SourceState());
  EXPECT_EQ(fresh.objects.size(), 6u);
}

TEST_F(WatchStreamTest, TokenOlderThanTheByteBoundedHistoryGetsReset) {
  // Room for a few updates of an 8 KB object, far fewer than the event
  // bound allows.
  constexpr size_t kBound = 100 << 10;
  Start({.history_size = 10000, .history_bytes = kBound});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::string old_token = state.events.back().resume_token();
  const std::string pad(8000, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        source_
            ->Modify("default", "a",
                     Labels{{"app", "web"}, {"pad", absl::StrCat(pad, i)}})
            .ok());
  }
  ReadEvents(call.get(), &state, 20);
  const std::string recent_token =
      state.events[state.events.size() - 2].resume_token();
  call->ctx.TryCancel();
  Finish(call.get());
  const std::vector<WatchMemoryStats> memory =
      service_->watch_hub().MemoryNow();
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_LE(memory[0].history_bytes, kBound);
  EXPECT_GT(memory[0].history_dropped_for_bytes, 0u);
  EXPECT_LT(memory[0].history_events, 20u);
  EXPECT_GT(memory[0].history_events, 1u);

  // Older than what the bytes let the history keep: RESET and a fresh
  // initial state, as for a token older than the event bound.
  v1::WatchRequest req = Pods();
  req.set_resume_token(old_token);
  auto again = Open(req);
  ClientState fresh;
  ReadInitial(again.get(), &fresh);
  EXPECT_EQ(fresh.events.front().type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(fresh.objects, SourceState());
  again->ctx.TryCancel();
  Finish(again.get());

  // Still in the history: exactly the one event after it.
  req.set_resume_token(recent_token);
  auto recent = Open(req);
  ClientState resumed;
  resumed.objects = state.objects;  // its view then (a is held)
  ReadEvents(recent.get(), &resumed, 1);
  EXPECT_EQ(resumed.events.front().type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(resumed.events.front().resume_token(),
            state.events.back().resume_token());
}

TEST_F(WatchStreamTest, TokenOfAnotherRunOrResourceOrMalformedGetsReset) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::vector<std::string> parts =
      TokenParts(state.events.back().resume_token());
  ASSERT_EQ(parts.size(), 4u);
  ASSERT_EQ(parts[0], "w2");
  const std::string other_run = absl::WebSafeBase64Escape(
      absl::StrCat("w2/not-", parts[1], "/", parts[2], "/", parts[3]));
  const std::string other_resource = absl::WebSafeBase64Escape(
      absl::StrCat("w2/", parts[1], "/", parts[2], "9/", parts[3]));
  for (const std::string& token :
       {other_run, other_resource, std::string("%%%"),
        absl::WebSafeBase64Escape("w2/x")}) {
    v1::WatchRequest req = Pods();
    req.set_resume_token(token);
    auto again = Open(req);
    ClientState fresh;
    ReadInitial(again.get(), &fresh);
    EXPECT_EQ(fresh.events.front().type(), v1::EVENT_TYPE_RESET) << token;
    EXPECT_EQ(fresh.objects, SourceState());
  }
}

TEST_F(WatchStreamTest, RelistSendsOnlyTheDifferences) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const size_t initial_events = state.events.size();
  // While the informer is cut off: a changes, b goes, c stays as it was;
  // the history is compacted, so the informer relists (410).
  const absl::Status cut = absl::UnavailableError("cut");
  source_->FailWatches(1 << 30, cut);
  source_->FailLists(1 << 30, cut);
  source_->BreakWatches(cut);
  ASSERT_TRUE(source_->Modify("default", "a", Labels{{"app", "v2"}}).ok());
  ASSERT_TRUE(source_->Delete("default", "b").ok());
  source_->CompactHistory();
  source_->FailLists(0, absl::OkStatus());
  source_->FailWatches(0, absl::OkStatus());
  ReadEvents(call.get(), &state, 2);
  // A marker event: anything the relist sent is before it.
  ASSERT_TRUE(source_->Add("default", "z").ok());
  while (state.objects.count("default/z") == 0) {
    ASSERT_TRUE(ReadOne(call.get(), &state));
  }
  std::map<std::string, v1::Event> live;
  for (size_t i = initial_events; i < state.events.size(); ++i) {
    auto obj = informer::Object::Parse(state.events[i].object().json());
    ASSERT_TRUE(obj.ok());
    EXPECT_EQ(live.count((*obj)->Key()), 0u) << (*obj)->Key();
    live[(*obj)->Key()] = state.events[i];
  }
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live["default/a"].type(), v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(live["default/b"].type(), v1::EVENT_TYPE_DELETED);
  EXPECT_TRUE(live["default/b"].tombstone());
  EXPECT_EQ(live["default/z"].type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(live.count("kube-system/c"), 0u);
  EXPECT_EQ(state.objects, SourceState());
}

// A relist that finds an object replaced (deleted and created again under
// the same name, new UID) while the informer was cut off: streams holding
// the old one get DELETED (the old UID) + ADDED, and a filtered stream the
// new object no longer matches gets DELETED of the object it held.
TEST_F(WatchStreamTest, ReplacedObjectIsDeletedThenAddedPerFilter) {
  Start();
  auto all = Open(Pods());
  v1::WatchRequest web_req = Pods();
  web_req.set_label_selector("app=web");
  auto web = Open(web_req);
  ClientState all_state, web_state;
  ReadInitial(all.get(), &all_state);
  ReadInitial(web.get(), &web_state);
  auto uid_of = [](const std::string& json) {
    auto obj = informer::Object::Parse(json);
    return obj.ok() ? std::string((*obj)->uid()) : std::string();
  };
  const std::string a_uid = uid_of(all_state.objects["default/a"]);
  const std::string c_uid = uid_of(all_state.objects["kube-system/c"]);
  const absl::Status cut = absl::UnavailableError("cut");
  source_->FailWatches(1 << 30, cut);
  source_->FailLists(1 << 30, cut);
  source_->BreakWatches(cut);
  // a: replaced, still app=web; c: replaced by an app=db object.
  ASSERT_TRUE(source_->Delete("default", "a").ok());
  ASSERT_TRUE(source_->Add("default", "a", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source_->Delete("kube-system", "c").ok());
  ASSERT_TRUE(source_->Add("kube-system", "c", Labels{{"app", "db"}}).ok());
  source_->CompactHistory();
  source_->FailLists(0, absl::OkStatus());
  source_->FailWatches(0, absl::OkStatus());
  // Each stream converges to the source's state through its filter (a
  // stuck stream fails at the call's deadline).
  std::map<std::string, std::string> web_want;
  for (const auto& [key, json] : SourceState()) {
    if (json.find("\"app\":\"web\"") != std::string::npos) {
      web_want[key] = json;
    }
  }
  while (all_state.objects != SourceState()) {
    ASSERT_TRUE(ReadOne(all.get(), &all_state));
  }
  while (web_state.objects != web_want) {
    ASSERT_TRUE(ReadOne(web.get(), &web_state));
  }
  // Per key, the types and UIDs each stream saw after its initial state.
  auto seen = [&](const ClientState& st, const std::string& key) {
    std::vector<std::string> out;
    bool live = false;
    for (const v1::Event& e : st.events) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) live = true;
      if (!live || !e.has_object()) continue;
      auto obj = informer::Object::Parse(e.object().json());
      if (!obj.ok() || (*obj)->Key() != key) continue;
      out.push_back(
          absl::StrCat(v1::EventType_Name(e.type()), " ", (*obj)->uid()));
    }
    return out;
  };
  const std::string new_a = uid_of(all_state.objects["default/a"]);
  const std::string new_c = uid_of(all_state.objects["kube-system/c"]);
  ASSERT_NE(new_a, a_uid);
  ASSERT_NE(new_c, c_uid);
  EXPECT_EQ(seen(all_state, "default/a"),
            (std::vector<std::string>{"EVENT_TYPE_DELETED " + a_uid,
                                      "EVENT_TYPE_ADDED " + new_a}));
  EXPECT_EQ(seen(all_state, "kube-system/c"),
            (std::vector<std::string>{"EVENT_TYPE_DELETED " + c_uid,
                                      "EVENT_TYPE_ADDED " + new_c}));
  EXPECT_EQ(seen(web_state, "default/a"),
            (std::vector<std::string>{"EVENT_TYPE_DELETED " + a_uid,
                                      "EVENT_TYPE_ADDED " + new_a}));
  EXPECT_EQ(seen(web_state, "kube-system/c"),
            (std::vector<std::string>{"EVENT_TYPE_DELETED " + c_uid}));
}

TEST_F(WatchStreamTest, PerStreamResyncSendsSyncForEveryMatchingObject) {
  Start({.bookmark_interval = absl::Hours(1)});
  v1::WatchRequest req = Pods();
  req.set_label_selector("app=web");
  req.mutable_resync_period()->set_seconds(1);
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  v1::WatchResponse resp;
  bool read_ok = false;
  absl::Notification got;
  std::thread reader([&] {
    read_ok = ReadOne(call.get(), &state, &resp);
    got.Notify();
  });
  for (int i = 0; i < 100 && !got.HasBeenNotified(); ++i) {
    clock_.WaitForWaiters(1);  // the ticker
    clock_.Advance(absl::Seconds(1));
  }
  reader.join();
  ASSERT_TRUE(read_ok);
  // One SYNC per held object per resync; several resyncs may share the
  // message if the clock moved again while the previous write was still
  // completing.
  ASSERT_GE(resp.events_size(), 2);
  EXPECT_EQ(resp.events_size() % 2, 0);
  std::set<std::string> keys;
  for (const v1::Event& e : resp.events()) {
    EXPECT_EQ(e.type(), v1::EVENT_TYPE_SYNC);
    EXPECT_FALSE(e.initial());
    EXPECT_FALSE(e.resume_token().empty());
    auto obj = informer::Object::Parse(e.object().json());
    ASSERT_TRUE(obj.ok());
    keys.insert((*obj)->Key());
  }
  EXPECT_EQ(keys, (std::set<std::string>{"default/a", "kube-system/c"}));
}

TEST_F(WatchStreamTest, WatchBeforeSyncWaitsThenSendsTheInitialState) {
  Start({}, /*start_informers=*/false);
  auto call = Open(Pods());
  service_->watch_hub().WaitForWaitingStreams(1);
  StartInformers();
  ClientState state;
  ReadInitial(call.get(), &state);
  EXPECT_EQ(state.events.front().type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(state.objects, SourceState());
  EXPECT_EQ(state.objects.size(), 3u);
  service_->watch_hub().WaitForWaitingStreams(0);
  service_->watch_hub().WaitForOpenStreams(1);
}

// An informer the API server refuses for good (here RBAC: 403) never
// syncs. A Watch waiting on it ends with the reason instead of hanging, and
// unary queries name the last error, while the informer keeps retrying.
TEST_F(WatchStreamTest, WatchOnAnInformerTheApiServerRefusesEndsWithTheReason) {
  Start({}, /*start_informers=*/false);
  source_->FailLists(
      1000, absl::PermissionDeniedError(
                "403 GET /api/v1/pods: Error from server (Forbidden): pods is "
                "forbidden: User \"system:serviceaccount:demo:app\" cannot "
                "list resource \"pods\""));
  ASSERT_TRUE(registry_->Start().ok());
  auto call = Open(Pods());
  const grpc::Status st = Finish(call.get());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(st.error_message(),
              HasSubstr("the informer of \"pods\" cannot sync: 403 GET "
                        "/api/v1/pods: Error from server (Forbidden)"));
  EXPECT_THAT(st.error_message(), HasSubstr("retry the Watch later"));
  service_->watch_hub().WaitForWaitingStreams(0);
  EXPECT_FALSE(entry_->informer->HasSynced());

  grpc::ClientContext ctx;
  v1::GetRequest get;
  get.set_resource("pods");
  get.set_namespace_("default");
  get.set_name("a");
  v1::GetResponse resp;
  const grpc::Status got = stub_->Get(&ctx, get, &resp);
  EXPECT_EQ(got.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(got.error_message(),
              HasSubstr("has not synced yet (last error: 403 GET"));
}

// A transient error (the API server's 503) does not end a waiting Watch:
// the reflector's back-off rides it out and the stream then gets the
// initial state as usual.
TEST_F(WatchStreamTest, WatchWaitsThroughTransientSyncErrors) {
  Start({}, /*start_informers=*/false);
  source_->FailLists(
      1, absl::UnavailableError("503 GET /api/v1/pods: Error from server "
                                "(ServiceUnavailable): try again"));
  ASSERT_TRUE(registry_->Start().ok());
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  EXPECT_EQ(state.objects, SourceState());
  EXPECT_FALSE(entry_->informer->LastError().ok());
}

TEST_F(WatchStreamTest, ShutdownEndsStreamsWithUnavailableAndTheirToken) {
  Start();
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  service_->watch_hub().Shutdown();
  grpc::Status st = Finish(call.get());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(), kShuttingDownMessage);
  auto late = Open(Pods());
  EXPECT_EQ(Finish(late.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  service_->watch_hub().WaitForOpenStreams(0);
}

TEST_F(WatchStreamTest, ShutdownEndsStreamsWaitingForSync) {
  Start({}, /*start_informers=*/false);
  auto call = Open(Pods());
  service_->watch_hub().WaitForWaitingStreams(1);
  service_->watch_hub().Shutdown();
  EXPECT_EQ(Finish(call.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  service_->watch_hub().WaitForWaitingStreams(0);
}

TEST_F(WatchStreamTest, TokensOfACoalescedBatchResumeWithoutSkipping) {
  Start({.max_queue = 8});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  const size_t initial = state.events.size();
  const uint64_t before = service_->watch_hub().events();
  service_->watch_hub().SetWritesPaused(true);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        source_->Modify("default", "a", Labels{{"app", absl::StrCat("v", i)}})
            .ok());
    ASSERT_TRUE(source_->Add("default", absl::StrCat("n", i)).ok());
  }
  service_->watch_hub().WaitForEvents(before + 12);
  service_->watch_hub().SetWritesPaused(false);
  while (state.objects != SourceState())
    ASSERT_TRUE(ReadOne(call.get(), &state));
  // Coalesced to one event per object: a's MODIFIED and six ADDED.
  const std::vector<v1::Event> batch(state.events.begin() + initial,
                                     state.events.end());
  ASSERT_EQ(batch.size(), 7u);
  // Every token but the last names the position before the batch.
  for (size_t i = 1; i + 1 < batch.size(); ++i) {
    EXPECT_EQ(batch[i].resume_token(), batch[0].resume_token());
  }
  EXPECT_NE(batch.back().resume_token(), batch[0].resume_token());
  call->ctx.TryCancel();
  Finish(call.get());

  // Resuming from the middle of the batch re-sends the batch's changes
  // relative to the state before it: nothing is skipped.
  {
    v1::WatchRequest req = Pods();
    req.set_resume_token(batch[3].resume_token());
    auto again = Open(req);
    std::map<std::string, std::string> objects;
    for (size_t i = 0; i < initial; ++i) {
      if (!state.events[i].has_object()) continue;
      auto obj = informer::Object::Parse(state.events[i].object().json());
      ASSERT_TRUE(obj.ok());
      objects[(*obj)->Key()] = state.events[i].object().json();
    }
    size_t replayed = 0;
    while (objects != SourceState()) {
      v1::WatchResponse resp;
      ASSERT_TRUE(again->reader->Read(&resp));
      for (const v1::Event& e : resp.events()) {
        ASSERT_NE(e.type(), v1::EVENT_TYPE_RESET);
        if (!e.has_object()) continue;
        ++replayed;
        auto obj = informer::Object::Parse(e.object().json());
        ASSERT_TRUE(obj.ok());
        if (e.type() == v1::EVENT_TYPE_DELETED) {
          objects.erase((*obj)->Key());
        } else {
          objects[(*obj)->Key()] = e.object().json();
        }
      }
    }
    // One event per object, plus what went out before the replay coalesced.
    EXPECT_GE(replayed, 7u);
    EXPECT_LE(replayed, 12u);
  }
  // Resuming from the batch's last token replays nothing.
  v1::WatchRequest req = Pods();
  req.set_resume_token(batch.back().resume_token());
  auto last = Open(req);
  ClientState resumed;
  resumed.objects = state.objects;
  ASSERT_TRUE(source_->Add("default", "z").ok());
  ReadEvents(last.get(), &resumed, 1);
  ASSERT_EQ(resumed.events.size(), 1u);
  EXPECT_EQ(resumed.events[0].type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(resumed.objects, SourceState());
}

// ---- Message size cap (WatchOptions::max_message_bytes) ----

// Every message of `call` until `done` says stop stays under `cap` unless
// it carries a single event.
void ExpectUnderCap(const v1::WatchResponse& resp, size_t cap) {
  if (resp.events_size() > 1) {
    EXPECT_LE(resp.ByteSizeLong(), cap) << resp.events_size() << " events";
  }
}

TEST_F(WatchStreamTest, InitialStatesAndBacklogsAreSplitUnderTheCap) {
  constexpr size_t kCap = 4096;
  seed_.clear();
  for (int i = 0; i < 50; ++i) {
    seed_.push_back({"default", absl::StrCat("p", i), std::string(500, 'w')});
  }
  // One object larger than the cap: it travels alone.
  seed_.push_back({"default", "zz-big", std::string(3 * kCap, 'b')});
  Start({.max_queue = 8, .max_message_bytes = kCap});
  auto call = Open(Pods());
  ClientState state;
  int messages = 0;
  bool big_alone = false;
  while (state.events.empty() ||
         state.events.back().type() != v1::EVENT_TYPE_INITIAL_STATE_DONE) {
    v1::WatchResponse resp;
    ASSERT_TRUE(ReadOne(call.get(), &state, &resp));
    ++messages;
    ExpectUnderCap(resp, kCap);
    for (const v1::Event& e : resp.events()) {
      if (absl::StrContains(e.object().json(), "zz-big")) {
        big_alone = resp.events_size() == 1;
      }
    }
  }
  EXPECT_EQ(state.objects, SourceState());
  EXPECT_GE(messages, 8);
  EXPECT_TRUE(big_alone);
  // A coalesced backlog is split the same way.
  const uint64_t before = service_->watch_hub().events();
  service_->watch_hub().SetWritesPaused(true);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(source_
                      ->Modify("default", absl::StrCat("p", i),
                               Labels{{"app", std::string(600 + round, 'v')}})
                      .ok());
    }
  }
  service_->watch_hub().WaitForEvents(before + 100);
  service_->watch_hub().SetWritesPaused(false);
  messages = 0;
  while (state.objects != SourceState()) {
    v1::WatchResponse resp;
    ASSERT_TRUE(ReadOne(call.get(), &state, &resp));
    ++messages;
    ExpectUnderCap(resp, kCap);
  }
  EXPECT_GE(messages, 8);
  EXPECT_GT(service_->watch_hub().GetCounters().coalesced, 0u);
}

TEST_F(WatchStreamTest, ResyncBurstsAreSplitUnderTheCap) {
  constexpr size_t kCap = 4096;
  seed_.clear();
  for (int i = 0; i < 30; ++i) {
    seed_.push_back({"default", absl::StrCat("p", i), std::string(500, 'w')});
  }
  Start({.bookmark_interval = absl::Hours(1), .max_message_bytes = kCap});
  v1::WatchRequest req = Pods();
  req.mutable_resync_period()->set_seconds(1);
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  const size_t initial = state.events.size();
  int messages = 0;
  bool read_ok = true;
  absl::Notification got;
  std::thread reader([&] {
    // One resync's SYNCs (30 objects, ~17 KB) take several messages.
    while (read_ok && state.events.size() < initial + 30) {
      v1::WatchResponse resp;
      read_ok = ReadOne(call.get(), &state, &resp);
      ++messages;
      ExpectUnderCap(resp, kCap);
    }
    got.Notify();
  });
  for (int i = 0; i < 100 && !got.HasBeenNotified(); ++i) {
    clock_.WaitForWaiters(1);  // the ticker
    clock_.Advance(absl::Seconds(1));
  }
  reader.join();
  ASSERT_TRUE(read_ok);
  for (size_t i = initial; i < state.events.size(); ++i) {
    EXPECT_EQ(state.events[i].type(), v1::EVENT_TYPE_SYNC);
  }
  EXPECT_GE(messages, 4);
}

// A client with gRPC's default channel (4 MiB receive limit) gets a 30 MB
// initial state: with the default cap every message is at most 1 MiB.
TEST_F(WatchStreamTest, ThirtyMegabyteInitialStateReachesADefaultChannel) {
  seed_.clear();
  for (int i = 0; i < 3000; ++i) {
    seed_.push_back({"default", absl::StrCat("p", i),
                     std::string(10500, static_cast<char>('a' + i % 26))});
  }
  Start();
  auto call = Open(Pods());
  ClientState state;
  size_t bytes = 0;
  int messages = 0;
  while (state.events.empty() ||
         state.events.back().type() != v1::EVENT_TYPE_INITIAL_STATE_DONE) {
    v1::WatchResponse resp;
    ASSERT_TRUE(ReadOne(call.get(), &state, &resp))
        << Finish(call.get()).error_message();
    ++messages;
    EXPECT_LE(resp.ByteSizeLong(), WatchOptions().max_message_bytes);
    for (const v1::Event& e : resp.events()) bytes += e.object().json().size();
  }
  EXPECT_EQ(state.objects.size(), 3000u);
  EXPECT_GE(bytes, 30u * 1000 * 1000);
  EXPECT_GE(messages, 30);
}

// ---- Leaving a filter ----

// As the API server's filtered watch: DELETED carries the last state that
// matched, stamped with the resourceVersion of the change that made it
// leave; live and resumed streams alike.
TEST_F(WatchStreamTest, LeavingTheFilterSendsTheLastMatchingStateAtTheNewRv) {
  Start();
  v1::WatchRequest req = Pods();
  req.set_label_selector("app=web");
  auto call = Open(req);
  ClientState state;
  ReadInitial(call.get(), &state);
  const std::string token = state.events.back().resume_token();
  absl::StatusOr<informer::ObjectPtr> moved =
      source_->Modify("default", "a", Labels{{"app", "db"}});
  ASSERT_TRUE(moved.ok());
  const std::string new_rv(moved.value()->resource_version());
  auto check = [&](const v1::Event& e) {
    EXPECT_EQ(e.type(), v1::EVENT_TYPE_DELETED);
    EXPECT_FALSE(e.tombstone());
    EXPECT_EQ(e.resource_version(), new_rv);
    auto obj = informer::Object::Parse(e.object().json());
    ASSERT_TRUE(obj.ok()) << obj.status();
    EXPECT_EQ((*obj)->Key(), "default/a");
    ASSERT_NE((*obj)->Label("app"), nullptr);
    EXPECT_EQ(*(*obj)->Label("app"), "web") << e.object().json();
    EXPECT_EQ((*obj)->resource_version(), new_rv);
  };
  ReadEvents(call.get(), &state, 1);
  check(state.events.back());
  // Resumed from before the change: the same DELETED, from the history.
  req.set_resume_token(token);
  auto resumed = Open(req);
  ClientState again;
  again.objects = {{"default/a", ""}};
  ReadEvents(resumed.get(), &again, 1);
  check(again.events.back());
}

// ---- Resume tokens of every event ----

// What an SDK does with events: upsert on ADDED/MODIFIED/SYNC, erase on
// DELETED, drop everything on RESET (repeats after a resume are allowed).
void Upsert(const v1::Event& e, std::map<std::string, std::string>* objects) {
  if (e.type() == v1::EVENT_TYPE_RESET) objects->clear();
  if (!e.has_object()) return;
  auto obj = informer::Object::Parse(e.object().json());
  ASSERT_TRUE(obj.ok()) << obj.status();
  if (e.type() == v1::EVENT_TYPE_DELETED) {
    objects->erase((*obj)->Key());
  } else {
    (*objects)[(*obj)->Key()] = e.object().json();
  }
}

class WatchResumeTest : public WatchStreamTest {
 protected:
  // The source's objects a stream with `selector` ("app=web" or "") holds.
  std::map<std::string, std::string> Expected(const std::string& selector) {
    std::map<std::string, std::string> out;
    for (const auto& [key, obj] : source_->Snapshot()) {
      const std::string* app = obj->Label("app");
      if (selector.empty() || (app != nullptr && *app == "web")) {
        out[key] = obj->json().str();
      }
    }
    return out;
  }

  // Resumes from `token` holding `objects` and reads until they equal the
  // source (through `selector`); a RESET fails.
  void ResumeAndConverge(const std::string& token,
                         std::map<std::string, std::string> objects,
                         const std::string& selector) {
    v1::WatchRequest req = Pods();
    req.set_label_selector(selector);
    req.set_resume_token(token);
    auto call = Open(req);
    const std::map<std::string, std::string> want = Expected(selector);
    while (objects != want) {
      v1::WatchResponse resp;
      ASSERT_TRUE(call->reader->Read(&resp))
          << "stream ended with " << objects.size() << " objects of "
          << want.size() << ": " << Finish(call.get()).error_message();
      for (const v1::Event& e : resp.events()) {
        ASSERT_NE(e.type(), v1::EVENT_TYPE_RESET);
        Upsert(e, &objects);
      }
    }
    call->ctx.TryCancel();
    Finish(call.get());
  }

  // Changes after the snapshot: modifications (some leaving or entering
  // app=web), deletions and additions.
  void Churn(int round) {
    const uint64_t before = service_->watch_hub().events();
    for (int i = 0; i < 10; ++i) {
      const std::string app = (i + round) % 2 == 0 ? "web" : "db";
      const std::string other = app == "web" ? "db" : "web";
      // Twice, so a slow stream's queue has something to coalesce.
      for (const std::string& value : {other, app}) {
        ASSERT_TRUE(source_
                        ->Modify("default", absl::StrCat("p", 10 * i + round),
                                 Labels{{"app", value}})
                        .ok());
      }
      ASSERT_TRUE(
          source_->Delete("default", absl::StrCat("p", 10 * i + round + 5))
              .ok());
      ASSERT_TRUE(source_
                      ->Add("default", absl::StrCat("n", round, "-", i),
                            Labels{{"app", app}})
                      .ok());
    }
    service_->watch_hub().WaitForEvents(before + 40);
  }

  void SeedPods(int n) {
    seed_.clear();
    for (int i = 0; i < n; ++i) {
      seed_.push_back({"default", absl::StrCat("p", i), i % 3 ? "web" : "db"});
    }
  }
};

TEST_F(WatchResumeTest, EveryInitialEventsTokenResumesRightAfterIt) {
  SeedPods(100);
  // A small cap: the initial state spans many messages.
  Start({.max_message_bytes = 2048});
  for (const std::string selector : {"", "app=web"}) {
    SCOPED_TRACE(selector);
    v1::WatchRequest req = Pods();
    req.set_label_selector(selector);
    auto call = Open(req);
    ClientState state;
    ReadInitial(call.get(), &state);
    call->ctx.TryCancel();
    Finish(call.get());
    const std::vector<v1::Event> initial = state.events;
    Churn(selector.empty() ? 0 : 1);
    std::map<std::string, std::string> objects;
    for (size_t i = 0; i < initial.size(); ++i) {
      Upsert(initial[i], &objects);
      if (i % 7 == 2 || i + 1 == initial.size()) {
        SCOPED_TRACE(absl::StrCat("resumed after initial event ", i));
        ResumeAndConverge(initial[i].resume_token(), objects, selector);
      }
    }
  }
}

TEST_F(WatchResumeTest, EveryTokenOfCoalescedBatchesUnderChurnResumes) {
  SeedPods(100);
  Start({.max_queue = 16, .max_message_bytes = 2048});
  auto call = Open(Pods());
  // The client's objects after each event, with the event's token.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>>
      positions;
  std::map<std::string, std::string> objects;
  auto read_until_converged = [&] {
    while (objects != Expected("")) {
      v1::WatchResponse resp;
      ASSERT_TRUE(call->reader->Read(&resp));
      for (const v1::Event& e : resp.events()) {
        Upsert(e, &objects);
        positions.emplace_back(e.resume_token(), objects);
      }
    }
  };
  read_until_converged();
  for (int round = 0; round < 3; ++round) {
    // A slow reader: its queue coalesces.
    service_->watch_hub().SetWritesPaused(true);
    Churn(round);
    service_->watch_hub().SetWritesPaused(false);
    read_until_converged();
  }
  EXPECT_GT(service_->watch_hub().GetCounters().coalesced, 0u);
  call->ctx.TryCancel();
  Finish(call.get());
  // More changes after the last position, so each resume needs the
  // history and then live events.
  Churn(3);
  for (size_t i = 0; i < positions.size(); i += 5) {
    SCOPED_TRACE(absl::StrCat("resumed after event ", i));
    ResumeAndConverge(positions[i].first, positions[i].second, "");
  }
}

TEST_F(WatchResumeTest, InitialEventsTokenBeyondTheHistoryGetsReset) {
  SeedPods(100);
  Start({.history_size = 5});
  auto call = Open(Pods());
  ClientState state;
  ReadInitial(call.get(), &state);
  call->ctx.TryCancel();
  Finish(call.get());
  Churn(0);  // 40 events: the snapshot is older than the history
  v1::WatchRequest req = Pods();
  req.set_resume_token(state.events[3].resume_token());
  auto resumed = Open(req);
  ClientState again;
  ReadOne(resumed.get(), &again);
  ASSERT_FALSE(again.events.empty());
  EXPECT_EQ(again.events[0].type(), v1::EVENT_TYPE_RESET);
}

// A lazily started informer: Watch starts it, the stream keeps it running,
// and once the registry retires it (idle) its fan-out goes too; a later
// Watch gets a fresh informer, and tokens of the old one get RESET.
TEST(WatchLazyInformerTest, RetiredInformerDropsItsFanout) {
  informer::FakeClock clock;
  InformerRegistry::Options options;
  options.clock = &clock;
  options.allow_unlisted = true;
  options.lazy_idle_timeout = absl::Minutes(1);
  ListerWatcherFactory factory = [](const ResourceConfig&)
      -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
    auto source = std::make_unique<informer::FakeSource>();
    if (absl::Status st = source->Add("default", "s1").status(); !st.ok()) {
      return st;
    }
    return source;
  };
  auto registry =
      InformerRegistry::Create({{.resource = "pods"}}, factory, options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE((*registry)->Start().ok());
  auto service = std::make_unique<InformerService>(
      registry->get(), InformerService::Options{}, &clock);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Informer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto read_initial = [&](const std::string& token) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    v1::WatchRequest req;
    req.set_resource("secrets");
    req.set_resume_token(token);
    auto reader = stub->Watch(&ctx, req);
    std::vector<v1::Event> events;
    v1::WatchResponse resp;
    while (events.empty() ||
           events.back().type() != v1::EVENT_TYPE_INITIAL_STATE_DONE) {
      EXPECT_TRUE(reader->Read(&resp));
      if (HasFailure()) break;
      events.insert(events.end(), resp.events().begin(), resp.events().end());
    }
    ctx.TryCancel();
    while (reader->Read(&resp)) {
    }
    reader->Finish();
    service->watch_hub().WaitForOpenStreams(0);
    return events;
  };
  const std::vector<v1::Event> first = read_initial("");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].type(), v1::EVENT_TYPE_ADDED);
  const std::string token = first.back().resume_token();
  // Idle: stopped between one and one and a quarter minutes later.
  for (int i = 0; i < 12 && (*registry)->lazy_stops() == 0; ++i) {
    clock.Advance(absl::Seconds(15));
    (*registry)->WaitForIdleCheck(clock.Now());
  }
  ASSERT_EQ((*registry)->lazy_stops(), 1);
  const std::vector<v1::Event> again = read_initial(token);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(again[1].type(), v1::EVENT_TYPE_ADDED);
  EXPECT_EQ((*registry)->lazy_starts(), 2);
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  service.reset();
  (*registry)->Stop();
}

}  // namespace
}  // namespace server

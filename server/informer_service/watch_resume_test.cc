// Resume tokens across a restart, in process over real gRPC: a run's
// history goes into what a snapshot stores (WatchResumeStore, as the
// SnapshotKeeper uses it), the next run loads it before its informer
// starts, and the old run's tokens map into the new run's positions: up to
// the snapshot's last position they resume, past it they get RESET.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_reader.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/informer_service.h"
#include "server/informer_service/watch/watch_resume_store.h"
#include "server/registry/informer_registry.h"
#include "server/registry/snapshot_keeper.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

// One FakeSource (the API server) shared by successive runs.
class SharedSource final : public informer::ListerWatcher {
 public:
  explicit SharedSource(informer::FakeSource* source) : source_(source) {}
  absl::StatusOr<informer::ObjectList> List(
      const informer::ListOptions& options) override {
    return source_->List(options);
  }
  absl::StatusOr<std::unique_ptr<informer::WatchStream>> Watch(
      const informer::WatchOptions& options) override {
    return source_->Watch(options);
  }

 private:
  informer::FakeSource* const source_;
};

// The client's view: key -> resourceVersion, and the last token.
struct View {
  std::map<std::string, std::string> objects;
  std::string token;
  std::vector<v1::EventType> types;

  void Apply(const v1::Event& e) {
    types.push_back(e.type());
    token = e.resume_token();
    if (e.type() == v1::EVENT_TYPE_RESET) objects.clear();
    if (!e.has_object()) return;
    auto obj = informer::Object::Parse(e.object().json());
    ASSERT_TRUE(obj.ok()) << obj.status();
    if (e.type() == v1::EVENT_TYPE_DELETED) {
      objects.erase((*obj)->Key());
    } else {
      objects[(*obj)->Key()] = std::string((*obj)->resource_version());
    }
  }
};

// One sidecar run: a registry on the shared source, the service (whose
// hub uses `store`), a gRPC server.
class SidecarRun {
 public:
  SidecarRun(informer::FakeSource* source, WatchResumeStore* store,
             SnapshotKeeper::Target* target,
             const SnapshotKeeper::Captured* snapshot) {
    ListerWatcherFactory factory = [source](const ResourceConfig&)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      return std::make_unique<SharedSource>(source);
    };
    auto registry = InformerRegistry::Create({{.resource = "pods"}}, factory);
    EXPECT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    entry_ = *registry_->Find("pods");
    target->informer = entry_->informer.get();
    target->identity.cluster = "test";
    target->identity.version = "v1";
    target->identity.resource = "pods";
    store->Wire("pods", target);
    if (snapshot != nullptr) {
      // What SnapshotKeeper::Load does with a snapshot it read.
      EXPECT_TRUE(
          entry_->informer
              ->SetInitialState(snapshot->objects, snapshot->resource_version)
              .ok());
      informer::LoadedSnapshot loaded;
      loaded.path = "in-memory";
      loaded.resource_version = snapshot->resource_version;
      loaded.objects = snapshot->objects;
      loaded.sections = snapshot->sections;
      target->on_read(loaded);
    }
    InformerService::Options options;
    options.watch.resume_store = store;
    // Built before the informers start, as the sidecar does.
    service_ = std::make_unique<InformerService>(registry_.get(), options);
    EXPECT_TRUE(registry_->Start().ok());
    EXPECT_TRUE(entry_->informer->WaitForSync(absl::Seconds(30)));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  ~SidecarRun() {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    service_.reset();  // the hub: its fan-out leaves its last capture
    registry_->Stop();
  }

  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader;
  };
  std::unique_ptr<Call> Watch(const std::string& token,
                              const std::string& label_selector = "") {
    auto call = std::make_unique<Call>();
    call->ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(60));
    v1::WatchRequest req;
    req.set_resource("pods");
    req.set_resume_token(token);
    req.set_label_selector(label_selector);
    call->reader = stub_->Watch(&call->ctx, req);
    return call;
  }

 private:
  std::unique_ptr<InformerRegistry> registry_;
  InformerEntry* entry_ = nullptr;
  std::unique_ptr<InformerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

// Reads events into `view` until `done(view)`.
template <typename Done>
void ReadUntil(SidecarRun::Call* call, View* view, Done done) {
  v1::WatchResponse resp;
  while (!done(*view)) {
    ASSERT_TRUE(call->reader->Read(&resp))
        << call->reader->Finish().error_message();
    for (const v1::Event& e : resp.events()) {
      if (e.type() != v1::EVENT_TYPE_BOOKMARK) view->Apply(e);
    }
  }
}

// The source's objects (with label app=`app`, if given): key ->
// resourceVersion.
std::map<std::string, std::string> SourceState(
    const informer::FakeSource& source, const std::string& app = "") {
  std::map<std::string, std::string> out;
  for (const auto& [key, obj] : source.Snapshot()) {
    bool match = app.empty();
    for (const auto& [k, v] : obj->labels()) match |= k == "app" && v == app;
    if (!match) continue;
    out[key] = std::string(obj->resource_version());
  }
  return out;
}

TEST(WatchResumeTest, TokensOfThePersistedRunMapIntoTheNextRun) {
  informer::FakeSource source;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(source.Add("default", name).ok());
  }
  View in_initial, at_first, at_capture, past_capture;
  SnapshotKeeper::Captured snapshot;
  {
    WatchResumeStore store;
    SnapshotKeeper::Target target;
    SidecarRun run(&source, &store, &target, nullptr);
    auto call = run.Watch("");
    View view;
    // Inside the initial state: after its first object.
    v1::WatchResponse first;
    ASSERT_TRUE(call->reader->Read(&first));
    ASSERT_GT(first.events_size(), 0);
    ASSERT_EQ(first.events(0).type(), v1::EVENT_TYPE_ADDED);
    in_initial.Apply(first.events(0));
    for (const v1::Event& e : first.events()) view.Apply(e);
    ReadUntil(call.get(), &view, [](const View& v) {
      return v.types.back() == v1::EVENT_TYPE_INITIAL_STATE_DONE;
    });
    ASSERT_TRUE(source.Modify("default", "a").ok());
    ReadUntil(call.get(), &view,
              [&](const View& v) { return v.objects == SourceState(source); });
    at_first = view;
    ASSERT_TRUE(source.Delete("default", "b").ok());
    ASSERT_TRUE(source.Add("default", "d").ok());
    ReadUntil(call.get(), &view,
              [&](const View& v) { return v.objects == SourceState(source); });
    at_capture = view;
    // A periodic snapshot now...
    std::optional<SnapshotKeeper::Captured> captured = target.capture();
    ASSERT_TRUE(captured.has_value());
    snapshot = *std::move(captured);
    ASSERT_EQ(snapshot.sections.size(), 1u);
    // ... then a change, and the run dies before its next snapshot.
    ASSERT_TRUE(source.Modify("default", "c").ok());
    ReadUntil(call.get(), &view,
              [&](const View& v) { return v.objects == SourceState(source); });
    past_capture = view;
    call->ctx.TryCancel();
  }
  // While no sidecar runs.
  ASSERT_TRUE(source.Modify("default", "a").ok());
  ASSERT_TRUE(source.Add("default", "e").ok());

  WatchResumeStore store;
  SnapshotKeeper::Target target;
  SidecarRun run(&source, &store, &target, &snapshot);
  const auto want = SourceState(source);
  // Tokens up to the snapshot's last position resume: exactly the changes
  // since, no RESET, no initial state.
  for (View view : {at_capture, at_first}) {
    auto call = run.Watch(view.token);
    view.types.clear();
    ReadUntil(call.get(), &view,
              [&](const View& v) { return v.objects == want; });
    for (v1::EventType t : view.types) {
      EXPECT_NE(t, v1::EVENT_TYPE_RESET);
      EXPECT_NE(t, v1::EVENT_TYPE_INITIAL_STATE_DONE);
    }
    call->ctx.TryCancel();
  }
  // Inside the old run's initial state: the rest of that initial state
  // (as it was then), its INITIAL_STATE_DONE, then every change since.
  {
    View view = in_initial;
    view.types.clear();
    auto call = run.Watch(view.token);
    ReadUntil(call.get(), &view,
              [&](const View& v) { return v.objects == want; });
    ASSERT_GE(view.types.size(), 3u);
    EXPECT_EQ(view.types[0], v1::EVENT_TYPE_ADDED);
    EXPECT_EQ(view.types[1], v1::EVENT_TYPE_ADDED);
    EXPECT_EQ(view.types[2], v1::EVENT_TYPE_INITIAL_STATE_DONE);
    for (v1::EventType t : view.types) EXPECT_NE(t, v1::EVENT_TYPE_RESET);
    call->ctx.TryCancel();
  }
  // Past it (issued after the snapshot by the run that died): RESET, then
  // a fresh initial state.
  View view = past_capture;
  view.types.clear();
  auto call = run.Watch(view.token);
  ReadUntil(call.get(), &view, [](const View& v) {
    return !v.types.empty() &&
           v.types.back() == v1::EVENT_TYPE_INITIAL_STATE_DONE;
  });
  EXPECT_EQ(view.types.front(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(view.objects, want);
  call->ctx.TryCancel();
}

// A filtered stream's positions are the resource's: after the restart it
// resumes through its filter, objects entering it ADDED, leaving DELETED.
TEST(WatchResumeTest, AFilteredStreamResumesThroughItsFilter) {
  using Labels = informer::FakeSource::Labels;
  informer::FakeSource source;
  ASSERT_TRUE(source.Add("default", "a", Labels{{"app", "web"}}).ok());
  ASSERT_TRUE(source.Add("default", "b", Labels{{"app", "db"}}).ok());
  ASSERT_TRUE(source.Add("default", "c", Labels{{"app", "web"}}).ok());
  View view;
  SnapshotKeeper::Captured snapshot;
  {
    WatchResumeStore store;
    SnapshotKeeper::Target target;
    SidecarRun run(&source, &store, &target, nullptr);
    auto call = run.Watch("", "app=web");
    ReadUntil(call.get(), &view, [&](const View& v) {
      return v.objects == SourceState(source, "web");
    });
    ASSERT_TRUE(source.Modify("default", "b", Labels{{"app", "web"}}).ok());
    ASSERT_TRUE(source.Modify("default", "a", Labels{{"app", "db"}}).ok());
    ReadUntil(call.get(), &view, [&](const View& v) {
      return v.objects == SourceState(source, "web");
    });
    std::optional<SnapshotKeeper::Captured> captured = target.capture();
    ASSERT_TRUE(captured.has_value());
    snapshot = *std::move(captured);
    call->ctx.TryCancel();
  }
  ASSERT_TRUE(source.Modify("default", "c", Labels{{"app", "db"}}).ok());
  ASSERT_TRUE(source.Add("default", "d", Labels{{"app", "web"}}).ok());

  WatchResumeStore store;
  SnapshotKeeper::Target target;
  SidecarRun run(&source, &store, &target, &snapshot);
  view.types.clear();
  auto call = run.Watch(view.token, "app=web");
  ReadUntil(call.get(), &view, [&](const View& v) {
    return v.objects == SourceState(source, "web");
  });
  EXPECT_EQ(view.types, (std::vector<v1::EventType>{v1::EVENT_TYPE_DELETED,
                                                    v1::EVENT_TYPE_ADDED}));
  call->ctx.TryCancel();
}

}  // namespace
}  // namespace server

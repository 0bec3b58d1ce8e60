// The stale state end to end inside the sidecar's services: an informer
// started from a snapshot while its source fails (the API server cannot be
// reached) is served at once, marked stale, and turns fresh, with the
// changes since the snapshot as ordinary events, once the source answers.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "server/informer_service/informer_service.h"
#include "server/informer_service/testing/watch_call.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

class StaleStateTest : public ::testing::Test {
 protected:
  // The registry of one configmaps informer on a FakeSource (source_),
  // entry_ its entry; the informer's reflector errors are counted in
  // errors_ (see AwaitSourceError).
  void CreateRegistry(bool serve_stale) {
    ListerWatcherFactory factory = [this](const ResourceConfig&)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      auto source = std::make_unique<informer::FakeSource>();
      source_ = source.get();
      return source;
    };
    InformerRegistry::Options options;
    options.serve_stale_on_start = serve_stale;
    auto registry = InformerRegistry::Create({{.resource = "configmaps"}},
                                             factory, std::move(options));
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    entry_ = *registry_->Find("configmaps");
    // Called by the reflector once its error count went up (the count that
    // ObserveStale reads).
    ASSERT_TRUE(entry_->informer
                    ->SetWatchErrorHandler([this](const absl::Status&) {
                      absl::MutexLock lock(&errors_mu_);
                      ++errors_;
                    })
                    .ok());
  }

  // Waits until the informer failed at least once: it has tried the API
  // server (the timeout is a failsafe).
  void AwaitSourceError() {
    absl::MutexLock lock(&errors_mu_);
    auto failed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(errors_mu_) {
      return errors_ > 0;
    };
    ASSERT_TRUE(errors_mu_.AwaitWithTimeout(absl::Condition(&failed),
                                            absl::Seconds(30)))
        << "the informer never tried the API server";
  }

  // Seeds the source with ns/a..ns/d and returns that state as a snapshot
  // holds it (`*rv` its resourceVersion).
  std::vector<informer::ObjectPtr> SeedSnapshot(std::string* rv) {
    for (const char* name : {"a", "b", "c", "d"}) {
      EXPECT_TRUE(source_->Add("ns", name).ok());
    }
    std::vector<informer::ObjectPtr> snapshot;
    for (const auto& [key, obj] : source_->Snapshot()) snapshot.push_back(obj);
    *rv = source_->CurrentResourceVersion();
    return snapshot;
  }

  // The InformerService on a loopback port, stub_ its client.
  void StartServer() {
    service_ = std::make_unique<InformerService>(
        registry_.get(), InformerService::Options{}, &clock_);
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

  // Seeds the source with ns/a..ns/d, keeps that state as the snapshot,
  // then changes the source behind it: b modified, d deleted, e added.
  void SetUpRegistry(bool serve_stale) {
    ASSERT_NO_FATAL_FAILURE(CreateRegistry(serve_stale));
    std::string rv;
    const std::vector<informer::ObjectPtr> snapshot = SeedSnapshot(&rv);
    ASSERT_TRUE(source_->Modify("ns", "b", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_->Delete("ns", "d").ok());
    ASSERT_TRUE(source_->Add("ns", "e").ok());
    ASSERT_TRUE(entry_->informer->SetInitialState(snapshot, rv).ok());
    // What the snapshot loader says (the seam): written an hour ago.
    entry_->stale.MarkLoadedFromSnapshot(clock_.Now() - absl::Hours(1));
    CutOff();
    ASSERT_TRUE(registry_->Start().ok());
    ASSERT_NO_FATAL_FAILURE(StartServer());
    ASSERT_NO_FATAL_FAILURE(AwaitSourceError());
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (registry_) registry_->Stop();
  }

  // The API server cannot be reached.
  void CutOff() {
    source_->FailLists(1000000, absl::UnavailableError("connection refused"));
    source_->FailWatches(1000000, absl::UnavailableError("connection refused"));
  }

  void Heal() {
    source_->FailLists(0, absl::OkStatus());
    source_->FailWatches(0, absl::OkStatus());
  }

  v1::ResourceStatus Status() {
    grpc::ClientContext ctx;
    v1::ListResourcesResponse resp;
    EXPECT_TRUE(
        stub_->ListResources(&ctx, v1::ListResourcesRequest(), &resp).ok());
    return resp.resources_size() == 1 ? resp.resources(0)
                                      : v1::ResourceStatus();
  }

  grpc::StatusCode GetCode(const std::string& name) {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_resource("configmaps");
    req.set_namespace_("ns");
    req.set_name(name);
    v1::GetResponse resp;
    return stub_->Get(&ctx, req, &resp).error_code();
  }

  // A Watch of every configmap from `resume_token` ("" for the start).
  std::unique_ptr<WatchCall> Watch(const std::string& resume_token = "") {
    v1::WatchRequest req;
    req.set_resource("configmaps");
    req.set_resume_token(resume_token);
    return std::make_unique<WatchCall>(stub_.get(), req);
  }

  informer::FakeClock clock_;
  absl::Mutex errors_mu_;
  int64_t errors_ ABSL_GUARDED_BY(errors_mu_) = 0;
  informer::FakeSource* source_ = nullptr;
  std::unique_ptr<InformerRegistry> registry_;
  InformerRef entry_;
  std::unique_ptr<InformerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(StaleStateTest, ServedStaleThenFreshWithTheChangesAsEvents) {
  SetUpRegistry(/*serve_stale=*/true);
  // Started with the snapshot's objects (Start installs them before the
  // reflector runs), and failed since: stale.
  ASSERT_TRUE(ObserveStale(*entry_).stale);
  v1::ResourceStatus status = Status();
  EXPECT_TRUE(status.stale());
  EXPECT_FALSE(status.synced());
  EXPECT_EQ(status.object_count(), 4);
  EXPECT_EQ(status.stale_age().seconds(), 3600);
  // Queries answer from the snapshot without allow_stale.
  EXPECT_EQ(GetCode("d"), grpc::StatusCode::OK);

  std::unique_ptr<WatchCall> watch = Watch();
  absl::StatusOr<WatchEvents> got =
      watch->ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->events,
              ElementsAre("ADDED ns/a initial", "ADDED ns/b initial",
                          "ADDED ns/c initial", "ADDED ns/d initial",
                          "INITIAL_STATE_DONE stale"));

  Heal();
  got = watch->ReadUntil(v1::EVENT_TYPE_FRESH);
  ASSERT_TRUE(got.ok()) << got.status();
  // The changes since the snapshot as ordinary events, then FRESH.
  EXPECT_THAT(got->events, ElementsAre("MODIFIED ns/b", "DELETED ns/d",
                                       "ADDED ns/e", "FRESH"));
  EXPECT_THAT(got->resume_tokens, Each(Not(IsEmpty())));
  status = Status();
  EXPECT_FALSE(status.stale());
  EXPECT_TRUE(status.synced());
  EXPECT_FALSE(status.has_stale_age());
  EXPECT_EQ(GetCode("d"), grpc::StatusCode::NOT_FOUND);
  watch.reset();

  // A stream resuming after the turn hears FRESH again (it may have
  // missed it), with nothing else.
  got = Watch(got->resume_tokens.back())->ReadUntil(v1::EVENT_TYPE_FRESH);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->events, ElementsAre("FRESH"));
}

TEST_F(StaleStateTest, WithoutServeStaleTheSameOutageWaitsForTheSync) {
  SetUpRegistry(/*serve_stale=*/false);
  EXPECT_FALSE(ObserveStale(*entry_).stale);
  v1::ResourceStatus status = Status();
  EXPECT_FALSE(status.stale());
  EXPECT_FALSE(status.synced());
  EXPECT_EQ(GetCode("a"), grpc::StatusCode::UNAVAILABLE);
  std::unique_ptr<WatchCall> watch = Watch();
  service_->watch_hub().WaitForWaitingStreams(1);
  Heal();
  absl::StatusOr<WatchEvents> got =
      watch->ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  ASSERT_TRUE(got.ok()) << got.status();
  // Today's behaviour: the caught-up state, never stale, no FRESH.
  EXPECT_THAT(got->events,
              ElementsAre("ADDED ns/a initial", "ADDED ns/b initial",
                          "ADDED ns/c initial", "ADDED ns/e initial",
                          "INITIAL_STATE_DONE"));
  EXPECT_TRUE(Status().synced());
}

TEST_F(StaleStateTest, AStreamWaitingBeforeTheFailureIsServedStale) {
  // Not stale before an error: streams wait as for any sync.
  ASSERT_NO_FATAL_FAILURE(CreateRegistry(/*serve_stale=*/true));
  ASSERT_TRUE(source_->Add("ns", "a").ok());
  ASSERT_TRUE(entry_->informer
                  ->SetInitialState({source_->Snapshot().begin()->second},
                                    source_->CurrentResourceVersion())
                  .ok());
  entry_->stale.MarkLoadedFromSnapshot(clock_.Now());
  EXPECT_FALSE(ObserveStale(*entry_).stale);
  ASSERT_NO_FATAL_FAILURE(StartServer());
  std::unique_ptr<WatchCall> watch = Watch();
  service_->watch_hub().WaitForWaitingStreams(1);
  // Now the API server is down: the waiting stream gets the snapshot.
  CutOff();
  ASSERT_TRUE(registry_->Start().ok());
  absl::StatusOr<WatchEvents> got =
      watch->ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->events,
              ElementsAre("ADDED ns/a initial", "INITIAL_STATE_DONE stale"));
  Heal();
  got = watch->ReadUntil(v1::EVENT_TYPE_FRESH);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->events, ElementsAre("FRESH"));
}

TEST_F(StaleStateTest, AResumeBegunFromTheHeaderIsNotStaleBeforeItsState) {
  // The sidecar's order with --cache_dir: each resume begins from its
  // snapshot's header (SharedIndexInformer::BeginResume), its probe failing
  // as the API server is down; the objects load; the gRPC server starts;
  // only then do the informers start with their objects. Until then the
  // cache is empty: not a stale snapshot to serve, whatever the errors.
  ASSERT_NO_FATAL_FAILURE(CreateRegistry(/*serve_stale=*/true));
  std::string rv;
  const std::vector<informer::ObjectPtr> snapshot = SeedSnapshot(&rv);
  CutOff();
  ASSERT_TRUE(entry_->informer->BeginResume(rv).ok());
  ASSERT_NO_FATAL_FAILURE(AwaitSourceError());
  ASSERT_TRUE(entry_->informer->SetInitialState(snapshot, rv).ok());
  entry_->stale.MarkLoadedFromSnapshot(clock_.Now() - absl::Hours(1));
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_FALSE(ObserveStale(*entry_).stale);
  EXPECT_FALSE(Status().stale());
  EXPECT_EQ(GetCode("a"), grpc::StatusCode::UNAVAILABLE);
  std::unique_ptr<WatchCall> watch = Watch();
  service_->watch_hub().WaitForWaitingStreams(1);
  // Started with its objects: now the snapshot is served stale.
  ASSERT_TRUE(registry_->Start().ok());
  absl::StatusOr<WatchEvents> got =
      watch->ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->events,
              ElementsAre("ADDED ns/a initial", "ADDED ns/b initial",
                          "ADDED ns/c initial", "ADDED ns/d initial",
                          "INITIAL_STATE_DONE stale"));
  EXPECT_TRUE(Status().stale());
  EXPECT_EQ(GetCode("a"), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace server

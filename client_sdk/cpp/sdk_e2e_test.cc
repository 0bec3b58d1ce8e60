// The C++ SDK end to end against the real informer_sidecar binary in --demo
// mode (an in-process demo cluster whose pods and configmaps change every
// second): RemoteInformer's initial sync, live events and reconciliation
// after a sidecar restart (RESET: the old run's token is unknown to the new
// run) with OnError/OnRecovered, errors of an unknown resource, InformerClient
// queries, the WorkQueueWorker loop and RecordEvent.

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/informer_client.h"
#include "client_sdk/cpp/record_event.h"
#include "client_sdk/cpp/remote_informer.h"
#include "client_sdk/cpp/workqueue_worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

namespace client_sdk {
namespace {

namespace v1 = ::informer::v1;
using integration::SidecarProcess;

// Failsafe for waits: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(60);

// A short private directory for the sidecar's socket, kept across restarts.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sdke2eXXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<SidecarProcess> StartSidecar(const std::string& socket) {
  absl::StatusOr<std::string> binary =
      integration::FindRunfile("server/informer_sidecar");
  EXPECT_TRUE(binary.ok()) << binary.status();
  SidecarProcess::Options options;
  options.flags = {"--demo", "--grpc_listen=unix:" + socket,
                   "--http_listen=127.0.0.1:0", "--print_events=false"};
  options.quiet = true;
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  EXPECT_TRUE(sidecar.ok()) << sidecar.status();
  return sidecar.ok() ? *std::move(sidecar) : nullptr;
}

// Replays the handler calls onto its own map and flags any call that
// contradicts it (a second add of a key, an update or delete of an unknown
// key): with a consistent story the replayed map equals the mirror.
class StoryChecker final : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr& obj, bool initial) override {
    absl::MutexLock lock(&mu_);
    if (!model_.emplace(obj->Key(), std::string(obj->resource_version()))
             .second) {
      errors_.push_back("duplicate add of " + obj->Key());
    }
    ++adds_;
    if (!initial) ++live_;
  }
  void OnUpdate(const informer::ObjectPtr& old_obj,
                const informer::ObjectPtr& new_obj) override {
    absl::MutexLock lock(&mu_);
    auto it = model_.find(new_obj->Key());
    if (it == model_.end() || it->second != old_obj->resource_version()) {
      errors_.push_back("update of unknown/stale " + new_obj->Key());
    }
    model_[new_obj->Key()] = std::string(new_obj->resource_version());
    ++updates_;
    ++live_;
  }
  void OnDelete(const informer::ObjectPtr& obj, bool unknown) override {
    absl::MutexLock lock(&mu_);
    if (model_.erase(obj->Key()) == 0) {
      errors_.push_back("delete of unknown " + obj->Key());
    }
    ++deletes_;
    if (unknown) ++unknown_deletes_;
    ++live_;
  }
  // Waits until `n` non-initial calls were seen.
  bool WaitForLive(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return live_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  struct Counts {
    int adds, updates, deletes, unknown_deletes, live;
  };
  Counts counts() {
    absl::MutexLock lock(&mu_);
    return {adds_, updates_, deletes_, unknown_deletes_, live_};
  }
  std::map<std::string, std::string> model() {
    absl::MutexLock lock(&mu_);
    return model_;
  }
  std::vector<std::string> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> model_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  int adds_ ABSL_GUARDED_BY(mu_) = 0;
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  int deletes_ ABSL_GUARDED_BY(mu_) = 0;
  int unknown_deletes_ ABSL_GUARDED_BY(mu_) = 0;
  int live_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records OnError codes and OnRecovered calls. Thread-safe.
class ErrorLog final : public StreamErrorHandler {
 public:
  void OnError(const StreamError& e) override {
    absl::MutexLock lock(&mu_);
    codes_.push_back(e.status.code());
    EXPECT_GE(e.retry_in, absl::ZeroDuration());
    EXPECT_EQ(e.failures, failures_ + 1);
    failures_ = e.failures;
  }
  void OnRecovered(int64_t failures) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(failures, failures_);
    failures_ = 0;
    ++recoveries_;
  }
  // Waits until OnError saw `n` calls.
  bool WaitForErrors(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return codes_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  std::vector<absl::StatusCode> codes() {
    absl::MutexLock lock(&mu_);
    return codes_;
  }
  int recoveries() {
    absl::MutexLock lock(&mu_);
    return recoveries_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::StatusCode> codes_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  int recoveries_ ABSL_GUARDED_BY(mu_) = 0;
};

std::map<std::string, std::string> MirrorOf(const RemoteInformer& informer) {
  std::map<std::string, std::string> out;
  for (const informer::ObjectPtr& o : informer.List()) {
    out[o->Key()] = std::string(o->resource_version());
  }
  return out;
}

TEST(SdkE2eTest, RemoteInformerSyncsFollowsAndReconcilesAfterRestart) {
  TempDir dir;
  const std::string socket = dir.path() + "/grpc.sock";
  std::unique_ptr<SidecarProcess> sidecar = StartSidecar(socket);
  ASSERT_NE(sidecar, nullptr);

  StoryChecker checker;
  ErrorLog errors;
  RemoteInformer::Options options;
  options.resource = "pods";
  options.error_handler = &errors;
  const std::string node_index = informer::FieldIndexName("spec.nodeName");
  options.indexers[node_index] = informer::FieldIndexFunc("spec.nodeName");
  options.initial_backoff = absl::Milliseconds(50);
  options.max_backoff = absl::Milliseconds(500);
  RemoteInformer pods(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()),
      options);
  pods.AddEventHandler(&checker);
  ASSERT_TRUE(pods.Start().ok());
  ASSERT_TRUE(pods.WaitForSync(kWait));
  const size_t initial = checker.counts().adds;
  EXPECT_GT(initial, 0u);

  // The mirror agrees with the sidecar's own answers on the node index.
  InformerClient client(sidecar->NewChannel());
  absl::StatusOr<std::vector<informer::ObjectPtr>> listed = client.List("pods");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_FALSE(listed->empty());
  absl::StatusOr<std::vector<informer::ObjectPtr>> on_node =
      pods.ByIndex(node_index, "node-1");
  ASSERT_TRUE(on_node.ok()) << on_node.status();
  for (const informer::ObjectPtr& p : *on_node) {
    EXPECT_THAT(p->FieldValues("spec.nodeName"),
                ::testing::ElementsAre("node-1"));
  }
  // Keys and IndexValues: sorted, and naming what the mirror holds (the
  // demo's namespaced pods, scheduled on node-1..node-3).
  const std::vector<std::string> keys = pods.Keys();
  EXPECT_FALSE(keys.empty());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
  for (const std::string& key : keys) {
    EXPECT_THAT(key, ::testing::MatchesRegex("[a-z0-9-]+/[a-z0-9.-]+"));
  }
  absl::StatusOr<std::vector<std::string>> nodes = pods.IndexValues(node_index);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_TRUE(std::is_sorted(nodes->begin(), nodes->end()));
  EXPECT_FALSE(nodes->empty());
  for (const std::string& node : *nodes) {
    EXPECT_THAT(node, ::testing::StartsWith("node-"));
  }
  EXPECT_EQ(pods.IndexValues("no-such-index").status().code(),
            absl::StatusCode::kNotFound);

  // Live events: the demo replaces pods every second.
  ASSERT_TRUE(checker.WaitForLive(2));
  EXPECT_EQ(pods.resets(), 0);
  const std::string old_token = pods.resume_token();
  EXPECT_FALSE(old_token.empty());

  // Restart: the new run does not know the old run's token -> RESET, then a
  // fresh initial state that the informer reconciles.
  EXPECT_THAT(errors.codes(), ::testing::IsEmpty());
  EXPECT_EQ(sidecar->Terminate(), 0);
  // The application hears of the broken stream (the sidecar ends Watch
  // streams with UNAVAILABLE on SIGTERM; attempts while it is away fail with
  // UNAVAILABLE too).
  ASSERT_TRUE(errors.WaitForErrors(1));
  EXPECT_EQ(errors.codes()[0], absl::StatusCode::kUnavailable);
  EXPECT_EQ(errors.recoveries(), 0);
  const StoryChecker::Counts before = checker.counts();
  sidecar = StartSidecar(socket);
  ASSERT_NE(sidecar, nullptr);
  ASSERT_TRUE(pods.WaitForSyncGeneration(2, kWait));
  EXPECT_EQ(pods.resets(), 1);
  EXPECT_GE(pods.connects(), 2);
  EXPECT_EQ(errors.recoveries(), 1);
  EXPECT_EQ(pods.failures(), 0);
  // While the old run shuts down, a new stream may also be CANCELLED.
  for (absl::StatusCode code : errors.codes()) {
    EXPECT_THAT(code, ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                       absl::StatusCode::kCancelled));
  }
  const StoryChecker::Counts after = checker.counts();
  std::cerr << "initial adds " << initial << "; reconciliation: adds "
            << after.adds - before.adds << ", updates "
            << after.updates - before.updates << ", deletes "
            << after.deletes - before.deletes << "\n";
  // The fresh demo cluster differs from the old one's state (the old run's
  // churn replaced pods): reconciliation told some difference, as
  // adds/updates/deletes, never a full replay of every object as new.
  EXPECT_GT(after.live + after.adds, before.live + before.adds);
  EXPECT_LT(after.adds - before.adds, static_cast<int>(initial));
  EXPECT_GT(after.unknown_deletes, before.unknown_deletes);

  // And keeps following the new run.
  ASSERT_TRUE(checker.WaitForLive(after.live + 2));
  pods.Stop();
  EXPECT_THAT(checker.errors(), ::testing::IsEmpty());
  EXPECT_EQ(checker.model(), MirrorOf(pods));
  EXPECT_NE(pods.resume_token(), old_token);
}

TEST(SdkE2eTest, RemoteInformerReportsUnknownResourceAsFinal) {
  TempDir dir;
  std::unique_ptr<SidecarProcess> sidecar =
      StartSidecar(dir.path() + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  ErrorLog errors;
  RemoteInformer::Options options;
  options.resource = "nosuchthings";
  options.initial_backoff = absl::Milliseconds(20);
  options.max_backoff = absl::Milliseconds(40);
  options.error_handler = &errors;
  RemoteInformer informer(
      grpc::CreateChannel(sidecar->address(),
                          grpc::InsecureChannelCredentials()),
      options);
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(errors.WaitForErrors(1));
  // Final: WaitForSync answers at once, no second stream.
  EXPECT_FALSE(informer.WaitForSync(kWait));
  EXPECT_TRUE(informer.gave_up());
  EXPECT_THAT(std::string(informer.last_stream_status().message()),
              ::testing::HasSubstr("unknown resource"));
  informer.Stop();
  EXPECT_THAT(errors.codes(),
              ::testing::ElementsAre(absl::StatusCode::kNotFound));
  EXPECT_EQ(informer.connects(), 1);
  EXPECT_FALSE(informer.HasSynced());
  EXPECT_EQ(errors.recoveries(), 0);
}

TEST(SdkE2eTest, InformerClientQueries) {
  TempDir dir;
  std::unique_ptr<SidecarProcess> sidecar =
      StartSidecar(dir.path() + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  InformerClient client(sidecar->NewChannel());
  absl::StatusOr<std::vector<v1::ResourceStatus>> resources =
      client.ListResources();
  ASSERT_TRUE(resources.ok()) << resources.status();
  std::set<std::string> names;
  for (const v1::ResourceStatus& r : *resources) names.insert(r.resource());
  EXPECT_TRUE(names.count("configmaps")) << ::testing::PrintToString(names);

  absl::StatusOr<std::vector<informer::ObjectPtr>> cms =
      client.List("configmaps");
  // Unary queries answer UNAVAILABLE until the informer synced; the sidecar
  // is health-SERVING only once its informers synced.
  ASSERT_TRUE(cms.ok()) << cms.status();
  ASSERT_FALSE(cms->empty());
  const informer::ObjectPtr& first = cms->front();
  absl::StatusOr<informer::ObjectPtr> got =
      client.Get("configmaps", first->namespace_(), first->name());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->Key(), first->Key());
  absl::StatusOr<std::vector<informer::ObjectPtr>> in_ns =
      client.ByIndex("configmaps", "namespace", first->namespace_());
  ASSERT_TRUE(in_ns.ok()) << in_ns.status();
  EXPECT_FALSE(in_ns->empty());
  for (const informer::ObjectPtr& o : *in_ns) {
    EXPECT_EQ(o->namespace_(), first->namespace_());
  }
  absl::StatusOr<std::vector<std::string>> namespaces =
      client.ListIndexValues("configmaps", "namespace");
  ASSERT_TRUE(namespaces.ok()) << namespaces.status();
  EXPECT_TRUE(std::is_sorted(namespaces->begin(), namespaces->end()));
  std::set<std::string> want;
  for (const informer::ObjectPtr& o : *cms) {
    want.insert(std::string(o->namespace_()));
  }
  EXPECT_EQ(std::set<std::string>(namespaces->begin(), namespaces->end()),
            want);
  EXPECT_EQ(
      client.ListIndexValues("configmaps", "no-such-index").status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Get("configmaps", "nope", "nope").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client.List("no-such-resource").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SdkE2eTest, WorkQueueWorkerForgetsAndRetriesFailures) {
  TempDir dir;
  std::unique_ptr<SidecarProcess> sidecar =
      StartSidecar(dir.path() + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  std::shared_ptr<grpc::Channel> channel = sidecar->NewChannel();
  {
    auto stub = v1::WorkQueue::NewStub(channel);
    grpc::ClientContext ctx;
    v1::CreateQueueRequest request;
    request.set_name("sdk-e2e");
    request.set_resource("configmaps");
    v1::CreateQueueResponse response;
    grpc::Status st = stub->CreateQueue(&ctx, request, &response);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  WorkQueueWorker worker(channel, "sdk-e2e", "sdk-e2e-worker");
  absl::Mutex mu;
  std::string failing_key;  // the first key leased fails once
  std::vector<int> failing_key_failures;
  int leases = 0;
  auto process = [&](const v1::Lease& lease) -> absl::Status {
    absl::MutexLock lock(&mu);
    ++leases;
    if (failing_key.empty()) failing_key = lease.key();
    if (lease.key() != failing_key) return absl::OkStatus();
    failing_key_failures.push_back(lease.failures());
    if (failing_key_failures.size() == 1) {
      return absl::InternalError("first attempt fails");
    }
    return absl::OkStatus();
  };
  absl::Status run_status;
  std::thread runner([&] { run_status = worker.Run(process); });
  {
    absl::MutexLock lock(&mu);
    auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) {
      return failing_key_failures.size() >= 2 && leases >= 5;
    };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), kWait));
    // Retried after the FAIL, with its failure count.
    EXPECT_THAT(failing_key_failures, ::testing::ElementsAre(0, 1));
  }
  worker.Stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status;
  EXPECT_GE(worker.processed(), 5);
  EXPECT_EQ(worker.failed(), 1);
  EXPECT_EQ(worker.rejected(), 0);

  // An unknown queue ends the loop with the sidecar's NOT_FOUND.
  WorkQueueWorker lost(channel, "no-such-queue");
  EXPECT_EQ(lost.Run([](const v1::Lease&) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kNotFound);
}

// RunWithReconnect, the Python and Node workers' contract: a queue that
// does not exist yet is NOT_FOUND on every attempt, each reported and
// retried; once it is declared the next stream works, reported once.
TEST(SdkE2eTest, WorkQueueWorkerReconnectsUntilTheQueueExists) {
  TempDir dir;
  std::unique_ptr<SidecarProcess> sidecar =
      StartSidecar(dir.path() + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  std::shared_ptr<grpc::Channel> channel = sidecar->NewChannel();
  ErrorLog errors;
  WorkQueueWorker worker(channel, "sdk-e2e-late", "late-worker");
  WorkQueueWorker::ReconnectOptions options;
  options.initial_backoff = absl::Milliseconds(20);
  options.max_backoff = absl::Milliseconds(40);
  options.error_handler = &errors;
  absl::Mutex mu;
  int leases = 0;
  absl::Status run_status;
  std::thread runner([&] {
    run_status = worker.RunWithReconnect(
        [&](const v1::Lease&) {
          absl::MutexLock lock(&mu);
          ++leases;
          return absl::OkStatus();
        },
        options);
  });
  ASSERT_TRUE(errors.WaitForErrors(2));
  {
    auto stub = v1::WorkQueue::NewStub(channel);
    grpc::ClientContext ctx;
    v1::CreateQueueRequest request;
    request.set_name("sdk-e2e-late");
    request.set_resource("configmaps");
    v1::CreateQueueResponse response;
    grpc::Status st = stub->CreateQueue(&ctx, request, &response);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  {
    absl::MutexLock lock(&mu);
    auto leased = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return leases > 0; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&leased), kWait));
  }
  worker.Stop();
  runner.join();
  EXPECT_TRUE(run_status.ok()) << run_status;
  for (absl::StatusCode code : errors.codes()) {
    EXPECT_EQ(code, absl::StatusCode::kNotFound);
  }
  // The first stream that delivered was reported before its first lease.
  EXPECT_EQ(errors.recoveries(), 1);
  EXPECT_GE(worker.processed(), 1);
}

TEST(SdkE2eTest, RecordEvent) {
  TempDir dir;
  std::unique_ptr<SidecarProcess> sidecar =
      StartSidecar(dir.path() + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  std::shared_ptr<grpc::Channel> channel = sidecar->NewChannel();
  v1::ObjectReference ref;
  ref.set_kind("Pod");
  ref.set_namespace_("default");
  ref.set_name("web-1");
  EXPECT_TRUE(
      RecordEvent(channel.get(), ref, "Normal", "Reconciled", "all good").ok());
  absl::Status bad = RecordEvent(channel.get(), ref, "Loud", "X", "");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("type"));
}

}  // namespace
}  // namespace client_sdk

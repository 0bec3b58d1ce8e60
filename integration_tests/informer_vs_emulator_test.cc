// A SharedIndexInformer over the real API client (libcurl, HTTP/1.1) against
// an in-process API server emulator, through every fault the emulator can
// inject. After each fault the informer's cache must equal the emulator's
// state object by object (same keys, same resourceVersions), no object may
// be added twice, deletes missed during a disconnect must arrive as
// tombstones when a relist discovers them, and the reflector must not relist
// where client-go would not.
//
// Time: the informer, its reflector and the HTTP transport share a
// FakeClock. A ClockPump advances it whenever something is parked on it
// (back-off, Retry-After), so nothing here sleeps on the wall clock; waits
// for convergence are condition waits whose deadline is only a safety net.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "emulator/seed.h"
#include "gtest/gtest.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/object/api_error.h"
#include "informer/util/clock.h"
#include "integration_tests/test_harness.h"

namespace integration {
namespace {

using ::informer::FakeClock;
using ::informer::ObjectPtr;
using ::informer::SharedIndexInformer;
using ::informer::client::KubeClient;
using ::informer::client::ResourceClient;
using ::informer::client::ResourceClientOptions;
using ::informer::client::RestConfig;

constexpr char kNs[] = "it";
// The watch idle timeout runs on the FakeClock. The pump only moves time
// while the reflector or transport is parked (no watch open then), so only
// the stall test, which advances past it on purpose, can trigger it.
constexpr absl::Duration kIdleTimeout = absl::Seconds(90);

struct Scenario {
  emulator::EmulatorOptions emulator;
  std::string resource = "pods";
  int64_t page_size = 500;
  // Objects created before the informer starts.
  int initial_pods = 20;
  // Reflector::Options::use_watch_list.
  bool watch_list = false;
  // RestConfig::compression (--api_compression).
  ::informer::client::ApiCompression compression =
      ::informer::client::ApiCompression::kNone;
};

class InformerVsEmulatorTest : public ::testing::Test {
 protected:
  ~InformerVsEmulatorTest() override {
    // Informer first (it waits on the clock and talks to the emulator),
    // then the pump (it waits on the clock itself), then the rest.
    if (informer_ != nullptr) informer_->Stop();
    informer_.reset();
    pump_.reset();
    resource_client_.reset();
    kube_.reset();
    if (emu_ != nullptr) emu_->Stop();
  }

  void StartEmulator(const Scenario& setup) {
    emu_ = std::make_unique<emulator::EmulatorWithFaults>(setup.emulator);
    ASSERT_TRUE(emu_->Start().ok());
    for (int i = 0; i < setup.initial_pods; ++i) {
      CreatePod(absl::StrCat("pod-", i));
    }
  }

  // Builds the client and informer (not started), so tests can arm faults
  // and hooks first.
  void MakeInformer(const Scenario& setup) {
    RestConfig config;
    config.server = emu_->url();
    config.ca_data = emu_->ca_cert_pem();
    config.compression = setup.compression;
    absl::StatusOr<std::unique_ptr<KubeClient>> kube =
        KubeClient::Create(config, &clock_);
    ASSERT_TRUE(kube.ok()) << kube.status();
    kube_ = *std::move(kube);
    ResourceClientOptions rc;
    rc.watch_idle_timeout = kIdleTimeout;
    absl::StatusOr<std::unique_ptr<ResourceClient>> client =
        kube_->ForResource(setup.resource, "", rc);
    ASSERT_TRUE(client.ok()) << client.status();
    resource_client_ = *std::move(client);

    SharedIndexInformer::Options options;
    options.name = absl::StrCat("it-", setup.resource);
    options.reflector.page_size = setup.page_size;
    options.reflector.random_seed = 42;
    options.reflector.use_watch_list = setup.watch_list;
    informer_ = std::make_unique<SharedIndexInformer>(resource_client_.get(),
                                                      options, &clock_);
    ASSERT_TRUE(informer_->AddEventHandler(&handler_).ok());
    ASSERT_TRUE(informer_
                    ->SetWatchErrorHandler(
                        [this](const absl::Status& s) { errors_.Add(s); })
                    .ok());
    pump_ = std::make_unique<ClockPump>(&clock_);
    resource_ = &emu_->Resource(setup.resource);
  }

  void StartInformer() { ASSERT_TRUE(informer_->Start().ok()); }

  void StartAll(const Scenario& setup) {
    StartEmulator(setup);
    MakeInformer(setup);
    StartInformer();
    ExpectConverged();
  }

  // Waits until the handler's view equals the emulator's state, then
  // compares the informer's indexer with it object by object.
  void ExpectConverged() {
    const KeyRvMap expected = ToKeyRvMap(emu_->store().Snapshot(*resource_));
    ASSERT_TRUE(handler_.AwaitView(expected))
        << "handler never converged: has " << handler_.View().size()
        << " objects, emulator " << expected.size()
        << "; last error: " << informer_->LastError();
    // The handler sees a change only after the indexer has it.
    ASSERT_TRUE(informer_->WaitForSync(absl::InfiniteDuration()));
    const std::vector<ObjectPtr> cached = informer_->GetIndexer().List();
    KeyRvMap got;
    for (const ObjectPtr& obj : cached) {
      got[obj->Key()] = std::string(obj->resource_version());
    }
    EXPECT_EQ(got, expected);
    ExpectNoDuplicateAdds();
  }

  void ExpectNoDuplicateAdds() {
    for (const auto& [uid, n] : handler_.AddsPerUid()) {
      EXPECT_EQ(n, 1) << "uid " << uid << " was added " << n << " times";
    }
  }

  // Until the informer's watch is open on the server, stream faults would
  // hit nobody.
  void AwaitWatch() {
    ASSERT_TRUE(emu_->store().AwaitWatchers(resource_, 1, absl::Seconds(60)));
  }

  // With the pump paused (before the fault, so no back-off can slip
  // through), waits until the reflector is parked in its back-off: the watch
  // is down and nothing re-opens it until pump_->Resume().
  void AwaitBackOff() { clock_.WaitForWaiters(1); }

  std::string PodJson(const std::string& name) {
    emulator::PodParams p;
    p.ns = kNs;
    p.name = name;
    p.node = "node-1";
    p.app = 3;
    p.pod_ip = "10.0.0.7";
    return emulator::PodJson(p);
  }
  void CreatePod(const std::string& name) {
    const emulator::ResourceInfo& pods = emu_->Resource("pods");
    ASSERT_TRUE(emu_->store().Create(pods, kNs, PodJson(name)).ok()) << name;
  }
  void TouchPod(const std::string& name, int n) {
    const emulator::ResourceInfo& pods = emu_->Resource("pods");
    ASSERT_TRUE(emu_->store()
                    .Patch(pods, kNs, name, emulator::PatchType::kMerge,
                           absl::StrCat(R"({"metadata":{"labels":{"touch":")",
                                        n, R"("}}})"))
                    .ok())
        << name;
  }
  void DeletePod(const std::string& name) {
    const emulator::ResourceInfo& pods = emu_->Resource("pods");
    ASSERT_TRUE(emu_->store().Delete(pods, kNs, name).ok()) << name;
  }

  // The deletes the handler saw for `key`.
  std::vector<RecordingHandler::Deleted> DeletesOf(const std::string& key) {
    std::vector<RecordingHandler::Deleted> out;
    for (const auto& d : handler_.Deletes()) {
      if (d.key == key) out.push_back(d);
    }
    return out;
  }

  static std::string Key(const std::string& name) {
    return absl::StrCat(kNs, "/", name);
  }

  FakeClock clock_;
  RecordingHandler handler_;
  ErrorLog errors_;
  std::unique_ptr<emulator::EmulatorWithFaults> emu_;
  std::unique_ptr<KubeClient> kube_;
  std::unique_ptr<ResourceClient> resource_client_;
  std::unique_ptr<ClockPump> pump_;
  std::unique_ptr<SharedIndexInformer> informer_;
  const emulator::ResourceInfo* resource_ = nullptr;
};

TEST_F(InformerVsEmulatorTest, SyncsAndFollowsLiveChangesWithOneList) {
  StartAll(Scenario{});
  EXPECT_EQ(handler_.adds(), 20);
  AwaitWatch();
  CreatePod("live-1");
  TouchPod("pod-3", 1);
  DeletePod("pod-4");
  ExpectConverged();
  // The reflector counts an event just after handing it to the FIFO, so a
  // handler can see the last event before it is counted. Events are
  // handled in order: once a later one has arrived, the earlier ones are
  // counted.
  CreatePod("sentinel");
  ExpectConverged();

  const auto deletes = DeletesOf(Key("pod-4"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(c.errors, 0);
  EXPECT_GE(c.events_added, 1);
  // The list body alone is several KB per Pod; the watch adds more.
  EXPECT_GT(c.bytes_received, 10u * 1000u);
  EXPECT_LE(c.events_added, 2);
  EXPECT_EQ(c.events_modified, 1);
  EXPECT_EQ(c.events_deleted, 1);
}

// Both --api_compression settings sync the same objects: with gzip the
// emulator compresses every list page over 128 KiB (as the API server does)
// and the transport decodes it; with none nothing is compressed. The list
// comes in two pages, both over 128 KiB: 250 Pods (over 1 MiB, which the
// emulator streams) and 150 (built in memory); live events follow over the
// watch, which is never compressed.
class ApiCompressionTest
    : public InformerVsEmulatorTest,
      public ::testing::WithParamInterface<::informer::client::ApiCompression> {
};

TEST_P(ApiCompressionTest, SyncsTheSameObjectsAndFollowsChanges) {
  Scenario setup;
  setup.initial_pods = 400;
  setup.page_size = 250;
  setup.emulator.watch_cache = false;  // an API server that pages RV=0 lists
  setup.compression = GetParam();
  StartAll(setup);
  EXPECT_EQ(handler_.adds(), 400);
  AwaitWatch();
  CreatePod("live-1");
  TouchPod("pod-3", 1);
  DeletePod("pod-4");
  CreatePod("sentinel");
  ExpectConverged();
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(c.errors, 0);
  // Counted after decoding: the JSON itself, several KB per Pod.
  EXPECT_GT(c.bytes_received, 400u * 1000u);
}

INSTANTIATE_TEST_SUITE_P(
    NoneAndGzip, ApiCompressionTest,
    ::testing::Values(::informer::client::ApiCompression::kNone,
                      ::informer::client::ApiCompression::kGzip),
    [](const ::testing::TestParamInfo<::informer::client::ApiCompression>&
           info) {
      return info.param == ::informer::client::ApiCompression::kGzip
                 ? std::string("Gzip")
                 : std::string("None");
    });

TEST_F(InformerVsEmulatorTest, CutWatchResumesFromLastRvWithoutRelisting) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  emu_->CutWatches(resource_);
  // This event is the one sent half-written before the connection drops.
  TouchPod("pod-1", 1);
  AwaitBackOff();
  // While the watch is down.
  DeletePod("pod-2");
  CreatePod("while-down");
  TouchPod("pod-3", 2);
  pump_->Resume();
  ExpectConverged();
  // After the re-watch.
  TouchPod("pod-5", 3);
  ExpectConverged();

  // The re-watch replays history from the last RV: the delete arrives as a
  // real DELETED event, not as a tombstone.
  const auto deletes = DeletesOf(Key("pod-2"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_GE(c.watches, 2);
  EXPECT_GE(c.errors, 1);
}

TEST_F(InformerVsEmulatorTest, StalledWatchHitsIdleTimeoutAndResumes) {
  StartAll(Scenario{});
  AwaitWatch();
  // An event through the stream proves its headers and bytes so far have
  // arrived: after the stall no byte can reset the idle timer we advance
  // past below.
  CreatePod("before-stall");
  ExpectConverged();
  emu_->StallWatches(resource_);
  CreatePod("during-stall");
  DeletePod("pod-6");
  TouchPod("pod-7", 1);
  // Nothing arrives any more; once the idle timeout has passed on the
  // transport's clock the stream is declared hung.
  clock_.Advance(kIdleTimeout + absl::Seconds(1));
  ExpectConverged();
  emu_->ResumeWatches(resource_);
  CreatePod("after-stall");
  ExpectConverged();

  bool saw_idle_timeout = false;
  for (const absl::Status& s : errors_.Errors()) {
    if (absl::IsDeadlineExceeded(s)) saw_idle_timeout = true;
  }
  EXPECT_TRUE(saw_idle_timeout);
  const auto deletes = DeletesOf(Key("pod-6"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
}

TEST_F(InformerVsEmulatorTest, ThrottledRewatchHonoursRetryAfterWithoutRelist) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  // More 429s than the transport retries internally (3), so the reflector
  // itself sees one and must back off and re-watch, not relist.
  emu_->faults().ThrottleNextRequests(5, 2);
  emu_->CutWatches(resource_);
  TouchPod("pod-1", 1);
  AwaitBackOff();
  DeletePod("pod-8");
  CreatePod("while-throttled");
  pump_->Resume();
  ExpectConverged();

  bool reflector_saw_429 = false;
  for (const absl::Status& s : errors_.Errors()) {
    if (informer::IsTooManyRequests(s)) reflector_saw_429 = true;
  }
  EXPECT_TRUE(reflector_saw_429);
  int retry_after_waits = 0;
  for (absl::Duration step : pump_->Steps()) {
    // Retry-After plus up to 20% jitter.
    if (step >= absl::Seconds(2) && step <= absl::Seconds(2.4)) {
      ++retry_after_waits;
    }
  }
  // Five 429s, each waited out: four retried by the transport (three, then
  // one more after the reflector's back-off), and the reflector's back-off
  // itself no shorter than the Retry-After of the 429 it got.
  EXPECT_EQ(retry_after_waits, 5);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
}

TEST_F(InformerVsEmulatorTest, InternalErrorsOnListBackOffExponentially) {
  Scenario setup;
  StartEmulator(setup);
  MakeInformer(setup);
  emu_->faults().FailRequests("list", "pods", 500, 3);
  StartInformer();
  ExpectConverged();

  // client-go's back-off: 800 ms doubling, jitter up to +100%.
  const std::vector<absl::Duration> steps = pump_->Steps();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_GE(steps[0], absl::Milliseconds(800));
  EXPECT_LE(steps[0], absl::Milliseconds(1600));
  EXPECT_GE(steps[1], absl::Milliseconds(1600));
  EXPECT_LE(steps[1], absl::Milliseconds(3200));
  EXPECT_GE(steps[2], absl::Milliseconds(3200));
  EXPECT_LE(steps[2], absl::Milliseconds(6400));
  const auto errs = errors_.Errors();
  ASSERT_EQ(errs.size(), 3u);
  for (const absl::Status& s : errs) {
    EXPECT_EQ(informer::HttpCode(s), 500) << s;
  }
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 4);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(handler_.adds(), 20);
}

TEST_F(InformerVsEmulatorTest,
       InternalErrorOnWatchRelistsAndDeliversTombstones) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  emu_->faults().FailRequests("watch", "pods", 500, 1);
  emu_->CutWatches(resource_);
  TouchPod("pod-1", 1);
  AwaitBackOff();
  DeletePod("pod-9");
  CreatePod("while-down");
  pump_->Resume();
  ExpectConverged();

  // client-go relists after a watch request fails with anything but 429 /
  // connection refused; the relist finds pod-9 gone.
  const auto deletes = DeletesOf(Key("pod-9"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_TRUE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 1);
}

TEST_F(InformerVsEmulatorTest, ExpiredWatchRelistsAndDeliversTombstones) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  emu_->faults().ExpireNextWatch("pods");
  emu_->CutWatches(resource_);
  TouchPod("pod-1", 1);
  AwaitBackOff();
  DeletePod("pod-10");
  DeletePod("pod-11");
  TouchPod("pod-12", 2);
  CreatePod("while-down");
  pump_->Resume();
  ExpectConverged();
  CreatePod("after-relist");
  ExpectConverged();

  for (const char* name : {"pod-10", "pod-11"}) {
    const auto deletes = DeletesOf(Key(name));
    ASSERT_EQ(deletes.size(), 1u) << name;
    EXPECT_TRUE(deletes[0].final_state_unknown) << name;
  }
  bool saw_expired = false;
  for (const absl::Status& s : errors_.Errors()) {
    if (informer::IsExpired(s)) saw_expired = true;
  }
  EXPECT_TRUE(saw_expired);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 1);
  EXPECT_GE(c.expired, 1);
}

TEST_F(InformerVsEmulatorTest, ExpiredContinueTokenRestartsAsAFullList) {
  Scenario setup;
  setup.page_size = 7;
  setup.initial_pods = 30;
  setup.emulator.watch_cache = false;  // an API server that pages RV=0 lists
  StartEmulator(setup);
  MakeInformer(setup);
  emu_->faults().ExpireNextContinue();
  // Mutations while the first list is paging: the transform runs on each
  // page's items before the next page is requested.
  int transformed = 0;
  absl::Notification mutated;
  ASSERT_TRUE(
      informer_
          ->SetTransform([&](ObjectPtr obj) -> absl::StatusOr<ObjectPtr> {
            if (++transformed == 1) {
              DeletePod("pod-29");
              CreatePod("while-paging");
              mutated.Notify();
            }
            return obj;
          })
          .ok());
  StartInformer();
  ASSERT_TRUE(mutated.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ExpectConverged();
  AwaitWatch();
  TouchPod("pod-0", 1);
  ExpectConverged();

  const auto errs = errors_.Errors();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_TRUE(informer::IsExpired(errs[0])) << errs[0];
  // The expired page restarts the whole list; nothing of the aborted one
  // reached the cache, so pod-29 was never added.
  EXPECT_TRUE(DeletesOf(Key("pod-29")).empty());
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(handler_.adds(), 30);
}

// An event that does not decode would come back on a re-watch from the same
// resourceVersion (it is in the server's history), so the reflector relists
// instead; the delete it missed arrives as a tombstone.
TEST_F(InformerVsEmulatorTest, MalformedEventLineRelistsInsteadOfRewatching) {
  StartAll(Scenario{});
  AwaitWatch();
  CreatePod("before-garbage");
  ExpectConverged();
  pump_->Pause();
  emu_->InjectMalformedEvent(resource_);
  AwaitBackOff();
  DeletePod("pod-13");
  CreatePod("after-garbage");
  pump_->Resume();
  ExpectConverged();

  const auto deletes = DeletesOf(Key("pod-13"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_TRUE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 1);
  EXPECT_GE(c.errors, 1);
}

TEST_F(InformerVsEmulatorTest, ObjectsLargerThanOneMiBArriveIntact) {
  Scenario setup;
  setup.resource = "configmaps";
  setup.initial_pods = 0;
  StartEmulator(setup);
  ASSERT_TRUE(emu_->CreateLargeObject(kNs, "big-listed", 3 << 19).ok());
  MakeInformer(setup);
  StartInformer();
  ExpectConverged();
  AwaitWatch();
  ASSERT_TRUE(emu_->CreateLargeObject(kNs, "big-watched", 2 << 20).ok());
  ExpectConverged();

  ObjectPtr listed = informer_->GetIndexer().GetByKey(Key("big-listed"));
  ObjectPtr watched = informer_->GetIndexer().GetByKey(Key("big-watched"));
  ASSERT_NE(listed, nullptr);
  ASSERT_NE(watched, nullptr);
  EXPECT_GT(listed->json().size(), size_t{3 << 19});
  EXPECT_GT(watched->json().size(), size_t{2 << 20});
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.errors, 0);
}

TEST_F(InformerVsEmulatorTest, RestartWithCaughtUpClientResumesWithoutRelist) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  emu_->Restart();
  AwaitBackOff();
  // The client had seen everything up to the restart, so its RV is still
  // servable: the changes made while it is away are replayed as events.
  DeletePod("pod-14");
  TouchPod("pod-16", 1);
  CreatePod("after-restart");
  pump_->Resume();
  ExpectConverged();

  const auto deletes = DeletesOf(Key("pod-14"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
}

// Seen against a real kube-apiserver v1.24: the client is paused (it reads
// nothing) across two API server restarts. Its re-watch gets 410 "too old
// resource version: RV (restart RV)" because a restarted watch cache starts
// at the restart's RV. A relist "from RV" with a limit is an EXACT read from
// etcd (which still has RV), so it returns the old state at RV; the watch
// from RV gets 410 again, forever. The relist must ask for the current
// state (no limit at a non-zero RV) and every round must back off.
TEST_F(InformerVsEmulatorTest, PausedAcrossTwoRestartsRelistsOnceAndConverges) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  emu_->StallWatches(resource_);  // the client reads nothing more
  DeletePod("pod-14");
  TouchPod("pod-16", 1);
  emu_->Restart();
  AwaitBackOff();
  CreatePod("between-restarts");
  emu_->Restart();
  DeletePod("pod-15");
  TouchPod("pod-17", 2);
  pump_->Resume();
  // The deadline is a safety net, not a timing assertion.
  ExpectConverged();
  AwaitWatch();
  TouchPod("pod-18", 3);
  ExpectConverged();

  const auto c = informer_->GetReflectorCounters();
  EXPECT_LE(c.lists, 2) << "relisted " << c.relists << " times";
  for (const char* name : {"pod-14", "pod-15"}) {
    const auto deletes = DeletesOf(Key(name));
    ASSERT_EQ(deletes.size(), 1u) << name;
    EXPECT_TRUE(deletes[0].final_state_unknown) << name;
  }
}

TEST_F(InformerVsEmulatorTest,
       RestartCompactingUnseenChangesRelistsAndDeliversTombstones) {
  StartAll(Scenario{});
  AwaitWatch();
  pump_->Pause();
  // The client falls behind (its stream stalls) while pods change, then the
  // API server restarts: the history holding those changes is compacted
  // and the watch dropped.
  emu_->StallWatches(resource_);
  DeletePod("pod-14");
  TouchPod("pod-16", 1);
  emu_->Restart();
  AwaitBackOff();
  DeletePod("pod-15");
  CreatePod("after-restart");
  pump_->Resume();
  ExpectConverged();
  AwaitWatch();
  TouchPod("pod-17", 2);
  ExpectConverged();

  for (const char* name : {"pod-14", "pod-15"}) {
    const auto deletes = DeletesOf(Key(name));
    ASSERT_EQ(deletes.size(), 1u) << name;
    EXPECT_TRUE(deletes[0].final_state_unknown) << name;
  }
  bool saw_expired = false;
  for (const absl::Status& s : errors_.Errors()) {
    if (informer::IsExpired(s)) saw_expired = true;
  }
  EXPECT_TRUE(saw_expired);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_GE(c.relists, 1);
  EXPECT_GE(c.expired, 1);
}

TEST_F(InformerVsEmulatorTest, HttpsWithGeneratedCaSurvivesACutWatch) {
  Scenario setup;
  setup.emulator.tls = true;
  StartAll(setup);
  ASSERT_EQ(emu_->url().rfind("https://", 0), 0u);
  AwaitWatch();
  pump_->Pause();
  emu_->CutWatches(resource_);
  TouchPod("pod-1", 1);
  AwaitBackOff();
  DeletePod("pod-2");
  pump_->Resume();
  ExpectConverged();

  const auto deletes = DeletesOf(Key("pod-2"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  EXPECT_EQ(informer_->GetReflectorCounters().lists, 1);
}

TEST_F(InformerVsEmulatorTest, WatchListStreamsTheInitialStateWithoutAList) {
  Scenario setup;
  setup.watch_list = true;
  StartEmulator(setup);
  MakeInformer(setup);
  // Any LIST of pods would fail and be reported: a clean start proves the
  // initial state came from the stream (initial events, then the bookmark
  // annotated k8s.io/initial-events-end).
  emu_->faults().FailRequests("list", "pods", 500, -1);
  StartInformer();
  ExpectConverged();
  EXPECT_EQ(handler_.adds(), 20);
  EXPECT_TRUE(errors_.Errors().empty());

  // The same stream goes on with live events.
  CreatePod("live-1");
  TouchPod("pod-1", 1);
  ExpectConverged();
  EXPECT_TRUE(errors_.Errors().empty());

  // A cut stream resumes with a plain watch from the last RV.
  AwaitWatch();
  pump_->Pause();
  emu_->CutWatches(resource_);
  TouchPod("pod-2", 2);
  AwaitBackOff();
  DeletePod("pod-3");
  pump_->Resume();
  ExpectConverged();

  const auto deletes = DeletesOf(Key("pod-3"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_FALSE(deletes[0].final_state_unknown);
  for (const absl::Status& s : errors_.Errors()) {
    EXPECT_EQ(informer::HttpCode(s), 0) << "only the cut may fail: " << s;
  }
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_GE(c.watches, 2);
}

TEST_F(InformerVsEmulatorTest, WatchListFallsBackToListAndWatchOnV124) {
  Scenario setup;
  setup.watch_list = true;
  setup.emulator.v1_24 = true;
  StartAll(setup);
  AwaitWatch();
  CreatePod("live-1");
  ExpectConverged();

  // A relist after the fallback goes straight to LIST: the server's "no"
  // is remembered.
  pump_->Pause();
  emu_->faults().ExpireNextWatch("pods");
  emu_->CutWatches(resource_);
  TouchPod("pod-1", 1);
  AwaitBackOff();
  DeletePod("pod-4");
  pump_->Resume();
  ExpectConverged();

  int unprocessable = 0;
  for (const absl::Status& s : errors_.Errors()) {
    if (informer::HttpCode(s) == 422) ++unprocessable;
  }
  EXPECT_EQ(unprocessable, 1);
  const auto deletes = DeletesOf(Key("pod-4"));
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_TRUE(deletes[0].final_state_unknown);
  EXPECT_EQ(handler_.adds(), 21);
}

}  // namespace
}  // namespace integration

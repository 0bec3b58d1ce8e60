// Back-off that spares the API server, fault by fault, against the emulator
// over real HTTP: Retry-After (429 as API Priority and Fairness answers, 503)
// is waited out, capped and jittered, on LIST and WATCH, and no failure is
// retried at once; three API server restarts in a row cost each informer at
// most one relist, and only where the server answered 410; a relist after
// 410 sends the request client-go's resourceVersion rules call for.
//
// Time: informers, reflectors and the HTTP transport share a FakeClock that
// a ClockPump advances whenever something is parked on it; the pump's steps
// are the waits. Nothing sleeps on the wall clock.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/object/api_error.h"
#include "informer/util/clock.h"
#include "integration_tests/emulated_informer.h"
#include "integration_tests/test_harness.h"

namespace integration {
namespace {

constexpr char kNs[] = "backoff";

void CreateConfigMap(emulator::EmulatorWithFaults* emu,
                     const std::string& name) {
  ASSERT_TRUE(emu->store()
                  .Create(emu->Resource("configmaps"), kNs,
                          absl::StrCat(R"({"apiVersion":"v1","kind":)",
                                       R"("ConfigMap","metadata":{"name":")",
                                       name, R"(","namespace":")", kNs,
                                       R"("},"data":{"k":"v"}})"))
                  .ok());
}

class ServerBackoffTest : public ::testing::Test {
 protected:
  ServerBackoffTest() : emu_(emulator::EmulatorOptions{}) {}
  ~ServerBackoffTest() override {
    informers_.clear();  // they wait on the clock: before the pump
    pump_.reset();
    emu_.Stop();
  }

  void SetUp() override {
    ASSERT_TRUE(emu_.Start().ok());
    for (int i = 0; i < 5; ++i) CreatePod(&emu_, kNs, absl::StrCat("pod-", i));
  }

  EmulatedInformer& Add(const std::string& resource) {
    EmulatedInformer::Options options;
    options.resource = resource;
    informers_.push_back(
        std::make_unique<EmulatedInformer>(&emu_, &clock_, options));
    if (pump_ == nullptr) pump_ = std::make_unique<ClockPump>(&clock_);
    return *informers_.back();
  }

  // Starts `inf` and waits for its cache and its watch.
  void StartSynced(EmulatedInformer& inf) {
    ASSERT_TRUE(inf.Start().ok());
    ASSERT_TRUE(inf.AwaitConverged());
    ASSERT_TRUE(
        emu_.store().AwaitWatchers(&inf.resource(), 1, absl::Seconds(60)));
  }

  // The LIST requests `inf` sent from the `mark`-th request on.
  static std::vector<std::string> ListsSince(const EmulatedInformer& inf,
                                             size_t mark) {
    std::vector<std::string> out;
    const std::vector<std::string> all = inf.requests().Requests();
    for (size_t i = mark; i < all.size(); ++i) {
      if (absl::StartsWith(all[i], "LIST ")) out.push_back(all[i]);
    }
    return out;
  }

  informer::FakeClock clock_;
  emulator::EmulatorWithFaults emu_;
  std::vector<std::unique_ptr<EmulatedInformer>> informers_;
  std::unique_ptr<ClockPump> pump_;
};

// Five 429s with Retry-After: 7 on the initial LIST: the transport retries
// three times, the reflector then gets the fourth and backs off, the fifth
// is retried by the transport again. Every wait is what the server asked
// plus at most 20% jitter; none is shorter.
TEST_F(ServerBackoffTest, RetryAfterOnListIsWaitedOutJittered) {
  emu_.faults().FailRequests("list", "pods", 429, 5, /*retry_after=*/7);
  EmulatedInformer& pods = Add("pods");
  ASSERT_TRUE(pods.Start().ok());
  ASSERT_TRUE(pods.AwaitConverged());

  const std::vector<absl::Duration> steps = pump_->Steps();
  ASSERT_EQ(steps.size(), 5u);
  bool jittered = false;
  for (absl::Duration step : steps) {
    EXPECT_GE(step, absl::Seconds(7));
    EXPECT_LE(step, absl::Seconds(7) * 1.2);
    jittered |= step > absl::Seconds(7);
  }
  EXPECT_TRUE(jittered) << "five waits of exactly Retry-After";
  EXPECT_EQ(emu_.request_counts().list, 6);
  const auto errors = pods.errors().Errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(informer::IsTooManyRequests(errors[0])) << errors[0];
  const auto c = pods.informer().GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 0);
}

// A Retry-After longer than the transport retries internally (10 s) on a
// WATCH goes to the reflector, which waits it out (not its own 1.6-3.2 s
// back-off) and re-watches without a relist.
TEST_F(ServerBackoffTest, LongRetryAfterOnWatchIsWaitedByTheReflector) {
  EmulatedInformer& pods = Add("pods");
  StartSynced(pods);
  emu_.faults().FailRequests("watch", "pods", 429, 1, /*retry_after=*/30);
  emu_.CutWatches(&pods.resource());
  CreatePod(&emu_, kNs, "after-cut");
  ASSERT_TRUE(pods.AwaitConverged());

  const std::vector<absl::Duration> steps = pump_->Steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_GE(steps[0], absl::Milliseconds(800));  // the cut: back-off
  EXPECT_LE(steps[0], absl::Milliseconds(1600));
  EXPECT_GE(steps[1], absl::Seconds(30));  // the 429: Retry-After
  EXPECT_LE(steps[1], absl::Seconds(36));
  const auto c = pods.informer().GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(c.watches, 3);
}

// 5xx: a 503 with Retry-After on a LIST is retried after it; a 500 without
// one, and a 503 without one on a WATCH, after the reflector's back-off.
// Nothing is retried at once, and the watch is re-opened without a relist.
TEST_F(ServerBackoffTest, ServerErrorsAreNeverRetriedAtOnce) {
  emu_.faults().FailRequests("list", "pods", 503, 1, /*retry_after=*/5);
  emu_.faults().FailRequests("list", "pods", 500, 1);
  EmulatedInformer& pods = Add("pods");
  StartSynced(pods);
  emu_.faults().FailRequests("watch", "pods", 503, 1);
  emu_.CutWatches(&pods.resource());
  CreatePod(&emu_, kNs, "after-cut");
  ASSERT_TRUE(pods.AwaitConverged());

  const std::vector<absl::Duration> steps = pump_->Steps();
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_GE(steps[0], absl::Seconds(5));  // 503 + Retry-After: transport
  EXPECT_LE(steps[0], absl::Seconds(6));
  EXPECT_GE(steps[1], absl::Milliseconds(800));  // 500: back-off
  EXPECT_LE(steps[1], absl::Milliseconds(1600));
  EXPECT_GE(steps[2], absl::Milliseconds(1600));  // the cut: doubled
  EXPECT_GE(steps[3], absl::Milliseconds(3200));  // 503 on the watch
  const auto c = pods.informer().GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 0);
  const auto counts = emu_.request_counts();
  EXPECT_EQ(counts.list, 3);
  EXPECT_EQ(counts.watch, 3);
}

// Three API server restarts in a row, with two informers: the pods
// informer's resourceVersion is behind the server's (a ConfigMap changed
// last), so after the first restart its re-watch is answered 410 and it
// relists once; the ConfigMaps informer is current and only re-watches.
// After that both are current: the next two restarts cost no list.
TEST_F(ServerBackoffTest, ThreeRestartsInARowRelistOnlyOn410) {
  EmulatedInformer& pods = Add("pods");
  EmulatedInformer& configmaps = Add("configmaps");
  StartSynced(pods);
  StartSynced(configmaps);
  CreatePod(&emu_, kNs, "live");
  ASSERT_TRUE(pods.AwaitConverged());
  CreateConfigMap(&emu_, "live");
  ASSERT_TRUE(configmaps.AwaitConverged());

  for (int restart = 0; restart < 3; ++restart) {
    const int64_t pod_watches = pods.informer().GetReflectorCounters().watches;
    const int64_t cm_watches =
        configmaps.informer().GetReflectorCounters().watches;
    emu_.Restart();
    ASSERT_TRUE(PollUntil([&] {
      return pods.informer().GetReflectorCounters().watches > pod_watches &&
             configmaps.informer().GetReflectorCounters().watches >
                 cm_watches &&
             emu_.store().NumWatchers(&pods.resource()) == 1 &&
             emu_.store().NumWatchers(&configmaps.resource()) == 1;
    })) << "restart "
        << restart;
  }
  CreatePod(&emu_, kNs, "after-restarts");
  CreateConfigMap(&emu_, "after-restarts");
  ASSERT_TRUE(pods.AwaitConverged());
  ASSERT_TRUE(configmaps.AwaitConverged());

  for (EmulatedInformer* inf : {&pods, &configmaps}) {
    const auto c = inf->informer().GetReflectorCounters();
    int answered_410 = 0;
    for (const absl::Status& s : inf->errors().Errors()) {
      answered_410 += informer::IsExpired(s);
    }
    EXPECT_LE(c.relists, 1) << inf->resource().resource;
    EXPECT_EQ(c.relists, answered_410) << inf->resource().resource;
  }
  EXPECT_EQ(pods.informer().GetReflectorCounters().relists, 1);
  EXPECT_EQ(configmaps.informer().GetReflectorCounters().relists, 0);
}

// Waits until the reflector has recorded the emulator's newest RV as
// applied: handlers see an event before the reflector records its RV, so
// a converged view alone does not say which RV the next relist names.
void AwaitAppliedCurrent(EmulatedInformer& inf,
                         emulator::EmulatorWithFaults& emu) {
  ASSERT_TRUE(PollUntil(
      [&] {
        return inf.informer().LastAppliedResourceVersion() ==
               absl::StrCat(emu.store().CurrentRv());
      },
      absl::Seconds(60)));
}

// client-go's relistResourceVersion, request by request: the first list
// at "0" (the watch cache, whole); after a watch's 410 the last synced RV,
// unpaged (the watch cache, not older than that RV); after a 410 at the
// very RV a list returned, or a list answered 410, "" with paging (a
// quorum read from etcd).
TEST_F(ServerBackoffTest, RelistAfter410SendsTheRequestClientGoWould) {
  EmulatedInformer& pods = Add("pods");
  StartSynced(pods);
  ASSERT_EQ(ListsSince(pods, 0),
            std::vector<std::string>{
                "LIST /api/v1/pods?limit=500&resourceVersion=0"});

  // A watch answered 410 after events moved the RV past the list's.
  CreatePod(&emu_, kNs, "a");
  ASSERT_TRUE(pods.AwaitConverged());
  AwaitAppliedCurrent(pods, emu_);
  std::string rv = pods.informer().LastAppliedResourceVersion();
  size_t mark = pods.requests().Requests().size();
  emu_.faults().ExpireNextWatch("pods");
  emu_.CutWatches(&pods.resource());
  CreatePod(&emu_, kNs, "b");
  ASSERT_TRUE(pods.AwaitConverged());
  EXPECT_EQ(ListsSince(pods, mark),
            std::vector<std::string>{
                absl::StrCat("LIST /api/v1/pods?resourceVersion=", rv)});

  // A watch answered 410 at the RV the last list returned (no event
  // applied since): that list was not current, read from etcd.
  ASSERT_TRUE(
      emu_.store().AwaitWatchers(&pods.resource(), 1, absl::Seconds(60)));
  mark = pods.requests().Requests().size();
  emu_.faults().ExpireNextWatch("pods");
  emu_.CutWatches(&pods.resource());
  CreatePod(&emu_, kNs, "c");
  ASSERT_TRUE(pods.AwaitConverged());
  EXPECT_EQ(ListsSince(pods, mark),
            std::vector<std::string>{"LIST /api/v1/pods?limit=500"});

  // A relist at the last synced RV answered 410: the next one from etcd.
  ASSERT_TRUE(
      emu_.store().AwaitWatchers(&pods.resource(), 1, absl::Seconds(60)));
  CreatePod(&emu_, kNs, "d");
  ASSERT_TRUE(pods.AwaitConverged());
  AwaitAppliedCurrent(pods, emu_);
  rv = pods.informer().LastAppliedResourceVersion();
  mark = pods.requests().Requests().size();
  emu_.faults().FailRequests("list", "pods", 410, 1);
  emu_.faults().ExpireNextWatch("pods");
  emu_.CutWatches(&pods.resource());
  CreatePod(&emu_, kNs, "e");
  ASSERT_TRUE(pods.AwaitConverged());
  EXPECT_EQ(ListsSince(pods, mark),
            (std::vector<std::string>{
                absl::StrCat("LIST /api/v1/pods?resourceVersion=", rv),
                "LIST /api/v1/pods?limit=500"}));
  const auto c = pods.informer().GetReflectorCounters();
  EXPECT_EQ(c.relists, 4);
  EXPECT_EQ(c.expired, 4);
}

}  // namespace
}  // namespace integration

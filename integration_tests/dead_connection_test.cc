// Dead connections to the API server, against the emulator over real HTTP:
// a watch whose server stops sending is replaced once the watch idle
// timeout (75 s by default: a minute between the API server's bookmarks
// plus margin) has passed, from the last resourceVersion and without a
// relist; a list whose server stops mid-body is abandoned after the stall
// timeout and retried. (Dropped packets: packet_loss_test.)
//
// Time: the informer, its reflector and the HTTP transport share a
// FakeClock: the test moves it past the idle timeout, and a ClockPump lets
// back-offs elapse. libcurl's stall timer runs on the wall clock, so that
// test sets it short by option.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"
#include "integration_tests/emulated_informer.h"
#include "integration_tests/test_harness.h"

namespace integration {
namespace {

constexpr char kNs[] = "dead";

class DeadConnectionTest : public ::testing::Test {
 protected:
  DeadConnectionTest() : emu_(emulator::EmulatorOptions{}) {}
  ~DeadConnectionTest() override {
    // Stop the informer (it waits on the clock) before the pump.
    informer_.reset();
    pump_.reset();
    emu_.Stop();
  }

  void SetUp() override {
    ASSERT_TRUE(emu_.Start().ok());
    for (int i = 0; i < 5; ++i) CreatePod(&emu_, kNs, absl::StrCat("pod-", i));
  }

  void MakeInformer(EmulatedInformer::Options options) {
    informer_ =
        std::make_unique<EmulatedInformer>(&emu_, &clock_, std::move(options));
    pump_ = std::make_unique<ClockPump>(&clock_);
  }

  int CountErrors(bool (*match)(const absl::Status&)) {
    int n = 0;
    for (const absl::Status& s : informer_->errors().Errors()) n += match(s);
    return n;
  }

  informer::FakeClock clock_;
  emulator::EmulatorWithFaults emu_;
  std::unique_ptr<EmulatedInformer> informer_;
  std::unique_ptr<ClockPump> pump_;
};

bool IsDeadline(const absl::Status& s) { return absl::IsDeadlineExceeded(s); }

// A server (or a proxy) that keeps the watch's connection open and
// acknowledged but sends nothing, not even the once-a-minute bookmark: with
// the default options the watch is replaced once 75 s pass without a byte.
TEST_F(DeadConnectionTest, SilentWatchIsReplacedAfterTheDefaultIdleTimeout) {
  MakeInformer(EmulatedInformer::Options{});
  ASSERT_TRUE(informer_->Start().ok());
  ASSERT_TRUE(informer_->AwaitConverged());
  ASSERT_TRUE(
      emu_.store().AwaitWatchers(&informer_->resource(), 1, absl::Seconds(60)));
  // An event through the stream: its bytes have arrived, so nothing can
  // reset the idle timer after the stall.
  CreatePod(&emu_, kNs, "before-stall");
  const int64_t resume_rv = emu_.store().CurrentRv();
  ASSERT_TRUE(informer_->AwaitConverged());

  emu_.StallWatches(&informer_->resource());
  CreatePod(&emu_, kNs, "during-stall");
  clock_.Advance(absl::Seconds(76));
  ASSERT_TRUE(informer_->AwaitConverged())
      << "the silent watch was not replaced 76 s after its last byte";

  // Noticed once, with the cause; re-watched from the last applied RV,
  // without a relist.
  ASSERT_EQ(CountErrors(&IsDeadline), 1);
  for (const absl::Status& s : informer_->errors().Errors()) {
    EXPECT_TRUE(absl::StrContains(s.message(), "no data for 1m15s")) << s;
  }
  const auto c = informer_->informer().GetReflectorCounters();
  EXPECT_EQ(c.lists, 1);
  EXPECT_EQ(c.relists, 0);
  EXPECT_EQ(c.watches, 2);
  const std::vector<std::string> requests = informer_->requests().Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(absl::StartsWith(requests[2], "WATCH "));
  EXPECT_TRUE(absl::StrContains(
      requests[2], absl::StrCat("resourceVersion=", resume_rv, "&")))
      << requests[2];
}

// A list whose server stops half-way through the body and holds the
// connection open: abandoned after the stall timeout (no request timeout
// set, so nothing else would end it), backed off, and retried.
TEST_F(DeadConnectionTest, ListStalledMidBodyIsAbandonedAndRetried) {
  EmulatedInformer::Options options;
  options.rest.request_timeout = absl::ZeroDuration();
  options.rest.stall_timeout = absl::Seconds(2);
  MakeInformer(options);
  emu_.StallLists(&informer_->resource());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(informer_->Start().ok());
  ASSERT_TRUE(PollUntil([&] { return CountErrors(&IsDeadline) >= 1; }))
      << "the stalled list was never abandoned";
  const absl::Duration noticed = absl::Now() - start;
  // libcurl averages the speed over about 5 s, so the half body sent at
  // once keeps it above a byte a second for that long before the 2 s of
  // stall timeout start counting.
  EXPECT_LT(noticed, absl::Seconds(15)) << "stall timeout 2 s";
  emu_.ResumeLists();
  ASSERT_TRUE(informer_->AwaitConverged());

  // The first failure is the stall timeout; a list that stalled again
  // before ResumeLists was cut by it (the emulator drops stalled lists).
  const auto errors = informer_->errors().Errors();
  ASSERT_FALSE(errors.empty());
  EXPECT_TRUE(absl::IsDeadlineExceeded(errors[0])) << errors[0];
  EXPECT_TRUE(absl::StrContains(errors[0].message(), "too slow")) << errors[0];
  for (const absl::Status& s : errors) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) << s;
  }
  const auto c = informer_->informer().GetReflectorCounters();
  EXPECT_EQ(c.lists, static_cast<int64_t>(errors.size()) + 1);
  EXPECT_EQ(c.relists, 0);
  std::cerr << "stalled list noticed after " << noticed << "\n";
}

}  // namespace
}  // namespace integration

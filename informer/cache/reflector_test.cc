#include "informer/cache/reflector.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/reflector_test_util.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/api_error.h"

namespace informer {
namespace {

TEST_F(ReflectorTest, ListsPagesIntoOneReplaceThenWatchesFromListRv) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(source_.Add("ns", absl::StrCat("p", i)).ok());
  }
  Reflector::Options opts;
  opts.page_size = 3;  // three pages
  StartReflector(opts);
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 3);
  EXPECT_EQ(fifo_.Len(), 7u);
  EXPECT_EQ(reflector_->LastSyncResourceVersion(),
            source_.CurrentResourceVersion());
  source_.WaitForWatches(1);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(PopOne().rfind("Replaced p", 0), 0u);
  ASSERT_TRUE(source_.Add("ns", "new").ok());
  EXPECT_EQ(PopOne(), "Added new");
}

TEST_F(ReflectorTest, NormalWatchCloseRewatchesWithoutRelist) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  StartReflector();
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  EXPECT_EQ(PopOne(), "Replaced a");
  EXPECT_EQ(PopOne(), "Added b");  // the watch is live and has seen events
  source_.CloseWatches();
  ASSERT_TRUE(source_.Add("ns", "c").ok());
  // The new watch resumes after b and replays c from the history.
  EXPECT_EQ(PopOne(), "Added c");
  EXPECT_EQ(source_.list_calls(), 1);
  EXPECT_EQ(reflector_->GetCounters().watches, 2);
  EXPECT_EQ(reflector_->GetCounters().errors, 0);
}

TEST_F(ReflectorTest, ExpiredWatchRelists) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  StartReflector();
  WaitForReplaces(1);
  source_.WaitForWatches(1);
  // The connection drops; meanwhile the server moves on and compacts, so
  // the reflector's resourceVersion is gone when it comes back.
  source_.BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(source_.Add("ns", "c").ok());
  source_.CompactHistory();
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  // The re-watch gets ERROR 410 -> a relist, after its back-off like every
  // relist (so that no answer of the server can make the loop spin).
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  WaitForReplaces(2);
  EXPECT_EQ(source_.list_calls(), 2);
  EXPECT_EQ(reflector_->GetCounters().expired, 1);
  EXPECT_TRUE(IsExpired(reflector_->LastError())) << reflector_->LastError();
  EXPECT_EQ(reflector_->LastSyncResourceVersion(),
            source_.CurrentResourceVersion());
}

TEST_F(ReflectorTest, ListFailureBacksOffOnTheClockThenRetries) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  source_.FailLists(2, absl::InternalError("boom"));
  StartReflector();
  // First back-off: 800 ms * (1 + jitter in [0,1)).
  absl::Time wake = clock_.WaitForWaiters(1);
  const absl::Duration first = wake - clock_.Now();
  EXPECT_GE(first, absl::Milliseconds(800));
  EXPECT_LT(first, absl::Milliseconds(1600));
  clock_.Advance(first);
  // Second back-off doubles the base: [1.6 s, 3.2 s).
  wake = clock_.WaitForWaiters(1);
  const absl::Duration second = wake - clock_.Now();
  EXPECT_GE(second, absl::Milliseconds(1600));
  EXPECT_LT(second, absl::Milliseconds(3200));
  clock_.Advance(second);
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 3);
  EXPECT_EQ(reflector_->GetCounters().errors, 2);
  EXPECT_EQ(reflector_->GetCounters().errors_by_kind.at("INTERNAL"), 2);
}

TEST_F(ReflectorTest, TooManyRequestsOnWatchBacksOffAndRewatchesWithoutRelist) {
  ApiStatus slow_down;
  slow_down.code = 429;
  slow_down.reason = "TooManyRequests";
  slow_down.message = "slow down";
  source_.FailWatches(1, StatusFromApiStatus(slow_down, "GET", "/api/v1/pods"));
  StartReflector();
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  source_.WaitForWatches(1);
  EXPECT_EQ(source_.list_calls(), 1);
  EXPECT_EQ(source_.watch_calls(), 2);
  EXPECT_EQ(reflector_->GetCounters().errors_by_kind,
            (std::map<std::string, int64_t>{{"http_429", 1}}));
}

TEST_F(ReflectorTest, CutConnectionRewatchesFromLastRvAfterBackOff) {
  StartReflector();
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  EXPECT_EQ(PopOne(), "Added a");
  source_.BreakWatches(absl::UnavailableError("connection reset by peer"));
  ASSERT_TRUE(source_.Add("ns", "b").ok());  // happens while disconnected
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  source_.WaitForWatches(1);
  EXPECT_EQ(PopOne(), "Added b");  // replayed from history, not relisted
  EXPECT_EQ(source_.list_calls(), 1);
}

TEST_F(ReflectorTest, VeryShortWatchCountsAsErrorAndBacksOff) {
  StartReflector();
  source_.WaitForWatches(1);
  source_.CloseWatches();  // at once, no event, no time passed
  clock_.WaitForWaiters(1);
  EXPECT_EQ(reflector_->GetCounters().errors, 1);
  EXPECT_EQ(source_.watch_calls(), 1);
}

TEST_F(ReflectorTest, BookmarkAdvancesResourceVersion) {
  StartReflector();
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  PopOne();
  source_.SendBookmark();
  const int64_t bookmark_rv = std::stoll(source_.CurrentResourceVersion());
  // Events are handled in order: once "b" is in the FIFO, the bookmark
  // before it has been handled.
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  EXPECT_EQ(PopOne(), "Added b");
  EXPECT_EQ(reflector_->GetCounters().bookmarks, 1);
  EXPECT_GE(std::stoll(reflector_->LastSyncResourceVersion()), bookmark_rv);
}

TEST_F(ReflectorTest, ResyncCallsFifoResyncAtPeriodWhenAsked) {
  Reflector::Options opts;
  opts.resync_period = absl::Seconds(30);
  int asked = 0;
  opts.should_resync = [&asked] {
    ++asked;
    return true;
  };
  StartReflector(opts);
  WaitForReplaces(1);
  source_.WaitForWatches(1);
  clock_.WaitForWaiters(1);  // the resync loop
  clock_.Advance(absl::Seconds(30));
  clock_.WaitForWaiters(1);  // parked again for the next period
  EXPECT_EQ(asked, 1);
}
class ExpireFirstContinue : public ListerWatcher {
 public:
  explicit ExpireFirstContinue(FakeSource* source) : source_(source) {}
  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    {
      absl::MutexLock lock(&mu_);
      rvs_.push_back(options.resource_version);
      if (!options.continue_token.empty() && !expired_once_) {
        expired_once_ = true;
        ApiStatus st;
        st.code = 410;
        st.reason = "Expired";
        st.message = "The provided continue parameter is too old";
        return StatusFromApiStatus(st, "GET", "/api/v1/pods");
      }
    }
    return source_->List(options);
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    return source_->Watch(options);
  }
  std::vector<std::string> rvs() {
    absl::MutexLock lock(&mu_);
    return rvs_;
  }

 private:
  FakeSource* const source_;
  absl::Mutex mu_;
  bool expired_once_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> rvs_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ReflectorTest,
       ExpiredContinueTokenRestartsFullListAtOnceWithQuorumRead) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  ExpireFirstContinue lw(&source_);
  Reflector::Options opts;
  opts.page_size = 1;
  StartReflector(opts, &lw);
  // No clock advance needed: the restart does not back off.
  WaitForReplaces(1);
  // First page at "0", its continue -> 410, then a full list from "" (a
  // quorum read, not the possibly stale watch cache), unpaged.
  const std::vector<std::string> rvs = lw.rvs();
  ASSERT_GE(rvs.size(), 3u);
  EXPECT_EQ(rvs[0], "0");
  EXPECT_EQ(rvs[1], "");  // the continue request carries no RV
  EXPECT_EQ(rvs[2], "");
  EXPECT_EQ(fifo_.Len(), 2u);
  EXPECT_EQ(reflector_->GetCounters().expired, 1);
}
TEST_F(ReflectorTest, AStagedListGetsEveryPagesItemsInOrderAndSkipsTheFifo) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(source_.Add("ns", absl::StrCat("p", i)).ok());
  }
  StageLog log;
  Reflector::Options opts;
  opts.page_size = 3;  // three pages, one stage
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts);
  WaitForReplaces(1);
  {
    absl::MutexLock lock(&log.mu);
    ASSERT_EQ(log.stages.size(), 1u);
    EXPECT_EQ(
        log.stages[0].added,
        (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}));
    EXPECT_EQ(log.stages[0].committed_items, 7);
    EXPECT_EQ(log.stages[0].committed_rv, source_.CurrentResourceVersion());
  }
  EXPECT_EQ(fifo_.Len(), 0u) << "committed by the stage, not Replaced";
  EXPECT_EQ(reflector_->GetCounters().staged_lists, 1);
  // Live events still go through the FIFO.
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Add("ns", "new").ok());
  EXPECT_EQ(PopOne(), "Added new");
}

TEST_F(ReflectorTest, ARefusedStageFallsBackToReplace) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(source_.Add("ns", absl::StrCat("p", i)).ok());
  }
  StageLog log;
  log.accept = false;
  Reflector::Options opts;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts);
  WaitForReplaces(1);
  EXPECT_EQ(fifo_.Len(), 3u);
  EXPECT_EQ(reflector_->GetCounters().staged_lists, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(PopOne(), absl::StrCat("Replaced p", i));
  }
}

TEST_F(ReflectorTest, AStageThatKeepsTheItemsGetsThemAloneAndARefusalFails) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(source_.Add("ns", absl::StrCat("p", i)).ok());
  }
  StageLog log;
  log.keeps = true;
  log.accept = false;
  Reflector::Options opts;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts);
  // Refused: the list fails (no Replace of the items it never collected)
  // and is retried after its back-off.
  const absl::Time retry_at = clock_.WaitForWaiters(1);
  {
    absl::MutexLock lock(&log.mu);
    log.accept = true;
  }
  clock_.Advance(retry_at - clock_.Now());
  WaitForReplaces(1);
  EXPECT_EQ(fifo_.Len(), 0u) << "nothing was Replaced";
  EXPECT_EQ(reflector_->GetCounters().staged_lists, 1);
  EXPECT_EQ(reflector_->GetCounters().lists, 2);
  absl::MutexLock lock(&log.mu);
  ASSERT_EQ(log.stages.size(), 2u);
  EXPECT_EQ(log.stages[0].committed_items, -1);
  EXPECT_EQ(log.stages[1].added.size(), 3u);
  EXPECT_EQ(log.stages[1].committed_items, 0) << "the stage keeps the items";
}

TEST_F(ReflectorTest, AListRestartedMidWayGetsAFreshStage) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  ExpireFirstContinue lw(&source_);
  StageLog log;
  Reflector::Options opts;
  opts.page_size = 1;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts, &lw);
  WaitForReplaces(1);
  absl::MutexLock lock(&log.mu);
  ASSERT_EQ(log.stages.size(), 2u);
  // The first page went to a stage that was dropped when its continue
  // token expired; the restarted list filled a new one.
  EXPECT_EQ(log.stages[0].added, (std::vector<std::string>{"a"}));
  EXPECT_EQ(log.stages[0].committed_items, -1);
  EXPECT_EQ(log.stages[1].added, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(log.stages[1].committed_items, 2);
}

ApiStatus ExpiredApiStatus() {
  ApiStatus st;
  st.code = 410;
  st.reason = "Expired";
  st.message = "too old resource version: 1 (9)";
  return st;
}

// Delegates to a FakeSource and records every List's options.
class RecordLists : public ListerWatcher {
 public:
  explicit RecordLists(FakeSource* source) : source_(source) {}
  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    {
      absl::MutexLock lock(&mu_);
      lists_.push_back(options);
    }
    return source_->List(options);
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    return source_->Watch(options);
  }
  std::vector<ListOptions> lists() {
    absl::MutexLock lock(&mu_);
    return lists_;
  }

 private:
  FakeSource* const source_;
  absl::Mutex mu_;
  std::vector<ListOptions> lists_ ABSL_GUARDED_BY(mu_);
};

class ReflectorRelistTest : public ReflectorTest {
 protected:
  void StartOn(ListerWatcher* lw, Reflector::Options opts) {
    opts.random_seed = 7;
    opts.on_replaced = [this] {
      absl::MutexLock lock(&mu_);
      ++replaces_;
    };
    reflector_ = std::make_unique<Reflector>(lw, &fifo_, &clock_, opts);
    thread_ = std::thread([this] { reflector_->Run(); });
  }
  // After the initial list and one event: the watch breaks while the
  // history is compacted, so the re-watch gets 410 and the reflector
  // relists (after its back-off).
  void ExpireAfterOneEvent() {
    WaitForReplaces(1);
    while (fifo_.Len() > 0) PopOne();
    source_.WaitForWatches(1);
    ASSERT_TRUE(source_.Add("ns", "c").ok());
    EXPECT_EQ(PopOne(), "Added c");
    source_.BreakWatches(absl::UnavailableError("cut"));
    ASSERT_TRUE(source_.Add("ns", "d").ok());
    source_.CompactHistory();
    clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
    clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
    WaitForReplaces(2);
  }
};

// With a limit and no resourceVersionMatch, a list at an RV is an exact read
// of that revision from etcd (list-resourceversion-semantics.txt): after an
// API server restart that old state cannot be watched from. The relist must
// ask for the current state, not older than the RV.
TEST_F(ReflectorRelistTest,
       RelistAtAnRvIsUnpagedSoTheServerServesCurrentState) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  RecordLists lw(&source_);
  StartOn(&lw, Reflector::Options{});
  ExpireAfterOneEvent();
  const std::vector<ListOptions> lists = lw.lists();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].resource_version, "0");
  EXPECT_EQ(lists[0].limit, 500);
  EXPECT_NE(lists[1].resource_version, "");
  EXPECT_NE(lists[1].resource_version, "0");
  EXPECT_EQ(lists[1].limit, 0) << "a limit makes it an exact etcd read";
}

TEST_F(ReflectorRelistTest, PagedServerGetsNotOlderThanOnRelistAtAnRv) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  RecordLists lw(&source_);
  Reflector::Options opts;
  opts.page_size = 1;  // the server pages: no watch cache serves lists
  StartOn(&lw, opts);
  ExpireAfterOneEvent();
  const std::vector<ListOptions> lists = lw.lists();
  ASSERT_GE(lists.size(), 3u);
  const ListOptions& relist = lists[2];
  EXPECT_NE(relist.resource_version, "");
  EXPECT_EQ(relist.limit, 1);
  EXPECT_EQ(relist.resource_version_match, "NotOlderThan");
}

TEST_F(ReflectorTest, EveryRelistWaitsItsBackOff) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  // Every watch is refused as expired: a server that can never be watched
  // from must not make the reflector relist in a loop.
  source_.FailWatches(
      1000, StatusFromApiStatus(ExpiredApiStatus(), "WATCH", "/api/v1/pods"));
  StartReflector();
  WaitForReplaces(1);
  absl::Duration expected = absl::Milliseconds(800);
  for (int round = 1; round <= 3; ++round) {
    const absl::Duration wait = clock_.WaitForWaiters(1) - clock_.Now();
    EXPECT_EQ(source_.list_calls(), round) << "relisted without back-off";
    EXPECT_GE(wait, expected);
    EXPECT_LT(wait, 2 * expected);
    clock_.Advance(wait);
    WaitForReplaces(round + 1);
    expected *= 2;
  }
}

TEST_F(ReflectorTest, TransformErrorFailsTheListInsteadOfDroppingTheObject) {
  ASSERT_TRUE(source_.Add("ns", "bad").ok());
  ASSERT_TRUE(source_.Add("ns", "good").ok());
  Reflector::Options opts;
  auto failures = std::make_shared<int>(1);
  opts.transform = [failures](ObjectPtr obj) -> absl::StatusOr<ObjectPtr> {
    if (obj->name() == "bad" && *failures > 0) {
      --*failures;
      return absl::InvalidArgumentError("cannot transform bad");
    }
    return obj;
  };
  StartReflector(opts);
  // The list failed: no Replace (it would tombstone "bad"), a back-off.
  const absl::Time wake = clock_.WaitForWaiters(1);
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(replaces_, 0);
  }
  EXPECT_EQ(fifo_.Len(), 0u);
  EXPECT_EQ(reflector_->LastError().message(), "cannot transform bad");
  clock_.Advance(wake - clock_.Now());
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 2);
  EXPECT_EQ(fifo_.Len(), 2u);
}
TEST_F(ReflectorTest, UndecodableEventRelistsInsteadOfReplayingIt) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  StartReflector();
  WaitForReplaces(1);
  source_.WaitForWatches(1);
  source_.BreakWatches(UndecodableEventError("watch: undecodable event"));
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  // A re-watch from the same RV would replay the event; the old behaviour
  // re-watched and never listed again (this wait would not return).
  WaitForReplaces(2);
  EXPECT_EQ(source_.list_calls(), 2);
  EXPECT_EQ(reflector_->GetCounters().relists, 1);
}

TEST_F(ReflectorTest, AppliedResourceVersionWaitsForTheConsumer) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  StartReflector();
  WaitForReplaces(1);
  const std::string list_rv = reflector_->LastSyncResourceVersion();
  EXPECT_EQ(list_rv, source_.CurrentResourceVersion());
  // Received, not applied: nothing has been popped yet.
  EXPECT_EQ(fifo_.AppliedResourceVersion(), "");
  PopOne();
  EXPECT_EQ(fifo_.AppliedResourceVersion(), "");
  PopOne();
  EXPECT_EQ(fifo_.AppliedResourceVersion(), list_rv);
}

}  // namespace
}  // namespace informer

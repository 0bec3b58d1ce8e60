// The reflector's WatchList rounds: the initial events are a list, handed
// to the list's stage as they are decoded and applied as a LIST is, at the
// initial-events-end bookmark and not before.

#include <atomic>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/indexer.h"
#include "informer/cache/list_reconciler.h"
#include "informer/cache/reflector.h"
#include "informer/cache/reflector_test_util.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/api_error.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

TEST_F(ReflectorTest, WatchListStreamsInitialStateIntoOneReplace) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  Reflector::Options opts;
  opts.use_watch_list = true;
  StartReflector(opts);
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 0);
  EXPECT_EQ(fifo_.Len(), 2u);
  EXPECT_TRUE(fifo_.HasSynced() == false);
  EXPECT_EQ(PopOne(), "Replaced a");
  EXPECT_EQ(PopOne(), "Replaced b");
  EXPECT_TRUE(fifo_.HasSynced());
  // The same stream goes on with live events.
  ASSERT_TRUE(source_.Add("ns", "c").ok());
  EXPECT_EQ(PopOne(), "Added c");
  EXPECT_EQ(source_.watch_calls(), 1);
  EXPECT_EQ(source_.watch_list_calls(), 1);
}

TEST_F(ReflectorTest, WatchListFallsBackToListWhenServerAnswers422) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  Reflector::Options opts;
  opts.use_watch_list = true;
  StartReflector(opts);
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 1);
  EXPECT_EQ(PopOne(), "Replaced a");
  source_.WaitForWatches(1);
  // A later relist does not try WatchList again.
  source_.BreakWatches(absl::UnavailableError("cut"));
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  source_.CompactHistory();
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  // The re-watch gets 410; the relist waits its back-off.
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  WaitForReplaces(2);
  EXPECT_EQ(source_.list_calls(), 2);
  EXPECT_EQ(source_.watch_list_calls(), 1);  // the 422 is remembered
}

TEST_F(ReflectorTest, WatchListAfterRefusalAsksAgainEachRelist) {
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  Reflector::Options opts;
  opts.use_watch_list = true;
  opts.watch_list_after_refusal = true;
  StartReflector(opts);
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 1);
  source_.WaitForWatches(1);
  source_.BreakWatches(absl::UnavailableError("cut"));
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  source_.CompactHistory();
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  WaitForReplaces(2);
  // The relist asked for WatchList again and fell back for that round.
  EXPECT_EQ(source_.list_calls(), 2);
  EXPECT_EQ(source_.watch_list_calls(), 2);
}

// Delegates to a FakeSource, records list options, and answers 410 Expired

TEST_F(ReflectorTest, WatchListFailureFallsBackToAListForThatRound) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ApiStatus internal;
  internal.code = 500;
  internal.reason = "InternalError";
  internal.message = "etcdserver: request timed out";
  source_.FailWatches(1,
                      StatusFromApiStatus(internal, "WATCH", "/api/v1/pods"));
  Reflector::Options opts;
  opts.use_watch_list = true;
  StartReflector(opts);
  // No clock advance: the LIST follows at once, as in client-go.
  WaitForReplaces(1);
  EXPECT_EQ(source_.watch_list_calls(), 1);
  EXPECT_EQ(source_.list_calls(), 1);
  EXPECT_EQ(PopOne(), "Replaced a");
  // Only that round: a later relist tries WatchList again.
  source_.WaitForWatches(1);
  source_.BreakWatches(absl::UnavailableError("cut"));
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  source_.CompactHistory();
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  clock_.Advance(clock_.WaitForWaiters(1) - clock_.Now());
  WaitForReplaces(2);
  EXPECT_EQ(source_.watch_list_calls(), 2);
  EXPECT_EQ(source_.list_calls(), 1);
}

// Delegates to a FakeSource. The WatchList request number `cut_call`
// (counted from 1) breaks after `cut_after` initial events; number
// `delete_call` has a DELETED event of its first object right after it.
class ScriptedWatchList final : public ListerWatcher {
 public:
  explicit ScriptedWatchList(FakeSource* source) : source_(source) {}

  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    return source_->List(options);
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    absl::StatusOr<std::unique_ptr<WatchStream>> inner =
        source_->Watch(options);
    if (!inner.ok() || !options.send_initial_events) return inner;
    const int call = ++calls_;
    return std::unique_ptr<WatchStream>(
        new Stream(*std::move(inner), call == cut_call ? cut_after : -1,
                   call == delete_call, &cut));
  }

  int cut_call = 0;
  int cut_after = 0;
  int delete_call = 0;
  absl::Notification cut;  // the cut happened

 private:
  class Stream final : public WatchStream {
   public:
    Stream(std::unique_ptr<WatchStream> inner, int cut_after,
           bool inject_delete, absl::Notification* cut)
        : inner_(std::move(inner)),
          cut_after_(cut_after),
          inject_delete_(inject_delete),
          cut_(cut) {}
    absl::Status Next(WatchEvent* ev) override {
      if (pending_delete_ != nullptr) {
        *ev = *std::move(pending_delete_);
        pending_delete_.reset();
        return absl::OkStatus();
      }
      if (events_ == cut_after_) {
        cut_->Notify();
        return absl::UnavailableError("connection reset mid-WatchList");
      }
      absl::Status st = inner_->Next(ev);
      if (!st.ok()) return st;
      ++events_;
      if (inject_delete_ && ev->type == WatchEventType::kAdded) {
        inject_delete_ = false;
        pending_delete_ = std::make_unique<WatchEvent>(*ev);
        pending_delete_->type = WatchEventType::kDeleted;
      }
      return st;
    }
    void Stop() override { inner_->Stop(); }

   private:
    const std::unique_ptr<WatchStream> inner_;
    const int cut_after_;
    bool inject_delete_;
    absl::Notification* const cut_;
    int events_ = 0;
    std::unique_ptr<WatchEvent> pending_delete_;
  };

  FakeSource* const source_;
  std::atomic<int> calls_{0};
};

// Cuts the watch, lets `change` run while it is down and compacts the
// history: the re-watch gets 410 and the reflector relists, after the two
// back-offs it walks the clock through.
template <typename Change>
void ForceRelist(FakeSource* source, FakeClock* clock, Change change) {
  source->WaitForWatches(1);
  source->BreakWatches(absl::UnavailableError("connection reset"));
  change();
  source->CompactHistory();
  clock->Advance(clock->WaitForWaiters(1) - clock->Now());
  clock->Advance(clock->WaitForWaiters(1) - clock->Now());
}

TEST_F(ReflectorTest, WatchListInitialEventsGoToTheListsStageAsTheyArrive) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  StageLog log;
  log.keeps = true;  // as a ListReconciler: nothing is collected for it
  Reflector::Options opts;
  opts.use_watch_list = true;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts);
  WaitForReplaces(1);
  {
    absl::MutexLock lock(&log.mu);
    ASSERT_EQ(log.stages.size(), 1u);
    EXPECT_EQ(log.stages[0].added, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(log.stages[0].committed_items, 0) << "the stage keeps them";
    EXPECT_EQ(log.stages[0].committed_rv, source_.CurrentResourceVersion());
  }
  EXPECT_EQ(fifo_.Len(), 0u) << "committed by the stage, not Replaced";
  // A relist: a WatchList again, into a stage of its own.
  ForceRelist(&source_, &clock_,
              [this] { ASSERT_TRUE(source_.Add("ns", "c").ok()); });
  WaitForReplaces(2);
  {
    absl::MutexLock lock(&log.mu);
    ASSERT_EQ(log.stages.size(), 2u);
    EXPECT_EQ(log.stages[1].added, (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(log.stages[1].committed_rv, source_.CurrentResourceVersion());
  }
  const Reflector::Counters c = reflector_->GetCounters();
  EXPECT_EQ(c.staged_lists, 2);
  EXPECT_EQ(c.relists, 1);
  EXPECT_EQ(source_.list_calls(), 0);
  EXPECT_EQ(source_.watch_list_calls(), 2);
  EXPECT_EQ(reflector_->LastSyncResourceVersion(),
            source_.CurrentResourceVersion());
  // The same stream goes on with live events, through the FIFO.
  ASSERT_TRUE(source_.Add("ns", "d").ok());
  EXPECT_EQ(PopOne(), "Added d");
}

TEST_F(ReflectorTest, AWatchListCutBeforeItsEndBookmarkAppliesNothing) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  ScriptedWatchList lw(&source_);
  lw.cut_call = 2;  // the relist
  lw.cut_after = 1;
  StageLog log;
  Reflector::Options opts;
  opts.use_watch_list = true;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts, &lw);
  WaitForReplaces(1);
  const std::string synced_rv = reflector_->LastSyncResourceVersion();
  ForceRelist(&source_, &clock_, [this] {
    ASSERT_TRUE(source_.Modify("ns", "a", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_.Add("ns", "c").ok());
    // The plain LIST the cut round falls back to fails too: the reflector
    // then waits its back-off, with the cut round's list in hand.
    source_.FailLists(1, absl::UnavailableError("list refused"));
  });
  lw.cut.WaitForNotification();
  const absl::Time retry_at = clock_.WaitForWaiters(1);
  {
    absl::MutexLock lock(&log.mu);
    ASSERT_GE(log.stages.size(), 2u);
    EXPECT_EQ(log.stages[1].added, std::vector<std::string>{"a"});
    EXPECT_EQ(log.stages[1].committed_items, -1) << "never committed";
  }
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(replaces_, 1);
  }
  EXPECT_EQ(fifo_.Len(), 0u);
  EXPECT_EQ(reflector_->LastSyncResourceVersion(), synced_rv);
  EXPECT_EQ(reflector_->GetCounters().staged_lists, 1);
  // The retry (a WatchList again) goes through.
  clock_.Advance(retry_at - clock_.Now());
  WaitForReplaces(2);
  absl::MutexLock lock(&log.mu);
  EXPECT_EQ(log.stages.back().added, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(log.stages.back().committed_rv, source_.CurrentResourceVersion());
  EXPECT_EQ(source_.watch_list_calls(), 3);
}

TEST_F(ReflectorTest, ADeletionAmongTheInitialEventsFailsTheRound) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "b").ok());
  ScriptedWatchList lw(&source_);
  lw.delete_call = 1;
  StageLog log;
  Reflector::Options opts;
  opts.use_watch_list = true;
  opts.begin_list_stage = Stages(&log);
  StartReflector(opts, &lw);
  // The round fails; like every WatchList failure, a plain LIST follows.
  WaitForReplaces(1);
  EXPECT_TRUE(absl::StrContains(reflector_->LastError().message(),
                                "deletion among a WatchList's initial"))
      << reflector_->LastError();
  EXPECT_EQ(source_.list_calls(), 1);
  absl::MutexLock lock(&log.mu);
  ASSERT_EQ(log.stages.size(), 2u);
  EXPECT_EQ(log.stages[0].committed_items, -1);
  EXPECT_EQ(log.stages[1].committed_items, 2);
}

TEST_F(ReflectorTest, ATransformErrorAmongTheInitialEventsFailsTheRound) {
  source_.SetWatchListSupported(true);
  ASSERT_TRUE(source_.Add("ns", "a").ok());
  ASSERT_TRUE(source_.Add("ns", "bad").ok());
  Reflector::Options opts;
  opts.use_watch_list = true;
  auto failures = std::make_shared<int>(1);
  opts.transform = [failures](ObjectPtr obj) -> absl::StatusOr<ObjectPtr> {
    if (obj->name() == "bad" && *failures > 0) {
      --*failures;
      return absl::InvalidArgumentError("cannot transform bad");
    }
    return obj;
  };
  StartReflector(opts);
  // Not a Replace without "bad" (which would delete it from a cache): the
  // round fails and the LIST that follows has it.
  WaitForReplaces(1);
  EXPECT_EQ(source_.list_calls(), 1);
  EXPECT_EQ(fifo_.Len(), 2u);
  EXPECT_EQ(PopOne(), "Replaced a");
  EXPECT_EQ(PopOne(), "Replaced bad");
}

// Pops everything: per name, the types of its deltas.
std::map<std::string, std::string> PopAll(DeltaFIFO* fifo) {
  std::map<std::string, std::string> popped;
  while (fifo->Len() != 0) {
    absl::Status st = fifo->Pop([&](const Deltas& d, bool) {
      std::string types;
      for (const Delta& delta : d) {
        absl::StrAppend(&types, DeltaTypeName(delta.type), " ");
      }
      popped[std::string(d.back().object->name())] = types;
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
  }
  return popped;
}

// A WatchList into a populated cache through the informer's pieces: a
// ListReconciler and DeltaFIFO::ReplaceReconciled.
TEST(WatchListReconcileTest,
     OnlyWhatChangedIsQueuedAndTheCacheKeepsItsObjects) {
  FakeSource source;
  source.SetWatchListSupported(true);
  for (const char* name : {"same", "changed", "gone", "recreated"}) {
    ASSERT_TRUE(source.Add("ns", name).ok());
  }
  // The cache a previous sync left: decoded copies (the stream's objects,
  // as a decoder's, are other copies).
  Indexer cache;
  for (const auto& [key, obj] : source.Snapshot()) {
    std::ostringstream json;
    json << obj->json();
    absl::StatusOr<ObjectPtr> copy = Object::Parse(json.str());
    ASSERT_TRUE(copy.ok()) << copy.status();
    cache.Add(*std::move(copy));
  }
  const ObjectPtr same = cache.GetByKey("ns/same");
  ASSERT_TRUE(source.Modify("ns", "changed", {{"v", "2"}}).ok());
  ASSERT_TRUE(source.Delete("ns", "gone").ok());
  ASSERT_TRUE(source.Delete("ns", "recreated").ok());
  ASSERT_TRUE(source.Add("ns", "recreated").ok());
  ASSERT_TRUE(source.Add("ns", "added").ok());

  DeltaFIFO::Options fifo_options;
  fifo_options.known_objects = &cache;
  DeltaFIFO fifo(fifo_options);
  std::vector<ObjectPtr> unchanged;
  DeltaFIFO::ReconcileCounts counts;
  absl::Notification applied;
  Reflector::Options opts;
  opts.use_watch_list = true;
  opts.random_seed = 7;
  opts.begin_list_stage = [&]() -> std::unique_ptr<ListStage> {
    return std::make_unique<ListReconciler>(
        &cache, cache.Size(),
        [&](const std::vector<ObjectPtr>& reconciled, absl::string_view) {
          absl::StatusOr<DeltaFIFO::ReconcileCounts> c = fifo.ReplaceReconciled(
              reconciled,
              [&](const std::vector<ObjectPtr>& u) { unchanged = u; });
          if (!c.ok()) return false;
          counts = *c;
          return true;
        });
  };
  opts.on_replaced = [&] {
    if (!applied.HasBeenNotified()) applied.Notify();
  };
  FakeClock clock;
  Reflector reflector(&source, &fifo, &clock, opts);
  std::thread run([&] { reflector.Run(); });
  applied.WaitForNotification();
  reflector.Stop();
  run.join();

  // The unchanged object: no delta, and the cache's own object stands for
  // it (the stream's copy was dropped as it arrived).
  ASSERT_EQ(unchanged.size(), 1u);
  EXPECT_EQ(unchanged[0].get(), same.get());
  EXPECT_EQ(counts.unchanged, 1u);
  EXPECT_EQ(counts.queued, 3u);  // changed, recreated, added
  EXPECT_EQ(counts.recreated, 1u);
  EXPECT_EQ(counts.vanished, 1u);  // gone
  EXPECT_EQ(fifo.Len(), 4u);
  const std::map<std::string, std::string> popped = PopAll(&fifo);
  EXPECT_EQ(popped, (std::map<std::string, std::string>{
                        {"added", "Replaced "},
                        {"changed", "Replaced "},
                        {"gone", "Deleted "},
                        {"recreated", "Deleted Replaced "}}));
  EXPECT_EQ(cache.GetByKey("ns/same").get(), same.get());
}

}  // namespace
}  // namespace informer

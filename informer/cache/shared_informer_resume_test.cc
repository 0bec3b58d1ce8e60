// An informer started from a saved state (SetInitialState, a warm restart):
// it watches from the state's resourceVersion instead of listing, reports
// synced once caught up with the server, and relists as a diff when the
// server no longer has that resourceVersion. With BeginResume the watch
// opens while the state still loads: its events are applied only once the
// state is in place, in order, and a load that fails lists cold.

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/cache/shared_informer.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// What a handler saw, in order.
class Recorder : public ResourceEventHandler {
 public:
  void OnAdd(const ObjectPtr& obj, bool initial) override {
    Log(absl::StrCat("add ", obj->name(), initial ? " initial" : ""));
  }
  void OnUpdate(const ObjectPtr& o, const ObjectPtr& n) override {
    Log(absl::StrCat(
        o->resource_version() == n->resource_version() ? "sync " : "update ",
        n->name()));
  }
  void OnDelete(const ObjectPtr& obj, bool) override {
    Log(absl::StrCat("delete ", obj->name()));
  }
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_.size() >= n;
    };
    mu_.Await(absl::Condition(&enough));
  }
  // The events after the first `skip`, sorted (order across keys is not
  // part of the contract).
  std::vector<std::string> SortedAfter(size_t skip) {
    return Sorted(Events(skip));
  }
  // The events after the first `skip`, in the order seen.
  std::vector<std::string> Events(size_t skip = 0) {
    absl::MutexLock lock(&mu_);
    return std::vector<std::string>(
        events_.begin() + std::min(skip, events_.size()), events_.end());
  }
  static std::vector<std::string> Sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  }

 private:
  void Log(std::string e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(e));
  }
  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

// The objects as a snapshot gives them back: decoded again from their JSON
// (equal to the cached ones, never the same pointers).
std::vector<ObjectPtr> Redecoded(const std::vector<ObjectPtr>& objects) {
  std::vector<ObjectPtr> out;
  for (const ObjectPtr& obj : objects) {
    std::ostringstream json;
    json << obj->json();
    absl::StatusOr<ObjectPtr> copy = Object::Parse(json.str());
    EXPECT_TRUE(copy.ok()) << copy.status();
    if (copy.ok()) out.push_back(*std::move(copy));
  }
  return out;
}

// key -> resourceVersion of an indexer or a source.
std::map<std::string, std::string> Versions(
    const std::vector<ObjectPtr>& objects) {
  std::map<std::string, std::string> out;
  for (const ObjectPtr& o : objects) {
    out[o->Key()] = std::string(o->resource_version());
  }
  return out;
}

std::map<std::string, std::string> Versions(const FakeSource& source) {
  std::vector<ObjectPtr> objects;
  for (const auto& [key, obj] : source.Snapshot()) objects.push_back(obj);
  return Versions(objects);
}

class SharedInformerResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"a", "b", "c", "d"}) {
      ASSERT_TRUE(source_.Add("ns", name, {{"v", "1"}}).ok());
    }
    // A first informer's state: what a snapshot keeps.
    SharedIndexInformer first(&source_, Options());
    ASSERT_TRUE(first.Start().ok());
    ASSERT_TRUE(first.WaitForSync(kWait));
    SharedIndexInformer::StateCopy state = first.CopyState();
    saved_ = Redecoded(state.objects);
    saved_rv_ = state.resource_version;
    ASSERT_EQ(saved_.size(), 4u);
    ASSERT_EQ(saved_rv_, source_.CurrentResourceVersion());
  }

  static SharedIndexInformer::Options Options() {
    SharedIndexInformer::Options o;
    o.reflector.backoff_initial = absl::Milliseconds(1);
    o.reflector.backoff_jitter = 0;
    return o;
  }

  // Changes while "down": one modified, one deleted, one added.
  void Change() {
    ASSERT_TRUE(source_.Modify("ns", "b", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_.Delete("ns", "c").ok());
    ASSERT_TRUE(source_.Add("ns", "e", {{"v", "1"}}).ok());
  }

  FakeSource source_;
  std::vector<ObjectPtr> saved_;
  std::string saved_rv_;
};

TEST_F(SharedInformerResumeTest, WatchesFromTheStateAndCatchesUp) {
  ASSERT_NO_FATAL_FAILURE(Change());
  const int64_t lists_before = source_.list_calls();
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  Recorder rec;
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_TRUE(informer.Resumed());
  // Synced means caught up: the indexer is the server's state.
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.LastAppliedResourceVersion(),
            source_.CurrentResourceVersion());
  // The one list call is the probe of the current resourceVersion.
  EXPECT_EQ(source_.list_calls() - lists_before, 1);
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
  // The handler: the loaded state as the initial list, then the changes.
  rec.WaitFor(7);
  EXPECT_EQ(rec.SortedAfter(0),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "add c initial", "add d initial", "add e",
                                      "delete c", "update b"}));
}

TEST_F(SharedInformerResumeTest, NothingChangedIsSyncedAtOnce) {
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
}

TEST_F(SharedInformerResumeTest,
       TheWatchsOwnEventsCatchUpWhenWritesWentElsewhere) {
  ASSERT_NO_FATAL_FAILURE(Change());
  const std::string last_change = source_.CurrentResourceVersion();
  // Other resources were written since (a Lease every few seconds): etcd's
  // resourceVersion is past this resource's last change, the watch cache's
  // is not. No bookmark is sent: the replayed events alone catch up.
  source_.WriteElsewhere();
  source_.WriteElsewhere();
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.LastAppliedResourceVersion(), last_change);
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
}

TEST_F(SharedInformerResumeTest, ABookmarkCatchesUpACacheMovedPastTheEvents) {
  ASSERT_NO_FATAL_FAILURE(Change());
  source_.WriteElsewhere();
  // A consistent read (another client's) moved the watch cache to etcd's
  // resourceVersion: no event reaches it, a bookmark does.
  ListOptions consistent;
  consistent.field_selector = "metadata.name=none";
  ASSERT_TRUE(source_.List(consistent).ok());
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  source_.WaitForWatches(1);
  EXPECT_FALSE(informer.HasSynced());
  source_.SendBookmark();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(informer.LastAppliedResourceVersion(),
            source_.CurrentResourceVersion());
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
}

TEST_F(SharedInformerResumeTest, ALaggingWatchCacheIsCaughtUpAtOnce) {
  // Another API server's cache, behind the one the snapshot came through:
  // a consistent read shows etcd has the state; nothing to catch up with.
  source_.LagWatchCache(2);
  const int64_t lists_before = source_.list_calls();
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_TRUE(informer.Resumed());
  EXPECT_EQ(source_.list_calls() - lists_before, 2);  // the two probes
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
}

TEST_F(SharedInformerResumeTest, AServerBeforeTheStateIsRelisted) {
  // etcd restored from a backup: the server is before the saved state,
  // which cannot be trusted to be its; a cold list replaces it.
  FakeSource restored;
  ASSERT_TRUE(restored.Add("ns", "a", {{"v", "1"}}).ok());
  SharedIndexInformer informer(&restored, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_FALSE(informer.Resumed());
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(restored));
  EXPECT_EQ(informer.GetReflectorCounters().lists, 1);
}

TEST_F(SharedInformerResumeTest, ExpiredStateRelistsAsADiff) {
  ASSERT_NO_FATAL_FAILURE(Change());
  // The server no longer has the saved resourceVersion: 410.
  source_.CompactHistory();
  SharedIndexInformer::Options o = Options();
  SharedIndexInformer informer(&source_, o);
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  Recorder rec;
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_FALSE(informer.Resumed()) << "it relisted";
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.GetReflectorCounters().lists, 1);
  // Only the changes reach the handler: no update for the unchanged a, d.
  rec.WaitFor(7);
  EXPECT_EQ(rec.SortedAfter(4),
            (std::vector<std::string>{"add e", "delete c", "update b"}));
}

TEST_F(SharedInformerResumeTest, InitialStateOnlyBeforeStart) {
  SharedIndexInformer informer(&source_, Options());
  EXPECT_TRUE(absl::IsInvalidArgument(informer.SetInitialState(saved_, "")));
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_TRUE(
      absl::IsFailedPrecondition(informer.SetInitialState(saved_, saved_rv_)));
}

TEST_F(SharedInformerResumeTest, CopyStateReflectsTheAppliedVersion) {
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  SharedIndexInformer::StateCopy copy = informer.CopyState();
  EXPECT_EQ(copy.resource_version, saved_rv_);
  EXPECT_EQ(Versions(copy.objects), Versions(saved_));
}

TEST_F(SharedInformerResumeTest, EventsDuringTheLoadAreAppliedAfterItInOrder) {
  ASSERT_NO_FATAL_FAILURE(Change());
  const int64_t lists_before = source_.list_calls();
  SharedIndexInformer informer(&source_, Options());
  Recorder rec;
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  // The watch from the state's resourceVersion is open while the state
  // loads; more changes arrive on it meanwhile.
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Modify("ns", "a", {{"v", "2"}}).ok());
  ASSERT_TRUE(source_.Modify("ns", "a", {{"v", "3"}}).ok());
  ASSERT_TRUE(source_.Delete("ns", "d").ok());
  // Nothing is applied to the empty cache, nothing reaches the handler.
  EXPECT_FALSE(informer.HasSynced());
  EXPECT_TRUE(informer.GetIndexer().List().empty());
  EXPECT_EQ(informer.LastAppliedResourceVersion(), "");
  EXPECT_TRUE(rec.Events().empty());
  // The state is in place: then every event since it, in order. (Synced
  // comes once the server's resourceVersion at the probe is applied; the
  // changes made after the probe may come after it.)
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_TRUE(informer.Resumed());
  rec.WaitFor(10);
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(source_.list_calls() - lists_before, 1);  // the probe
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
  const std::vector<std::string> all = rec.Events();
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(Recorder::Sorted({all.begin(), all.begin() + 4}),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "add c initial", "add d initial"}));
  EXPECT_EQ(rec.Events(4),
            (std::vector<std::string>{"update b", "delete c", "add e",
                                      "update a", "update a", "delete d"}));
}

TEST_F(SharedInformerResumeTest, TheStateGivenBeforeStartIsInstalledAtStart) {
  // The sidecar's order: the resume begins, the objects load, and only
  // then the informer starts (its handlers registered in between).
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  source_.WaitForWatches(1);
  ASSERT_NO_FATAL_FAILURE(Change());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  EXPECT_TRUE(informer.GetIndexer().List().empty());
  EXPECT_FALSE(informer.HasSynced());
  Recorder rec;
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  rec.WaitFor(7);  // the changes came after the probe: maybe after synced
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
  EXPECT_EQ(rec.Events(4),
            (std::vector<std::string>{"update b", "delete c", "add e"}));
}

TEST_F(SharedInformerResumeTest, ALoadThatFailsDuringTheWatchListsCold) {
  ASSERT_NO_FATAL_FAILURE(Change());
  SharedIndexInformer informer(&source_, Options());
  Recorder rec;
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Modify("ns", "a", {{"v", "2"}}).ok());
  ASSERT_TRUE(source_.Delete("ns", "d").ok());
  ASSERT_TRUE(
      informer.AbandonResume(absl::DataLossError("a garbled snapshot")).ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_FALSE(informer.Resumed());
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  // A cold start's list (not a relist), and the watch's events dropped
  // unread: each object once, as the list has it, nothing else.
  EXPECT_EQ(informer.GetReflectorCounters().lists, 1);
  EXPECT_EQ(informer.GetReflectorCounters().relists, 0);
  rec.WaitFor(3);
  EXPECT_EQ(rec.SortedAfter(0),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "add e initial"}));
  // And it goes on from the list: a later change once.
  ASSERT_TRUE(source_.Modify("ns", "b", {{"v", "3"}}).ok());
  rec.WaitFor(4);
  EXPECT_EQ(rec.Events(3), std::vector<std::string>{"update b"});
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
}

TEST_F(SharedInformerResumeTest, AResumeAbandonedBeforeStartListsAtStart) {
  SharedIndexInformer informer(&source_, Options());
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  source_.WaitForWatches(1);
  ASSERT_NO_FATAL_FAILURE(Change());
  ASSERT_TRUE(informer.AbandonResume(absl::DataLossError("truncated")).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(source_));
  EXPECT_EQ(informer.GetReflectorCounters().lists, 1);
  EXPECT_EQ(informer.GetReflectorCounters().relists, 0);
}

TEST_F(SharedInformerResumeTest,
       AStateLoadedWhileTheServerIsDownIsAtItsVersion) {
  // --serve_stale_on_start: the API server cannot be reached at start, so
  // the probe never succeeds and the watch never opens. The loaded state
  // is served stale all the same, and what is served says the
  // resourceVersion it is at, as after SetInitialState alone.
  source_.FailLists(1000000, absl::UnavailableError("connection refused"));
  source_.FailWatches(1000000, absl::UnavailableError("connection refused"));
  SharedIndexInformer::Options o = Options();
  o.reflector.backoff_max = absl::Milliseconds(10);  // retries once healed
  SharedIndexInformer informer(&source_, o);
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_EQ(Versions(informer.GetIndexer().List()), Versions(saved_));
  EXPECT_EQ(informer.LastAppliedResourceVersion(), saved_rv_);
  EXPECT_EQ(informer.CopyState().resource_version, saved_rv_);
  EXPECT_FALSE(informer.HasSynced());
  // The state given after Start: the same once it is installed.
  SharedIndexInformer later(&source_, o);
  ASSERT_TRUE(later.BeginResume(saved_rv_).ok());
  ASSERT_TRUE(later.Start().ok());
  EXPECT_EQ(later.LastAppliedResourceVersion(), "");
  ASSERT_TRUE(later.SetInitialState(saved_, saved_rv_).ok());
  EXPECT_EQ(Versions(later.GetIndexer().List()), Versions(saved_));
  EXPECT_EQ(later.LastAppliedResourceVersion(), saved_rv_);
  // The server back: both catch up from there, the changes as events.
  ASSERT_NO_FATAL_FAILURE(Change());
  source_.FailLists(0, absl::OkStatus());
  source_.FailWatches(0, absl::OkStatus());
  for (SharedIndexInformer* i : {&informer, &later}) {
    ASSERT_TRUE(i->WaitForSync(kWait));
    EXPECT_TRUE(i->Resumed());
    EXPECT_EQ(i->GetReflectorCounters().lists, 0);
    EXPECT_EQ(Versions(i->GetIndexer().List()), Versions(source_));
  }
}

// The source's watch calls and the informer's errors, awaited together.
class WatchCounter : public ListerWatcher {
 public:
  explicit WatchCounter(FakeSource* source) : source_(source) {}
  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    return source_->List(options);
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    absl::StatusOr<std::unique_ptr<WatchStream>> w = source_->Watch(options);
    absl::MutexLock lock(&mu_);
    ++watches_;
    return w;
  }
  void NoteError() {
    absl::MutexLock lock(&mu_);
    ++errors_;
  }
  // Until `watches` watches were opened or an error was reported.
  std::pair<int, int> WaitForWatchesOrError(int watches) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return watches_ >= watches || errors_ > 0;
    };
    mu_.Await(absl::Condition(&done));
    return {watches_, errors_};
  }

 private:
  FakeSource* const source_;
  absl::Mutex mu_;
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(SharedInformerResumeTest, AWatchThatEndedDuringTheLoadIsNoShortWatch) {
  // The resume's watch ran its course (timeoutSeconds) while the state was
  // loading, without an event: read after the load, it ends at once, but
  // it lasted as long as it was open. Not a server misbehaving (an error,
  // which marks a loaded informer stale, and a back-off): a re-watch.
  FakeClock clock;
  WatchCounter lw(&source_);
  SharedIndexInformer informer(&lw, Options(), &clock);
  ASSERT_TRUE(
      informer
          .SetWatchErrorHandler([&lw](const absl::Status&) { lw.NoteError(); })
          .ok());
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  source_.WaitForWatches(1);
  source_.CloseWatches();
  clock.Advance(absl::Seconds(5));  // the load
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  ASSERT_TRUE(informer.Start().ok());
  const auto [watches, errors] = lw.WaitForWatchesOrError(2);
  EXPECT_EQ(errors, 0) << informer.GetReflectorCounters().errors;
  EXPECT_EQ(watches, 2);
  EXPECT_EQ(informer.GetReflectorCounters().errors, 0);
}

TEST_F(SharedInformerResumeTest, BeginResumeChecksItsCourse) {
  SharedIndexInformer informer(&source_, Options());
  EXPECT_TRUE(absl::IsInvalidArgument(informer.BeginResume("")));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      informer.AbandonResume(absl::DataLossError("x"))));
  ASSERT_TRUE(informer.BeginResume(saved_rv_).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(informer.BeginResume(saved_rv_)));
  EXPECT_TRUE(absl::IsFailedPrecondition(informer.SetTransform(nullptr)));
  // The state must be the one the resume began from.
  EXPECT_TRUE(
      absl::IsInvalidArgument(informer.SetInitialState(saved_, "999999")));
  ASSERT_TRUE(informer.SetInitialState(saved_, saved_rv_).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      informer.AbandonResume(absl::DataLossError("x"))));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(informer.SetInitialState(saved_, saved_rv_)));
  // Never started: Stop (the destructor) ends the waiting reflector.
}

}  // namespace
}  // namespace informer

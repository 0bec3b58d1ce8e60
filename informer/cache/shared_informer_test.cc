#include "informer/cache/shared_informer.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/cache/testing/fake_source.h"

namespace informer {
namespace {

// Records what a handler saw; tests wait on counts, never on time.
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
  void OnDelete(const ObjectPtr& obj, bool unknown) override {
    Log(absl::StrCat("delete ", obj->name(), unknown ? " tombstone" : ""));
  }
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_.size() >= n;
    };
    mu_.Await(absl::Condition(&enough));
  }
  std::vector<std::string> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  void Log(std::string e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(e));
  }
  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

SharedIndexInformer::Options Opts() {
  SharedIndexInformer::Options o;
  o.name = "pods";
  o.reflector.random_seed = 1;
  return o;
}

TEST(SharedInformerTest, InitialListThenLiveEventsReachHandlerAndCache) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  ASSERT_TRUE(source.Add("ns", "b").ok());
  Recorder rec;
  SharedIndexInformer informer(&source, Opts());
  auto reg = informer.AddEventHandler(&rec);
  ASSERT_TRUE(reg.ok());
  EXPECT_FALSE(informer.HasSynced());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  rec.WaitFor(2);
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Modify("ns", "a", {{"app", "x"}}).ok());
  ASSERT_TRUE(source.Delete("ns", "b").ok());
  ASSERT_TRUE(source.Add("ns", "c").ok());
  rec.WaitFor(5);
  EXPECT_EQ(rec.events(),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "update a", "delete b", "add c"}));
  EXPECT_TRUE((*reg)->HasSynced());
  EXPECT_EQ(informer.GetIndexer().ListKeys().size(), 2u);
  // The reflector records an event's RV right after queueing it, so it may
  // trail what the handler already saw by one event, never more.
  EXPECT_FALSE(informer.LastSyncResourceVersion().empty());
}

TEST(SharedInformerTest, HasSyncedTrueForEmptyList) {
  FakeSource source;
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_TRUE(informer.WaitForSync(absl::Hours(1)));
  EXPECT_TRUE(informer.HasSynced());
}

// An informer stopped before it could sync: WaitForSync returns false at
// once (the stop, not a timeout) and IsStopped says why.
TEST(SharedInformerTest, StoppedBeforeSyncNeverSyncs) {
  FakeSource source;
  source.FailLists(1000, absl::PermissionDeniedError("403 forbidden"));
  SharedIndexInformer informer(&source, Opts());
  EXPECT_FALSE(informer.IsStopped());
  ASSERT_TRUE(informer.Start().ok());
  informer.Stop();
  EXPECT_TRUE(informer.IsStopped());
  EXPECT_FALSE(informer.WaitForSync(absl::Hours(1)));
  EXPECT_FALSE(informer.HasSynced());
}

TEST(SharedInformerTest, LateHandlerFirstReceivesCachedObjectsAsInitialAdds) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  ASSERT_TRUE(source.Add("ns", "b").ok());
  Recorder late;
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  auto reg = informer.AddEventHandler(&late);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(source.Add("ns", "c").ok());
  late.WaitFor(3);
  std::vector<std::string> ev = late.events();
  std::sort(ev.begin(), ev.begin() + 2);
  EXPECT_EQ(ev, (std::vector<std::string>{"add a initial", "add b initial",
                                          "add c"}));
  (*reg)->WaitIdle();
  EXPECT_TRUE((*reg)->HasSynced());
}

TEST(SharedInformerTest, ResyncGoesOnlyToHandlersThatAskedForIt) {
  FakeClock clock;
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  Recorder resyncing, quiet;
  SharedIndexInformer informer(&source, Opts(), &clock);
  HandlerOptions every_minute;
  every_minute.resync_period = absl::Minutes(1);
  auto r1 = informer.AddEventHandler(&resyncing, every_minute);
  auto r2 = informer.AddEventHandler(&quiet);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  resyncing.WaitFor(1);
  quiet.WaitFor(1);
  source.WaitForWatches(1);
  // The resync loop parks on the clock; move time past its period.
  clock.WaitForWaiters(1);
  clock.Advance(absl::Minutes(1));
  resyncing.WaitFor(2);
  EXPECT_EQ(resyncing.events()[1], "sync a");
  // A live event after the resync proves the quiet handler got no sync.
  ASSERT_TRUE(source.Add("ns", "z").ok());
  quiet.WaitFor(2);
  EXPECT_EQ(quiet.events(),
            (std::vector<std::string>{"add a initial", "add z"}));
}

TEST(SharedInformerTest, ZeroResyncPeriodOptsAHandlerOutOfTheDefault) {
  // The informer resyncs every minute by default; a handler that asks for a
  // period of 0 gets none (client-go's AddEventHandlerWithResyncPeriod(h, 0)),
  // one that asks for nothing gets the default.
  FakeClock clock;
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  Recorder defaulted, opted_out;
  SharedIndexInformer::Options opts = Opts();
  opts.default_resync_period = absl::Minutes(1);
  SharedIndexInformer informer(&source, opts, &clock);
  HandlerOptions no_resync;
  no_resync.resync_period = absl::ZeroDuration();
  auto r1 = informer.AddEventHandler(&defaulted);
  auto r2 = informer.AddEventHandler(&opted_out, no_resync);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  defaulted.WaitFor(1);
  opted_out.WaitFor(1);
  source.WaitForWatches(1);
  clock.WaitForWaiters(1);
  clock.Advance(absl::Minutes(1));
  defaulted.WaitFor(2);
  EXPECT_EQ(defaulted.events()[1], "sync a");
  // A live event after the resync proves the opted-out handler got no sync.
  ASSERT_TRUE(source.Add("ns", "z").ok());
  opted_out.WaitFor(2);
  EXPECT_EQ(opted_out.events(),
            (std::vector<std::string>{"add a initial", "add z"}));
}

TEST(SharedInformerTest, AddEventHandlerWithResyncPeriodOfZeroMeansNone) {
  FakeClock clock;
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  Recorder every_minute, never;
  SharedIndexInformer::Options opts = Opts();
  opts.default_resync_period = absl::Minutes(5);
  SharedIndexInformer informer(&source, opts, &clock);
  ASSERT_TRUE(
      informer.AddEventHandlerWithResyncPeriod(&every_minute, absl::Minutes(1))
          .ok());
  ASSERT_TRUE(
      informer.AddEventHandlerWithResyncPeriod(&never, absl::ZeroDuration())
          .ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  every_minute.WaitFor(1);
  never.WaitFor(1);
  source.WaitForWatches(1);
  for (int i = 0; i < 5; ++i) {
    clock.WaitForWaiters(1);
    clock.Advance(absl::Minutes(1));
    every_minute.WaitFor(2 + i);
  }
  ASSERT_TRUE(source.Add("ns", "z").ok());
  never.WaitFor(2);
  EXPECT_EQ(never.events(),
            (std::vector<std::string>{"add a initial", "add z"}));
}

TEST(SharedInformerTest, RelistDeliversUnchangedAsSyncAndVanishedAsTombstone) {
  FakeClock clock;
  FakeSource source(/*history_limit=*/1);
  ASSERT_TRUE(source.Add("ns", "same").ok());
  ASSERT_TRUE(source.Add("ns", "gone").ok());
  ASSERT_TRUE(source.Add("ns", "changed").ok());
  Recorder plain, resyncing;
  SharedIndexInformer informer(&source, Opts(), &clock);
  HandlerOptions resync;
  resync.resync_period = absl::Minutes(1);
  ASSERT_TRUE(informer.AddEventHandler(&plain).ok());
  ASSERT_TRUE(informer.AddEventHandler(&resyncing, resync).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  plain.WaitFor(3);
  resyncing.WaitFor(3);
  source.WaitForWatches(1);
  // Make the resyncing handler due: it gets a sync of every object.
  clock.WaitForWaiters(1);
  clock.Advance(absl::Minutes(1));
  resyncing.WaitFor(6);
  // While the watch is down, "gone" is deleted and "changed" changes, and
  // the history is compacted: the re-watch gets 410 and the informer relists.
  source.BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(source.Delete("ns", "gone").ok());
  ASSERT_TRUE(source.Modify("ns", "changed", {{"v", "2"}}).ok());
  source.CompactHistory();
  // Parked on the clock: the resync loop (next in a minute) and the
  // back-off after the cut connection (sooner). Advance past the back-off
  // only, so the resync set stays as it is.
  const absl::Time backoff_end = clock.WaitForWaiters(2);
  clock.Advance(backoff_end - clock.Now());
  // The re-watch gets 410; the relist waits its own back-off.
  const absl::Time relist_at = clock.WaitForWaiters(2);
  clock.Advance(relist_at - clock.Now());
  plain.WaitFor(5);
  std::vector<std::string> ev = plain.events();
  std::vector<std::string> tail(ev.begin() + 3, ev.end());
  std::sort(tail.begin(), tail.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"delete gone tombstone",
                                            "update changed"}));
  // The unchanged object is no news to a handler without resync...
  EXPECT_EQ(std::find(ev.begin(), ev.end(), "sync same"), ev.end());
  // ...and is delivered as a sync to the one whose resync is due.
  resyncing.WaitFor(9);
  std::vector<std::string> r = resyncing.events();
  std::vector<std::string> rtail(r.begin() + 6, r.end());
  std::sort(rtail.begin(), rtail.end());
  EXPECT_EQ(rtail, (std::vector<std::string>{"delete gone tombstone",
                                             "sync same", "update changed"}));
  EXPECT_EQ(source.list_calls(), 2);
  std::map<std::string, ObjectPtr> truth = source.Snapshot();
  std::vector<std::string> keys = informer.GetIndexer().ListKeys();
  ASSERT_EQ(keys.size(), truth.size());
  for (const std::string& k : keys) {
    ASSERT_EQ(truth.count(k), 1u) << k;
    EXPECT_EQ(informer.GetIndexer().GetByKey(k)->resource_version(),
              truth[k]->resource_version());
  }
}

TEST(SharedInformerTest, SlowHandlerDoesNotDelayAnother) {
  FakeSource source;
  Recorder fast;
  absl::Notification release;
  ResourceEventHandlerFuncs slow;
  slow.add = [&](const ObjectPtr&, bool) { release.WaitForNotification(); };
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer.AddEventHandler(&slow).ok());
  ASSERT_TRUE(informer.AddEventHandler(&fast).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  // Unblocks the slow handler however the test ends, before the informer
  // (declared earlier) joins its thread.
  struct Releaser {
    absl::Notification* n;
    ~Releaser() {
      if (!n->HasBeenNotified()) n->Notify();
    }
  } releaser{&release};
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(source.Add("ns", absl::StrCat("p", i)).ok());
  }
  // The fast handler sees all 50 while the slow one is stuck in its first.
  fast.WaitFor(50);
  EXPECT_EQ(fast.events().size(), 50u);
}

TEST(SharedInformerTest, NonBlockingHandlerRunsInlineInOrder) {
  FakeSource source;
  Recorder inline_rec;
  SharedIndexInformer informer(&source, Opts());
  HandlerOptions nb;
  nb.non_blocking = true;
  ASSERT_TRUE(informer.AddEventHandler(&inline_rec, nb).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Add("ns", "a").ok());
  ASSERT_TRUE(source.Modify("ns", "a").ok());
  inline_rec.WaitFor(2);
  EXPECT_EQ(inline_rec.events(),
            (std::vector<std::string>{"add a", "update a"}));
}

TEST(SharedInformerTest, NonBlockingHandlerMayAskHasSyncedAndReadTheCache) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  absl::Mutex mu;
  std::vector<std::string> seen;
  SharedIndexInformer* self = nullptr;
  HandlerRegistration* reg = nullptr;
  ResourceEventHandlerFuncs funcs;
  funcs.add = [&](const ObjectPtr& obj, bool) {
    // Called inline under the informer's locks: neither may deadlock.
    const bool synced = self->HasSynced() && reg->HasSynced();
    const bool cached = self->GetIndexer().GetByKey(obj->Key()) != nullptr;
    absl::MutexLock lock(&mu);
    seen.push_back(absl::StrCat(obj->name(), synced ? " synced" : "",
                                cached ? " cached" : ""));
  };
  SharedIndexInformer informer(&source, Opts());
  self = &informer;
  HandlerOptions nb;
  nb.non_blocking = true;
  auto r = informer.AddEventHandler(&funcs, nb);
  ASSERT_TRUE(r.ok());
  reg = *r;
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Add("ns", "b").ok());
  absl::MutexLock lock(&mu);
  auto two = [&]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return seen.size() >= 2; };
  mu.Await(absl::Condition(&two));
  // The initial add is delivered before the informer counts as synced; the
  // live one after.
  EXPECT_EQ(seen, (std::vector<std::string>{"a cached", "b synced cached"}));
}

TEST(SharedInformerTest, IndexesFollowUpdatesAndAddIndexersWorksAfterSync) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a", {{"app", "web"}}, "node-1").ok());
  ASSERT_TRUE(source.Add("other", "b", {{"app", "db"}}, "node-1").ok());
  SharedIndexInformer::Options o = Opts();
  o.indexers[LabelIndexName("app")] = LabelIndexFunc("app");
  Recorder rec;
  SharedIndexInformer informer(&source, o);
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  const Indexer& idx = informer.GetIndexer();
  EXPECT_EQ(idx.ByIndex(kNamespaceIndex, "ns")->size(), 1u);
  EXPECT_EQ(idx.ByIndex(LabelIndexName("app"), "web")->size(), 1u);
  // Added after the cache is populated: existing objects get indexed.
  ASSERT_TRUE(informer
                  .AddIndexers({{FieldIndexName("spec.nodeName"),
                                 FieldIndexFunc("spec.nodeName")}})
                  .ok());
  EXPECT_EQ(idx.ByIndex(FieldIndexName("spec.nodeName"), "node-1")->size(), 2u);
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Modify("ns", "a", {{"app", "db"}}, "node-2").ok());
  rec.WaitFor(3);
  EXPECT_EQ(idx.ByIndex(LabelIndexName("app"), "web")->size(), 0u);
  EXPECT_EQ(idx.ByIndex(LabelIndexName("app"), "db")->size(), 2u);
  EXPECT_EQ(idx.ByIndex(FieldIndexName("spec.nodeName"), "node-2")->size(), 1u);
}

TEST(SharedInformerTest, RemovedHandlerGetsNothingMore) {
  FakeSource source;
  Recorder keep, drop;
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer.AddEventHandler(&keep).ok());
  auto reg = informer.AddEventHandler(&drop);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Add("ns", "a").ok());
  drop.WaitFor(1);
  ASSERT_TRUE(informer.RemoveEventHandler(*reg).ok());
  EXPECT_FALSE(informer.RemoveEventHandler(*reg).ok());
  ASSERT_TRUE(source.Add("ns", "b").ok());
  keep.WaitFor(2);
  EXPECT_EQ(drop.events().size(), 1u);
}

TEST(SharedInformerTest, SetTransformRunsBeforeCachingAndOnlyBeforeStart) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a", {{"secret", "x"}, {"app", "web"}}).ok());
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer
                  .SetTransform([](ObjectPtr obj) -> absl::StatusOr<ObjectPtr> {
                    ObjectBuilder b;
                    b.SetNamespace(obj->namespace_())
                        .SetName(obj->name())
                        .SetResourceVersion(obj->resource_version());
                    for (const auto& [k, v] : obj->labels()) {
                      if (k != "secret") b.AddLabel(k, v);
                    }
                    return b.Build();
                  })
                  .ok());
  ASSERT_TRUE(informer.Start().ok());
  EXPECT_FALSE(informer.SetTransform(nullptr).ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  ObjectPtr a = informer.GetIndexer().GetByKey("ns/a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->Label("secret"), nullptr);
  EXPECT_NE(a->Label("app"), nullptr);
}

// A FakeSource whose lists hand their items over one by one, as the API
// client does while a list downloads, and can pause or fail part way.
class StreamingSource final : public ListerWatcher {
 public:
  explicit StreamingSource(FakeSource* inner) : inner_(inner) {}

  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    return inner_->List(options);
  }
  absl::StatusOr<ObjectList> ListWithItems(const ListOptions& options,
                                           const ItemFn& on_item) override {
    absl::StatusOr<ObjectList> list = inner_->List(options);
    if (!list.ok()) return list;
    const int call = ++lists_;
    if (call == 2 && pause_second_) {
      second_started_.Notify();
      resume_second_.WaitForNotification();
    }
    if (call == 1 && duplicate_first_ && !list->items.empty()) {
      list->items.push_back(list->items.front());
    }
    for (size_t i = 0; i < list->items.size(); ++i) {
      if (i == 2 && call == 1 && pause_first_) {
        paused_.Notify();
        resume_.WaitForNotification();
      }
      if (i == 2 && call == 1 && fail_first_) {
        return absl::UnavailableError("connection reset mid-list");
      }
      absl::Status st = on_item(list->items[i]);
      if (!st.ok()) return st;
    }
    return list;
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    return inner_->Watch(options);
  }

  FakeSource* const inner_;
  std::atomic<int> lists_{0};
  bool pause_first_ = false;
  bool fail_first_ = false;
  bool duplicate_first_ = false;
  bool pause_second_ = false;
  absl::Notification paused_;
  absl::Notification resume_;
  absl::Notification second_started_;
  absl::Notification resume_second_;
};

TEST(SharedInformerTest, InitialListIsStagedAndPublishedOnlyWhenComplete) {
  FakeSource source;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(source.Add(name[0] == 'c' ? "other" : "ns", name).ok());
  }
  StreamingSource streaming(&source);
  streaming.pause_first_ = true;
  Recorder rec;
  SharedIndexInformer informer(&streaming, Opts());
  auto reg = informer.AddEventHandler(&rec);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(informer.Start().ok());
  // Two items are in, the third is not: nothing is visible yet.
  streaming.paused_.WaitForNotification();
  EXPECT_EQ(informer.GetIndexer().Size(), 0u);
  EXPECT_FALSE(informer.HasSynced());
  EXPECT_EQ(informer.LastAppliedResourceVersion(), "");
  streaming.resume_.Notify();
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  // Published at once, indexes included, and every handler got the adds of
  // the initial list in list order, as the pops would have given them.
  EXPECT_EQ(informer.GetIndexer().Size(), 3u);
  EXPECT_EQ(informer.LastAppliedResourceVersion(),
            source.CurrentResourceVersion());
  auto other = informer.GetIndexer().ByIndex(kNamespaceIndex, "other");
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0]->name(), "c");
  rec.WaitFor(3);
  EXPECT_EQ(rec.events(),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "add c initial"}));
  // The listener counts a notification delivered after its handler
  // returns: the last initial add may have been recorded but not counted.
  (*reg)->WaitIdle();
  EXPECT_TRUE((*reg)->HasSynced());
  EXPECT_EQ(informer.GetReflectorCounters().staged_lists, 1);
  // Live events go through the DeltaFIFO as before.
  source.WaitForWatches(1);
  ASSERT_TRUE(source.Modify("ns", "a", {{"app", "x"}}).ok());
  ASSERT_TRUE(source.Add("ns", "d").ok());
  rec.WaitFor(5);
  EXPECT_EQ(rec.events()[3], "update a");
  EXPECT_EQ(rec.events()[4], "add d");
  EXPECT_EQ(informer.GetIndexer().Size(), 4u);
  informer.Stop();
}

TEST(SharedInformerTest, AListThatFailsHalfWayLeavesNoTrace) {
  FakeSource source;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(source.Add("ns", name).ok());
  }
  StreamingSource streaming(&source);
  streaming.fail_first_ = true;
  streaming.pause_second_ = true;
  SharedIndexInformer::Options opts = Opts();
  opts.reflector.backoff_initial = absl::Milliseconds(1);
  Recorder rec;
  SharedIndexInformer informer(&streaming, opts);
  auto reg = informer.AddEventHandler(&rec);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(informer.Start().ok());
  // The first list failed after staging two items; the retry has not
  // started listing. Nothing of the failed list is anywhere.
  streaming.second_started_.WaitForNotification();
  (*reg)->WaitIdle();
  EXPECT_EQ(informer.GetIndexer().Size(), 0u);
  EXPECT_TRUE(rec.events().empty());
  EXPECT_FALSE(informer.HasSynced());
  EXPECT_EQ(informer.LastAppliedResourceVersion(), "");
  EXPECT_EQ(informer.GetReflectorCounters().staged_lists, 0);
  streaming.resume_second_.Notify();
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  EXPECT_EQ(streaming.lists_.load(), 2);
  (*reg)->WaitIdle();
  // Exactly one add per object, from the list that succeeded.
  EXPECT_EQ(rec.events(),
            (std::vector<std::string>{"add a initial", "add b initial",
                                      "add c initial"}));
  EXPECT_EQ(informer.GetIndexer().Size(), 3u);
  EXPECT_EQ(informer.GetReflectorCounters().staged_lists, 1);
  informer.Stop();
}

TEST(SharedInformerTest, AListWithADuplicateKeyGoesThroughTheFifo) {
  FakeSource source;
  ASSERT_TRUE(source.Add("ns", "a").ok());
  ASSERT_TRUE(source.Add("ns", "b").ok());
  StreamingSource streaming(&source);
  streaming.duplicate_first_ = true;  // "a" listed twice
  Recorder rec;
  SharedIndexInformer informer(&streaming, Opts());
  auto reg = informer.AddEventHandler(&rec);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  (*reg)->WaitIdle();
  // The FIFO queues both copies under one key: an add, then the second
  // copy as an unchanged object, a sync that only handlers due for a
  // resync get (client-go's HandleDeltas).
  EXPECT_EQ(rec.events(),
            (std::vector<std::string>{"add a initial", "add b initial"}));
  EXPECT_EQ(informer.GetIndexer().Size(), 2u);
  EXPECT_EQ(informer.GetReflectorCounters().staged_lists, 0);
  informer.Stop();
}

TEST(SharedInformerTest, ConcurrentReadersWhileEventsFlow) {
  FakeSource source;
  Recorder rec;
  SharedIndexInformer informer(&source, Opts());
  ASSERT_TRUE(informer.AddEventHandler(&rec).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Hours(1)));
  source.WaitForWatches(1);
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        for (const ObjectPtr& o : informer.GetIndexer().List()) {
          ASSERT_FALSE(o->name().empty());
        }
        (void)informer.GetIndexer().ByIndex(kNamespaceIndex, "ns");
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(source.Add("ns", absl::StrCat("p", i)).ok());
    if (i % 3 == 0) {
      ASSERT_TRUE(source.Delete("ns", absl::StrCat("p", i)).ok());
    }
  }
  rec.WaitFor(200 + 67);
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(informer.GetIndexer().ListKeys().size(), 200u - 67u);
}

}  // namespace
}  // namespace informer

// The informer's relists: a list into a populated cache goes through a
// ListReconciler, so only what changed becomes deltas and the cache keeps
// its objects.

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/cache/shared_informer.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

// Records what a handler saw ("sync" for an update that kept the RV), and
// the objects of the notifications, for identity checks.
class Recorder : public ResourceEventHandler {
 public:
  void OnAdd(const ObjectPtr& obj, bool initial) override {
    Log(absl::StrCat("add ", obj->name(), initial ? " initial" : ""), obj,
        nullptr);
  }
  void OnUpdate(const ObjectPtr& o, const ObjectPtr& n) override {
    Log(absl::StrCat(o->resource_version() == n->resource_version() ? "sync "
                                                                    : "update ",
                     n->name()),
        n, o);
  }
  void OnDelete(const ObjectPtr& obj, bool unknown) override {
    Log(absl::StrCat("delete ", obj->name(), unknown ? " tombstone" : ""), obj,
        nullptr);
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
  // The events after the first `skip`, sorted (order across keys is not
  // part of the contract).
  std::vector<std::string> SortedAfter(size_t skip) {
    std::vector<std::string> ev = events();
    std::vector<std::string> tail(ev.begin() + std::min(skip, ev.size()),
                                  ev.end());
    std::sort(tail.begin(), tail.end());
    return tail;
  }
  // The (new, old) objects of the last notification named `event`.
  std::pair<ObjectPtr, ObjectPtr> Objects(const std::string& event) {
    absl::MutexLock lock(&mu_);
    return objects_[event];
  }

 private:
  void Log(std::string e, ObjectPtr obj, ObjectPtr old) {
    absl::MutexLock lock(&mu_);
    objects_[e] = {std::move(obj), std::move(old)};
    events_.push_back(std::move(e));
  }
  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::pair<ObjectPtr, ObjectPtr>> objects_
      ABSL_GUARDED_BY(mu_);
};

// The object decoded again from its JSON text: equal, never the same.
ObjectPtr Redecoded(const ObjectPtr& obj) {
  std::ostringstream json;
  json << obj->json();
  absl::StatusOr<ObjectPtr> copy = Object::Parse(json.str());
  EXPECT_TRUE(copy.ok()) << copy.status();
  return copy.ok() ? *std::move(copy) : obj;
}

// Hands out a FakeSource's watch events with their objects decoded afresh;
// breaks after the first event when `cut` says so.
class CopyingStream final : public WatchStream {
 public:
  CopyingStream(std::unique_ptr<WatchStream> inner, bool cut)
      : inner_(std::move(inner)), cut_(cut) {}
  absl::Status Next(WatchEvent* ev) override {
    if (cut_ && events_ == 1) {
      return absl::UnavailableError("connection reset mid-WatchList");
    }
    absl::Status st = inner_->Next(ev);
    if (!st.ok()) return st;
    ++events_;
    if (ev->object != nullptr) ev->object = Redecoded(ev->object);
    return st;
  }
  void Stop() override { inner_->Stop(); }

 private:
  const std::unique_ptr<WatchStream> inner_;
  const bool cut_;
  int events_ = 0;
};

// A FakeSource whose lists and watches decode every object afresh, as the
// API client's do (an unchanged object is equal to the cached one, never
// the same pointer); lists hand the items over one by one, and keep none
// of them when told not to. List number `fail_list` fails after its first
// item; WatchList number `fail_watch_list` breaks after its first event.
class CopyingSource final : public ListerWatcher {
 public:
  explicit CopyingSource(FakeSource* inner) : inner_(inner) {}

  absl::StatusOr<ObjectList> List(const ListOptions& options) override {
    return ListWithItems(options,
                         [](const ObjectPtr&) { return absl::OkStatus(); });
  }
  absl::StatusOr<ObjectList> ListWithItems(const ListOptions& options,
                                           const ItemFn& on_item) override {
    absl::StatusOr<ObjectList> list = inner_->List(options);
    if (!list.ok()) return list;
    const int call = ++lists_;
    std::vector<ObjectPtr> items;
    for (size_t i = 0; i < list->items.size(); ++i) {
      if (call == fail_list && i == 1) {
        failed_.Notify();
        return absl::UnavailableError("connection reset mid-list");
      }
      ObjectPtr copy = Redecoded(list->items[i]);
      absl::Status st = on_item(copy);
      if (!st.ok()) return st;
      if (options.keep_items) items.push_back(std::move(copy));
    }
    list->items = std::move(items);
    return list;
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override {
    absl::StatusOr<std::unique_ptr<WatchStream>> inner = inner_->Watch(options);
    if (!inner.ok()) return inner;
    const bool cut =
        options.send_initial_events && ++watch_lists_ == fail_watch_list;
    return std::unique_ptr<WatchStream>(
        new CopyingStream(*std::move(inner), cut));
  }

  int fail_list = 0;
  int fail_watch_list = 0;
  absl::Notification failed_;

 private:
  FakeSource* const inner_;
  std::atomic<int> lists_{0};
  std::atomic<int> watch_lists_{0};
};

// An informer over a CopyingSource of `same`, `changed`, `gone` and
// `recreated`, with a handler without resync (`plain`) and one whose
// resync is due when a relist comes (`resyncing`). Its lists are LISTs, or
// WatchLists when the parameter says so.
class RelistTest : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr size_t kObjects = 4;

  RelistTest() : copying_(&source_) {
    source_.SetWatchListSupported(true);
    for (const char* name : {"same", "changed", "gone", "recreated"}) {
      EXPECT_TRUE(source_.Add("ns", name).ok());
    }
  }

  void Start(bool syncs_unchanged = true) {
    SharedIndexInformer::Options o;
    o.name = "configmaps";
    o.reflector.random_seed = 1;
    o.relist_syncs_unchanged = syncs_unchanged;
    o.reflector.use_watch_list = WatchList();
    o.on_relist_applied = [this] {
      // What the cache holds when it is called.
      ObjectPtr changed = Cached("changed");
      absl::MutexLock lock(&applied_mu_);
      applied_.push_back(absl::StrCat(
          Cached("gone") == nullptr ? "gone absent" : "gone cached", ", ",
          changed != nullptr && changed->Label("v") != nullptr
              ? "changed updated"
              : "changed as it was"));
    };
    informer_ = std::make_unique<SharedIndexInformer>(&copying_, o, &clock_);
    HandlerOptions resync;
    resync.resync_period = absl::Minutes(1);
    ASSERT_TRUE(informer_->AddEventHandler(&plain_).ok());
    absl::StatusOr<HandlerRegistration*> r =
        informer_->AddEventHandler(&resyncing_, resync);
    ASSERT_TRUE(r.ok());
    resyncing_reg_ = *r;
    ASSERT_TRUE(informer_->Start().ok());
    ASSERT_TRUE(informer_->WaitForSync(absl::Hours(1)));
    plain_.WaitFor(kObjects);
    resyncing_.WaitFor(kObjects);
    source_.WaitForWatches(1);
    for (const std::string& key : informer_->GetIndexer().ListKeys()) {
      before_[key] = informer_->GetIndexer().GetByKey(key);
    }
    // Make the resyncing handler due: it gets a sync of every object.
    clock_.WaitForWaiters(1);
    clock_.Advance(absl::Minutes(1));
    resyncing_.WaitFor(2 * kObjects);
  }

  // Cuts the watch, runs `change` while it is down and compacts the
  // history, so that the re-watch gets 410; then walks the clock through
  // the back-offs (the resync loop parks too, a minute away) to the relist.
  template <typename Change>
  void Relist(Change change) {
    source_.BreakWatches(absl::UnavailableError("connection reset"));
    change();
    source_.CompactHistory();
    const absl::Time backoff_end = clock_.WaitForWaiters(2);
    clock_.Advance(backoff_end - clock_.Now());
    const absl::Time relist_at = clock_.WaitForWaiters(2);
    clock_.Advance(relist_at - clock_.Now());
  }

  static bool WatchList() { return GetParam(); }

  // What on_relist_applied saw, one entry per call.
  std::vector<std::string> Applied() {
    absl::MutexLock lock(&applied_mu_);
    return applied_;
  }
  // Waits until on_relist_applied was called `n` times (the hook records
  // under applied_mu_, so the wait is on that condition; the timeout is a
  // failsafe, reached only when the test fails).
  void AwaitApplied(size_t n) {
    absl::MutexLock lock(&applied_mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(applied_mu_) {
      return applied_.size() >= n;
    };
    EXPECT_TRUE(applied_mu_.AwaitWithTimeout(absl::Condition(&reached),
                                             absl::Seconds(30)))
        << applied_.size() << " relists applied, " << n << " awaited";
    ASSERT_EQ(applied_.size(), n);
  }

  ObjectPtr Cached(absl::string_view name) {
    return informer_->GetIndexer().GetByKey(absl::StrCat("ns/", name));
  }

  FakeClock clock_;
  FakeSource source_{/*history_limit=*/1};
  CopyingSource copying_;
  Recorder plain_, resyncing_;
  HandlerRegistration* resyncing_reg_ = nullptr;
  std::map<std::string, ObjectPtr> before_;
  absl::Mutex applied_mu_;
  std::vector<std::string> applied_ ABSL_GUARDED_BY(applied_mu_);
  // Last: stopped (joining its threads) before the rest goes.
  std::unique_ptr<SharedIndexInformer> informer_;
};

TEST_P(RelistTest, OnlyWhatChangedBecomesNewsAndTheCacheKeepsItsObjects) {
  Start();
  Relist([this] {
    ASSERT_TRUE(source_.Modify("ns", "changed", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_.Delete("ns", "gone").ok());
    ASSERT_TRUE(source_.Delete("ns", "recreated").ok());
    ASSERT_TRUE(source_.Add("ns", "recreated").ok());
    ASSERT_TRUE(source_.Add("ns", "added").ok());
  });
  plain_.WaitFor(kObjects + 5);
  EXPECT_EQ(plain_.SortedAfter(kObjects),
            (std::vector<std::string>{
                "add added", "add recreated", "delete gone tombstone",
                "delete recreated tombstone", "update changed"}));
  // The recreated name: the old object's deletion first, then the new one.
  const std::vector<std::string> ev = plain_.events();
  EXPECT_LT(std::find(ev.begin(), ev.end(), "delete recreated tombstone"),
            std::find(ev.begin(), ev.end(), "add recreated"));
  // The unchanged object is the cached one, index entries and all.
  EXPECT_EQ(Cached("same").get(), before_["ns/same"].get());
  auto by_ns = informer_->GetIndexer().ByIndex(kNamespaceIndex, "ns");
  ASSERT_TRUE(by_ns.ok());
  EXPECT_EQ(by_ns->size(), 4u);
  EXPECT_NE(Cached("changed").get(), before_["ns/changed"].get());
  EXPECT_EQ(Cached("changed")->Label("v") != nullptr, true);
  EXPECT_NE(Cached("recreated")->uid(), before_["ns/recreated"]->uid());
  EXPECT_EQ(Cached("gone"), nullptr);
  // A vanished object is reported with the last state the cache had.
  EXPECT_EQ(plain_.Objects("delete gone tombstone").first.get(),
            before_["ns/gone"].get());
  EXPECT_EQ(plain_.Objects("update changed").second.get(),
            before_["ns/changed"].get());
  // The handler whose resync is due also hears of the unchanged object,
  // as client-go's relist tells it: an update with the cached object as
  // old and new.
  resyncing_.WaitFor(2 * kObjects + 6);
  EXPECT_EQ(resyncing_.SortedAfter(2 * kObjects),
            (std::vector<std::string>{
                "add added", "add recreated", "delete gone tombstone",
                "delete recreated tombstone", "sync same", "update changed"}));
  const auto [now, old] = resyncing_.Objects("sync same");
  EXPECT_EQ(now.get(), before_["ns/same"].get());
  EXPECT_EQ(old.get(), before_["ns/same"].get());
  // The reflector records the relist's RV after the handlers have heard of
  // it, so wait for it rather than read it at once: on_relist_applied is
  // called once the FIFO has applied the relist's RV, the source's current
  // one (nothing changed since).
  AwaitApplied(1);
  EXPECT_EQ(informer_->LastAppliedResourceVersion(),
            source_.CurrentResourceVersion());
  // Both lists were of the kind asked for, and both were staged.
  const Reflector::Counters c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.relists, 1);
  EXPECT_EQ(c.staged_lists, 2);
  EXPECT_EQ(source_.watch_list_calls(), WatchList() ? 2 : 0);
  EXPECT_EQ(source_.list_calls(), WatchList() ? 0 : 2);
}

TEST_P(RelistTest, HandlersCanBeSparedTheUnchangedObjects) {
  Start(/*syncs_unchanged=*/false);
  Relist([this] {
    ASSERT_TRUE(source_.Modify("ns", "changed", {{"v", "2"}}).ok());
  });
  plain_.WaitFor(kObjects + 1);
  resyncing_.WaitFor(2 * kObjects + 1);
  resyncing_reg_->WaitIdle();
  EXPECT_EQ(resyncing_.SortedAfter(2 * kObjects),
            std::vector<std::string>{"update changed"});
  EXPECT_EQ(plain_.SortedAfter(kObjects),
            std::vector<std::string>{"update changed"});
  for (const char* name : {"same", "gone", "recreated"}) {
    EXPECT_EQ(Cached(name).get(), before_[absl::StrCat("ns/", name)].get());
  }
}

TEST_P(RelistTest, ARelistThatFailsHalfWayLeavesTheCacheAsItWas) {
  if (WatchList()) {
    // The relist's WatchList breaks before its end bookmark; the LIST it
    // falls back to at once fails too, so the reflector backs off.
    copying_.fail_watch_list = 2;
    copying_.fail_list = 1;
  } else {
    copying_.fail_list = 2;  // the relist, after its first item
  }
  Start();
  const std::string applied = informer_->LastAppliedResourceVersion();
  Relist([this] {
    ASSERT_TRUE(source_.Modify("ns", "same", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_.Delete("ns", "gone").ok());
  });
  copying_.failed_.WaitForNotification();
  // Parked in the back-off after the failure (with the resync loop).
  const absl::Time retry_at = clock_.WaitForWaiters(2);
  EXPECT_EQ(informer_->GetIndexer().Size(), kObjects);
  for (const auto& [key, obj] : before_) {
    EXPECT_EQ(informer_->GetIndexer().GetByKey(key).get(), obj.get()) << key;
  }
  EXPECT_EQ(plain_.events().size(), kObjects);
  EXPECT_EQ(informer_->LastAppliedResourceVersion(), applied);
  EXPECT_TRUE(Applied().empty()) << "a failed relist was reported";
  // The retry goes through.
  clock_.Advance(retry_at - clock_.Now());
  plain_.WaitFor(kObjects + 2);
  EXPECT_EQ(plain_.SortedAfter(kObjects),
            (std::vector<std::string>{"delete gone tombstone", "update same"}));
  AwaitApplied(1);
}

TEST_P(RelistTest, EachRelistIsReportedOnceItIsInTheCache) {
  Start();
  // Neither the initial list, nor watch events, nor the resync that Start
  // made due.
  ASSERT_TRUE(source_.Modify("ns", "same", {{"v", "1"}}).ok());
  plain_.WaitFor(kObjects + 1);
  EXPECT_TRUE(Applied().empty());
  Relist([this] {
    ASSERT_TRUE(source_.Modify("ns", "changed", {{"v", "2"}}).ok());
    ASSERT_TRUE(source_.Delete("ns", "gone").ok());
  });
  AwaitApplied(1);
  // Called with the relist's changes in the cache already.
  EXPECT_EQ(Applied()[0], "gone absent, changed updated");
  // Later events are not relists: still one call (the event's pop would
  // have made a pending second one).
  ASSERT_TRUE(source_.Modify("ns", "same", {{"v", "3"}}).ok());
  plain_.WaitFor(kObjects + 4);
  EXPECT_EQ(Applied().size(), 1u);
  // The next relist is reported too, once.
  Relist([this] {
    ASSERT_TRUE(source_.Modify("ns", "changed", {{"v", "5"}}).ok());
  });
  AwaitApplied(2);
  EXPECT_EQ(informer_->GetReflectorCounters().relists, 2);
  ASSERT_TRUE(source_.Modify("ns", "same", {{"v", "4"}}).ok());
  plain_.WaitFor(kObjects + 6);
  EXPECT_EQ(Applied().size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(ListAndWatchList, RelistTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "WatchList" : "List";
                         });

}  // namespace
}  // namespace informer

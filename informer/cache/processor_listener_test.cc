#include "informer/cache/processor_listener.h"

#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using Type = Notification::Type;

ObjectPtr Obj(absl::string_view name, absl::string_view rv,
              absl::string_view uid = "u1") {
  return ObjectBuilder()
      .SetNamespace("ns")
      .SetName(name)
      .SetUid(uid)
      .SetResourceVersion(rv)
      .Build();
}

Notification Add(ObjectPtr o, bool initial = false) {
  Notification n;
  n.type = Type::kAdd;
  n.key = o->Key();
  n.obj = std::move(o);
  n.is_in_initial_list = initial;
  return n;
}
Notification Update(ObjectPtr old_obj, ObjectPtr o) {
  Notification n;
  n.type = Type::kUpdate;
  n.key = o->Key();
  n.old_obj = std::move(old_obj);
  n.obj = std::move(o);
  return n;
}
Notification Delete(ObjectPtr o) {
  Notification n;
  n.type = Type::kDelete;
  n.key = o->Key();
  n.obj = std::move(o);
  return n;
}

TEST(CoalesceTest, AddThenUpdatesStaysAddOfLatestState) {
  std::deque<Notification> tail;
  CoalesceInto(&tail, Add(Obj("a", "1"), /*initial=*/true));
  CoalesceInto(&tail, Update(Obj("a", "1"), Obj("a", "2")));
  CoalesceInto(&tail, Update(Obj("a", "2"), Obj("a", "3")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].type, Type::kAdd);
  EXPECT_TRUE(tail[0].is_in_initial_list);
  EXPECT_EQ(tail[0].obj->resource_version(), "3");
}

TEST(CoalesceTest, UpdatesKeepOldestOldAndNewestNew) {
  std::deque<Notification> tail;
  CoalesceInto(&tail, Update(Obj("a", "1"), Obj("a", "2")));
  CoalesceInto(&tail, Update(Obj("a", "2"), Obj("a", "3")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].type, Type::kUpdate);
  EXPECT_EQ(tail[0].old_obj->resource_version(), "1");
  EXPECT_EQ(tail[0].obj->resource_version(), "3");
}

TEST(CoalesceTest, DeleteStaysDeleteAndSupersedesPendingUpdates) {
  std::deque<Notification> tail;
  CoalesceInto(&tail, Update(Obj("a", "1"), Obj("a", "2")));
  CoalesceInto(&tail, Update(Obj("a", "2"), Obj("a", "3")));
  CoalesceInto(&tail, Delete(Obj("a", "4")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].type, Type::kDelete);
  EXPECT_EQ(tail[0].obj->resource_version(), "4");
}

TEST(CoalesceTest, AddAndDeleteOfAnUnseenObjectVanishTogether) {
  // The handler never heard of "a": neither the add nor the delete is owed.
  std::deque<Notification> tail;
  CoalesceInto(&tail, Add(Obj("a", "1")));
  CoalesceInto(&tail, Update(Obj("a", "1"), Obj("a", "2")));
  CoalesceInto(&tail, Delete(Obj("a", "3")));
  EXPECT_TRUE(tail.empty());
}

TEST(CoalesceTest, DeleteOfTheKnownObjectSurvivesARecreateAndDelete) {
  // The handler knows uid1. uid1 goes, uid2 comes and goes: the handler must
  // still hear that uid1 went away; uid2's add and delete vanish together.
  std::deque<Notification> tail;
  CoalesceInto(&tail, Delete(Obj("a", "3", "uid1")));
  CoalesceInto(&tail, Add(Obj("a", "4", "uid2")));
  CoalesceInto(&tail, Delete(Obj("a", "5", "uid2")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].type, Type::kDelete);
  EXPECT_EQ(tail[0].obj->uid(), "uid1");
  // And again: still one delete, of uid1.
  CoalesceInto(&tail, Add(Obj("a", "6", "uid3")));
  CoalesceInto(&tail, Update(Obj("a", "6", "uid3"), Obj("a", "7", "uid3")));
  CoalesceInto(&tail, Delete(Obj("a", "8", "uid3")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].obj->uid(), "uid1");
  EXPECT_EQ(tail[0].obj->resource_version(), "3");
}

TEST(CoalesceTest, DeleteThenAddOfNewObjectKeepsBoth) {
  std::deque<Notification> tail;
  CoalesceInto(&tail, Delete(Obj("a", "3", "old")));
  CoalesceInto(&tail, Add(Obj("a", "4", "new")));
  CoalesceInto(&tail, Update(Obj("a", "4", "new"), Obj("a", "5", "new")));
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].type, Type::kDelete);
  EXPECT_EQ(tail[0].obj->uid(), "old");
  EXPECT_EQ(tail[1].type, Type::kAdd);
  EXPECT_EQ(tail[1].obj->resource_version(), "5");
}

TEST(CoalesceTest, DeleteAfterAnUpdateToANewUidDeletesTheKnownObject) {
  // A relist found "a" recreated (uid1 -> uid2), then uid2 was deleted. The
  // handler knows uid1 only: it must hear that uid1 is gone.
  std::deque<Notification> tail;
  CoalesceInto(&tail, Update(Obj("a", "1", "uid1"), Obj("a", "2", "uid2")));
  CoalesceInto(&tail, Update(Obj("a", "2", "uid2"), Obj("a", "3", "uid2")));
  CoalesceInto(&tail, Delete(Obj("a", "4", "uid2")));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].type, Type::kDelete);
  EXPECT_EQ(tail[0].obj->uid(), "uid1");
  EXPECT_EQ(tail[0].obj->resource_version(), "1");
  EXPECT_TRUE(tail[0].final_state_unknown);
}

// A handler that blocks until released and records what it saw.
class GatedHandler : public ResourceEventHandler {
 public:
  void OnAdd(const ObjectPtr& obj, bool) override {
    Record(absl::StrCat("add ", obj->name(), "@", obj->resource_version()),
           obj);
  }
  void OnUpdate(const ObjectPtr& o, const ObjectPtr& n) override {
    Record(absl::StrCat("update ", n->name(), "@", o->resource_version(), "->",
                        n->resource_version()),
           n);
  }
  void OnDelete(const ObjectPtr& obj, bool) override {
    Record(absl::StrCat("delete ", obj->name(), "@", obj->resource_version()),
           nullptr, std::string(obj->name()));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    gate_open_ = true;
  }
  void WaitForCalls(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return log_.size() >= n;
    };
    mu_.Await(absl::Condition(&enough));
  }
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  std::map<std::string, std::string> state() {
    absl::MutexLock lock(&mu_);
    return state_;
  }

 private:
  void Record(std::string line, const ObjectPtr& obj,
              std::string deleted = "") {
    absl::MutexLock lock(&mu_);
    log_.push_back(line);
    mu_.Await(absl::Condition(&gate_open_));
    if (obj)
      state_[std::string(obj->name())] = std::string(obj->resource_version());
    if (!deleted.empty()) state_.erase(deleted);
  }
  absl::Mutex mu_;
  bool gate_open_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> state_ ABSL_GUARDED_BY(mu_);
};

TEST(ProcessorListenerTest, SlowHandlerQueueStaysBoundedAndConvergesOnLatest) {
  GatedHandler handler;
  ProcessorListener::Options opts;
  opts.max_pending = 16;
  ProcessorListener listener(&handler, opts, RealClock());
  listener.Start();
  // The first notification blocks the handler; then 10 objects get 1000
  // updates each while it is stuck.
  listener.Add(Add(Obj("blocker", "1")));
  handler.WaitForCalls(1);
  for (int i = 0; i < 10; ++i) {
    listener.Add(Add(Obj(absl::StrCat("o", i), "1")));
  }
  for (int rv = 2; rv <= 1000; ++rv) {
    for (int i = 0; i < 10; ++i) {
      listener.Add(Update(Obj(absl::StrCat("o", i), absl::StrCat(rv - 1)),
                          Obj(absl::StrCat("o", i), absl::StrCat(rv))));
    }
  }
  listener.Add(Delete(Obj("o3", "1001")));
  const ProcessorListener::Stats stats = listener.GetStats();
  // Bounded by the number of objects (x2 for the doubling rule), not events.
  EXPECT_LE(stats.pending, 2 * 16u);
  EXPECT_GT(stats.coalesced, 9000u);
  handler.Release();
  listener.WaitIdle();
  std::map<std::string, std::string> state = handler.state();
  EXPECT_EQ(state.count("o3"), 0u);
  for (int i = 0; i < 10; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(state[absl::StrCat("o", i)], "1000") << "o" << i;
  }
  listener.Stop();
}

// Checks each call against what the handler believes exists: an add only
// for an absent key, an update or delete only of the object it knows (same
// UID). Handler calls of one listener never overlap, but the checker's
// state is read from the test thread, hence the lock.
class ConsistencyChecker : public ResourceEventHandler {
 public:
  void OnAdd(const ObjectPtr& obj, bool) override {
    absl::MutexLock lock(&mu_);
    const std::string key = obj->Key();
    if (known_.count(key) != 0) {
      errors_.push_back(absl::StrCat("add of known ", key, " ", obj->uid()));
    }
    known_[key] = std::string(obj->uid());
  }
  void OnUpdate(const ObjectPtr& old_obj, const ObjectPtr& obj) override {
    absl::MutexLock lock(&mu_);
    const std::string key = obj->Key();
    auto it = known_.find(key);
    if (it == known_.end() || it->second != old_obj->uid()) {
      errors_.push_back(
          absl::StrCat("update of unknown ", key, " ", old_obj->uid()));
    }
    known_[key] = std::string(obj->uid());
  }
  void OnDelete(const ObjectPtr& obj, bool) override {
    absl::MutexLock lock(&mu_);
    const std::string key = obj->Key();
    auto it = known_.find(key);
    if (it == known_.end() || it->second != obj->uid()) {
      errors_.push_back(
          absl::StrCat("delete of unknown ", key, " ", obj->uid()));
    } else {
      known_.erase(it);
    }
    deleted_uids_.push_back(std::string(obj->uid()));
  }
  std::map<std::string, std::string> known() {
    absl::MutexLock lock(&mu_);
    return known_;
  }
  std::vector<std::string> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }
  std::vector<std::string> deleted_uids() {
    absl::MutexLock lock(&mu_);
    return deleted_uids_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> known_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> deleted_uids_ ABSL_GUARDED_BY(mu_);
};

// Passes calls on to `next`, but blocks the listener's thread in the call
// for the object named "blocker" until released.
class BlockingHandler : public ResourceEventHandler {
 public:
  explicit BlockingHandler(ResourceEventHandler* next) : next_(next) {}
  void OnAdd(const ObjectPtr& obj, bool initial) override {
    Gate(*obj);
    next_->OnAdd(obj, initial);
  }
  void OnUpdate(const ObjectPtr& o, const ObjectPtr& n) override {
    Gate(*n);
    next_->OnUpdate(o, n);
  }
  void OnDelete(const ObjectPtr& obj, bool unknown) override {
    Gate(*obj);
    next_->OnDelete(obj, unknown);
  }
  void WaitBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  void Gate(const Object& obj) {
    if (obj.name() != "blocker") return;
    absl::MutexLock lock(&mu_);
    blocked_ = true;
    mu_.Await(absl::Condition(&open_));
  }
  ResourceEventHandler* const next_;
  absl::Mutex mu_;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(ProcessorListenerTest, CoalescingNeverLosesTheDeleteOfAKnownObject) {
  ConsistencyChecker checker;
  BlockingHandler handler(&checker);
  ProcessorListener::Options opts;
  opts.max_pending = 2;
  ProcessorListener listener(&handler, opts, RealClock());
  listener.Start();
  // The handler learns of uid1, then gets stuck on another object.
  listener.Add(Add(Obj("a", "1", "uid1")));
  listener.Add(Add(Obj("blocker", "2", "b")));
  handler.WaitBlocked();
  // While it is stuck: uid1 is deleted, uid2 created and deleted under the
  // same key, and enough other traffic arrives to compact the queue.
  listener.Add(Delete(Obj("a", "3", "uid1")));
  listener.Add(Add(Obj("a", "4", "uid2")));
  listener.Add(Delete(Obj("a", "5", "uid2")));
  for (int i = 0; i < 8; ++i) {
    listener.Add(Add(Obj(absl::StrCat("o", i), "6", absl::StrCat("o", i))));
  }
  EXPECT_GT(listener.GetStats().coalesced, 0u);
  handler.Release();
  listener.WaitIdle();
  EXPECT_THAT(checker.errors(), ::testing::IsEmpty());
  EXPECT_THAT(checker.deleted_uids(), ::testing::ElementsAre("uid1"));
  EXPECT_EQ(checker.known().count("ns/a"), 0u);
  EXPECT_EQ(checker.known().size(), 9u);  // the blocker and o0..o7
}

TEST(ProcessorListenerTest, RandomHistoriesStayConsistentUnderCoalescing) {
  // Random create/update/delete/recreate histories of a few keys, pushed
  // into a tiny queue behind a stuck handler: whatever is merged, each call
  // must make sense to the handler and it must end on the true state.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    ConsistencyChecker checker;
    BlockingHandler handler(&checker);
    ProcessorListener::Options opts;
    opts.max_pending = 1 + seed % 4;
    ProcessorListener listener(&handler, opts, RealClock());
    listener.Start();
    // The handler first learns some of the objects, then gets stuck.
    std::map<std::string, ObjectPtr> truth;
    for (int i = 0; i < 3; ++i) {
      const std::string name = absl::StrCat("k", i);
      ObjectPtr o = Obj(name, "1", absl::StrCat(name, "-1"));
      truth[o->Key()] = o;
      listener.Add(Add(o));
    }
    listener.Add(Add(Obj("blocker", "1", "b")));
    handler.WaitBlocked();
    truth["ns/blocker"] = Obj("blocker", "1", "b");
    int next = 2;
    for (int step = 0; step < 300; ++step) {
      const std::string name = absl::StrCat("k", rng() % 5);
      const std::string key = absl::StrCat("ns/", name);
      const std::string rv = absl::StrCat(next++);
      auto it = truth.find(key);
      if (it == truth.end()) {
        ObjectPtr o = Obj(name, rv, absl::StrCat(name, "-", rv));
        truth[key] = o;
        listener.Add(Add(o));
      } else if (rng() % 3 == 0) {
        ObjectPtr gone = Obj(name, rv, std::string(it->second->uid()));
        truth.erase(it);
        listener.Add(Delete(gone));
      } else if (rng() % 8 == 0) {
        // Recreated under the same key while the watch was down: a relist
        // reports it as an update to an object with another UID.
        ObjectPtr o = Obj(name, rv, absl::StrCat(name, "-", rv));
        listener.Add(Update(it->second, o));
        it->second = o;
      } else {
        ObjectPtr o = Obj(name, rv, std::string(it->second->uid()));
        listener.Add(Update(it->second, o));
        it->second = o;
      }
    }
    handler.Release();
    listener.WaitIdle();
    EXPECT_THAT(checker.errors(), ::testing::IsEmpty()) << "seed " << seed;
    std::map<std::string, std::string> want;
    for (const auto& [key, obj] : truth) want[key] = std::string(obj->uid());
    EXPECT_EQ(checker.known(), want) << "seed " << seed;
  }
}

TEST(ProcessorListenerTest, PerObjectOrderIsPreservedWithoutCoalescing) {
  GatedHandler handler;
  handler.Release();
  ProcessorListener listener(&handler, {}, RealClock());
  listener.Start();
  listener.Add(Add(Obj("a", "1")));
  listener.Add(Update(Obj("a", "1"), Obj("a", "2")));
  listener.Add(Delete(Obj("a", "3")));
  listener.WaitIdle();
  EXPECT_EQ(handler.log(), (std::vector<std::string>{"add a@1", "update a@1->2",
                                                     "delete a@3"}));
}

TEST(ProcessorListenerTest, InlineHandlerRunsOnCallerThread) {
  std::thread::id seen;
  ResourceEventHandlerFuncs funcs;
  funcs.add = [&](const ObjectPtr&, bool) {
    seen = std::this_thread::get_id();
  };
  ProcessorListener::Options opts;
  opts.inline_handler = true;
  ProcessorListener listener(&funcs, opts, RealClock());
  listener.Start();
  listener.Add(Add(Obj("a", "1")));
  EXPECT_EQ(seen, std::this_thread::get_id());
  EXPECT_EQ(listener.GetStats().delivered, 1u);
}

TEST(ProcessorListenerTest, InitialListDeliveredOnlyAfterInitialAddsHandled) {
  GatedHandler handler;
  ProcessorListener listener(&handler, {}, RealClock());
  listener.Start();
  EXPECT_TRUE(listener.InitialListDelivered());
  listener.Add(Add(Obj("a", "1"), /*initial=*/true));
  listener.Add(Add(Obj("b", "1"), /*initial=*/true));
  handler.WaitForCalls(1);
  EXPECT_FALSE(listener.InitialListDelivered());
  handler.Release();
  listener.WaitIdle();
  EXPECT_TRUE(listener.InitialListDelivered());
}

TEST(ProcessorListenerTest, ResyncDueOnlyAfterPeriod) {
  FakeClock clock;
  ResourceEventHandlerFuncs funcs;
  ProcessorListener::Options opts;
  opts.resync_period = absl::Seconds(30);
  ProcessorListener listener(&funcs, opts, &clock);
  EXPECT_FALSE(listener.ShouldResync(clock.Now()));
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(listener.ShouldResync(clock.Now()));
  listener.DetermineNextResync(clock.Now());
  EXPECT_FALSE(listener.ShouldResync(clock.Now()));

  ProcessorListener no_resync(&funcs, {}, &clock);
  clock.Advance(absl::Hours(10));
  EXPECT_FALSE(no_resync.ShouldResync(clock.Now()));
}

}  // namespace
}  // namespace informer

#include "informer/cache/delta_fifo.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/store.h"
#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ObjectPtr Obj(absl::string_view name, absl::string_view rv,
              absl::string_view ns = "ns") {
  return ObjectBuilder()
      .SetKind("Pod")
      .SetNamespace(ns)
      .SetName(name)
      .SetResourceVersion(rv)
      .Build();
}

// "Type:key@rv", with "Deleted?" for a tombstone, so expectations read like
// the delta lists they describe.
std::string Describe(const Delta& d) {
  std::string type(DeltaTypeName(d.type));
  if (d.final_state_unknown) type += "?";
  return absl::StrCat(type, ":", d.object->Key(), "@",
                      d.object->resource_version());
}

std::vector<std::string> Describe(const Deltas& deltas) {
  std::vector<std::string> out;
  for (const Delta& d : deltas) out.push_back(Describe(d));
  return out;
}

// In-test stand-in for the informer's Indexer.
class FakeKnownObjects : public KeyListerGetter {
 public:
  void Set(ObjectPtr obj) {
    absl::MutexLock lock(&mu_);
    objects_[obj->Key()] = std::move(obj);
  }
  // A key that ListKeys reports but GetByKey cannot find, as when the store
  // loses it between the two calls.
  void AddPhantomKey(std::string key) {
    absl::MutexLock lock(&mu_);
    objects_[std::move(key)] = nullptr;
  }

  std::vector<std::string> ListKeys() const override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> keys;
    for (const auto& [key, obj] : objects_) keys.push_back(key);
    return keys;
  }
  ObjectPtr GetByKey(absl::string_view key) const override {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(std::string(key));
    return it == objects_.end() ? nullptr : it->second;
  }
  void Reserve(size_t n) override {
    absl::MutexLock lock(&mu_);
    reserved_.push_back(n);
  }
  std::vector<size_t> reserved() const {
    absl::MutexLock lock(&mu_);
    return reserved_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<size_t> reserved_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ObjectPtr> objects_ ABSL_GUARDED_BY(mu_);
};

struct Popped {
  absl::Status status;
  std::vector<std::string> deltas;
  bool is_in_initial_list = false;
};

// Pops one key; `result` is what the process function returns.
Popped PopOne(DeltaFIFO& fifo, absl::Status result = absl::OkStatus()) {
  Popped p;
  p.status = fifo.Pop([&](const Deltas& deltas, bool initial) {
    p.deltas = Describe(deltas);
    p.is_in_initial_list = initial;
    return result;
  });
  return p;
}

DeltaFIFO::Options WithKnown(KeyListerGetter* known, bool replaced = true) {
  DeltaFIFO::Options o;
  o.known_objects = known;
  o.emit_delta_type_replaced = replaced;
  return o;
}

TEST(DeltaTypeTest, NamesMatchClientGo) {
  EXPECT_EQ(DeltaTypeName(DeltaType::kAdded), "Added");
  EXPECT_EQ(DeltaTypeName(DeltaType::kUpdated), "Updated");
  EXPECT_EQ(DeltaTypeName(DeltaType::kDeleted), "Deleted");
  EXPECT_EQ(DeltaTypeName(DeltaType::kReplaced), "Replaced");
  EXPECT_EQ(DeltaTypeName(DeltaType::kSync), "Sync");
}

TEST(DeltaFIFOTest, PopsKeysInTheOrderTheyFirstBecamePending) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  ASSERT_TRUE(fifo.Add(Obj("b", "1")).ok());
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Add(Obj("c", "1")).ok());

  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a", "ns/b", "ns/c"));
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/a@1", "Updated:ns/a@2"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/b@1"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/c@1"));
  EXPECT_EQ(fifo.Len(), 0u);
}

TEST(DeltaFIFOTest, KeyIsQueuedOnceWithAllItsDeltasOldestFirst) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Update(Obj("a", "3")).ok());

  EXPECT_EQ(fifo.Len(), 1u);
  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a"));
  absl::optional<Deltas> queued = fifo.GetByKey("ns/a");
  ASSERT_TRUE(queued.has_value());
  EXPECT_THAT(Describe(*queued),
              ElementsAre("Added:ns/a@1", "Updated:ns/a@2", "Updated:ns/a@3"));
  ASSERT_EQ(fifo.List().size(), 1u);
  EXPECT_EQ(fifo.List()[0]->resource_version(), "3");
  absl::optional<Deltas> by_obj = fifo.Get(Obj("a", "9"));
  ASSERT_TRUE(by_obj.has_value());
  EXPECT_EQ(by_obj->size(), 3u);
  EXPECT_FALSE(fifo.GetByKey("ns/missing").has_value());
}

TEST(DeltaFIFOTest, AnInitialListTellsTheCacheHowManyKeysAreComing) {
  FakeKnownObjects known;
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(
      fifo.Replace({Obj("a", "1"), Obj("b", "1"), Obj("c", "1")}, "1").ok());
  EXPECT_THAT(known.reserved(), ElementsAre(3u));
  // A relist onto a cache that holds objects is no such hint.
  while (!fifo.HasSynced()) ASSERT_TRUE(PopOne(fifo).status.ok());
  known.Set(Obj("a", "1"));
  ASSERT_TRUE(fifo.Replace({Obj("a", "2")}, "2").ok());
  EXPECT_THAT(known.reserved(), ElementsAre(3u));
}

TEST(DeltaFIFOTest, NullObjectsAreRejected) {
  DeltaFIFO fifo({});
  EXPECT_EQ(fifo.Add(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fifo.Update(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fifo.Delete(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fifo.Replace({Obj("a", "1"), nullptr}, "1").code(),
            absl::StatusCode::kInvalidArgument);
  // A rejected Replace queues nothing.
  EXPECT_EQ(fifo.Len(), 0u);
  EXPECT_EQ(fifo.AddIfNotPresent("ns/a", {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeltaFIFOTest, RequeueStatusPutsTheDeltasBackAndPopReturnsTheCause) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  ASSERT_TRUE(fifo.Add(Obj("b", "1")).ok());

  Popped first =
      PopOne(fifo, RequeueStatus(absl::UnavailableError("store busy")));
  EXPECT_EQ(first.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(first.status.message(), "store busy");
  EXPECT_FALSE(IsRequeue(first.status));
  // Requeued behind b.
  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/b", "ns/a"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/b@1"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/a@1"));
}

TEST(DeltaFIFOTest, RequeueOfOkCauseIsAnAbortedRequeue) {
  absl::Status s = RequeueStatus(absl::OkStatus());
  EXPECT_TRUE(IsRequeue(s));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(IsRequeue(absl::AbortedError("x")));
}

TEST(DeltaFIFOTest, ProcessErrorWithoutRequeueDropsTheDeltas) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  Popped p = PopOne(fifo, absl::InternalError("handler failed"));
  EXPECT_EQ(p.status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(fifo.Len(), 0u);
}

TEST(DeltaFIFOTest, AddIfNotPresentDoesNotReplaceQueuedDeltas) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  ASSERT_TRUE(
      fifo.AddIfNotPresent("ns/a", {Delta{DeltaType::kAdded, Obj("a", "1")}})
          .ok());
  ASSERT_TRUE(
      fifo.AddIfNotPresent("ns/b", {Delta{DeltaType::kAdded, Obj("b", "1")}})
          .ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Updated:ns/a@2"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/b@1"));
}

TEST(DedupDeltasTest, DeleteAfterTombstoneKeepsTheRealDelete) {
  Deltas d = {Delta{DeltaType::kDeleted, Obj("a", "1"), true},
              Delta{DeltaType::kDeleted, Obj("a", "2")}};
  DedupDeltas(d);
  EXPECT_THAT(Describe(d), ElementsAre("Deleted:ns/a@2"));
}

TEST(DedupDeltasTest, TombstoneAfterDeleteKeepsTheRealDelete) {
  Deltas d = {Delta{DeltaType::kDeleted, Obj("a", "2")},
              Delta{DeltaType::kDeleted, Obj("a", "1"), true}};
  DedupDeltas(d);
  EXPECT_THAT(Describe(d), ElementsAre("Deleted:ns/a@2"));
}

TEST(DedupDeltasTest, TwoTombstonesKeepTheNewer) {
  Deltas d = {Delta{DeltaType::kDeleted, Obj("a", "1"), true},
              Delta{DeltaType::kDeleted, Obj("a", "2"), true}};
  DedupDeltas(d);
  EXPECT_THAT(Describe(d), ElementsAre("Deleted?:ns/a@2"));
}

TEST(DedupDeltasTest, NonDeletionsAreNotCollapsed) {
  Deltas d = {Delta{DeltaType::kUpdated, Obj("a", "1")},
              Delta{DeltaType::kUpdated, Obj("a", "1")},
              Delta{DeltaType::kDeleted, Obj("a", "1")}};
  DedupDeltas(d);
  EXPECT_EQ(d.size(), 3u);
}

TEST(DeltaFIFOTest, WatchDeleteThenRelistTombstoneCollapsesToTheRealDelete) {
  FakeKnownObjects known;
  known.Set(Obj("a", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Delete(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Replace({}, "10").ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Deleted:ns/a@2"));
}

TEST(DeltaFIFOTest, RelistTombstoneThenWatchDeleteCollapsesToTheRealDelete) {
  FakeKnownObjects known;
  known.Set(Obj("a", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Replace({}, "10").ok());
  ASSERT_THAT(Describe(*fifo.GetByKey("ns/a")), ElementsAre("Deleted?:ns/a@1"));
  ASSERT_TRUE(fifo.Delete(Obj("a", "2")).ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Deleted:ns/a@2"));
}

TEST(DeltaFIFOTest, DeleteOfObjectNeitherKnownNorQueuedIsIgnored) {
  FakeKnownObjects known;
  DeltaFIFO with_known(WithKnown(&known));
  ASSERT_TRUE(with_known.Delete(Obj("a", "1")).ok());
  EXPECT_EQ(with_known.Len(), 0u);

  DeltaFIFO without_known({});
  ASSERT_TRUE(without_known.Delete(Obj("a", "1")).ok());
  EXPECT_EQ(without_known.Len(), 0u);
}

TEST(DeltaFIFOTest, DeleteOfKnownOrQueuedObjectIsQueued) {
  FakeKnownObjects known;
  known.Set(Obj("a", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Delete(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Add(Obj("b", "1")).ok());
  ASSERT_TRUE(fifo.Delete(Obj("b", "2")).ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Deleted:ns/a@2"));
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/b@1", "Deleted:ns/b@2"));
}

TEST(DeltaFIFOTest, ReplaceTombstonesKnownKeysMissingFromTheList) {
  FakeKnownObjects known;
  known.Set(Obj("a", "1"));
  known.Set(Obj("b", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Replace({Obj("a", "2")}, "10").ok());

  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/a@2"));
  Popped b = PopOne(fifo);
  EXPECT_THAT(b.deltas, ElementsAre("Deleted?:ns/b@1"));
  EXPECT_EQ(fifo.Len(), 0u);
}

TEST(DeltaFIFOTest, ReplaceTombstoneForAQueuedKeyCarriesTheNewestQueuedObject) {
  // The store still holds b@1 but b@2 is queued: the tombstone must not carry
  // the older state.
  FakeKnownObjects known;
  known.Set(Obj("b", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Update(Obj("b", "2")).ok());
  ASSERT_TRUE(fifo.Replace({}, "10").ok());
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Updated:ns/b@2", "Deleted?:ns/b@2"));
}

TEST(DeltaFIFOTest, ReplaceTombstonesQueuedButUnknownKeysMissingFromTheList) {
  // c was added by the watch but not yet popped into the store when the
  // relist found it gone; without a tombstone it would be cached forever.
  FakeKnownObjects known;
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Add(Obj("c", "1")).ok());
  ASSERT_TRUE(fifo.Replace({}, "10").ok());
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/c@1", "Deleted?:ns/c@1"));
}

TEST(DeltaFIFOTest, ReplaceWithoutKnownObjectsTombstonesQueuedKeysMissing) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  ASSERT_TRUE(fifo.Add(Obj("b", "1")).ok());
  ASSERT_TRUE(fifo.Replace({Obj("a", "2")}, "10").ok());

  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/a@1", "Replaced:ns/a@2"));
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/b@1", "Deleted?:ns/b@1"));
}

TEST(DeltaFIFOTest, ReplaceSkipsTombstoneWhenTheKnownObjectCannotBeFound) {
  FakeKnownObjects known;
  known.AddPhantomKey("ns/ghost");
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Replace({Obj("a", "1")}, "10").ok());
  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/a@1"));
  // The skipped tombstone is not owed to the initial list either.
  EXPECT_TRUE(fifo.HasSynced());
}

TEST(DeltaFIFOTest, ReplaceEmitsSyncWhenReplacedTypeIsDisabled) {
  FakeKnownObjects known;
  known.Set(Obj("b", "1"));
  DeltaFIFO fifo(WithKnown(&known, /*replaced=*/false));
  ASSERT_TRUE(fifo.Replace({Obj("a", "1")}, "10").ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Sync:ns/a@1"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Deleted?:ns/b@1"));
}

TEST(DeltaFIFOTest, ResyncQueuesSyncOnlyForKnownKeysWithoutQueuedDeltas) {
  FakeKnownObjects known;
  known.Set(Obj("a", "1"));
  known.Set(Obj("b", "1"));
  known.AddPhantomKey("ns/ghost");
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Resync().ok());

  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a", "ns/b"));
  // a keeps only its newer queued update; no Sync with the stale a@1.
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Updated:ns/a@2"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Sync:ns/b@1"));
}

TEST(DeltaFIFOTest, ResyncWithoutKnownObjectsDoesNothing) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Resync().ok());
  EXPECT_EQ(fifo.Len(), 0u);
}

TEST(DeltaFIFOTest, HasSyncedOnlyAfterTheFirstReplaceIsPoppedEntirely) {
  FakeKnownObjects known;
  known.Set(Obj("old", "1"));
  DeltaFIFO fifo(WithKnown(&known));
  EXPECT_FALSE(fifo.HasSynced());
  // Initial list: a, b and a tombstone for old.
  ASSERT_TRUE(fifo.Replace({Obj("a", "1"), Obj("b", "1")}, "10").ok());
  EXPECT_FALSE(fifo.HasSynced());

  Popped a = PopOne(fifo);
  EXPECT_TRUE(a.is_in_initial_list);
  EXPECT_FALSE(fifo.HasSynced());
  Popped b = PopOne(fifo);
  EXPECT_TRUE(b.is_in_initial_list);
  EXPECT_FALSE(fifo.HasSynced());
  Popped old = PopOne(fifo);
  EXPECT_THAT(old.deltas, ElementsAre("Deleted?:ns/old@1"));
  EXPECT_TRUE(old.is_in_initial_list);
  EXPECT_TRUE(fifo.HasSynced());

  // Later events, including a second Replace, are not part of the initial
  // list and do not un-sync.
  ASSERT_TRUE(fifo.Replace({Obj("c", "1")}, "11").ok());
  EXPECT_TRUE(fifo.HasSynced());
  Popped c = PopOne(fifo);
  EXPECT_FALSE(c.is_in_initial_list);
}

TEST(DeltaFIFOTest, ReplaceAppliedPublishesAListWhenNothingIsQueued) {
  DeltaFIFO fifo(DeltaFIFO::Options{});
  std::vector<bool> calls;
  // The consumer refuses: nothing changes.
  EXPECT_FALSE(fifo.ReplaceApplied("5", [&](bool initial) {
    calls.push_back(initial);
    return false;
  }));
  EXPECT_FALSE(fifo.HasSynced());
  EXPECT_EQ(fifo.AppliedResourceVersion(), "") << "refused: nothing applied";
  // The consumer applies the initial list itself: synced at once, nothing
  // to pop.
  EXPECT_TRUE(fifo.ReplaceApplied("5", [&](bool initial) {
    calls.push_back(initial);
    return true;
  }));
  EXPECT_TRUE(fifo.HasSynced());
  EXPECT_EQ(fifo.Len(), 0u);
  // A later one is no longer the initial list.
  EXPECT_TRUE(fifo.ReplaceApplied("5", [&](bool initial) {
    calls.push_back(initial);
    return true;
  }));
  EXPECT_THAT(calls, ElementsAre(true, true, false));
  // The list's RV is applied with it, in the same critical section.
  EXPECT_EQ(fifo.AppliedResourceVersion(), "5");
}

TEST(DeltaFIFOTest, ReplaceAppliedIsRefusedWhileKeysAreQueued) {
  DeltaFIFO fifo(DeltaFIFO::Options{});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  bool called = false;
  EXPECT_FALSE(fifo.ReplaceApplied("5", [&](bool) {
    called = true;
    return true;
  }));
  EXPECT_FALSE(called) << "a queued event must reach the store first";
  EXPECT_EQ(fifo.Len(), 1u);
}

TEST(DeltaFIFOTest, InitialReplaceWithDuplicateKeysOwesOnePopPerKey) {
  // The initial-list path (nothing queued, nothing known) keeps no set of
  // listed keys; a key listed twice must still count once.
  FakeKnownObjects known;
  DeltaFIFO fifo(WithKnown(&known));
  ASSERT_TRUE(
      fifo.Replace({Obj("a", "1"), Obj("b", "1"), Obj("a", "2")}, "9").ok());
  EXPECT_EQ(fifo.Len(), 2u);
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Replaced:ns/a@1", "Replaced:ns/a@2"));
  EXPECT_FALSE(fifo.HasSynced());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/b@1"));
  EXPECT_TRUE(fifo.HasSynced());
  // A relist after that takes the full path: vanished keys get tombstones.
  known.Set(Obj("a", "2"));
  known.Set(Obj("b", "1"));
  ASSERT_TRUE(fifo.Replace({Obj("b", "3")}, "10").ok());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/b@3"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Deleted?:ns/a@2"));
}

TEST(DeltaFIFOTest, HasSyncedCountsPopsNotEventsDuringTheInitialList) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Replace({Obj("a", "1"), Obj("b", "1")}, "10").ok());
  // An update to an initial-list key joins its pending deltas.
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  EXPECT_FALSE(fifo.HasSynced());
  Popped a = PopOne(fifo);
  EXPECT_THAT(a.deltas, ElementsAre("Replaced:ns/a@1", "Updated:ns/a@2"));
  EXPECT_TRUE(a.is_in_initial_list);
  EXPECT_FALSE(fifo.HasSynced());
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/b@1"));
  EXPECT_TRUE(fifo.HasSynced());
}

TEST(DeltaFIFOTest, HasSyncedAtOnceWhenAnEventPrecedesTheFirstReplace) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  EXPECT_TRUE(fifo.HasSynced());
  Popped a = PopOne(fifo);
  EXPECT_FALSE(a.is_in_initial_list);
}

TEST(DeltaFIFOTest, EmptyFirstReplaceSyncsImmediately) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Replace({}, "10").ok());
  EXPECT_TRUE(fifo.HasSynced());
}

TEST(DeltaFIFOTest, PopBlocksUntilAnotherThreadAddsAKey) {
  DeltaFIFO fifo({});
  Popped popped;
  std::thread consumer([&] { popped = PopOne(fifo); });
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  consumer.join();
  EXPECT_TRUE(popped.status.ok());
  EXPECT_THAT(popped.deltas, ElementsAre("Added:ns/a@1"));
}

TEST(DeltaFIFOTest, CloseUnblocksABlockedPop) {
  DeltaFIFO fifo({});
  absl::Notification processed;
  absl::Status status;
  std::thread consumer([&] {
    status = fifo.Pop([&](const Deltas&, bool) {
      processed.Notify();
      return absl::OkStatus();
    });
  });
  fifo.Close();
  consumer.join();
  EXPECT_TRUE(IsFifoClosed(status));
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(processed.HasBeenNotified());
  EXPECT_TRUE(fifo.IsClosed());
}

TEST(DeltaFIFOTest, PopAfterCloseDrainsQueuedKeysThenReportsClosed) {
  DeltaFIFO fifo({});
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  fifo.Close();
  Popped a = PopOne(fifo);
  EXPECT_TRUE(a.status.ok());
  EXPECT_THAT(a.deltas, ElementsAre("Added:ns/a@1"));
  Popped none = PopOne(fifo);
  EXPECT_TRUE(IsFifoClosed(none.status));
  EXPECT_THAT(none.deltas, IsEmpty());
}

// Producers and a consumer (and, with `process_when_idle`, the producers
// processing when the queue is empty) on one FIFO: every delta of a key must
// be processed once, with a strictly larger version than the previous one
// seen for that key, across pops.
void ExpectConcurrentUseKeepsPerKeyOrder(bool process_when_idle) {
  constexpr int kProducers = 4;
  constexpr int kKeysPerProducer = 25;
  constexpr int kUpdatesPerKey = 60;
  // Only ever called under the FIFO's lock, so the state needs no other.
  absl::flat_hash_map<std::string, int64_t> last_version;
  int64_t deltas_seen = 0;
  bool order_ok = true;
  const DeltaFIFO::ProcessFn process = [&](const Deltas& deltas, bool) {
    for (const Delta& d : deltas) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d.object->resource_version(), &v)) {
        order_ok = false;
      }
      auto [it, inserted] = last_version.try_emplace(d.object->Key(), v);
      if (!inserted) {
        if (v <= it->second) order_ok = false;
        it->second = v;
      }
      ++deltas_seen;
    }
    return absl::OkStatus();
  };
  DeltaFIFO::Options options;
  if (process_when_idle) options.process_when_idle = process;
  DeltaFIFO fifo(options);

  std::thread consumer([&] {
    while (!IsFifoClosed(fifo.Pop(process))) {
    }
  });

  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&fifo, p] {
      for (int u = 1; u <= kUpdatesPerKey; ++u) {
        for (int k = 0; k < kKeysPerProducer; ++k) {
          std::string name = absl::StrCat("p", p, "-k", k);
          std::string rv = absl::StrCat(u);
          absl::Status s =
              u == 1 ? fifo.Add(Obj(name, rv)) : fifo.Update(Obj(name, rv));
          if (!s.ok()) return;
        }
      }
    });
  }
  for (std::thread& t : producers) t.join();
  fifo.Close();
  consumer.join();

  EXPECT_TRUE(order_ok);
  EXPECT_EQ(deltas_seen, kProducers * kKeysPerProducer * kUpdatesPerKey);
  EXPECT_EQ(last_version.size(),
            static_cast<size_t>(kProducers * kKeysPerProducer));
  for (const auto& [key, v] : last_version) {
    EXPECT_EQ(v, kUpdatesPerKey) << key;
  }
}

TEST(DeltaFIFOTest, ConcurrentProducersAndConsumerPreservePerKeyOrder) {
  ExpectConcurrentUseKeepsPerKeyOrder(/*process_when_idle=*/false);
}

TEST(DeltaFIFOTest, ProducersProcessingWhenIdlePreservePerKeyOrder) {
  ExpectConcurrentUseKeepsPerKeyOrder(/*process_when_idle=*/true);
}

TEST(DeltaFIFOTest, KeyOfUsesTheNewestDelta) {
  Deltas d = {Delta{DeltaType::kAdded, Obj("a", "1")},
              Delta{DeltaType::kDeleted, Obj("a", "2"), true}};
  EXPECT_EQ(KeyOf(d), "ns/a");
  EXPECT_EQ(KeyOf(d.front()), "ns/a");
  EXPECT_EQ(KeyOf(Deltas{}), "");
  EXPECT_EQ(Oldest(d)->object->resource_version(), "1");
  EXPECT_EQ(Newest(d)->object->resource_version(), "2");
  EXPECT_EQ(Newest(Deltas{}), nullptr);
  ObjectPtr cluster_scoped = Obj("node-1", "1", /*ns=*/"");
  EXPECT_EQ(KeyOf(Delta{DeltaType::kAdded, cluster_scoped}), "node-1");
}

// The RV a consumer's store reflects: noted RVs become "applied" only once
// everything queued before the note has been processed, never earlier.
TEST(DeltaFIFOTest, AppliedResourceVersionFollowsProcessingNotReceipt) {
  DeltaFIFO fifo{DeltaFIFO::Options{}};
  EXPECT_EQ(fifo.AppliedResourceVersion(), "");
  ASSERT_TRUE(fifo.Replace({Obj("a", "3"), Obj("b", "4")}, "5").ok());
  fifo.NoteResourceVersion("5");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "") << "received, not applied";
  std::string seen_inside;
  ASSERT_TRUE(fifo.Pop([&](const Deltas&, bool) {
                    // Callable from a process function (no deadlock).
                    seen_inside = fifo.AppliedResourceVersion();
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(seen_inside, "");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "");  // "b" still queued
  ASSERT_TRUE(
      fifo.Pop([](const Deltas&, bool) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(fifo.AppliedResourceVersion(), "5");
  // A bookmark with nothing queued applies at once.
  fifo.NoteResourceVersion("7");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "7");
  // An event waits for its Pop; a requeued one keeps it waiting.
  ASSERT_TRUE(fifo.Update(Obj("a", "8")).ok());
  fifo.NoteResourceVersion("8");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "7");
  EXPECT_FALSE(fifo.Pop([](const Deltas&, bool) {
                     return RequeueStatus(absl::UnavailableError("later"));
                   })
                   .ok());
  EXPECT_EQ(fifo.AppliedResourceVersion(), "7");
  ASSERT_TRUE(
      fifo.Pop([](const Deltas&, bool) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(fifo.AppliedResourceVersion(), "8");
}

// The server went back (etcd restored from a backup): until the relist
// that brings the store to the server's line has been processed, the store
// is at no resourceVersion of it, not at the later one it had.
TEST(DeltaFIFOTest, AResourceVersionNotedBeforeTheAppliedOneClearsIt) {
  DeltaFIFO fifo{DeltaFIFO::Options{}};
  ASSERT_TRUE(fifo.Replace({Obj("a", "3")}, "9").ok());
  fifo.NoteResourceVersion("9");
  ASSERT_TRUE(
      fifo.Pop([](const Deltas&, bool) { return absl::OkStatus(); }).ok());
  ASSERT_EQ(fifo.AppliedResourceVersion(), "9");
  ASSERT_TRUE(fifo.Replace({Obj("a", "2")}, "2").ok());
  fifo.NoteResourceVersion("2");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "");
  ASSERT_TRUE(
      fifo.Pop([](const Deltas&, bool) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(fifo.AppliedResourceVersion(), "2");
}

// What a FIFO's process_when_idle was handed, in order.
struct IdleProcessed {
  std::vector<std::vector<std::string>> deltas;
  std::vector<bool> initial;
  // Returned by the next call (then reset to OK).
  absl::Status next_result;
};

DeltaFIFO::Options ProcessingWhenIdle(IdleProcessed* seen,
                                      KeyListerGetter* known = nullptr) {
  DeltaFIFO::Options o;
  o.known_objects = known;
  o.process_when_idle = [seen](const Deltas& deltas, bool initial) {
    seen->deltas.push_back(Describe(deltas));
    seen->initial.push_back(initial);
    return std::exchange(seen->next_result, absl::OkStatus());
  };
  return o;
}

TEST(DeltaFIFOProcessWhenIdleTest, AnEventOnAnEmptyQueueIsProcessedAtOnce) {
  IdleProcessed seen;
  FakeKnownObjects known;
  known.Set(Obj("c", "1"));
  DeltaFIFO fifo(ProcessingWhenIdle(&seen, &known));
  ASSERT_TRUE(fifo.Add(Obj("a", "2")).ok());
  ASSERT_TRUE(fifo.Update(Obj("a", "3")).ok());
  ASSERT_TRUE(fifo.Delete(Obj("c", "4")).ok());
  // Neither queued nor known: dropped, as without the option.
  ASSERT_TRUE(fifo.Delete(Obj("gone", "5")).ok());
  EXPECT_THAT(seen.deltas, ElementsAre(ElementsAre("Added:ns/a@2"),
                                       ElementsAre("Updated:ns/a@3"),
                                       ElementsAre("Deleted:ns/c@4")));
  EXPECT_THAT(seen.initial, ElementsAre(false, false, false));
  EXPECT_EQ(fifo.Len(), 0u) << "nothing left for the consumer";
  // The noted RV applies at once: every delta is processed.
  fifo.NoteResourceVersion("4");
  EXPECT_EQ(fifo.AppliedResourceVersion(), "4");
}

TEST(DeltaFIFOProcessWhenIdleTest, ABacklogStaysTheConsumersInOrder) {
  IdleProcessed seen;
  DeltaFIFO fifo(ProcessingWhenIdle(&seen));
  // A relist's items are queued for Pop (never processed by the producer).
  ASSERT_TRUE(fifo.Replace({Obj("a", "1"), Obj("b", "1")}, "1").ok());
  // Events behind a backlog only queue: processing them now would pass
  // the keys queued before them.
  ASSERT_TRUE(fifo.Add(Obj("c", "2")).ok());
  ASSERT_TRUE(fifo.Update(Obj("a", "3")).ok());
  EXPECT_THAT(seen.deltas, IsEmpty());
  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a", "ns/b", "ns/c"));
  Popped a = PopOne(fifo);
  EXPECT_THAT(a.deltas, ElementsAre("Replaced:ns/a@1", "Updated:ns/a@3"));
  EXPECT_TRUE(a.is_in_initial_list);
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Replaced:ns/b@1"));
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/c@2"));
  EXPECT_TRUE(fifo.HasSynced());
  // Drained: the producer processes again.
  ASSERT_TRUE(fifo.Update(Obj("b", "4")).ok());
  EXPECT_THAT(seen.deltas, ElementsAre(ElementsAre("Updated:ns/b@4")));
  EXPECT_EQ(fifo.Len(), 0u);
}

TEST(DeltaFIFOProcessWhenIdleTest, ARequeueGoesBackToTheConsumer) {
  IdleProcessed seen;
  DeltaFIFO fifo(ProcessingWhenIdle(&seen));
  seen.next_result = RequeueStatus(absl::UnavailableError("later"));
  // The Add itself succeeded; its processing asked to be retried.
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  ASSERT_EQ(seen.deltas.size(), 1u);
  EXPECT_THAT(fifo.ListKeys(), ElementsAre("ns/a"));
  // A later event for the key joins the requeued deltas, oldest first.
  ASSERT_TRUE(fifo.Update(Obj("a", "2")).ok());
  EXPECT_EQ(seen.deltas.size(), 1u);
  EXPECT_THAT(PopOne(fifo).deltas,
              ElementsAre("Added:ns/a@1", "Updated:ns/a@2"));
}

TEST(DeltaFIFOProcessWhenIdleTest, NotOnceClosed) {
  IdleProcessed seen;
  DeltaFIFO fifo(ProcessingWhenIdle(&seen));
  fifo.Close();
  ASSERT_TRUE(fifo.Add(Obj("a", "1")).ok());
  EXPECT_THAT(seen.deltas, IsEmpty());
  // Pop drains what was queued after Close.
  EXPECT_THAT(PopOne(fifo).deltas, ElementsAre("Added:ns/a@1"));
  EXPECT_TRUE(IsFifoClosed(PopOne(fifo).status));
}

TEST(DeltaFIFOProcessWhenIdleTest, ABlockedConsumerIsNotWokenForIt) {
  // The consumer waits in Pop while the producer adds to an empty queue:
  // the producer processes the event and the Pop keeps waiting, then takes
  // the next backlog (a resync) and only that.
  IdleProcessed seen;
  FakeKnownObjects known;
  known.Set(Obj("k", "1"));
  DeltaFIFO fifo(ProcessingWhenIdle(&seen, &known));
  absl::Notification popped;
  std::vector<std::string> consumer_got;
  std::thread consumer([&] {
    ASSERT_TRUE(fifo.Pop([&](const Deltas& deltas, bool) {
                      consumer_got = Describe(deltas);
                      return absl::OkStatus();
                    })
                    .ok());
    popped.Notify();
  });
  ASSERT_TRUE(fifo.Add(Obj("a", "2")).ok());
  EXPECT_THAT(seen.deltas, ElementsAre(ElementsAre("Added:ns/a@2")));
  EXPECT_FALSE(popped.HasBeenNotified());
  ASSERT_TRUE(fifo.Resync().ok());
  consumer.join();
  EXPECT_THAT(consumer_got, ElementsAre("Sync:ns/k@1"));
  EXPECT_EQ(seen.deltas.size(), 1u);
}

}  // namespace
}  // namespace informer

#include "informer/cache/list_reconciler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"

namespace informer {
namespace {

// A fresh object each call, as a list decodes one: equal content is never
// the same pointer.
ObjectPtr ConfigMap(absl::string_view name, absl::string_view rv,
                    absl::string_view uid = "") {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":")", uid.empty() ? name : uid,
      R"(","resourceVersion":")", rv, R"("},"data":{"k":"v"}})"));
  EXPECT_TRUE(obj.ok()) << obj.status();
  return std::move(obj).value();
}

// "Type name rv" for each delta of a key, tombstones marked.
std::vector<std::string> Describe(const Deltas& deltas) {
  std::vector<std::string> out;
  for (const Delta& d : deltas) {
    out.push_back(absl::StrCat(DeltaTypeName(d.type), " ", d.object->name(),
                               " ", d.object->resource_version(),
                               d.final_state_unknown ? " tombstone" : ""));
  }
  return out;
}

// A cache of `same`, `changed`, `gone` and `renamed` (all at RV 1), a FIFO
// fed into it, and a reconciler committing into the FIFO.
class ListReconcilerTest : public ::testing::Test {
 protected:
  ListReconcilerTest() : fifo_(FifoOptions(&cache_)) {
    for (const char* name : {"same", "changed", "gone", "recreated"}) {
      cache_.Add(ConfigMap(name, "1"));
    }
  }

  static DeltaFIFO::Options FifoOptions(Indexer* cache) {
    DeltaFIFO::Options o;
    o.known_objects = cache;
    return o;
  }

  ListReconciler MakeReconciler() {
    return ListReconciler(
        &cache_, cache_.Size(),
        [this](const std::vector<ObjectPtr>& list, absl::string_view) {
          absl::StatusOr<DeltaFIFO::ReconcileCounts> c =
              fifo_.ReplaceReconciled(
                  list, [this](const std::vector<ObjectPtr>& unchanged) {
                    unchanged_ = unchanged;
                  });
          if (!c.ok()) return false;
          counts_ = *c;
          return true;
        });
  }

  // The server's state now: `same` as cached, `changed` at RV 2, `gone`
  // deleted, `recreated` under another uid, `added` new.
  std::vector<ObjectPtr> ServerList() {
    return {ConfigMap("same", "1"), ConfigMap("changed", "2"),
            ConfigMap("recreated", "3", "other-uid"), ConfigMap("added", "4")};
  }

  Indexer cache_;
  DeltaFIFO fifo_;
  std::vector<ObjectPtr> unchanged_;
  DeltaFIFO::ReconcileCounts counts_;
};

TEST_F(ListReconcilerTest, SameVersionIsSameUidAndResourceVersion) {
  EXPECT_TRUE(
      ListReconciler::SameVersion(*ConfigMap("a", "1"), *ConfigMap("a", "1")));
  EXPECT_FALSE(
      ListReconciler::SameVersion(*ConfigMap("a", "1"), *ConfigMap("a", "2")));
  EXPECT_FALSE(ListReconciler::SameVersion(*ConfigMap("a", "1", "u1"),
                                           *ConfigMap("a", "1", "u2")));
  EXPECT_FALSE(
      ListReconciler::SameVersion(*ConfigMap("a", ""), *ConfigMap("a", "")))
      << "without a resourceVersion nothing says they are the same";
}

TEST_F(ListReconcilerTest, AnUnchangedItemIsDroppedAtOnceForTheCachedObject) {
  const ObjectPtr cached = cache_.GetByKey("ns/same");
  ListReconciler r = MakeReconciler();
  ObjectPtr listed = ConfigMap("same", "1");
  std::weak_ptr<const Object> listed_copy = listed;
  ASSERT_TRUE(r.Add(listed).ok());
  listed.reset();  // what the list's source does once Add returns
  EXPECT_TRUE(listed_copy.expired()) << "the list holds no second copy";
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.reconciled()[0].get(), cached.get());
  EXPECT_EQ(r.kept(), 1u);
  EXPECT_EQ(fifo_.Len(), 0u) << "nothing is visible before the commit";
}

TEST_F(ListReconcilerTest, OnlyChangedAddedVanishedAndRecreatedBecomeDeltas) {
  const ObjectPtr cached_same = cache_.GetByKey("ns/same");
  ListReconciler r = MakeReconciler();
  for (const ObjectPtr& obj : ServerList()) ASSERT_TRUE(r.Add(obj).ok());
  EXPECT_EQ(r.kept(), 1u);
  ASSERT_TRUE(r.Commit({}, "9"));

  EXPECT_EQ(counts_.unchanged, 1u);
  EXPECT_EQ(counts_.queued, 3u);
  EXPECT_EQ(counts_.recreated, 1u);
  EXPECT_EQ(counts_.vanished, 1u);
  ASSERT_EQ(unchanged_.size(), 1u);
  EXPECT_EQ(unchanged_[0].get(), cached_same.get())
      << "the unchanged object is the cached one itself";
  EXPECT_FALSE(fifo_.GetByKey("ns/same").has_value()) << "no delta for it";
  EXPECT_EQ(cache_.GetByKey("ns/same").get(), cached_same.get());

  EXPECT_EQ(Describe(*fifo_.GetByKey("ns/changed")),
            std::vector<std::string>{"Replaced changed 2"});
  EXPECT_EQ(Describe(*fifo_.GetByKey("ns/added")),
            std::vector<std::string>{"Replaced added 4"});
  // The last state we had, as a tombstone.
  EXPECT_EQ(Describe(*fifo_.GetByKey("ns/gone")),
            std::vector<std::string>{"Deleted gone 1 tombstone"});
  // Another uid under the same name: a delete of the old object, then the
  // new one (an add once popped), never an update from one to the other.
  EXPECT_EQ(Describe(*fifo_.GetByKey("ns/recreated")),
            (std::vector<std::string>{"Deleted recreated 1 tombstone",
                                      "Replaced recreated 3"}));
  EXPECT_EQ(fifo_.GetByKey("ns/recreated")->front().object->uid(), "recreated");
  EXPECT_EQ(fifo_.Len(), 4u);
}

TEST_F(ListReconcilerTest, AnItemWhoseKeyHasQueuedDeltasIsQueuedAfterThem) {
  // A watch event not yet popped when the list arrives: the comparison
  // with the store was against an older state.
  ASSERT_TRUE(fifo_.Update(ConfigMap("same", "5")).ok());
  ListReconciler r = MakeReconciler();
  const ObjectPtr cached_same = cache_.GetByKey("ns/same");
  ASSERT_TRUE(r.Add(ConfigMap("same", "1")).ok());
  ASSERT_TRUE(r.Commit({}, "9"));
  EXPECT_TRUE(unchanged_.empty());
  const Deltas deltas = *fifo_.GetByKey("ns/same");
  EXPECT_EQ(Describe(deltas),
            (std::vector<std::string>{"Updated same 5", "Replaced same 1"}));
  EXPECT_EQ(deltas.back().object.get(), cached_same.get())
      << "the kept object stands for the listed state";
}

TEST_F(ListReconcilerTest, ACacheChangedDuringTheListGetsTheListedState) {
  ListReconciler r = MakeReconciler();
  ASSERT_TRUE(r.Add(ConfigMap("same", "1")).ok());
  const ObjectPtr kept = r.reconciled()[0];
  // A backlog popped meanwhile replaced the store's object.
  cache_.Update(ConfigMap("same", "7"));
  ASSERT_TRUE(r.Commit({}, "9"));
  EXPECT_TRUE(unchanged_.empty());
  ASSERT_TRUE(fifo_.GetByKey("ns/same").has_value());
  EXPECT_EQ(fifo_.GetByKey("ns/same")->back().object.get(), kept.get());
}

TEST_F(ListReconcilerTest, ARefusedCommitChangesNothing) {
  const std::vector<ObjectPtr> before = cache_.List();
  ListReconciler r(
      &cache_, 0,
      [](const std::vector<ObjectPtr>&, absl::string_view) { return false; });
  for (const ObjectPtr& obj : ServerList()) ASSERT_TRUE(r.Add(obj).ok());
  EXPECT_FALSE(r.Commit({}, "9"));
  EXPECT_EQ(fifo_.Len(), 0u);
  EXPECT_EQ(cache_.Size(), before.size());
  for (const ObjectPtr& obj : before) {
    EXPECT_EQ(cache_.GetByKey(obj->Key()).get(), obj.get());
  }
}

TEST_F(ListReconcilerTest, AFirstReconciledReplaceDefinesTheInitialList) {
  ListReconciler r = MakeReconciler();
  for (const ObjectPtr& obj : ServerList()) ASSERT_TRUE(r.Add(obj).ok());
  EXPECT_FALSE(fifo_.HasSynced());
  ASSERT_TRUE(r.Commit({}, "9"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(fifo_.HasSynced());
    ASSERT_TRUE(fifo_
                    .Pop([](const Deltas&, bool initial) {
                      EXPECT_TRUE(initial);
                      return absl::OkStatus();
                    })
                    .ok());
  }
  EXPECT_TRUE(fifo_.HasSynced());
}

TEST(ReplaceReconciledTest, NeedsKnownObjectsAndNonNullItems) {
  DeltaFIFO bare({});
  auto none = [](const std::vector<ObjectPtr>&) {};
  EXPECT_TRUE(absl::IsFailedPrecondition(
      bare.ReplaceReconciled({ConfigMap("a", "1")}, none).status()));
  Indexer cache;
  DeltaFIFO::Options o;
  o.known_objects = &cache;
  DeltaFIFO fifo(o);
  EXPECT_TRUE(absl::IsInvalidArgument(
      fifo.ReplaceReconciled({ConfigMap("a", "1"), nullptr}, none).status()));
  EXPECT_EQ(fifo.Len(), 0u);
}

}  // namespace
}  // namespace informer

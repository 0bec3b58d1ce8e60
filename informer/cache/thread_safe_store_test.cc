#include "informer/cache/thread_safe_store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr absl::string_view kTagsIndex = "tags";

// A multi-valued index function: the comma-separated "tags" annotation.
IndexValues TagsIndexFunc(const Object& obj) {
  IndexValues values;
  const std::string* tags = obj.Annotation("tags");
  if (tags == nullptr) return values;
  for (absl::string_view tag : absl::StrSplit(*tags, ',', absl::SkipEmpty())) {
    values.emplace_back(tag);
  }
  return values;
}

Indexers TestIndexers() {
  return Indexers{{std::string(kNamespaceIndex), MetaNamespaceIndexFunc},
                  {std::string(kTagsIndex), TagsIndexFunc}};
}

ObjectPtr Obj(absl::string_view ns, absl::string_view name,
              absl::string_view tags = "", absl::string_view rv = "1") {
  ObjectBuilder builder;
  builder.SetNamespace(ns).SetName(name).SetResourceVersion(rv);
  if (!tags.empty()) builder.AddAnnotation("tags", tags);
  return builder.Build();
}

std::vector<std::string> Names(const std::vector<ObjectPtr>& objs) {
  std::vector<std::string> names;
  for (const ObjectPtr& obj : objs) names.emplace_back(obj->name());
  return names;
}

std::vector<std::string> NamesOrDie(
    const absl::StatusOr<std::vector<ObjectPtr>>& objs) {
  EXPECT_TRUE(objs.ok()) << objs.status();
  return objs.ok() ? Names(*objs) : std::vector<std::string>{};
}

std::vector<std::string> ValuesOrDie(
    const absl::StatusOr<std::vector<std::string>>& values) {
  EXPECT_TRUE(values.ok()) << values.status();
  return values.ok() ? *values : std::vector<std::string>{};
}

TEST(ThreadSafeStoreTest, GetReturnsTheSameObjectThatWasAdded) {
  ThreadSafeStore store;
  ObjectPtr a = Obj("ns", "a");
  store.Add("ns/a", a);
  EXPECT_EQ(store.Get("ns/a"), a);  // Shared, not copied.
  EXPECT_EQ(store.Get("ns/missing"), nullptr);
  EXPECT_EQ(store.Size(), 1u);
}

TEST(ThreadSafeStoreTest, UpdateReplacesTheObjectUnderTheKey) {
  ThreadSafeStore store;
  store.Add("ns/a", Obj("ns", "a", "", "1"));
  ObjectPtr newer = Obj("ns", "a", "", "2");
  store.Update("ns/a", newer);
  EXPECT_EQ(store.Get("ns/a"), newer);
  EXPECT_EQ(store.Size(), 1u);
}

TEST(ThreadSafeStoreTest, ListAndListKeysReturnEveryItem) {
  ThreadSafeStore store;
  store.Add("ns/a", Obj("ns", "a"));
  store.Add("ns/b", Obj("ns", "b"));
  store.Add("c", Obj("", "c"));
  EXPECT_THAT(Names(store.List()), UnorderedElementsAre("a", "b", "c"));
  EXPECT_THAT(store.ListKeys(), UnorderedElementsAre("ns/a", "ns/b", "c"));
}

TEST(ThreadSafeStoreTest, DeleteRemovesTheItemAndItsIndexEntries) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x,y"));
  store.Add("ns/b", Obj("ns", "b", "y"));
  store.Delete("ns/a");
  EXPECT_EQ(store.Get("ns/a"), nullptr);
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "x")), IsEmpty());
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "y")), ElementsAre("b"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kNamespaceIndex, "ns")),
              ElementsAre("b"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)),
              ElementsAre("y"));
}

TEST(ThreadSafeStoreTest, DeleteOfAnAbsentKeyChangesNothing) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x"));
  store.Delete("ns/zzz");
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "x")), ElementsAre("a"));
}

TEST(ThreadSafeStoreTest, MultiValueIndexEntriesMoveOnUpdate) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "red,green"));
  store.Update("ns/a", Obj("ns", "a", "green,blue", "2"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "red")), IsEmpty());
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "green")), ElementsAre("a"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "blue")), ElementsAre("a"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)),
              UnorderedElementsAre("green", "blue"));
}

TEST(ThreadSafeStoreTest, SingleValueIndexEntryMovesOnUpdate) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "red"));
  store.Update("ns/a", Obj("ns", "a", "blue", "2"));
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "red")), IsEmpty());
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "blue")),
              ElementsAre("ns/a"));
}

TEST(ThreadSafeStoreTest, UpdateWithUnchangedValuesKeepsIndexEntries) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "red,green"));
  ObjectPtr newer = Obj("ns", "a", "red,green", "2");
  store.Update("ns/a", newer);
  absl::StatusOr<std::vector<ObjectPtr>> red = store.ByIndex(kTagsIndex, "red");
  ASSERT_TRUE(red.ok());
  ASSERT_EQ(red->size(), 1u);
  EXPECT_EQ((*red)[0], newer);  // The bucket leads to the new object.
}

TEST(ThreadSafeStoreTest, EmptyValueSetsAreRemoved) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "ip-1"));
  store.Add("other/b", Obj("other", "b", "ip-2"));
  store.Update("ns/a", Obj("ns", "a", "ip-3", "2"));
  store.Delete("other/b");
  store.Update("ns/a", Obj("ns", "a", "", "3"));
  // No value lingers with an empty key set.
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)), IsEmpty());
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              ElementsAre("ns"));
}

TEST(ThreadSafeStoreTest, DuplicateValuesFromAnIndexFunctionCountOnce) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x,x"));
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "x")),
              ElementsAre("ns/a"));
  store.Delete("ns/a");
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)), IsEmpty());
}

TEST(ThreadSafeStoreTest, ByIndexAndIndexKeysReturnEverythingUnderAValue) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns1/a", Obj("ns1", "a", "x"));
  store.Add("ns1/b", Obj("ns1", "b", "x,y"));
  store.Add("ns2/c", Obj("ns2", "c", "y"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kNamespaceIndex, "ns1")),
              UnorderedElementsAre("a", "b"));
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "y")),
              UnorderedElementsAre("ns1/b", "ns2/c"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kNamespaceIndex, "nope")), IsEmpty());
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              UnorderedElementsAre("ns1", "ns2"));
}

TEST(ThreadSafeStoreTest, IndexReturnsObjectsSharingAnyValueOnlyOnce) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/x", Obj("ns", "x", "a"));
  store.Add("ns/y", Obj("ns", "y", "b"));
  store.Add("ns/z", Obj("ns", "z", "a,b"));
  store.Add("ns/w", Obj("ns", "w", "c"));
  // The probe need not be in the store.
  ObjectPtr probe = Obj("elsewhere", "probe", "a,b");
  EXPECT_THAT(NamesOrDie(store.Index(kTagsIndex, *probe)),
              UnorderedElementsAre("x", "y", "z"));
  ObjectPtr single = Obj("elsewhere", "single", "c");
  EXPECT_THAT(NamesOrDie(store.Index(kTagsIndex, *single)), ElementsAre("w"));
  ObjectPtr none = Obj("elsewhere", "none");
  EXPECT_THAT(NamesOrDie(store.Index(kTagsIndex, *none)), IsEmpty());
}

TEST(ThreadSafeStoreTest, UnknownIndexNameIsNotFoundAndNamed) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x"));
  ObjectPtr a = store.Get("ns/a");
  std::vector<absl::Status> statuses = {
      store.ByIndex("nosuch", "x").status(),
      store.IndexKeys("nosuch", "x").status(),
      store.ListIndexFuncValues("nosuch").status(),
      store.Index("nosuch", *a).status(),
  };
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(status.message()), HasSubstr("nosuch"));
  }
}

TEST(ThreadSafeStoreTest, GetIndexersReturnsTheRegisteredIndexes) {
  ThreadSafeStore store(TestIndexers());
  Indexers indexers = store.GetIndexers();
  ASSERT_EQ(indexers.size(), 2u);
  ASSERT_TRUE(indexers.contains(kTagsIndex));
  ObjectPtr obj = Obj("ns", "a", "p,q");
  EXPECT_THAT(indexers.at(kTagsIndex)(*obj), ElementsAre("p", "q"));
}

TEST(ThreadSafeStoreTest, AddIndexersOnAPopulatedStoreIndexesExistingItems) {
  ThreadSafeStore store;
  store.Add("ns1/a", Obj("ns1", "a", "x"));
  store.Add("ns2/b", Obj("ns2", "b", "x,y"));
  ASSERT_TRUE(store.AddIndexers(TestIndexers()).ok());
  EXPECT_THAT(NamesOrDie(store.ByIndex(kNamespaceIndex, "ns1")),
              ElementsAre("a"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "x")),
              UnorderedElementsAre("a", "b"));
  // Later writes maintain the new index too.
  store.Add("ns1/c", Obj("ns1", "c", "y"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "y")),
              UnorderedElementsAre("b", "c"));
  EXPECT_EQ(store.GetIndexers().size(), 2u);
}

TEST(ThreadSafeStoreTest, AddIndexersWithAConflictingNameFailsAndAddsNothing) {
  ThreadSafeStore store(
      {{std::string(kNamespaceIndex), MetaNamespaceIndexFunc}});
  store.Add("ns/a", Obj("ns", "a", "x"));
  absl::Status status = store.AddIndexers(TestIndexers());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(status.message()), HasSubstr("namespace"));
  EXPECT_EQ(store.GetIndexers().size(), 1u);
  EXPECT_EQ(store.ByIndex(kTagsIndex, "x").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ThreadSafeStoreTest, AddIndexersRejectsANullFunction) {
  ThreadSafeStore store;
  absl::Status status = store.AddIndexers({{"broken", IndexFunc()}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.GetIndexers().empty());
}

TEST(ThreadSafeStoreTest, ReplaceSwapsTheContentsAndRebuildsIndices) {
  ThreadSafeStore store(TestIndexers());
  store.Add("old/a", Obj("old", "a", "stale"));
  store.Add("keep/b", Obj("keep", "b", "x"));
  ItemMap items;
  ObjectPtr fresh_b = Obj("keep", "b", "y", "2");
  items.emplace("keep/b", fresh_b);
  items.emplace("new/c", Obj("new", "c", "y"));
  store.Replace(std::move(items), "42");

  EXPECT_THAT(store.ListKeys(), UnorderedElementsAre("keep/b", "new/c"));
  EXPECT_EQ(store.Get("keep/b"), fresh_b);
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              UnorderedElementsAre("keep", "new"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)),
              ElementsAre("y"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "y")),
              UnorderedElementsAre("b", "c"));
  // The rebuilt indexes are live: writes after Replace keep them exact.
  store.Delete("new/c");
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "y")), ElementsAre("b"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              ElementsAre("keep"));
}

TEST(ThreadSafeStoreTest, AdoptIfEmptyTakesAStagedStoreWithItsIndexes) {
  ThreadSafeStore staged(TestIndexers());
  staged.Add("a/x", Obj("a", "x", "red,blue"));
  staged.Add("b/y", Obj("b", "y", "red"));
  ThreadSafeStore store(TestIndexers());
  ASSERT_TRUE(store.AdoptIfEmpty(&staged));

  EXPECT_THAT(store.ListKeys(), UnorderedElementsAre("a/x", "b/y"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "red")),
              UnorderedElementsAre("x", "y"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              UnorderedElementsAre("a", "b"));
  // The staged store is left empty, with its index functions.
  EXPECT_EQ(staged.Size(), 0u);
  EXPECT_THAT(ValuesOrDie(staged.ListIndexFuncValues(kTagsIndex)), IsEmpty());
  // The adopted indexes are live: later writes keep them exact.
  store.Update("a/x", Obj("a", "x", "blue", "2"));
  store.Delete("b/y");
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "red")), IsEmpty());
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)),
              ElementsAre("blue"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              ElementsAre("a"));
}

TEST(ThreadSafeStoreTest, AdoptIfEmptyChangesNothingWhenTheStoreHoldsItems) {
  ThreadSafeStore staged(TestIndexers());
  staged.Add("a/x", Obj("a", "x", "red"));
  ThreadSafeStore store(TestIndexers());
  store.Add("c/z", Obj("c", "z", "green"));
  EXPECT_FALSE(store.AdoptIfEmpty(&staged));
  EXPECT_THAT(store.ListKeys(), ElementsAre("c/z"));
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)),
              ElementsAre("green"));
  EXPECT_THAT(staged.ListKeys(), ElementsAre("a/x"));
  EXPECT_THAT(NamesOrDie(staged.ByIndex(kTagsIndex, "red")), ElementsAre("x"));
}

TEST(ThreadSafeStoreTest, AdoptIfEmptyBuildsIndexesTheStagedStoreLacks) {
  // An index added to the target while the staged store was filling.
  ThreadSafeStore staged(
      Indexers{{std::string(kNamespaceIndex), MetaNamespaceIndexFunc}});
  staged.Add("a/x", Obj("a", "x", "red"));
  staged.Add("b/y", Obj("b", "y", "red,blue"));
  ThreadSafeStore store(TestIndexers());
  ASSERT_TRUE(store.AdoptIfEmpty(&staged));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kTagsIndex, "red")),
              UnorderedElementsAre("x", "y"));
  EXPECT_THAT(NamesOrDie(store.ByIndex(kNamespaceIndex, "b")),
              ElementsAre("y"));
  // An index only the staged store had is not carried over.
  ThreadSafeStore staged2(TestIndexers());
  staged2.Add("a/x", Obj("a", "x", "red"));
  ThreadSafeStore store2(
      Indexers{{std::string(kNamespaceIndex), MetaNamespaceIndexFunc}});
  ASSERT_TRUE(store2.AdoptIfEmpty(&staged2));
  EXPECT_EQ(store2.ByIndex(kTagsIndex, "red").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(NamesOrDie(store2.ByIndex(kNamespaceIndex, "a")),
              ElementsAre("x"));
}

TEST(ThreadSafeStoreTest, KeysOutliveTheObjectsTheyWereFirstStoredWith) {
  // A key equal to its object's Key() shares that object's string; when the
  // object is replaced and released the key must follow the new object.
  // (Under ASan a dangling key is a use-after-free here.)
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x", "1"));
  for (int rv = 2; rv < 6; ++rv) {
    store.Update("ns/a", Obj("ns", "a", rv % 2 ? "x" : "y", absl::StrCat(rv)));
  }
  EXPECT_THAT(store.ListKeys(), ElementsAre("ns/a"));
  EXPECT_EQ(store.Get("ns/a")->resource_version(), "5");
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "x")),
              ElementsAre("ns/a"));
  // Replace adopts keys given as strings and shares them from then on.
  ItemMap items;
  items.emplace("ns/a", Obj("ns", "a", "z", "6"));
  store.Replace(std::move(items), "");
  store.Update("ns/a", Obj("ns", "a", "z", "7"));
  EXPECT_THAT(store.ListKeys(), ElementsAre("ns/a"));
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "z")),
              ElementsAre("ns/a"));
}

TEST(ThreadSafeStoreTest, KeysOtherThanTheObjectsOwnAreKept) {
  // Any string may key an object (client-go's store takes any key func).
  ThreadSafeStore store(TestIndexers());
  store.Add("custom", Obj("ns", "a", "x", "1"));
  store.Update("custom", Obj("ns", "b", "x", "2"));
  // From a foreign key to the object's own and back.
  store.Add("ns/c", Obj("ns", "z", "x", "1"));
  store.Update("ns/c", Obj("ns", "c", "x", "2"));
  store.Update("ns/c", Obj("ns", "d", "x", "3"));
  EXPECT_THAT(store.ListKeys(), UnorderedElementsAre("custom", "ns/c"));
  EXPECT_EQ(store.Get("custom")->name(), "b");
  EXPECT_EQ(store.Get("ns/c")->name(), "d");
  EXPECT_THAT(ValuesOrDie(store.IndexKeys(kTagsIndex, "x")),
              UnorderedElementsAre("custom", "ns/c"));
  store.Delete("custom");
  EXPECT_THAT(store.ListKeys(), ElementsAre("ns/c"));
}

TEST(StoreKeyTest, OneWordThatOwnsOnlyItsCopies) {
  // Paid once per cached object (in the store's map node).
  static_assert(sizeof(StoreKey) == sizeof(void*));
  ObjectPtr a = Obj("ns", "a", "x", "1");
  StoreKey shared(*a);
  EXPECT_EQ(shared.view(), "ns/a");
  EXPECT_EQ(shared.view().data(), a->Key().data());
  StoreKey owned("ns/a");
  EXPECT_NE(owned.view().data(), a->Key().data());
  // Binding to an object with the same key frees the copy and shares.
  owned.Bind(*a);
  EXPECT_EQ(owned.view().data(), a->Key().data());
  // Binding to another key makes an owned copy of the current text.
  ObjectPtr b = Obj("ns", "b", "x", "1");
  shared.Bind(*b);
  a.reset();
  EXPECT_EQ(shared.view(), "ns/a");
  // Moves carry ownership (under ASan a double free or leak shows here).
  StoreKey moved(std::move(shared));
  EXPECT_EQ(moved.view(), "ns/a");
  EXPECT_EQ(shared.view(), "");  // NOLINT(bugprone-use-after-move)
  moved = StoreKey("other");
  EXPECT_EQ(moved.view(), "other");
}

TEST(ThreadSafeStoreTest, ReplaceWithNothingEmptiesStoreAndIndices) {
  ThreadSafeStore store(TestIndexers());
  store.Add("ns/a", Obj("ns", "a", "x"));
  store.Replace(ItemMap(), "");
  EXPECT_EQ(store.Size(), 0u);
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kTagsIndex)), IsEmpty());
  EXPECT_THAT(ValuesOrDie(store.ListIndexFuncValues(kNamespaceIndex)),
              IsEmpty());
}

TEST(ThreadSafeStoreTest, ReadersDoNotBlockEachOther) {
  // The index function runs under the reader lock during Index(). For the
  // probe object it waits until a second reader has completed a query; if
  // readers excluded each other this would deadlock (and time out).
  absl::Notification other_reader_done;
  IndexFunc blocking = [&](const Object& obj) {
    if (obj.name() == "probe") other_reader_done.WaitForNotification();
    return TagsIndexFunc(obj);
  };
  ThreadSafeStore store({{"blocking", blocking}});
  store.Add("ns/a", Obj("ns", "a", "x"));

  std::thread first([&] {
    ObjectPtr probe = Obj("ns", "probe", "x");
    EXPECT_THAT(NamesOrDie(store.Index("blocking", *probe)), ElementsAre("a"));
  });
  std::thread second([&] {
    // May run before or while `first` holds its reader lock; either way it
    // must complete without waiting for `first`.
    EXPECT_THAT(NamesOrDie(store.ByIndex("blocking", "x")), ElementsAre("a"));
    EXPECT_EQ(store.Size(), 1u);
    other_reader_done.Notify();
  });
  first.join();
  second.join();
}

TEST(ThreadSafeStoreTest, ConcurrentReadersAndWritersLeaveConsistentState) {
  ThreadSafeStore store(TestIndexers());
  constexpr int kWriters = 4;
  constexpr int kReaders = 4;
  constexpr int kKeysPerWriter = 300;
  std::atomic<int> writers_left{kWriters};
  std::atomic<bool> reader_saw_inconsistency{false};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      const std::string ns = absl::StrCat("ns-", w);
      for (int i = 0; i < kKeysPerWriter; ++i) {
        const std::string name = absl::StrCat("obj-", i);
        const std::string key = absl::StrCat(ns, "/", name);
        store.Add(key, Obj(ns, name, "even,odd"));
        // Move to one tag; every third object is deleted again.
        store.Update(key, Obj(ns, name, i % 2 == 0 ? "even" : "odd", "2"));
        if (i % 3 == 0) store.Delete(key);
      }
      writers_left.fetch_sub(1);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      const std::string ns = absl::StrCat("ns-", r % kWriters);
      do {
        absl::StatusOr<std::vector<ObjectPtr>> in_ns =
            store.ByIndex(kNamespaceIndex, ns);
        if (!in_ns.ok()) reader_saw_inconsistency = true;
        for (const ObjectPtr& obj : *in_ns) {
          if (obj->namespace_() != ns) reader_saw_inconsistency = true;
        }
        absl::StatusOr<std::vector<ObjectPtr>> even =
            store.ByIndex(kTagsIndex, "even");
        for (const ObjectPtr& obj : *even) {
          const std::string* tags = obj->Annotation("tags");
          if (tags == nullptr || !absl::StrContains(*tags, "even")) {
            reader_saw_inconsistency = true;
          }
        }
        for (const std::string& key : store.ListKeys()) {
          // A key listed a moment ago may have been deleted since, but a
          // present object must carry its key.
          ObjectPtr obj = store.Get(key);
          if (obj != nullptr && obj->Key() != key) {
            reader_saw_inconsistency = true;
          }
        }
      } while (writers_left.load() > 0);
    });
  }
  for (std::thread& t : threads) t.join();

  EXPECT_FALSE(reader_saw_inconsistency.load());
  // Per writer: 300 keys, 100 deleted (i % 3 == 0), 200 left, of which the
  // even ones (i % 2 == 0 and i % 3 != 0) number 100.
  EXPECT_EQ(store.Size(), static_cast<size_t>(kWriters * 200));
  for (int w = 0; w < kWriters; ++w) {
    EXPECT_EQ(
        ValuesOrDie(store.IndexKeys(kNamespaceIndex, absl::StrCat("ns-", w)))
            .size(),
        200u);
  }
  EXPECT_EQ(ValuesOrDie(store.IndexKeys(kTagsIndex, "even")).size(),
            static_cast<size_t>(kWriters * 100));
  EXPECT_EQ(ValuesOrDie(store.IndexKeys(kTagsIndex, "odd")).size(),
            static_cast<size_t>(kWriters * 100));
}

TEST(ThreadSafeStoreTest, ReplaceConcurrentWithAddIndexersLeavesCompleteIndex) {
  ThreadSafeStore store(TestIndexers());
  constexpr int kRounds = 50;
  absl::Notification start;
  std::thread replacer([&] {
    start.WaitForNotification();
    for (int round = 0; round < kRounds; ++round) {
      ItemMap items;
      for (int i = 0; i < 20; ++i) {
        const std::string ns = absl::StrCat("ns-", i % 4);
        const std::string name = absl::StrCat("obj-", i);
        items.emplace(absl::StrCat(ns, "/", name), Obj(ns, name, "t"));
      }
      store.Replace(std::move(items), "");
    }
  });
  std::thread indexer_adder([&] {
    start.WaitForNotification();
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_TRUE(store
                      .AddIndexers({{absl::StrCat("extra-", i),
                                     IndexFunc(MetaNamespaceIndexFunc)}})
                      .ok());
    }
  });
  start.Notify();
  replacer.join();
  indexer_adder.join();

  // Whatever the interleaving, every index covers every item.
  EXPECT_EQ(store.Size(), 20u);
  for (int i = 0; i < kRounds; ++i) {
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(ValuesOrDie(store.IndexKeys(absl::StrCat("extra-", i),
                                            absl::StrCat("ns-", n)))
                    .size(),
                5u);
    }
  }
  EXPECT_EQ(ValuesOrDie(store.IndexKeys(kTagsIndex, "t")).size(), 20u);
}

}  // namespace
}  // namespace informer

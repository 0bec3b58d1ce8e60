#include "server/kubeapi/resource_cache.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"

namespace server {
namespace kubeapi {
namespace {

using informer::ObjectPtr;
using informer::WatchEventType;

ObjectPtr Cm(const std::string& ns, const std::string& name, int64_t rv,
             const std::string& app = "a") {
  return informer::ObjectBuilder()
      .SetApiVersion("v1")
      .SetKind("ConfigMap")
      .SetNamespace(ns)
      .SetName(name)
      .SetResourceVersion(absl::StrCat(rv))
      .AddLabel("app", app)
      .Build();
}

std::vector<std::string> Keys(const ResourceCache::Page& p) {
  std::vector<std::string> out;
  for (const auto& o : p.objects) out.push_back(o->Key());
  return out;
}

TEST(ResourceCacheTest, InitialStateHasNoHistory) {
  std::atomic<int> changes{0};
  ResourceCache c(10, [&] { ++changes; });
  c.OnAdd(Cm("a", "x", 5), true);
  c.OnAdd(Cm("a", "y", 7), true);
  EXPECT_EQ(c.resource_version(), 7);
  EXPECT_EQ(c.floor(), 7);
  EXPECT_EQ(changes.load(), 0);
  EXPECT_EQ(c.size(), 2u);
  auto seq = c.SeqAfter(6);
  EXPECT_FALSE(seq.ok());  // changes between 6 and 7 were never seen
  EXPECT_EQ(*c.SeqAfter(7), 1);
}

TEST(ResourceCacheTest, ListsRewindTheHistory) {
  ResourceCache c(10, nullptr);
  c.OnAdd(Cm("a", "x", 5), true);
  c.OnAdd(Cm("b", "y", 6), true);
  c.OnAdd(Cm("a", "z", 8), false);               // rv 8: add a/z
  c.OnUpdate(Cm("a", "x", 5), Cm("a", "x", 9));  // rv 9: modify a/x
  c.OnDelete(Cm("b", "y", 10), false);           // rv 10: delete b/y
  EXPECT_EQ(c.resource_version(), 10);
  auto now = c.List(0, "", "", 0, nullptr, false);
  EXPECT_EQ(Keys(*now), (std::vector<std::string>{"a/x", "a/z"}));
  auto at6 = c.List(6, "", "", 0, nullptr, false);
  ASSERT_TRUE(at6.ok());
  EXPECT_EQ(Keys(*at6), (std::vector<std::string>{"a/x", "b/y"}));
  EXPECT_EQ(at6->objects[0]->resource_version(), "5");
  auto at9 = c.List(9, "", "", 0, nullptr, false);
  EXPECT_EQ(Keys(*at9), (std::vector<std::string>{"a/x", "a/z", "b/y"}));
  EXPECT_EQ(at9->objects[0]->resource_version(), "9");
  EXPECT_TRUE(
      absl::IsOutOfRange(c.List(4, "", "", 0, nullptr, false).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      c.List(11, "", "", 0, nullptr, false).status()));
}

TEST(ResourceCacheTest, PagesPrefixesAndRemainingCount) {
  ResourceCache c(10, nullptr);
  for (int i = 0; i < 5; ++i)
    c.OnAdd(Cm("a", absl::StrCat("o", i), 10 + i), true);
  c.OnAdd(Cm("b", "o0", 20), true);
  auto p1 = c.List(0, "a/", "", 2, nullptr, true);
  EXPECT_EQ(Keys(*p1), (std::vector<std::string>{"a/o0", "a/o1"}));
  EXPECT_TRUE(p1->more);
  EXPECT_EQ(p1->remaining, 3);
  auto p2 = c.List(p1->rv, "a/", "a/o1", 2, nullptr, true);
  EXPECT_EQ(Keys(*p2), (std::vector<std::string>{"a/o2", "a/o3"}));
  auto p3 = c.List(p1->rv, "a/", "a/o3", 2, nullptr, true);
  EXPECT_EQ(Keys(*p3), (std::vector<std::string>{"a/o4"}));
  EXPECT_FALSE(p3->more);
  auto odd = c.List(
      0, "", "", 0,
      [](const informer::Object& o) {
        return o.name() == "o1" || o.name() == "o3";
      },
      false);
  EXPECT_EQ(Keys(*odd), (std::vector<std::string>{"a/o1", "a/o3"}));
}

TEST(ResourceCacheTest, HistoryIsBoundedAndWatchersCanFallBehind) {
  ResourceCache c(3, nullptr);
  c.OnAdd(Cm("a", "x", 1), true);
  for (int i = 2; i <= 6; ++i) c.OnUpdate(Cm("a", "x", i - 1), Cm("a", "x", i));
  EXPECT_EQ(c.floor(), 3);
  std::vector<Change> out;
  EXPECT_TRUE(absl::IsOutOfRange(c.ChangesSince(1, 10, &out)));
  EXPECT_TRUE(absl::IsOutOfRange(c.SeqAfter(2).status()));
  auto seq = c.SeqAfter(4);
  ASSERT_TRUE(seq.ok());
  ASSERT_TRUE(c.ChangesSince(*seq, 10, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rv, 5);
  EXPECT_EQ(out[0].type, WatchEventType::kModified);
  EXPECT_EQ(out[0].old->resource_version(), "4");
  EXPECT_EQ(out[1].rv, 6);
}

TEST(ResourceCacheTest, ResyncsAreNotChanges) {
  int changes = 0;
  ResourceCache c(10, [&] { ++changes; });
  ObjectPtr x = Cm("a", "x", 3);
  c.OnAdd(x, true);
  c.OnUpdate(x, x);
  c.OnUpdate(x, Cm("a", "x", 3));
  EXPECT_EQ(changes, 0);
  EXPECT_EQ(c.next_seq(), 1);
  c.OnDelete(Cm("a", "missing", 4), false);
  EXPECT_EQ(changes, 0);
}

TEST(ResourceCacheTest, AnOlderDeleteIsRecordedAtTheCurrentVersion) {
  ResourceCache c(10, nullptr);
  c.OnAdd(Cm("a", "x", 3), true);
  c.OnAdd(Cm("a", "y", 9), true);
  c.OnDelete(Cm("a", "x", 3), /*final_state_unknown=*/true);
  std::vector<Change> out;
  ASSERT_TRUE(c.ChangesSince(1, 10, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rv, 9);
  EXPECT_EQ(out[0].type, WatchEventType::kDeleted);
}

TEST(ResourceCacheTest, BookmarksAdvanceTheVersionWithoutChanges) {
  std::atomic<int> changes{0};
  ResourceCache c(10, [&] { ++changes; });
  c.OnAdd(Cm("a", "x", 5), true);
  // The list's resourceVersion is above every object's: the first advance
  // pins the floor there (deletes between 5 and 12 were never seen).
  EXPECT_TRUE(c.AdvanceTo(12));
  EXPECT_EQ(c.resource_version(), 12);
  EXPECT_EQ(c.floor(), 12);
  EXPECT_FALSE(c.SeqAfter(11).ok());
  // A bookmark: the state at 20 is the state at 12; the floor stays.
  EXPECT_TRUE(c.AdvanceTo(20));
  EXPECT_FALSE(c.AdvanceTo(20));
  EXPECT_FALSE(c.AdvanceTo(15));  // never backwards
  EXPECT_EQ(c.floor(), 12);
  EXPECT_EQ(changes.load(), 0);
  auto at20 = c.List(20, "", "", 0, nullptr, false);
  ASSERT_TRUE(at20.ok());
  EXPECT_EQ(at20->rv, 20);
  EXPECT_EQ(Keys(*at20), (std::vector<std::string>{"a/x"}));
  EXPECT_EQ(c.GetProgress().rv, 20);
  EXPECT_EQ(c.GetProgress().next_seq, 1);
  // A change after the bookmark; lists between the two are exact.
  c.OnAdd(Cm("a", "y", 25), false);
  EXPECT_EQ(Keys(*c.List(22, "", "", 0, nullptr, false)),
            (std::vector<std::string>{"a/x"}));
  EXPECT_EQ(*c.SeqAfter(20), 1);
  EXPECT_EQ(c.GetProgress().next_seq, 2);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

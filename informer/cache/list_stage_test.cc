#include "informer/cache/list_stage.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

ObjectPtr ConfigMap(absl::string_view ns, absl::string_view name,
                    absl::string_view rv = "1") {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
      R"(","namespace":")", ns, R"(","resourceVersion":")", rv, R"("}})"));
  EXPECT_TRUE(obj.ok()) << obj.status();
  return std::move(obj).value();
}

Indexers NamespaceIndexers() {
  Indexers indexers;
  indexers.emplace(std::string(kNamespaceIndex), MetaNamespaceIndexFunc);
  return indexers;
}

std::vector<std::string> Keys(const std::vector<ObjectPtr>& objs) {
  std::vector<std::string> keys;
  for (const ObjectPtr& o : objs) keys.push_back(o->Key());
  return keys;
}

TEST(IndexerListStageTest, BuildsTheIndexedCacheAsItemsArriveAndCommitsIt) {
  std::vector<std::string> committed_keys;
  std::vector<std::string> staged_in_a;
  IndexerListStage stage(
      NamespaceIndexers(),
      [&](Indexer* staged, const std::vector<ObjectPtr>& items,
          absl::string_view rv) {
        EXPECT_EQ(rv, "9");
        committed_keys = Keys(items);
        absl::StatusOr<std::vector<std::string>> a =
            staged->IndexKeys(kNamespaceIndex, "a");
        EXPECT_TRUE(a.ok()) << a.status();
        if (a.ok()) staged_in_a = *a;
        return true;
      });
  std::vector<ObjectPtr> items = {ConfigMap("a", "x"), ConfigMap("b", "y"),
                                  ConfigMap("a", "z")};
  for (const ObjectPtr& obj : items) {
    ASSERT_TRUE(stage.Add(obj).ok());
  }
  // Indexed before the commit, out of everyone's sight but the stage's.
  EXPECT_EQ(stage.staged().Size(), 3u);
  EXPECT_THAT(Keys(stage.staged().ByIndex(kNamespaceIndex, "b").value()),
              ElementsAre("b/y"));
  EXPECT_TRUE(stage.Commit(items, "9"));
  EXPECT_THAT(committed_keys, ElementsAre("a/x", "b/y", "a/z"));
  EXPECT_THAT(staged_in_a, UnorderedElementsAre("a/x", "a/z"));
}

// A commit function that notes it was called and accepts the stage.
auto NoteCommit(bool* called) {
  return [called](Indexer*, const std::vector<ObjectPtr>&, absl::string_view) {
    *called = true;
    return true;
  };
}

TEST(IndexerListStageTest, AListWithADuplicateKeyIsNotCommitted) {
  bool called = false;
  IndexerListStage stage(NamespaceIndexers(), NoteCommit(&called));
  std::vector<ObjectPtr> items = {ConfigMap("a", "x", "1"),
                                  ConfigMap("a", "y", "2"),
                                  ConfigMap("a", "x", "3")};
  for (const ObjectPtr& obj : items) ASSERT_TRUE(stage.Add(obj).ok());
  // The FIFO's Replace then gives the key both objects, as client-go does.
  EXPECT_FALSE(stage.Commit(items, "9"));
  EXPECT_FALSE(called);
}

TEST(IndexerListStageTest, ItemsOtherThanTheStagedOnesAreNotCommitted) {
  bool called = false;
  IndexerListStage stage(NamespaceIndexers(), NoteCommit(&called));
  ObjectPtr x = ConfigMap("a", "x");
  ASSERT_TRUE(stage.Add(x).ok());
  EXPECT_FALSE(stage.Commit({x, ConfigMap("a", "y")}, "9"));
  EXPECT_FALSE(called);
}

TEST(IndexerListStageTest, ACommitFunctionsRefusalIsPassedOn) {
  IndexerListStage stage(NamespaceIndexers(),
                         [](Indexer*, const std::vector<ObjectPtr>&,
                            absl::string_view) { return false; });
  ObjectPtr x = ConfigMap("a", "x");
  ASSERT_TRUE(stage.Add(x).ok());
  EXPECT_FALSE(stage.Commit({x}, "9"));
}

TEST(IndexerListStageTest, RefusesANullObject) {
  IndexerListStage stage(NamespaceIndexers(),
                         [](Indexer*, const std::vector<ObjectPtr>&,
                            absl::string_view) { return true; });
  absl::Status st = stage.Add(nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace informer

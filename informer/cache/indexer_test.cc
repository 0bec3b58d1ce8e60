#include "informer/cache/indexer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/cache/store.h"
#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

ObjectPtr Pod(absl::string_view ns, absl::string_view name,
              absl::string_view node, absl::string_view app,
              absl::string_view rv = "1", absl::string_view owner_uid = "") {
  std::string owners;
  if (!owner_uid.empty()) {
    owners = absl::StrCat(
        R"(,"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",)",
        R"("name":"rs","uid":")", owner_uid, R"(","controller":true}])");
  }
  std::string json =
      absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")",
                   name, R"(","namespace":")", ns, R"(","resourceVersion":")",
                   rv, R"(","labels":{"app":")", app, R"("})", owners,
                   R"(},"spec":{"nodeName":")", node, R"("}})");
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  EXPECT_TRUE(obj.ok()) << obj.status();
  return std::move(obj).value();
}

std::vector<std::string> NamesOrDie(
    const absl::StatusOr<std::vector<ObjectPtr>>& objs) {
  EXPECT_TRUE(objs.ok()) << objs.status();
  std::vector<std::string> names;
  if (objs.ok()) {
    for (const ObjectPtr& obj : *objs) names.emplace_back(obj->name());
  }
  return names;
}

Indexers PodIndexers() {
  return Indexers{
      {std::string(kNamespaceIndex), MetaNamespaceIndexFunc},
      {LabelIndexName("app"), LabelIndexFunc("app")},
      {FieldIndexName("spec.nodeName"), FieldIndexFunc("spec.nodeName")},
      {std::string(kOwnerUidIndex), OwnerUidIndexFunc},
  };
}

TEST(IndexerTest, AddStoresObjectsUnderNamespaceSlashName) {
  Indexer indexer;
  ObjectPtr pod = Pod("default", "web-1", "node-a", "web");
  indexer.Add(pod);
  EXPECT_THAT(indexer.ListKeys(), ElementsAre("default/web-1"));
  EXPECT_EQ(indexer.GetByKey("default/web-1"), pod);
  EXPECT_EQ(indexer.Get(*pod), pod);
}

TEST(IndexerTest, ClusterScopedObjectIsKeyedByName) {
  Indexer indexer;
  ObjectPtr node = ObjectBuilder().SetKind("Node").SetName("node-a").Build();
  indexer.Add(node);
  EXPECT_EQ(indexer.GetByKey("node-a"), node);
}

TEST(IndexerTest, NamespaceIndexListsClusterScopedObjectsUnderEmpty) {
  Indexer indexer(PodIndexers());
  indexer.Add(ObjectBuilder().SetKind("Node").SetName("node-a").Build());
  indexer.Add(ObjectBuilder().SetKind("Node").SetName("node-b").Build());
  indexer.Add(Pod("ns1", "a", "node-a", "web"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(kNamespaceIndex, "")),
              UnorderedElementsAre("node-a", "node-b"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(kNamespaceIndex, "ns1")),
              ElementsAre("a"));
  absl::StatusOr<std::vector<std::string>> values =
      indexer.ListIndexFuncValues(kNamespaceIndex);
  ASSERT_TRUE(values.ok());
  EXPECT_THAT(*values, UnorderedElementsAre("", "ns1"));
}

TEST(IndexerTest, UpdateReplacesTheStoredVersion) {
  Indexer indexer;
  indexer.Add(Pod("default", "web-1", "node-a", "web", "1"));
  ObjectPtr newer = Pod("default", "web-1", "node-a", "web", "2");
  indexer.Update(newer);
  EXPECT_EQ(indexer.Size(), 1u);
  EXPECT_EQ(indexer.GetByKey("default/web-1")->resource_version(), "2");
}

TEST(IndexerTest, DeleteRemovesByTheObjectsKeyWhateverItsVersion) {
  Indexer indexer(PodIndexers());
  indexer.Add(Pod("default", "web-1", "node-a", "web", "5"));
  indexer.Add(Pod("default", "web-2", "node-a", "web", "6"));
  // The delete event may carry a different version than the cached one.
  indexer.Delete(*Pod("default", "web-1", "node-a", "web", "7"));
  EXPECT_THAT(indexer.ListKeys(), ElementsAre("default/web-2"));
  EXPECT_THAT(
      NamesOrDie(indexer.ByIndex(FieldIndexName("spec.nodeName"), "node-a")),
      ElementsAre("web-2"));
}

TEST(IndexerTest, DeleteByKeyRemovesTheObject) {
  Indexer indexer(PodIndexers());
  indexer.Add(Pod("default", "web-1", "node-a", "web"));
  indexer.DeleteByKey("default/web-1");
  EXPECT_EQ(indexer.Size(), 0u);
  absl::StatusOr<std::vector<std::string>> values =
      indexer.ListIndexFuncValues(LabelIndexName("app"));
  ASSERT_TRUE(values.ok());
  EXPECT_THAT(*values, IsEmpty());
}

TEST(IndexerTest, BuiltInIndexesFindPodsByNamespaceLabelNodeAndOwner) {
  Indexer indexer(PodIndexers());
  indexer.Add(Pod("ns1", "a", "node-a", "web", "1", "rs-uid-1"));
  indexer.Add(Pod("ns1", "b", "node-b", "db", "1", "rs-uid-2"));
  indexer.Add(Pod("ns2", "c", "node-a", "web", "1", "rs-uid-1"));

  EXPECT_THAT(NamesOrDie(indexer.ByIndex(kNamespaceIndex, "ns1")),
              UnorderedElementsAre("a", "b"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(LabelIndexName("app"), "web")),
              UnorderedElementsAre("a", "c"));
  EXPECT_THAT(
      NamesOrDie(indexer.ByIndex(FieldIndexName("spec.nodeName"), "node-a")),
      UnorderedElementsAre("a", "c"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(kOwnerUidIndex, "rs-uid-2")),
              ElementsAre("b"));
  absl::StatusOr<std::vector<std::string>> keys =
      indexer.IndexKeys(kOwnerUidIndex, "rs-uid-1");
  ASSERT_TRUE(keys.ok());
  EXPECT_THAT(*keys, UnorderedElementsAre("ns1/a", "ns2/c"));
}

TEST(IndexerTest, RescheduledPodMovesBetweenNodeBuckets) {
  Indexer indexer(PodIndexers());
  const std::string by_node = FieldIndexName("spec.nodeName");
  indexer.Add(Pod("ns", "a", "node-a", "web", "1"));
  indexer.Update(Pod("ns", "a", "node-b", "web", "2"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(by_node, "node-a")), IsEmpty());
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(by_node, "node-b")), ElementsAre("a"));
  absl::StatusOr<std::vector<std::string>> nodes =
      indexer.ListIndexFuncValues(by_node);
  ASSERT_TRUE(nodes.ok());
  EXPECT_THAT(*nodes, ElementsAre("node-b"));
}

TEST(IndexerTest, IndexFindsObjectsSharingTheProbesValue) {
  Indexer indexer(PodIndexers());
  indexer.Add(Pod("ns", "a", "node-a", "web"));
  indexer.Add(Pod("ns", "b", "node-b", "web"));
  ObjectPtr probe = Pod("ns", "probe", "node-a", "other");
  EXPECT_THAT(
      NamesOrDie(indexer.Index(FieldIndexName("spec.nodeName"), *probe)),
      ElementsAre("a"));
}

TEST(IndexerTest, ReplaceSwapsContentsAndRebuildsIndexes) {
  Indexer indexer(PodIndexers());
  indexer.Add(Pod("ns", "gone", "node-a", "web"));
  indexer.Replace(
      {Pod("ns", "x", "node-c", "db"), Pod("other", "y", "node-c", "db")},
      "100");
  EXPECT_THAT(indexer.ListKeys(), UnorderedElementsAre("ns/x", "other/y"));
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(LabelIndexName("app"), "web")),
              IsEmpty());
  EXPECT_THAT(
      NamesOrDie(indexer.ByIndex(FieldIndexName("spec.nodeName"), "node-c")),
      UnorderedElementsAre("x", "y"));
}

TEST(IndexerTest, ReplaceWithDuplicateKeysKeepsTheLaterObject) {
  Indexer indexer;
  indexer.Replace({Pod("ns", "x", "node-a", "web", "1"),
                   Pod("ns", "x", "node-a", "web", "2")},
                  "");
  EXPECT_EQ(indexer.Size(), 1u);
  EXPECT_EQ(indexer.GetByKey("ns/x")->resource_version(), "2");
  // The key shares the kept object's string, not the dropped one's.
  EXPECT_THAT(indexer.ListKeys(), ElementsAre("ns/x"));
  indexer.Update(Pod("ns", "x", "node-b", "web", "3"));
  EXPECT_THAT(indexer.ListKeys(), ElementsAre("ns/x"));
  EXPECT_EQ(indexer.GetByKey("ns/x")->resource_version(), "3");
}

TEST(IndexerTest, AddIndexersAfterPopulationIndexesExistingObjects) {
  Indexer indexer;
  indexer.Add(Pod("ns", "a", "node-a", "web"));
  ASSERT_TRUE(
      indexer.AddIndexers({{LabelIndexName("app"), LabelIndexFunc("app")}})
          .ok());
  EXPECT_THAT(NamesOrDie(indexer.ByIndex(LabelIndexName("app"), "web")),
              ElementsAre("a"));
  absl::Status again =
      indexer.AddIndexers({{LabelIndexName("app"), LabelIndexFunc("app")}});
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(indexer.GetIndexers().size(), 1u);
}

TEST(IndexerTest, UnknownIndexIsNotFound) {
  Indexer indexer(PodIndexers());
  absl::Status status = indexer.ByIndex("label:tier", "x").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("label:tier"));
}

TEST(IndexerTest, ServesAsTheKeyListerGetterOfADeltaFifo) {
  Indexer indexer;
  ObjectPtr pod = Pod("ns", "a", "node-a", "web");
  indexer.Add(pod);
  const KeyListerGetter& known = indexer;
  EXPECT_THAT(known.ListKeys(), ElementsAre("ns/a"));
  EXPECT_EQ(known.GetByKey("ns/a"), pod);
  EXPECT_EQ(known.GetByKey("ns/b"), nullptr);
}

}  // namespace
}  // namespace informer

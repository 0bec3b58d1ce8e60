#include "informer/cache/index.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ObjectPtr ParseOrDie(absl::string_view json) {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  EXPECT_TRUE(obj.ok()) << obj.status();
  return std::move(obj).value();
}

TEST(MetaNamespaceIndexFuncTest, ReturnsTheNamespace) {
  ObjectPtr obj =
      ObjectBuilder().SetNamespace("kube-system").SetName("a").Build();
  EXPECT_THAT(MetaNamespaceIndexFunc(*obj), ElementsAre("kube-system"));
}

TEST(MetaNamespaceIndexFuncTest, ClusterScopedObjectIsIndexedUnderEmpty) {
  // As client-go: cluster-scoped objects sit in the "" bucket.
  ObjectPtr obj = ObjectBuilder().SetName("node-1").Build();
  EXPECT_THAT(MetaNamespaceIndexFunc(*obj), ElementsAre(""));
}

TEST(LabelIndexFuncTest, ReturnsTheLabelValue) {
  ObjectPtr obj = ObjectBuilder()
                      .SetName("a")
                      .AddLabel("tier", "web")
                      .AddLabel("app", "nginx")
                      .Build();
  EXPECT_THAT(LabelIndexFunc("app")(*obj), ElementsAre("nginx"));
}

TEST(LabelIndexFuncTest, ObjectWithoutTheLabelIsIndexedUnderNothing) {
  ObjectPtr obj = ObjectBuilder().SetName("a").AddLabel("tier", "web").Build();
  EXPECT_THAT(LabelIndexFunc("app")(*obj), IsEmpty());
}

TEST(LabelIndexFuncTest, EmptyLabelValueIsIndexedUnderEmptyString) {
  ObjectPtr obj = ObjectBuilder().SetName("a").AddLabel("app", "").Build();
  EXPECT_THAT(LabelIndexFunc("app")(*obj), ElementsAre(""));
}

TEST(FieldIndexFuncTest, ReturnsTheValueAtTheFieldPath) {
  ObjectPtr pod = ParseOrDie(
      R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"nodeName":"node-7"}})");
  EXPECT_THAT(FieldIndexFunc("spec.nodeName")(*pod), ElementsAre("node-7"));
}

TEST(FieldIndexFuncTest, ArrayAlongThePathYieldsOneValuePerElement) {
  ObjectPtr pod = ParseOrDie(
      R"({"metadata":{"name":"p","namespace":"ns"},)"
      R"("spec":{"containers":[{"image":"nginx"},{"image":"envoy"}]}})");
  EXPECT_THAT(FieldIndexFunc("spec.containers.image")(*pod),
              ElementsAre("nginx", "envoy"));
}

TEST(FieldIndexFuncTest, MissingFieldIsIndexedUnderNothing) {
  ObjectPtr pod =
      ParseOrDie(R"({"metadata":{"name":"p","namespace":"ns"},"spec":{}})");
  EXPECT_THAT(FieldIndexFunc("spec.nodeName")(*pod), IsEmpty());
}

TEST(OwnerUidIndexFuncTest, ReturnsTheUidOfEveryOwner) {
  OwnerReference rs;
  rs.kind = "ReplicaSet";
  rs.name = "web-abc";
  rs.uid = "uid-1";
  rs.controller = true;
  OwnerReference other;
  other.kind = "Foo";
  other.name = "bar";
  other.uid = "uid-2";
  ObjectPtr obj = ObjectBuilder()
                      .SetNamespace("ns")
                      .SetName("p")
                      .AddOwnerReference(rs)
                      .AddOwnerReference(other)
                      .Build();
  EXPECT_THAT(OwnerUidIndexFunc(*obj), ElementsAre("uid-1", "uid-2"));
}

TEST(OwnerUidIndexFuncTest, ObjectWithoutOwnersIsIndexedUnderNothing) {
  ObjectPtr obj = ObjectBuilder().SetNamespace("ns").SetName("p").Build();
  EXPECT_THAT(OwnerUidIndexFunc(*obj), IsEmpty());
}

TEST(IndexNameTest, LabelAndFieldIndexNamesAreConventional) {
  EXPECT_EQ(LabelIndexName("app"), "label:app");
  EXPECT_EQ(FieldIndexName("spec.nodeName"), "field:spec.nodeName");
  EXPECT_EQ(kNamespaceIndex, "namespace");
}

}  // namespace
}  // namespace informer

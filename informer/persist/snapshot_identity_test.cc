#include "informer/persist/snapshot_identity.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "informer/object/object.h"

namespace informer {
namespace {

SnapshotIdentity Pods() {
  SnapshotIdentity id;
  id.cluster = "https://10.0.0.1:6443 uid=1234";
  id.version = "v1";
  id.resource = "pods";
  id.namespace_ = "shop";
  id.label_selector = "app=web";
  id.field_selector = "spec.nodeName=n1";
  id.transform = "managed_fields=drop;drop=";
  return id;
}

TEST(SnapshotIdentityTest, EqualIdentitiesHaveNoMismatch) {
  EXPECT_EQ(Pods(), Pods());
  EXPECT_EQ(DescribeIdentityMismatch(Pods(), Pods()), "");
}

TEST(SnapshotIdentityTest, TheKindIsNotCompared) {
  // A file written before the kind was recorded still matches.
  SnapshotIdentity with_kind = Pods();
  with_kind.kind = "Pod";
  EXPECT_EQ(Pods(), with_kind);
  EXPECT_EQ(DescribeIdentityMismatch(Pods(), with_kind), "");
}

TEST(SnapshotIdentityTest, MismatchNamesTheFieldAndBothValues) {
  struct Case {
    void (*change)(SnapshotIdentity&);
    const char* message;
  };
  const Case cases[] = {
      {[](SnapshotIdentity& id) { id.cluster = "other"; },
       "cluster differs: snapshot \"other\" vs expected "
       "\"https://10.0.0.1:6443 uid=1234\""},
      {[](SnapshotIdentity& id) { id.group = "apps"; },
       "group differs: snapshot \"apps\" vs expected \"\""},
      {[](SnapshotIdentity& id) { id.version = "v2"; },
       "version differs: snapshot \"v2\" vs expected \"v1\""},
      {[](SnapshotIdentity& id) { id.resource = "configmaps"; },
       "resource differs: snapshot \"configmaps\" vs expected \"pods\""},
      {[](SnapshotIdentity& id) { id.namespace_ = ""; },
       "namespace differs: snapshot \"\" vs expected \"shop\""},
      {[](SnapshotIdentity& id) { id.label_selector = "app=db"; },
       "label selector differs: snapshot \"app=db\" vs expected "
       "\"app=web\""},
      {[](SnapshotIdentity& id) { id.field_selector = ""; },
       "field selector differs: snapshot \"\" vs expected "
       "\"spec.nodeName=n1\""},
      {[](SnapshotIdentity& id) { id.transform = "x"; },
       "transform differs: snapshot \"x\" vs expected "
       "\"managed_fields=drop;drop=\""},
      {[](SnapshotIdentity& id) { id.metadata_only = true; },
       "metadata-only differs: snapshot \"true\" vs expected \"false\""},
  };
  for (const Case& c : cases) {
    SnapshotIdentity changed = Pods();
    c.change(changed);
    EXPECT_NE(changed, Pods());
    EXPECT_EQ(DescribeIdentityMismatch(changed, Pods()), c.message);
  }
}

TEST(SnapshotIdentityTest, MismatchEscapesUnprintableBytes) {
  SnapshotIdentity a = Pods();
  a.cluster = "a\nb";
  EXPECT_EQ(DescribeIdentityMismatch(a, Pods()).substr(0, 35),
            "cluster differs: snapshot \"a\\nb\" vs");
}

TEST(SnapshotIdentityTest, TransformIdentityIgnoresOrderAndDuplicates) {
  TransformOptions a;
  a.drop_fields = {"status.x", "metadata.annotations", "status.x"};
  TransformOptions b;
  b.drop_fields = {"metadata.annotations", "status.x"};
  EXPECT_EQ(TransformIdentity(a), TransformIdentity(b));
  EXPECT_EQ(TransformIdentity(a),
            "managed_fields=drop;drop=metadata.annotations,status.x");
  TransformOptions keep;
  keep.drop_managed_fields = false;
  EXPECT_EQ(TransformIdentity(keep), "managed_fields=keep;drop=");
  EXPECT_NE(TransformIdentity(keep), TransformIdentity(TransformOptions()));
}

TEST(SnapshotIdentityTest, FileNameIsTheResourceAndGroup) {
  SnapshotIdentity id = Pods();
  EXPECT_EQ(SnapshotFileName(id), "pods.snapshot");
  id.group = "apps";
  id.resource = "deployments";
  EXPECT_EQ(SnapshotFileName(id), "deployments.apps.snapshot");
  // The other fields do not change it: the informer's slot keeps its file.
  SnapshotIdentity other = id;
  other.cluster = "x";
  other.version = "v2";
  other.namespace_ = "";
  other.label_selector = "a=b";
  other.transform = "y";
  other.metadata_only = true;
  EXPECT_EQ(SnapshotFileName(other), SnapshotFileName(id));
}

TEST(SnapshotIdentityTest, FileNamesAreSafeAndDistinct) {
  const std::pair<const char*, const char*> resources[] = {
      {"a.b", ""}, {"a", "b"},   {"A", ""},      {"a", ""},
      {"", ""},    {"", "apps"}, {".", "apps"},  {"..", ""},
      {"x/y", ""}, {"x%2F", ""}, {"x y", "a.b"}, {"%", ""},
  };
  std::set<std::string> names;
  for (const auto& [resource, group] : resources) {
    SnapshotIdentity id;
    id.resource = resource;
    id.group = group;
    const std::string name = SnapshotFileName(id);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_NE(name[0], '.') << name;
    for (char c : name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '%' || (c >= 'A' && c <= 'F'))
          << name;
    }
  }
  SnapshotIdentity slash;
  slash.resource = "x/y";
  EXPECT_EQ(SnapshotFileName(slash), "x%2Fy.snapshot");
}

TEST(SnapshotIdentityTest, LongNamesAreCutAndHashed) {
  SnapshotIdentity a;
  a.resource = std::string(150, 'r');
  a.group = std::string(150, 'g');
  SnapshotIdentity b = a;
  b.group.back() = 'h';
  const std::string na = SnapshotFileName(a), nb = SnapshotFileName(b);
  EXPECT_EQ(na.size(), 200u);
  EXPECT_NE(na, nb);
  EXPECT_EQ(na, SnapshotFileName(a));  // stable
  EXPECT_EQ(na.substr(na.size() - 9), ".snapshot");
}

TEST(SnapshotIdentityTest, PathJoinsTheDirectory) {
  const SnapshotIdentity id = Pods();
  EXPECT_EQ(SnapshotPath("/var/cache", id), "/var/cache/pods.snapshot");
  EXPECT_EQ(SnapshotPath("/var/cache/", id), "/var/cache/pods.snapshot");
  EXPECT_EQ(SnapshotPath("", id), "pods.snapshot");
}

}  // namespace
}  // namespace informer

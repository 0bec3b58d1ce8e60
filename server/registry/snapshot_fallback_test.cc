#include "server/registry/snapshot_fallback.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "informer/object/api_error.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace server {
namespace {

informer::SnapshotIdentity Id(const std::string& group,
                              const std::string& version,
                              const std::string& resource,
                              const std::string& ns) {
  informer::SnapshotIdentity id;
  id.cluster = "uid:abc";
  id.group = group;
  id.version = version;
  id.resource = resource;
  id.namespace_ = ns;
  return id;
}

TEST(SnapshotFallbackTest, UnreachableIsConnectionTimeoutAnd5xxOnly) {
  EXPECT_TRUE(IsApiServerUnreachable(
      informer::ConnectionError("GET", "/api", "refused")));
  EXPECT_TRUE(IsApiServerUnreachable(absl::DeadlineExceededError("slow")));
  EXPECT_TRUE(IsApiServerUnreachable(
      informer::StatusFromHttpResponse(500, "GET", "/api", "boom")));
  EXPECT_TRUE(IsApiServerUnreachable(
      informer::StatusFromHttpResponse(503, "GET", "/api", "")));
  EXPECT_FALSE(IsApiServerUnreachable(
      informer::StatusFromHttpResponse(401, "GET", "/api", "")));
  EXPECT_FALSE(IsApiServerUnreachable(
      informer::StatusFromHttpResponse(403, "GET", "/api", "")));
  EXPECT_FALSE(IsApiServerUnreachable(absl::InvalidArgumentError("config")));
  EXPECT_FALSE(IsApiServerUnreachable(absl::OkStatus()));
}

TEST(SnapshotFallbackTest, ReadsTheIdentitiesOfTheSnapshotFiles) {
  const std::string dir = informer::snapshot_testing::MakeTempDir();
  for (const informer::SnapshotIdentity& id :
       {Id("", "v1", "configmaps", "demo"),
        Id("apps", "v1", "deployments", "")}) {
    ASSERT_TRUE(informer::WriteSnapshot(dir, id, "5",
                                        std::vector<informer::ObjectPtr>())
                    .ok());
  }
  informer::snapshot_testing::WriteAll(dir + "/broken.snapshot", "junk");
  informer::snapshot_testing::WriteAll(dir + "/lock", "");
  const SnapshotIdentities ids = SnapshotIdentities::Read(dir);
  absl::StatusOr<informer::client::ApiResource> cm = ids.Resolve("configmaps");
  ASSERT_TRUE(cm.ok()) << cm.status();
  EXPECT_EQ(cm->GroupVersion(), "v1");
  EXPECT_TRUE(cm->namespaced);
  for (const char* name :
       {"deployments", "deployments.apps", "deployments.v1.apps"}) {
    absl::StatusOr<informer::client::ApiResource> d = ids.Resolve(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status();
    EXPECT_EQ(d->GroupVersion(), "apps/v1");
    EXPECT_EQ(d->resource, "deployments");
    EXPECT_FALSE(d->namespaced);
  }
  EXPECT_TRUE(absl::IsNotFound(ids.Resolve("pods").status()));
  EXPECT_TRUE(absl::IsNotFound(ids.Resolve("deploy").status()));
  absl::StatusOr<std::string> cluster = ids.Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(*cluster, "uid:abc");
}

TEST(SnapshotFallbackTest, TheClusterOnlyWhenAllSnapshotsAgree) {
  EXPECT_TRUE(absl::IsNotFound(SnapshotIdentities({}).Cluster().status()));
  informer::SnapshotIdentity other = Id("", "v1", "pods", "");
  other.cluster = "uid:other";
  EXPECT_TRUE(absl::IsFailedPrecondition(
      SnapshotIdentities({Id("", "v1", "configmaps", ""), other})
          .Cluster()
          .status()));
}

// A resolver whose answer is fixed.
class FixedResolver final : public ResourceResolver {
 public:
  explicit FixedResolver(absl::StatusOr<std::string> answer)
      : answer_(std::move(answer)) {}
  absl::StatusOr<std::string> Canonical(absl::string_view) override {
    return answer_;
  }

 private:
  const absl::StatusOr<std::string> answer_;
};

TEST(SnapshotFallbackTest, TheResolverFallsBackOnlyWhenUnreachable) {
  const SnapshotIdentities ids({Id("apps", "v1", "deployments", "")});
  FixedResolver down(informer::ConnectionError("GET", "/apis", "refused"));
  SnapshotFallbackResolver from_down(&down, &ids);
  absl::StatusOr<std::string> c = from_down.Canonical("deployments");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, "deployments.apps");
  // Not in a snapshot: discovery's own error.
  EXPECT_TRUE(absl::IsUnavailable(from_down.Canonical("pods").status()));

  FixedResolver forbidden(
      informer::StatusFromHttpResponse(403, "GET", "/apis", ""));
  SnapshotFallbackResolver from_forbidden(&forbidden, &ids);
  EXPECT_TRUE(absl::IsPermissionDenied(
      from_forbidden.Canonical("deployments").status()));

  FixedResolver up(std::string("deployments.apps"));
  SnapshotFallbackResolver from_up(&up, &ids);
  EXPECT_EQ(*from_up.Canonical("deploy"), "deployments.apps");
}

TEST(SnapshotFallbackTest, TheKindAndSingularResolveWhenRecorded) {
  const std::string dir = informer::snapshot_testing::MakeTempDir();
  informer::SnapshotIdentity cm = Id("", "v1", "configmaps", "demo");
  cm.kind = "ConfigMap";
  informer::SnapshotIdentity deploy = Id("apps", "v1", "deployments", "");
  deploy.kind = "Deployment";
  // Written before kinds were recorded.
  const informer::SnapshotIdentity old = Id("", "v1", "secrets", "");
  for (const informer::SnapshotIdentity& id : {cm, deploy, old}) {
    ASSERT_TRUE(informer::WriteSnapshot(dir, id, "5",
                                        std::vector<informer::ObjectPtr>())
                    .ok());
  }
  const SnapshotIdentities ids = SnapshotIdentities::Read(dir);
  for (const char* name :
       {"ConfigMap", "configmap", "configmaps", "CONFIGMAP", "configmap.v1"}) {
    absl::StatusOr<informer::client::ApiResource> r = ids.Resolve(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_EQ(r->resource, "configmaps") << name;
    EXPECT_EQ(r->kind, "ConfigMap") << name;
    EXPECT_EQ(r->singular, "configmap") << name;
  }
  for (const char* name :
       {"Deployment", "deployment.apps", "Deployment.v1.apps"}) {
    absl::StatusOr<informer::client::ApiResource> r = ids.Resolve(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_EQ(r->resource, "deployments") << name;
    EXPECT_EQ(r->kind, "Deployment") << name;
  }
  // The older file: its plural only, its kind empty.
  absl::StatusOr<informer::client::ApiResource> s = ids.Resolve("secrets");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, "");
  EXPECT_EQ(s->singular, "");
  EXPECT_TRUE(absl::IsNotFound(ids.Resolve("Secret").status()));
  EXPECT_TRUE(absl::IsNotFound(ids.Resolve("secret").status()));

  // Through the resolver while discovery cannot be reached.
  FixedResolver down(informer::ConnectionError("GET", "/api", "refused"));
  SnapshotFallbackResolver from_down(&down, &ids);
  absl::StatusOr<std::string> c = from_down.Canonical("Deployment");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, "deployments.apps");
}

}  // namespace
}  // namespace server

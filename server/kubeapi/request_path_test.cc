#include "server/kubeapi/request_path.h"

#include "gtest/gtest.h"

namespace server {
namespace kubeapi {
namespace {

using Type = RequestPath::Type;

TEST(RequestPathTest, DiscoveryAndHealth) {
  EXPECT_EQ(ParseRequestPath("/api")->type, Type::kApi);
  EXPECT_EQ(ParseRequestPath("/api/")->type, Type::kApi);
  EXPECT_EQ(ParseRequestPath("/apis")->type, Type::kApis);
  EXPECT_EQ(ParseRequestPath("/apis/apps")->type, Type::kGroup);
  auto gv = ParseRequestPath("/apis/apps/v1");
  EXPECT_EQ(gv->type, Type::kGroupVersion);
  EXPECT_EQ(gv->group, "apps");
  EXPECT_EQ(ParseRequestPath("/api/v1")->type, Type::kGroupVersion);
  EXPECT_EQ(ParseRequestPath("/version")->type, Type::kVersion);
  EXPECT_EQ(ParseRequestPath("/readyz")->health, "readyz");
  EXPECT_EQ(ParseRequestPath("/livez/ping")->type, Type::kHealth);
  EXPECT_FALSE(ParseRequestPath("/"));
  EXPECT_FALSE(ParseRequestPath("/metrics"));
}

TEST(RequestPathTest, Resources) {
  auto all = ParseRequestPath("/api/v1/configmaps");
  EXPECT_EQ(all->type, Type::kResource);
  EXPECT_EQ(all->resource, "configmaps");
  EXPECT_EQ(all->namespace_, "");
  auto ns = ParseRequestPath("/api/v1/namespaces/demo/configmaps/cm-1");
  EXPECT_EQ(ns->namespace_, "demo");
  EXPECT_EQ(ns->resource, "configmaps");
  EXPECT_EQ(ns->name, "cm-1");
  auto dep = ParseRequestPath("/apis/apps/v1/namespaces/d/deployments");
  EXPECT_EQ(dep->group, "apps");
  EXPECT_EQ(dep->version, "v1");
  EXPECT_EQ(dep->resource, "deployments");
  auto sub = ParseRequestPath("/api/v1/namespaces/d/pods/p/status");
  EXPECT_EQ(sub->subresource, "status");
  EXPECT_FALSE(ParseRequestPath("/api/v1/namespaces/d/pods/p/status/x"));
}

TEST(RequestPathTest, NamespacesThemselves) {
  auto list = ParseRequestPath("/api/v1/namespaces");
  EXPECT_EQ(list->resource, "namespaces");
  EXPECT_EQ(list->name, "");
  auto one = ParseRequestPath("/api/v1/namespaces/demo");
  EXPECT_EQ(one->resource, "namespaces");
  EXPECT_EQ(one->name, "demo");
  EXPECT_EQ(one->namespace_, "");
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

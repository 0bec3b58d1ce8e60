#include "server/kubeapi/discovery_documents.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/client/discovery.h"
#include "server/kubeapi/test_util.h"

namespace server {
namespace kubeapi {
namespace {

using informer::client::ApiResource;

// Resources as the real API server's discovery documents describe them.
std::vector<ApiResource> Captured() {
  std::vector<ApiResource> out;
  auto core = informer::client::ParseApiResourceList(
      ReadCapture("discovery-api-v1.json"), "");
  auto apps = informer::client::ParseApiResourceList(
      ReadCapture("discovery-apis-apps-v1.json"), "apps");
  for (const auto& r : *core) {
    if (r.resource == "configmaps" || r.resource == "pods") out.push_back(r);
  }
  for (const auto& r : *apps) {
    if (r.resource == "deployments") out.push_back(r);
  }
  return out;
}

TEST(DiscoveryDocumentsTest, ApiVersionsIsTheApiServersBytes) {
  std::string want = ReadCapture("discovery-api.json");
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_EQ(ApiVersionsDocument("127.0.0.1:6443"), want);
}

TEST(DiscoveryDocumentsTest, GroupListHasTheServedGroupsInTheApiServersForm) {
  std::vector<ApiResource> resources = Captured();
  std::string doc = ApiGroupListDocument(resources);
  const std::string apps =
      R"({"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}})";
  ASSERT_NE(ReadCapture("discovery-apis.json").find(apps), std::string::npos);
  EXPECT_EQ(doc, absl::StrCat(
                     R"({"kind":"APIGroupList","apiVersion":"v1","groups":[)",
                     apps, "]}"));
}

// The API server's entry for `resource` in a captured APIResourceList, as
// the facade must write it: the same bytes but for the verbs (read-only)
// and storageVersionHash (the facade stores nothing).
std::string ReadOnlyEntry(const std::string& capture,
                          const std::string& resource) {
  std::string doc = ReadCapture(capture);
  size_t start = doc.find(absl::StrCat(R"({"name":")", resource, "\""));
  EXPECT_NE(start, std::string::npos) << resource;
  std::string entry = doc.substr(start, doc.find('}', start) + 1 - start);
  size_t verbs = entry.find(R"("verbs":[)");
  entry.replace(verbs, entry.find(']', verbs) + 1 - verbs,
                R"("verbs":["get","list","watch"])");
  size_t hash = entry.find(R"(,"storageVersionHash":")");
  if (hash != std::string::npos) {
    entry.erase(hash, entry.find('"', hash + 23) + 1 - hash);
  }
  return entry;
}

// Entries are the API server's, byte for byte (singularName "" for
// built-in types as v1.24 writes it, categories kept for `kubectl get
// all`), with only the read verbs.
TEST(DiscoveryDocumentsTest, CoreResourceListIsTheApiServersWithReadVerbs) {
  std::vector<ApiResource> resources = Captured();
  absl::optional<std::string> doc =
      ApiResourceListDocument(resources, "", "v1");
  ASSERT_TRUE(doc.has_value());
  const std::string cm = ReadOnlyEntry("discovery-api-v1.json", "configmaps");
  const std::string pods = ReadOnlyEntry("discovery-api-v1.json", "pods");
  EXPECT_EQ(
      cm,
      R"({"name":"configmaps","singularName":"","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"],"shortNames":["cm"]})");
  EXPECT_NE(pods.find(R"("categories":["all"])"), std::string::npos);
  EXPECT_EQ(*doc,
            absl::StrCat(R"({"kind":"APIResourceList","groupVersion":"v1",)",
                         R"("resources":[)", cm, ",", pods, "]}"));
  // The same prefix as the API server's document (no apiVersion for v1).
  EXPECT_EQ(ReadCapture("discovery-api-v1.json")
                .rfind(R"({"kind":"APIResourceList","groupVersion":"v1",)", 0),
            0u);
  // A singularName the server did write (a CRD's) is written again.
  ApiResource crd;
  crd.group = "example.com";
  crd.version = "v1";
  crd.resource = "widgets";
  crd.singular = "widget";
  crd.kind = "Widget";
  EXPECT_NE(ApiResourceListDocument({crd}, "example.com", "v1")
                ->find(R"("singularName":"widget")"),
            std::string::npos);
}

TEST(DiscoveryDocumentsTest, GroupResourceListAndUnknownGroups) {
  std::vector<ApiResource> resources = Captured();
  absl::optional<std::string> doc =
      ApiResourceListDocument(resources, "apps", "v1");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(
      *doc,
      absl::StrCat(
          R"({"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[)",
          ReadOnlyEntry("discovery-apis-apps-v1.json", "deployments"), "]}"));
  EXPECT_FALSE(ApiResourceListDocument(resources, "batch", "v1").has_value());
  EXPECT_FALSE(ApiGroupDocument(resources, "batch").has_value());
  EXPECT_EQ(
      *ApiGroupDocument(resources, "apps"),
      R"({"kind":"APIGroup","apiVersion":"v1","name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}})");
  // /api/v1 exists even with no core resource served.
  EXPECT_TRUE(ApiResourceListDocument({}, "", "v1").has_value());
}

TEST(DiscoveryDocumentsTest, ClientsParseWhatWeServe) {
  std::vector<ApiResource> resources = Captured();
  auto parsed = informer::client::ParseApiResourceList(
      *ApiResourceListDocument(resources, "", "v1"), "");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[1].kind, "Pod");
  EXPECT_EQ((*parsed)[1].verbs,
            (std::vector<std::string>{"get", "list", "watch"}));
  auto groups =
      informer::client::ParseApiGroupList(ApiGroupListDocument(resources));
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ((*groups)[0].name, "apps");
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

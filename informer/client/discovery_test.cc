#include "informer/client/discovery.h"

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/test_server.h"

namespace informer {
namespace client {
namespace {

using ::testing::HasSubstr;

std::string Recorded(const std::string& name) {
  std::ifstream in("testdata/kube-apiserver-v1.24/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<ApiResource> RecordedResources() {
  std::vector<ApiResource> all =
      *ParseApiResourceList(Recorded("discovery-api-v1.json"), "");
  auto apps =
      ParseApiResourceList(Recorded("discovery-apis-apps-v1.json"), "apps");
  all.insert(all.end(), apps->begin(), apps->end());
  ApiResource events;
  events.group = "events.k8s.io";
  events.version = "v1";
  events.resource = "events";
  events.singular = "event";
  events.kind = "Event";
  events.namespaced = true;
  events.short_names = {"ev"};
  all.push_back(events);
  return all;
}

TEST(ParseDiscoveryTest, ApiAndApis) {
  auto core = ParseApiVersions(Recorded("discovery-api.json"));
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(core->versions, std::vector<std::string>{"v1"});
  auto groups = ParseApiGroupList(Recorded("discovery-apis.json"));
  ASSERT_TRUE(groups.ok());
  ASSERT_GE(groups->size(), 2u);
  EXPECT_EQ((*groups)[1].name, "apps");
  // Preferred version first.
  for (const ApiGroup& g : *groups) {
    if (g.name == "events.k8s.io") {
      EXPECT_EQ(g.versions, (std::vector<std::string>{"v1", "v1beta1"}));
    }
  }
  EXPECT_FALSE(ParseApiGroupList("{").ok());
}

TEST(ParseDiscoveryTest, ResourceListSkipsSubresourcesAndDerivesSingular) {
  auto list =
      ParseApiResourceList(Recorded("discovery-apis-apps-v1.json"), "apps");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 5u);  // 12 entries, 7 of them subresources
  const ApiResource& d = (*list)[1];
  EXPECT_EQ(d.resource, "daemonsets");
  EXPECT_EQ(d.singular, "daemonset");
  EXPECT_EQ(d.kind, "DaemonSet");
  EXPECT_EQ(d.GroupVersion(), "apps/v1");
  EXPECT_TRUE(d.namespaced);
  EXPECT_EQ(d.short_names, std::vector<std::string>{"ds"});
}

struct Case {
  const char* input;
  const char* group;
  const char* version;
  const char* resource;
  const char* kind;
  bool namespaced;
};

TEST(ResolveResourceTest, WhatUsersType) {
  const std::vector<ApiResource> all = RecordedResources();
  const Case cases[] = {
      {"pods", "", "v1", "pods", "Pod", true},
      {"po", "", "v1", "pods", "Pod", true},
      {"pod", "", "v1", "pods", "Pod", true},
      {"Pod", "", "v1", "pods", "Pod", true},
      {"v1/pods", "", "v1", "pods", "Pod", true},
      {"deployments.apps", "apps", "v1", "deployments", "Deployment", true},
      {"deployments.v1.apps", "apps", "v1", "deployments", "Deployment", true},
      {"apps/v1/deployments", "apps", "v1", "deployments", "Deployment", true},
      {"apps/deployments", "apps", "v1", "deployments", "Deployment", true},
      {"deploy", "apps", "v1", "deployments", "Deployment", true},
      {"ns", "", "v1", "namespaces", "Namespace", false},
      {"nodes", "", "v1", "nodes", "Node", false},
      {"events", "", "v1", "events", "Event", true},  // core wins
      {"events.events.k8s.io", "events.k8s.io", "v1", "events", "Event", true},
  };
  for (const Case& c : cases) {
    auto r = ResolveResource(all, c.input);
    ASSERT_TRUE(r.ok()) << c.input << ": " << r.status();
    EXPECT_EQ(r->group, c.group) << c.input;
    EXPECT_EQ(r->version, c.version) << c.input;
    EXPECT_EQ(r->resource, c.resource) << c.input;
    EXPECT_EQ(r->kind, c.kind) << c.input;
    EXPECT_EQ(r->namespaced, c.namespaced) << c.input;
  }
}

TEST(ResolveResourceTest, UnknownNameListsNearMatches) {
  const std::vector<ApiResource> all = RecordedResources();
  auto r = ResolveResource(all, "podz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("the server doesn't have a resource type \"podz\"; "
                        "did you mean: pods"));
  auto d = ResolveResource(all, "deploymnts.apps");
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("deployments.apps"));
  EXPECT_FALSE(ResolveResource(all, "apps/v2/deployments").ok());
  EXPECT_FALSE(ResolveResource(all, "a/b/c/d").ok());
}

constexpr char kCrdGroup[] =
    R"({"name":"stable.example.com","versions":[{"groupVersion":)"
    R"("stable.example.com/v1","version":"v1"}],"preferredVersion":)"
    R"({"groupVersion":"stable.example.com/v1","version":"v1"}},)";
constexpr char kCrdResources[] =
    R"({"kind":"APIResourceList","apiVersion":"v1","groupVersion":)"
    R"("stable.example.com/v1","resources":[{"name":"crontabs",)"
    R"("singularName":"crontab","namespaced":true,"kind":"CronTab",)"
    R"("verbs":["get","list","watch"],"shortNames":["ct"]}]})";

TEST(DiscoveryTest, FetchesCachesAndRefreshesOnMiss) {
  testing::TestServer srv;
  std::atomic<bool> crd_installed{false};
  std::atomic<int> api_calls{0};
  auto serve = [](const std::string& body) {
    return [body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "application/json");
    };
  };
  srv.server().Get(
      "/api", [&](const httplib::Request&, httplib::Response& res) {
        ++api_calls;
        res.set_content(Recorded("discovery-api.json"), "application/json");
      });
  srv.server().Get("/api/v1", serve(Recorded("discovery-api-v1.json")));
  srv.server().Get("/apis/apps/v1",
                   serve(Recorded("discovery-apis-apps-v1.json")));
  srv.server().Get("/apis/stable.example.com/v1", serve(kCrdResources));
  srv.server().Get("/apis", [&](const httplib::Request&,
                                httplib::Response& res) {
    std::string body = Recorded("discovery-apis.json");
    if (crd_installed) {
      body = absl::StrReplaceAll(
          body, {{"\"groups\":[", std::string("\"groups\":[") + kCrdGroup}});
    }
    res.set_content(body, "application/json");
  });
  // Every other group version answers 404 and is skipped.
  srv.Start();
  RestConfig rc;
  rc.server = srv.url();
  auto t = HttpTransport::Create(
      rc, std::make_unique<StaticCredentialProvider>(Credentials()),
      RealClock());
  ASSERT_TRUE(t.ok());
  Discovery d(t->get());
  auto deploy = d.Resolve("deploy");
  ASSERT_TRUE(deploy.ok()) << deploy.status();
  EXPECT_EQ(deploy->GroupVersion(), "apps/v1");
  EXPECT_EQ(d.refreshes(), 1);
  ASSERT_TRUE(d.Resolve("cm").ok());
  EXPECT_EQ(d.refreshes(), 1);  // cached
  EXPECT_EQ(api_calls.load(), 1);

  // A CRD that did not exist: a miss refreshes, still not there.
  EXPECT_TRUE(absl::IsNotFound(d.Resolve("ct").status()));
  EXPECT_EQ(d.refreshes(), 2);
  crd_installed = true;
  auto ct = d.Resolve("ct");
  ASSERT_TRUE(ct.ok()) << ct.status();
  EXPECT_EQ(ct->resource, "crontabs");
  EXPECT_EQ(ct->group, "stable.example.com");
  EXPECT_EQ(d.refreshes(), 3);
  EXPECT_TRUE(d.Resolve("crontabs.stable.example.com").ok());
  EXPECT_EQ(d.refreshes(), 3);
}

}  // namespace
}  // namespace client
}  // namespace informer

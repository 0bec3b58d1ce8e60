#include "emulator/resource_registry.h"

#include <set>
#include <string>

#include "emulator/test_util.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"

namespace emulator {
namespace {

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

// The member names of a JSON object, in order.
std::vector<std::string> Keys(const rapidjson::Value& v) {
  std::vector<std::string> out;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    out.push_back(it->name.GetString());
  }
  return out;
}

const rapidjson::Value* FindResource(const rapidjson::Value& list,
                                     const std::string& name) {
  for (const auto& r : list["resources"].GetArray()) {
    if (name == r["name"].GetString()) return &r;
  }
  return nullptr;
}

TEST(ResourceRegistryTest, FindsBuiltinsByNameAndGroup) {
  auto reg = ResourceRegistry::WithBuiltins();
  ASSERT_NE(reg->FindByName("pods"), nullptr);
  EXPECT_EQ(reg->FindByName("pods")->kind, "Pod");
  EXPECT_EQ(reg->FindByName("events")->group, "") << "core preferred";
  EXPECT_EQ(reg->FindByName("events.events.k8s.io")->group, "events.k8s.io");
  EXPECT_EQ(reg->FindByName("deployments")->group, "apps");
  EXPECT_EQ(reg->FindByName("deployments.v1.apps")->resource, "deployments");
  EXPECT_EQ(reg->FindByName("nope"), nullptr);
  EXPECT_FALSE(reg->FindByName("nodes")->namespaced);
  EXPECT_EQ(reg->Find("apps", "v1", "replicasets")->QualifiedResource(),
            "replicasets.apps");
}

TEST(ResourceRegistryTest, RegisterRejectsDuplicatesAndIncompleteInfo) {
  auto reg = ResourceRegistry::WithBuiltins();
  ResourceInfo crd;
  crd.group = "example.com";
  crd.version = "v1";
  crd.resource = "widgets";
  crd.kind = "Widget";
  EXPECT_TRUE(reg->Register(crd).ok());
  EXPECT_EQ(reg->Register(crd).code(), absl::StatusCode::kAlreadyExists);
  ResourceInfo bad;
  bad.version = "v1";
  EXPECT_EQ(reg->Register(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reg->ApiGroupJson("example.com").has_value());
}

TEST(ResourceRegistryTest, ApiVersionsHasTheCapturedShape) {
  auto reg = ResourceRegistry::WithBuiltins();
  EXPECT_EQ(reg->ApiVersionsJson("127.0.0.1:6443"),
            CaptureBody("discovery-api.json"));
}

TEST(ResourceRegistryTest, CoreResourceListMatchesCapturedEntries) {
  auto reg = ResourceRegistry::WithBuiltins();
  rapidjson::Document ours = Parse(*reg->ResourceListJson("", "v1"));
  rapidjson::Document real = Parse(ReadCapture("discovery-api-v1.json"));
  EXPECT_EQ(Keys(ours), Keys(real));
  EXPECT_STREQ(ours["groupVersion"].GetString(), "v1");
  // Every resource we serve is described exactly as v1.24 describes it.
  int compared = 0;
  for (const auto& r : ours["resources"].GetArray()) {
    const rapidjson::Value* want = FindResource(real, r["name"].GetString());
    ASSERT_NE(want, nullptr) << r["name"].GetString();
    EXPECT_TRUE(r == *want) << r["name"].GetString();
    ++compared;
  }
  EXPECT_GE(compared, 15);
}

TEST(ResourceRegistryTest, AppsResourceListMatchesCapturedEntries) {
  auto reg = ResourceRegistry::WithBuiltins();
  rapidjson::Document ours = Parse(*reg->ResourceListJson("apps", "v1"));
  rapidjson::Document real = Parse(ReadCapture("discovery-apis-apps-v1.json"));
  EXPECT_EQ(Keys(ours), Keys(real));
  for (const auto& r : ours["resources"].GetArray()) {
    const rapidjson::Value* want = FindResource(real, r["name"].GetString());
    ASSERT_NE(want, nullptr) << r["name"].GetString();
    EXPECT_TRUE(r == *want) << r["name"].GetString();
  }
}

TEST(ResourceRegistryTest, GroupListHasTheCapturedShape) {
  auto reg = ResourceRegistry::WithBuiltins();
  rapidjson::Document ours = Parse(reg->ApiGroupListJson());
  rapidjson::Document real = Parse(ReadCapture("discovery-apis.json"));
  EXPECT_EQ(Keys(ours), Keys(real));
  std::set<std::string> real_groups;
  for (const auto& g : real["groups"].GetArray()) {
    real_groups.insert(g["name"].GetString());
  }
  for (const auto& g : ours["groups"].GetArray()) {
    EXPECT_EQ(real_groups.count(g["name"].GetString()), 1u)
        << g["name"].GetString();
    EXPECT_EQ(Keys(g), Keys(real["groups"][0]));
  }
  EXPECT_FALSE(reg->ResourceListJson("nope", "v1").has_value());
  EXPECT_FALSE(reg->ApiGroupJson("nope").has_value());
}

}  // namespace
}  // namespace emulator

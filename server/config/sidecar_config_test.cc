#include "server/config/sidecar_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ErrorOf(absl::string_view yaml) {
  absl::StatusOr<SidecarConfig> c = ParseSidecarConfig(yaml, "cfg.yaml");
  EXPECT_FALSE(c.ok()) << "accepted:\n" << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(SidecarConfigTest, ParsesTheExampleFileWithEveryKey) {
  absl::StatusOr<SidecarConfig> c = LoadSidecarConfigFile(
      "server/config/testdata/sidecar_config_example.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->allow_unlisted_resources);
  EXPECT_TRUE(c->has_lazy_idle_timeout);
  EXPECT_EQ(c->lazy_idle_timeout, absl::Minutes(5));
  ASSERT_EQ(c->resources.size(), 3u);

  const SidecarConfig::Resource& pods = c->resources[0];
  EXPECT_EQ(pods.config.resource, "pods");
  EXPECT_TRUE(pods.has_namespace);
  EXPECT_EQ(pods.config.namespace_, "default");
  EXPECT_EQ(pods.config.label_selector, "tier in (frontend,backend),!canary");
  EXPECT_EQ(pods.config.field_selector, "status.phase!=Succeeded");
  EXPECT_EQ(pods.config.resync_period, absl::Minutes(10));
  EXPECT_FALSE(pods.config.metadata_only);
  EXPECT_THAT(pods.config.drop_fields,
              ElementsAre("metadata.annotations", "status.conditions"));
  EXPECT_THAT(pods.config.label_indexes, ElementsAre("app"));
  EXPECT_THAT(pods.config.field_indexes, ElementsAre("spec.nodeName"));
  EXPECT_THAT(
      pods.config.origin,
      StartsWith("server/config/testdata/sidecar_config_example.yaml:"));

  const SidecarConfig::Resource& deploy = c->resources[1];
  EXPECT_EQ(deploy.config.resource, "deployments.apps");
  EXPECT_TRUE(deploy.has_namespace);
  EXPECT_EQ(deploy.config.namespace_, "");
  EXPECT_THAT(deploy.config.label_indexes,
              ElementsAre("app.kubernetes.io/name"));

  const SidecarConfig::Resource& cms = c->resources[2];
  EXPECT_EQ(cms.config.resource, "configmaps");
  EXPECT_FALSE(cms.has_namespace);
  EXPECT_TRUE(cms.config.metadata_only);
}

TEST(SidecarConfigTest, DefaultNamespaceOnlyForResourcesThatSetNone) {
  absl::StatusOr<SidecarConfig> c = ParseSidecarConfig(
      "resources:\n"
      "- resource: pods\n"
      "- resource: secrets\n"
      "  namespace: kube-system\n"
      "- resource: nodes\n"
      "  namespace: \"\"\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ApplyDefaultNamespace(&*c, "team-a");
  EXPECT_EQ(c->resources[0].config.namespace_, "team-a");
  EXPECT_EQ(c->resources[1].config.namespace_, "kube-system");
  EXPECT_EQ(c->resources[2].config.namespace_, "");
  EXPECT_FALSE(c->allow_unlisted_resources);
  EXPECT_FALSE(c->has_lazy_idle_timeout);
}

TEST(SidecarConfigTest, LazyOnlyConfigIsValid) {
  absl::StatusOr<SidecarConfig> c = ParseSidecarConfig(
      "allowUnlistedResources: true\nlazyIdleTimeout: 90s\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->resources.empty());
  EXPECT_EQ(c->lazy_idle_timeout, absl::Seconds(90));
}

TEST(SidecarConfigTest, UnknownKeyNamesFileLineAndField) {
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "  labelSelectr: app=web\n"),
            "cfg.yaml:3:3: resources[0].labelSelectr: unknown field (known: "
            "resource, namespace, labelSelector, fieldSelector, "
            "resyncPeriod, metadataOnly, transform, indexes)");
  EXPECT_THAT(ErrorOf("resourcez: []\n"),
              StartsWith("cfg.yaml:1:1: resourcez: unknown field"));
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  transform:\n"
                      "    drop: [a]\n"),
              StartsWith("cfg.yaml:4:5: resources[0].transform.drop: "
                         "unknown field (known: dropFields)"));
}

TEST(SidecarConfigTest, WrongTypesNameTheField) {
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "  metadataOnly: maybe\n"),
            "cfg.yaml:3:17: resources[0].metadataOnly: expected true or false");
  EXPECT_EQ(ErrorOf("resources: pods\n"),
            "cfg.yaml:1:12: resources: expected a list");
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: [pods]\n"),
            "cfg.yaml:2:13: resources[0].resource: expected a string");
  EXPECT_EQ(ErrorOf("allowUnlistedResources: 3\n"),
            "cfg.yaml:1:25: allowUnlistedResources: expected true or false");
  EXPECT_THAT(ErrorOf("resources:\n- pods\n"),
              StartsWith("cfg.yaml:2:3: resources[0]: expected a mapping"));
  EXPECT_THAT(ErrorOf("- a\n"), StartsWith("cfg.yaml:1:1: (top level)"));
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "  transform: [metadata.annotations]\n"),
            "cfg.yaml:3:14: resources[0].transform: expected a mapping");
}

TEST(SidecarConfigTest, BadDurationsNameTheField) {
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "  resyncPeriod: 5x\n"),
            "cfg.yaml:3:17: resources[0].resyncPeriod: invalid duration "
            "\"5x\" (use a non-negative Go duration like 30s, 5m, 1h30m, 0)");
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  resyncPeriod: -5m\n"),
              StartsWith("cfg.yaml:3:17: resources[0].resyncPeriod: invalid "
                         "duration \"-5m\""));
  EXPECT_THAT(ErrorOf("allowUnlistedResources: true\nlazyIdleTimeout: 0\n"),
              StartsWith("cfg.yaml:2:18: lazyIdleTimeout: must be positive"));
}

TEST(SidecarConfigTest, BadSelectorsNameTheField) {
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  labelSelector: \"app in (a\"\n"),
              StartsWith("cfg.yaml:3:18: resources[0].labelSelector: "));
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "  fieldSelector: spec.nodeName\n"),
            "cfg.yaml:3:18: resources[0].fieldSelector: invalid field "
            "selector term \"spec.nodeName\": expected FIELD=VALUE, "
            "FIELD==VALUE or FIELD!=VALUE");
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  fieldSelector: a..b=c\n"),
              HasSubstr("empty segment"));
}

TEST(SidecarConfigTest, BadIndexesAndTransformsNameTheField) {
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  indexes:\n"
                      "  - label: -bad-\n"),
              StartsWith("cfg.yaml:4:12: resources[0].indexes[0].label: "
                         "invalid label key \"-bad-\""));
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  indexes:\n"
                      "  - {label: app, field: spec.nodeName}\n"),
              StartsWith("cfg.yaml:4:5: resources[0].indexes[0]: expected one "
                         "of"));
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  indexes:\n"
                      "  - node: x\n"),
              StartsWith("cfg.yaml:4:5: resources[0].indexes[0].node: unknown "
                         "field"));
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  indexes:\n"
                      "  - ownerUid: false\n"),
              StartsWith("cfg.yaml:4:15: resources[0].indexes[0].ownerUid: "));
  EXPECT_THAT(ErrorOf("resources:\n"
                      "- resource: pods\n"
                      "  transform:\n"
                      "    dropFields: [metadata.name]\n"),
              StartsWith("cfg.yaml:4:18: resources[0].transform.dropFields[0]: "
                         "\"metadata.name\" cannot be dropped"));
}

TEST(SidecarConfigTest, DuplicateAndMissingResources) {
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- resource: pods\n"
                    "- resource: Pods\n"),
            "cfg.yaml:3:13: resources[1].resource: duplicate resource "
            "\"Pods\" (first listed at cfg.yaml:2:3)");
  EXPECT_EQ(ErrorOf("resources:\n"
                    "- namespace: x\n"),
            "cfg.yaml:2:3: resources[0].resource: required (e.g. pods, "
            "deployments.apps)");
  EXPECT_THAT(ErrorOf("resources: []\n"),
              HasSubstr("resources: lists no resource"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("cfg.yaml: empty"));
}

TEST(SidecarConfigTest, InvalidYamlHasAPosition) {
  EXPECT_THAT(ErrorOf("resources:\n- resource: pods\n  namespace: [a\n"),
              StartsWith("cfg.yaml:"));
  EXPECT_THAT(ErrorOf("resources:\n- resource: pods\n  namespace: [a\n"),
              HasSubstr("invalid YAML"));
  std::string deep(5000, '[');
  EXPECT_THAT(ErrorOf(deep), HasSubstr("nested more than"));
}

TEST(SidecarConfigTest, MissingFileIsNamed) {
  absl::StatusOr<SidecarConfig> c = LoadSidecarConfigFile("/nonexistent.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("/nonexistent.yaml"));
}

TEST(SidecarConfigTest, ResourceListShorthand) {
  absl::StatusOr<SidecarConfig> c =
      SidecarConfigFromResourceList(" pods, configmaps ,deployments.apps");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->resources.size(), 3u);
  EXPECT_EQ(c->resources[0].config.resource, "pods");
  EXPECT_EQ(c->resources[1].config.resource, "configmaps");
  EXPECT_EQ(c->resources[2].config.resource, "deployments.apps");
  EXPECT_FALSE(c->resources[0].has_namespace);
  EXPECT_EQ(c->resources[0].config.origin, "--resources");
  EXPECT_TRUE(SidecarConfigFromResourceList("")->resources.empty());
  EXPECT_THAT(
      std::string(SidecarConfigFromResourceList("pods,,cm").status().message()),
      HasSubstr("empty item"));
  EXPECT_THAT(
      std::string(
          SidecarConfigFromResourceList("pods,pods").status().message()),
      HasSubstr("duplicate resource \"pods\""));
}

TEST(SidecarConfigTest, GoDurations) {
  EXPECT_EQ(*ParseGoDuration("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseGoDuration("5m"), absl::Minutes(5));
  EXPECT_EQ(*ParseGoDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseGoDuration("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseGoDuration("0"), absl::ZeroDuration());
  for (const char* bad : {"", "5", "5 m", "-1s", "inf", "5d", "abc"}) {
    EXPECT_FALSE(ParseGoDuration(bad).ok()) << bad;
  }
}

TEST(SidecarConfigTest, FieldSelectorSyntax) {
  EXPECT_TRUE(ValidateFieldSelector("").ok());
  EXPECT_TRUE(ValidateFieldSelector("spec.nodeName=n1").ok());
  EXPECT_TRUE(
      ValidateFieldSelector("metadata.name==a,status.phase!=Running").ok());
  EXPECT_TRUE(ValidateFieldSelector("spec.nodeName=").ok());
  EXPECT_FALSE(ValidateFieldSelector("=x").ok());
  EXPECT_FALSE(ValidateFieldSelector("a=b=c").ok());
  EXPECT_FALSE(ValidateFieldSelector("a,b=c").ok());
}

}  // namespace
}  // namespace server

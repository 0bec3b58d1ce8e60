#include "emulator/object_name.h"

#include <memory>
#include <string>
#include <vector>

#include "emulator/api_status.h"
#include "emulator/resource_registry.h"
#include "gtest/gtest.h"

namespace emulator {
namespace {

class ObjectNameTest : public ::testing::Test {
 protected:
  std::string Message(absl::string_view resource, absl::string_view name,
                      absl::string_view generate_name = "") {
    const ResourceInfo& r = *registry_->FindByName(resource);
    std::vector<FieldError> e = ValidateObjectName(r, name, generate_name);
    return e.empty() ? ""
                     : InvalidFieldsStatus(r.group, r.kind, name, e).message;
  }
  std::unique_ptr<ResourceRegistry> registry_ =
      ResourceRegistry::WithBuiltins();
};

// The texts are v1.37.2's answers (real_emulator_differential_test).
TEST_F(ObjectNameTest, SubdomainNamesAsTheRealServerChecksThem) {
  EXPECT_EQ(Message("configmaps", "ok.name-1"), "");
  EXPECT_EQ(
      Message("configmaps", "Not_Valid"),
      "ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: "
      "\"Not_Valid\": a lowercase RFC 1123 subdomain must consist of lower "
      "case alphanumeric characters, '-' or '.', and must start and end with "
      "an alphanumeric character (e.g. 'example.com', regex used for "
      "validation is "
      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  for (const char* bad : {"-abc", "abc.", "a..b", "A"}) {
    EXPECT_NE(Message("configmaps", bad), "") << bad;
  }
  std::string long_name(254, 'a');
  EXPECT_EQ(Message("configmaps", long_name),
            "ConfigMap \"" + long_name +
                "\" is invalid: metadata.name: Invalid value: \"" + long_name +
                "\": must be no more than 253 characters");
  EXPECT_NE(Message("deployments.apps", "Bad").find("Deployment.apps \"Bad\""),
            std::string::npos);
}

TEST_F(ObjectNameTest, NamespacesAndServicesTakeLabels) {
  EXPECT_EQ(Message("namespaces", "a.b"),
            "Namespace \"a.b\" is invalid: metadata.name: Invalid value: "
            "\"a.b\": must not contain dots");
  EXPECT_EQ(Message("services", "a.b"),
            "Service \"a.b\" is invalid: metadata.name: Invalid value: "
            "\"a.b\": must not contain dots");
  EXPECT_EQ(Message("services", "1abc"), "");
  EXPECT_EQ(
      Message("namespaces", "Bad"),
      "Namespace \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\": "
      "a lowercase RFC 1123 label must consist of lower case alphanumeric "
      "characters or '-', and must start and end with an alphanumeric "
      "character (e.g. 'my-name',  or '123-abc', regex used for validation "
      "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
}

TEST_F(ObjectNameTest, EventsTakeAnyPathSegment) {
  const ResourceInfo& ev = *registry_->FindByName("events");
  EXPECT_TRUE(ValidateObjectName(ev, "pod-x.d4vl4", "pod-x.").empty());
  EXPECT_EQ(ValidateObjectName(ev, "", "").size(), 1u);
}

TEST_F(ObjectNameTest, MissingNameAndGenerateName) {
  const ResourceInfo& cm = *registry_->FindByName("configmaps");
  std::vector<FieldError> none = ValidateObjectName(cm, "", "");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].type, FieldError::Type::kRequired);
  EXPECT_TRUE(ValidateObjectName(cm, "ok-x2b4c", "ok-").empty());
  // A bad prefix: its own error, then the generated name's.
  std::vector<FieldError> bad = ValidateObjectName(cm, "Bad_5w6gm", "Bad_");
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0].field, "metadata.generateName");
  EXPECT_EQ(bad[1].field, "metadata.name");
}

}  // namespace
}  // namespace emulator

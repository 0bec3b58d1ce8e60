#include "server/security/authz_test_tokens.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace server {

std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string AppTokensYaml(bool with_secrets) {
  std::string yaml = absl::StrCat(
      "tokens:\n"
      "- name: app\n"
      "  token: \"",
      kAppToken,
      "\"\n"
      "  resources: [pods, configmaps]\n"
      "  namespaces: [default]\n"
      "- name: admin\n"
      "  token: ",
      kAdminToken,
      "\n"
      "  resources: ['*']\n");
  if (with_secrets) {
    absl::StrAppend(&yaml, "- name: secret-reader\n  token: ", kSecretToken,
                    "\n  resources: [secrets]\n");
  }
  return yaml;
}

absl::StatusOr<std::unique_ptr<Authorizer>> LoadTestAuthorizer(
    absl::string_view yaml, bool allow_secrets) {
  Authorizer::Options options;
  options.allow_secrets = allow_secrets;
  options.configured_resources = {"configmaps", "pods", "secrets"};
  return Authorizer::FromTokensYaml(yaml, "tokens.yaml", TestTempDir(),
                                    options);
}

}  // namespace server

#ifndef SERVER_SECURITY_AUTHZ_TEST_TOKENS_H_
#define SERVER_SECURITY_AUTHZ_TEST_TOKENS_H_

// The tokens file the Authorizer's tests share (authz_test here, and
// sidecar_server_authz_test over real gRPC in server/app): an "app" token
// limited to pods and configmaps in "default", an "admin" token for every
// resource and, on request, a "secret-reader" token, loaded against a
// sidecar that serves configmaps, pods and secrets. Stateless; safe from any
// thread.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/authz.h"

namespace server {

inline constexpr char kAppToken[] = "app-token-0123456789abcdef";
inline constexpr char kAdminToken[] = "admin-token-0123456789abcdef";
inline constexpr char kSecretToken[] = "secret-token-0123456789abcdef";

// $TEST_TMPDIR, or /tmp outside Bazel: where relative token files resolve.
std::string TestTempDir();

// The tokens YAML above; the secret-reader token only `with_secrets`.
std::string AppTokensYaml(bool with_secrets);

// An Authorizer from `yaml` (named "tokens.yaml" in errors) for a sidecar
// that serves configmaps, pods and secrets, relative files in TestTempDir().
absl::StatusOr<std::unique_ptr<Authorizer>> LoadTestAuthorizer(
    absl::string_view yaml, bool allow_secrets = false);

}  // namespace server

#endif  // SERVER_SECURITY_AUTHZ_TEST_TOKENS_H_

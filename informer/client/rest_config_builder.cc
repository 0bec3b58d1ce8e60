#include "informer/client/rest_config_builder.h"

#include <utility>

#include "absl/strings/match.h"

namespace informer {
namespace client {
namespace {

// A server URL names no trailing '/': paths are appended to it.
std::string TrimSlashes(std::string server) {
  while (absl::EndsWith(server, "/")) server.pop_back();
  return server;
}

}  // namespace

RestConfig RestConfigFor(const ApiEndpoint& endpoint,
                         const RestConfig& transport) {
  RestConfig config;
  config.server = TrimSlashes(endpoint.server);
  config.ca_file = endpoint.ca_file;
  config.bearer_token_file = endpoint.bearer_token_file;
  CopyTransportSettings(transport, &config);
  return config;
}

void CopyTransportSettings(const RestConfig& from, RestConfig* to) {
  // Listed here are the fields that are not transport settings, so that a
  // transport setting added to RestConfig is copied without a change here.
  RestConfig merged = from;
  merged.server = std::move(to->server);
  merged.ca_file = std::move(to->ca_file);
  merged.ca_data = std::move(to->ca_data);
  merged.insecure_skip_tls_verify = to->insecure_skip_tls_verify;
  merged.tls_server_name = std::move(to->tls_server_name);
  merged.proxy_url = std::move(to->proxy_url);
  merged.bearer_token = std::move(to->bearer_token);
  merged.bearer_token_file = std::move(to->bearer_token_file);
  merged.client_cert_file = std::move(to->client_cert_file);
  merged.client_cert_data = std::move(to->client_cert_data);
  merged.client_key_file = std::move(to->client_key_file);
  merged.client_key_data = std::move(to->client_key_data);
  merged.username = std::move(to->username);
  merged.password = std::move(to->password);
  merged.exec = std::move(to->exec);
  merged.namespace_ = std::move(to->namespace_);
  *to = std::move(merged);
}

void ApplyOverrides(const ConfigOverrides& overrides, RestConfig* config) {
  if (!overrides.server.empty()) {
    config->server = TrimSlashes(overrides.server);
  }
  if (!overrides.token.empty()) {
    config->bearer_token = overrides.token;
    config->bearer_token_file.clear();
  }
  if (!overrides.namespace_.empty()) config->namespace_ = overrides.namespace_;
  if (overrides.insecure_skip_tls_verify.has_value()) {
    config->insecure_skip_tls_verify = *overrides.insecure_skip_tls_verify;
  }
}

}  // namespace client
}  // namespace informer

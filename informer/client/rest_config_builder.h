#ifndef INFORMER_CLIENT_REST_CONFIG_BUILDER_H_
#define INFORMER_CLIENT_REST_CONFIG_BUILDER_H_

#include <string>

#include "informer/client/kubeconfig.h"

namespace informer {
namespace client {

// The one place that knows which RestConfig fields are "where and who"
// (the endpoint and its credentials) and which are "how" (the transport
// settings that come from flags): every way to a cluster (a kubeconfig
// context, in-cluster, a cache upstream) builds its RestConfig here, so a
// transport setting added to RestConfig reaches all of them. Pure
// functions; thread-safe.

// An API server and the credentials read from files.
struct ApiEndpoint {
  std::string server;  // scheme://host[:port][/prefix]
  std::string ca_file;
  std::string bearer_token_file;
};

// A RestConfig for `endpoint` (trailing '/' of the server dropped) with
// the transport settings of `transport` and nothing else of it.
RestConfig RestConfigFor(const ApiEndpoint& endpoint,
                         const RestConfig& transport = RestConfig());

// Copies the transport settings (timeouts, HTTP/2, compression, exec
// plugin timeout, user agent: every field that is not the endpoint, its TLS
// and proxy settings, a credential or the namespace) of `from` into `to`;
// the endpoint, credentials and namespace of `to` stay.
void CopyTransportSettings(const RestConfig& from, RestConfig* to);

// Applies the explicit flags: each non-empty override replaces the
// config's value (a server without its trailing '/'); a token override
// also drops the token file.
void ApplyOverrides(const ConfigOverrides& overrides, RestConfig* config);

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_REST_CONFIG_BUILDER_H_

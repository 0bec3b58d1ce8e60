#ifndef SERVER_KUBEAPI_KUBE_API_FLAGS_H_
#define SERVER_KUBEAPI_KUBE_API_FLAGS_H_

// Command-line flags of the Kubernetes API facade:
//   --kube_api_listen=HOST:PORT        serve the facade (off when empty)
//   --kube_api_tls_cert_file, --kube_api_tls_key_file   serve HTTPS
//   --kube_api_tls_client_ca_file      require client certificates
//   --kube_api_history=N               changes kept per resource
//   --kube_api_advertised_address      host:port written into /api

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, kube_api_listen);
ABSL_DECLARE_FLAG(std::string, kube_api_tls_cert_file);
ABSL_DECLARE_FLAG(std::string, kube_api_tls_key_file);
ABSL_DECLARE_FLAG(std::string, kube_api_tls_client_ca_file);
ABSL_DECLARE_FLAG(int64_t, kube_api_history);
ABSL_DECLARE_FLAG(std::string, kube_api_advertised_address);
#include "absl/status/statusor.h"
#include "server/kubeapi/kube_api_server.h"

namespace server {
namespace kubeapi {

// Whether --kube_api_listen is set (the facade is wanted).
bool KubeApiEnabled();

// Options from the flags; the caller fills in registry, resources,
// authorizer and metrics. InvalidArgument naming the flag for a malformed
// listen address, half a TLS key pair, a client CA without a key pair, a
// history below 1, or a TLS file that cannot be read.
absl::StatusOr<KubeApiServer::Options> KubeApiOptionsFromFlags();

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_FLAGS_H_

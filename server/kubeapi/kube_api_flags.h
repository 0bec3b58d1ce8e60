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
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "informer/client/discovery.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/registry/informer_registry.h"
#include "server/registry/snapshot_fallback.h"

namespace server {
namespace kubeapi {

// Whether --kube_api_listen is set (the facade is wanted).
bool KubeApiEnabled();

// Options from the flags; the caller fills in registry, resources,
// authorizer and metrics. InvalidArgument naming the flag for a malformed
// listen address, half a TLS key pair, a client CA without a key pair, a
// history below 1, or a TLS file that cannot be read.
absl::StatusOr<KubeApiServer::Options> KubeApiOptionsFromFlags();

// The configured resources of `registry` as `discovery` describes them
// (kind, scope, group version, short names), for Options::resources. With
// `snapshots` (--serve_stale_on_start), one that discovery cannot resolve
// because the API server is unreachable is taken as its snapshot recorded
// it (ResolveOrFromSnapshot): the facade starts, and answers once the
// informer synced, as for any informer.
absl::StatusOr<std::vector<informer::client::ApiResource>> ResourcesOf(
    const InformerRegistry& registry, informer::client::Discovery* discovery,
    const SnapshotIdentities* snapshots = nullptr);

// The sidecar's wiring in one call: null when --kube_api_listen is unset;
// otherwise a started facade over every configured resource of `registry`
// (discovery resolves them) and, when the registry is in lazy mode, over
// every other resource `discovery` lists (started on first request), with
// the gRPC side's authorizer (may be null) and metrics registry (may be
// null); `snapshots` as for ResourcesOf. Errors name the flag or resource.
absl::StatusOr<std::unique_ptr<KubeApiServer>> StartKubeApiFromFlags(
    InformerRegistry* registry, informer::client::Discovery* discovery,
    const Authorizer* authorizer, metrics::Registry* metrics,
    const SnapshotIdentities* snapshots = nullptr);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_FLAGS_H_

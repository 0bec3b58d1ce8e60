#ifndef SERVER_REGISTRY_CLUSTER_IDENTITY_H_
#define SERVER_REGISTRY_CLUSTER_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "informer/client/http_transport.h"

namespace server {

// Which cluster a cache came from, for the snapshots of a warm restart: a
// snapshot of another cluster must never be served.
//
// The kube-system namespace's uid, read once at start ("uid:<uid>"): it
// is created with the cluster and lives as long as it, so it tells two
// clusters apart even behind the same URL (a cluster rebuilt at the same
// address), and one cluster under two URLs is still one. Cluster-identity
// tools use it for the same reason. When the sidecar may not read it (RBAC
// without get on namespaces), the fallback is the API server's URL and the
// SHA-256 of the CA bundle it trusts ("server:<url> ca-sha256:<hex>",
// "ca-sha256:none" without one): a rebuilt cluster gets a new CA. Either
// way a mismatch only costs a cold start.
//
// Errors: only a failure to reach the API server at all (the sidecar could
// not serve anyway); a 403 or 404 takes the fallback. Thread-safe.
absl::StatusOr<std::string> ReadClusterIdentity(
    informer::client::HttpTransport* transport);

// The fallback identity of the transport's cluster (see above).
std::string FallbackClusterIdentity(const informer::client::RestConfig& config);

}  // namespace server

#endif  // SERVER_REGISTRY_CLUSTER_IDENTITY_H_

#ifndef SERVER_KUBEAPI_DISCOVERY_DOCUMENTS_H_
#define SERVER_KUBEAPI_DISCOVERY_DOCUMENTS_H_

// The discovery documents of the facade (/api, /api/v1, /apis,
// /apis/<group>/<version>), in the API server's JSON form, listing only the
// resources the facade serves, each with the verbs get, list and watch: what
// kubectl's and client-go's RESTMapper need to find them.
//
// Pure functions; thread-safe.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "informer/client/discovery.h"

namespace server {
namespace kubeapi {

// GET /api. `server_address` is host:port as clients reach the facade.
std::string ApiVersionsDocument(absl::string_view server_address);
// GET /apis: the groups of `resources` (core excluded), in first-seen order.
std::string ApiGroupListDocument(
    const std::vector<informer::client::ApiResource>& resources);
// GET /api/v1 (group "") or /apis/<group>/<version>: nullopt when no served
// resource has that group version (the caller answers 404). Resources are
// sorted by name as the API server lists them.
absl::optional<std::string> ApiResourceListDocument(
    const std::vector<informer::client::ApiResource>& resources,
    absl::string_view group, absl::string_view version);
// GET /apis/<group>: nullopt for a group not served.
absl::optional<std::string> ApiGroupDocument(
    const std::vector<informer::client::ApiResource>& resources,
    absl::string_view group);
// GET /version: the facade's own version info in the API server's fields.
std::string VersionDocument();

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_DISCOVERY_DOCUMENTS_H_

#ifndef SERVER_KUBEAPI_REQUEST_PATH_H_
#define SERVER_KUBEAPI_REQUEST_PATH_H_

// Parsing of the facade's URL paths the way the API server routes them.
// Pure; thread-safe.

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace server {
namespace kubeapi {

struct RequestPath {
  enum class Type {
    kHealth,        // /healthz, /livez, /readyz (and their sub-checks)
    kVersion,       // /version
    kApi,           // /api
    kApis,          // /apis
    kGroup,         // /apis/<group>
    kGroupVersion,  // /api/v1, /apis/<group>/<version>
    kResource,      // a collection or one object
  };
  Type type = Type::kApi;
  std::string group;  // "" = core
  std::string version;
  std::string namespace_;  // "" = all namespaces / cluster scope
  std::string resource;
  std::string name;  // "" = the collection
  std::string subresource;
  // For kHealth: "readyz" / "livez" / "healthz".
  std::string health;
};

// nullopt when the path names nothing the API server would route (the
// caller answers 404). Percent-decoding must have been done by the caller
// only for the path as a whole; segments are taken verbatim.
absl::optional<RequestPath> ParseRequestPath(absl::string_view path);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_REQUEST_PATH_H_

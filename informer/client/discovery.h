#ifndef INFORMER_CLIENT_DISCOVERY_H_
#define INFORMER_CLIENT_DISCOVERY_H_

// API discovery: what resources the server serves (/api, /apis and their
// group versions), and resolution of what a user types ("pods", "po",
// "deployments.apps", "deployments.v1.apps", "apps/v1/deployments",
// "v1/pods", "deploy", "Deployment", a CRD's plural or short name) to one
// resource, like kubectl's REST mapper.
//
// Precedence when a name matches several resources: the core group first,
// then groups in the server's order; within a group the preferred version
// first. So "events" is core/v1 events, not events.k8s.io.

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/client/http_transport.h"

namespace informer {
namespace client {

struct ApiResource {
  std::string group;  // "" for core
  std::string version;
  std::string resource;  // plural, e.g. "deployments"
  std::string singular;  // e.g. "deployment"
  // The server left singularName empty (v1.24 does for built-in types) and
  // `singular` was derived from the kind; a server that re-serves the
  // discovery writes "" again.
  bool singular_derived = false;
  std::string kind;  // e.g. "Deployment"
  bool namespaced = false;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
  // e.g. {"all"}: what `kubectl get all` lists.
  std::vector<std::string> categories;

  // "v1" or "apps/v1".
  std::string GroupVersion() const;
};

// One group of /apis (or the core group from /api), versions in preference
// order (preferred first).
struct ApiGroup {
  std::string name;
  std::vector<std::string> versions;
};

// Pure parsers of discovery documents. InvalidArgument for malformed JSON.
absl::StatusOr<ApiGroup> ParseApiVersions(absl::string_view json);  // /api
absl::StatusOr<std::vector<ApiGroup>> ParseApiGroupList(
    absl::string_view json);  // /apis
// /api/v1 or /apis/<group>/<version>; subresources ("pods/status") are
// skipped.
absl::StatusOr<std::vector<ApiResource>> ParseApiResourceList(
    absl::string_view json, absl::string_view group);

// Resolves `name` against `resources` (in precedence order). NotFound
// "the server doesn't have a resource type "x"" listing near matches.
absl::StatusOr<ApiResource> ResolveResource(
    const std::vector<ApiResource>& resources, absl::string_view name);

// Fetches and caches discovery; resolves names, refreshing once on a miss
// (a CRD installed after start-up is found). Thread-safe. `transport` must
// outlive this object.
class Discovery {
 public:
  explicit Discovery(HttpTransport* transport);

  absl::StatusOr<ApiResource> Resolve(absl::string_view name)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Re-reads everything. A group version that fails (e.g. an unavailable
  // aggregated API) is skipped and logged; the core group must succeed.
  absl::Status Refresh() ABSL_LOCKS_EXCLUDED(mu_);
  // The cached resources in precedence order (empty before a refresh).
  std::vector<ApiResource> Resources() const ABSL_LOCKS_EXCLUDED(mu_);
  int refreshes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(refresh_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);

  HttpTransport* const transport_;
  // Serialises refreshes so a burst of misses fetches discovery once.
  absl::Mutex refresh_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::vector<ApiResource> resources_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  int refreshes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_DISCOVERY_H_

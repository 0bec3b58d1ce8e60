#ifndef EMULATOR_RESOURCE_REGISTRY_H_
#define EMULATOR_RESOURCE_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace emulator {

// One servable resource type (a GroupVersionResource plus what discovery
// says about it).
struct ResourceInfo {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural, e.g. "pods"
  std::string kind;      // "Pod"
  bool namespaced = true;
  std::vector<std::string> verbs = {"create", "delete", "deletecollection",
                                    "get",    "list",   "patch",
                                    "update", "watch"};
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::string storage_version_hash;
  // Subresources listed by discovery ("status"); PUT/PATCH on them act on
  // the whole object.
  std::vector<std::string> subresources;
  // Field paths usable in fieldSelector besides metadata.name and
  // metadata.namespace, e.g. "spec.nodeName" for pods.
  std::vector<std::string> selectable_fields;
  // Whether metadata.generation is maintained (set to 1 on create, bumped
  // when .spec changes), as for Deployments.
  bool has_generation = false;

  // "v1" or "apps/v1": both the discovery groupVersion and objects' apiVersion.
  std::string GroupVersion() const;
  // "pods" or "deployments.apps": how API messages name the resource.
  std::string QualifiedResource() const;
};

// ResourceRegistry is the set of resource types the emulator serves, and
// renders the discovery documents (/api, /api/v1, /apis, /apis/<g>/<v>)
// shaped like a real v1.24 API server's.
//
// Thread-safety: Register must finish before the registry is shared (the
// emulator registers everything before it starts serving); afterwards all
// const methods are safe from any thread. ResourceInfo pointers stay valid
// for the registry's lifetime.
class ResourceRegistry {
 public:
  ResourceRegistry() = default;
  ResourceRegistry(const ResourceRegistry&) = delete;
  ResourceRegistry& operator=(const ResourceRegistry&) = delete;

  // A registry with the built-in types: core v1 (pods, configmaps, secrets,
  // services, endpoints, events, namespaces, nodes, serviceaccounts,
  // persistentvolumeclaims, persistentvolumes), apps/v1 (deployments,
  // replicasets, statefulsets, daemonsets, controllerrevisions),
  // events.k8s.io/v1 events, batch/v1 jobs and cronjobs, and
  // coordination.k8s.io/v1 leases.
  static std::unique_ptr<ResourceRegistry> WithBuiltins();

  // AlreadyExists if the same group/version/resource is registered;
  // InvalidArgument for an empty version, resource or kind.
  absl::Status Register(ResourceInfo info);

  const ResourceInfo* Find(absl::string_view group, absl::string_view version,
                           absl::string_view resource) const;
  // Looks up "pods", "deployments.apps" or "deployments.v1.apps" (as kubectl
  // spells resources). A bare plural prefers the core group.
  const ResourceInfo* FindByName(absl::string_view name) const;
  std::vector<const ResourceInfo*> All() const;

  // GET /api: {"kind":"APIVersions",...}.
  std::string ApiVersionsJson(absl::string_view server_address) const;
  // GET /apis: {"kind":"APIGroupList",...}.
  std::string ApiGroupListJson() const;
  // GET /apis/<group>: {"kind":"APIGroup",...}; nullopt for unknown groups.
  absl::optional<std::string> ApiGroupJson(absl::string_view group) const;
  // GET /api/v1 or /apis/<group>/<version>: {"kind":"APIResourceList",...};
  // nullopt for an unknown group/version.
  absl::optional<std::string> ResourceListJson(absl::string_view group,
                                               absl::string_view version) const;

 private:
  std::vector<std::unique_ptr<ResourceInfo>> resources_;
};

}  // namespace emulator

#endif  // EMULATOR_RESOURCE_REGISTRY_H_

#ifndef SERVER_CONFIG_SIDECAR_CONFIG_H_
#define SERVER_CONFIG_SIDECAR_CONFIG_H_

// The sidecar's configuration file (--config=FILE, YAML) and the
// --resources shorthand.
//
//   allowUnlistedResources: true      # lazy informers for other resources
//   lazyIdleTimeout: 5m               # stop a lazy informer idle this long
//   resources:
//   - resource: pods                  # any name kubectl accepts
//     namespace: default              # absent: --namespace; "": all
//     labelSelector: app=web          # full label selector syntax
//     fieldSelector: spec.nodeName=n1 # k=v, k==v, k!=v, comma-separated
//     resyncPeriod: 30s               # Go duration; 0: no resync
//     metadataOnly: false             # PartialObjectMetadata only
//     transform:
//       dropFields: [metadata.managedFields, status.conditions]
//     indexes:
//     - label: app                    # index "label:app"
//     - field: spec.nodeName          # index "field:spec.nodeName"
//     - ownerUid: true                # index "ownerUid" (always present)
//
// Every error names the file, the line and column, and the field
// ("sidecar.yaml:7:19: resources[0].resyncPeriod: invalid duration ...").
// Unknown keys are errors (a typo must not silently change behaviour).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/registry/informer_registry.h"

namespace server {

inline constexpr absl::Duration kDefaultLazyIdleTimeout = absl::Minutes(5);

struct SidecarConfig {
  struct Resource {
    ResourceConfig config;
    // Whether the file set `namespace` (even to ""): --namespace applies to
    // the others.
    bool has_namespace = false;
  };
  std::vector<Resource> resources;
  // Lazy mode: informers for resources not listed start on first request.
  bool allow_unlisted_resources = false;
  // Absent in the file: the --lazy_idle_timeout flag decides.
  bool has_lazy_idle_timeout = false;
  absl::Duration lazy_idle_timeout = kDefaultLazyIdleTimeout;
};

// Parses a config document. `file_name` only labels errors. InvalidArgument
// "FILE:LINE:COL: FIELD: problem" for every mistake (unknown key, wrong
// type, bad duration, bad selector, bad index, duplicate resource).
absl::StatusOr<SidecarConfig> ParseSidecarConfig(absl::string_view yaml,
                                                 absl::string_view file_name);
// Reads and parses `path`. NotFound/PermissionDenied naming the file when it
// cannot be read.
absl::StatusOr<SidecarConfig> LoadSidecarConfigFile(const std::string& path);

// --resources=pods,configmaps,deployments.apps: one resource each, no
// namespace set. InvalidArgument for an empty item or a duplicate.
absl::StatusOr<SidecarConfig> SidecarConfigFromResourceList(
    absl::string_view list);

// Gives every resource that set no namespace `default_namespace`.
void ApplyDefaultNamespace(SidecarConfig* config,
                           absl::string_view default_namespace);

// A Go-style duration ("300ms", "30s", "5m", "1h30m", "0"). InvalidArgument
// for anything else, a negative or an infinite duration.
absl::StatusOr<absl::Duration> ParseGoDuration(absl::string_view text);

// Syntax check of a Kubernetes field selector ("a=b,c!=d"; "" is valid).
absl::Status ValidateFieldSelector(absl::string_view selector);

}  // namespace server

#endif  // SERVER_CONFIG_SIDECAR_CONFIG_H_

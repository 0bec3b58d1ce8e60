#ifndef SERVER_REGISTRY_SNAPSHOT_FALLBACK_H_
#define SERVER_REGISTRY_SNAPSHOT_FALLBACK_H_

// What a sidecar started with --serve_stale_on_start takes from its cache
// directory's snapshots when its API server cannot be reached at start:
// each resource's group, version and plural (instead of discovery) and the
// cluster identity (instead of the kube-system namespace's uid).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/client/discovery.h"
#include "informer/persist/snapshot_identity.h"
#include "server/registry/resource_resolver.h"

namespace server {

// True when `status` says the API server could not be reached or could not
// answer: a refused or dropped connection, a timeout, a 5xx. False for
// everything an operator must fix (401, 403, a bad configuration), which
// stays fatal.
bool IsApiServerUnreachable(const absl::Status& status);

// The identities of the snapshots in one cache directory, read from their
// headers (SnapshotKeeper still verifies a whole file before loading it).
// An immutable value once read; thread-safe.
class SnapshotIdentities {
 public:
  // Every "*.snapshot" file of `dir`; unreadable ones are logged and left
  // out (never an error: at worst nothing is known).
  static SnapshotIdentities Read(const std::string& dir);
  explicit SnapshotIdentities(std::vector<informer::SnapshotIdentity> ids)
      : ids_(std::move(ids)) {}

  // The resource of the snapshot that `name` names: its plural ("pods"),
  // plural.group ("deployments.apps") or plural.version.group, and the
  // same with its kind ("Deployment") or singular ("deployment") when the
  // snapshot recorded the kind (older files did not: their kind and
  // singular stay empty, a warning at Read says so). Verbs and short names
  // are unknown (not in a snapshot); namespaced is taken as "the snapshot
  // has a namespace". NotFound when no snapshot, or more than one, matches.
  absl::StatusOr<informer::client::ApiResource> Resolve(
      absl::string_view name) const;
  // The cluster identity all the snapshots were written for. NotFound
  // without snapshots; FailedPrecondition when they disagree (then none is
  // trusted).
  absl::StatusOr<std::string> Cluster() const;

 private:
  std::vector<informer::SnapshotIdentity> ids_;
};

// Resolves through `primary` (discovery); when that fails because the API
// server is unreachable, through the snapshots (logged as a warning).
// Other failures are returned as they are. Thread-safe;
// `primary` and `snapshots` must outlive it.
class SnapshotFallbackResolver final : public ResourceResolver {
 public:
  SnapshotFallbackResolver(ResourceResolver* primary,
                           const SnapshotIdentities* snapshots)
      : primary_(primary), snapshots_(snapshots) {}
  absl::StatusOr<std::string> Canonical(absl::string_view name) override;

 private:
  ResourceResolver* const primary_;
  const SnapshotIdentities* const snapshots_;
};

// `name` through `discovery`, or, when the API server cannot be reached
// and `snapshots` is set (--serve_stale_on_start), as its snapshot
// recorded it (logged as a warning). Discovery's error otherwise.
absl::StatusOr<informer::client::ApiResource> ResolveOrFromSnapshot(
    informer::client::Discovery* discovery, const SnapshotIdentities* snapshots,
    const std::string& name);

}  // namespace server

#endif  // SERVER_REGISTRY_SNAPSHOT_FALLBACK_H_

#ifndef INFORMER_PERSIST_SNAPSHOT_IDENTITY_H_
#define INFORMER_PERSIST_SNAPSHOT_IDENTITY_H_

#include <string>

#include "informer/object/object.h"

namespace informer {

// What must match for a cache snapshot to stand in for a fresh list: a
// snapshot is only ever loaded by an informer of exactly this identity.
// A plain value; compared field by field.
struct SnapshotIdentity {
  // Tells one cluster from another. Opaque here: whoever builds the
  // identity decides what it holds (it must change when the cluster does).
  std::string cluster;
  // The resource: group ("" for the core group), version, resource name.
  std::string group;
  std::string version;
  std::string resource;
  // The resource's kind ("ConfigMap") as discovery named it: what a
  // sidecar that cannot reach its API server resolves kind and singular
  // names by. Descriptive, not part of the identity: never compared (a
  // file written before the kind was recorded holds "" and still matches).
  std::string kind;
  // "" = all namespaces.
  std::string namespace_;
  // The informer's server-side filters ("" = none).
  std::string label_selector;
  std::string field_selector;
  // The transform settings' canonical text (see TransformIdentity): the
  // snapshot holds objects as cached, after their transform.
  std::string transform;
  // PartialObjectMetadata objects instead of whole ones.
  bool metadata_only = false;
};

bool operator==(const SnapshotIdentity& a, const SnapshotIdentity& b);
inline bool operator!=(const SnapshotIdentity& a, const SnapshotIdentity& b) {
  return !(a == b);
}

// The canonical text of `transform` for SnapshotIdentity::transform: the
// drop paths sorted and deduplicated, so that the order in which they were
// configured does not matter. E.g. "managed_fields=drop;drop=status.x".
std::string TransformIdentity(const TransformOptions& transform);

// "" when the identities are equal. Otherwise names the first field that
// differs and both values, e.g.
//   cluster differs: snapshot "https://a" vs expected "https://b"
// so that a log line says why a snapshot was not used.
std::string DescribeIdentityMismatch(const SnapshotIdentity& in_snapshot,
                                     const SnapshotIdentity& expected);

// The snapshot's file name in its cache directory (no directory part):
// "configmaps.snapshot", "deployments.apps.snapshot". Stable across
// releases; filesystem-safe (bytes outside [a-z0-9.-] (and the resource's dots)
// are escaped as %XX, so distinct names never collide); at most 200 bytes
// (longer ones end in a hash of the whole name).
//
// Derived from the group and resource only, since a sidecar runs one
// informer per resource: an informer whose cluster, version, namespace,
// selectors or transform changed finds its old snapshot under the same name,
// so that ReadSnapshot can say which setting changed, and its next snapshot
// replaces the old one instead of leaving it behind.
std::string SnapshotFileName(const SnapshotIdentity& id);

// dir/SnapshotFileName(id) ("" as dir: the current directory).
std::string SnapshotPath(const std::string& dir, const SnapshotIdentity& id);

}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_IDENTITY_H_

#include "server/registry/snapshot_fallback.h"

#include <glog/logging.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "informer/object/api_error.h"
#include "informer/persist/snapshot_reader.h"

namespace server {

bool IsApiServerUnreachable(const absl::Status& status) {
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    return true;
  }
  return informer::HttpCode(status) >= 500;
}

SnapshotIdentities SnapshotIdentities::Read(const std::string& dir) {
  std::vector<informer::SnapshotIdentity> ids;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    const std::string path = file.path().string();
    if (!absl::EndsWith(path, ".snapshot")) continue;
    absl::StatusOr<informer::SnapshotIdentity> id =
        informer::ReadSnapshotFileIdentity(path);
    if (!id.ok()) {
      LOG(WARNING) << "snapshot not usable without the API server: "
                   << id.status().message();
      continue;
    }
    if (id->kind.empty()) {
      LOG(WARNING) << "snapshot of " << id->resource
                   << " has no kind (written before kinds were recorded): "
                      "without the API server its kind and singular names "
                      "do not resolve, only its plural";
    }
    ids.push_back(*std::move(id));
  }
  if (ec) {
    LOG(WARNING) << "cannot list the snapshots in " << dir << ": "
                 << ec.message();
  }
  return SnapshotIdentities(std::move(ids));
}

namespace {

// The singular name discovery derives from a kind when the server leaves
// it out: "ConfigMap" -> "configmap".
std::string SingularOf(const informer::SnapshotIdentity& id) {
  return absl::AsciiStrToLower(id.kind);
}

// Whether `name` names the resource of `id`: its plural, or its kind or
// singular when recorded (any case, as discovery matches them), each alone,
// with its group or with its version and group.
bool Names(const informer::SnapshotIdentity& id, absl::string_view name) {
  std::vector<std::string> bases = {id.resource};
  if (!id.kind.empty()) {
    bases.push_back(id.kind);
    bases.push_back(SingularOf(id));
  }
  const std::string group = id.group.empty() ? "" : absl::StrCat(".", id.group);
  for (const std::string& base : bases) {
    for (const std::string& spelling :
         {base, absl::StrCat(base, group),
          absl::StrCat(base, ".", id.version, group)}) {
      if (absl::EqualsIgnoreCase(spelling, name)) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<informer::client::ApiResource> SnapshotIdentities::Resolve(
    absl::string_view name) const {
  const informer::SnapshotIdentity* found = nullptr;
  int matches = 0;
  for (const informer::SnapshotIdentity& id : ids_) {
    if (Names(id, name)) {
      found = &id;
      ++matches;
    }
  }
  if (matches != 1) {
    return absl::NotFoundError(
        absl::StrCat(matches == 0 ? "no snapshot of resource \""
                                  : "more than one snapshot of resource \"",
                     name, "\" in the cache directory"));
  }
  informer::client::ApiResource r;
  r.group = found->group;
  r.version = found->version;
  r.resource = found->resource;
  r.kind = found->kind;
  r.singular = SingularOf(*found);
  r.singular_derived = true;
  r.namespaced = !found->namespace_.empty();
  return r;
}

absl::StatusOr<std::string> SnapshotIdentities::Cluster() const {
  if (ids_.empty()) {
    return absl::NotFoundError("no snapshot in the cache directory");
  }
  for (const informer::SnapshotIdentity& id : ids_) {
    if (id.cluster != ids_.front().cluster) {
      return absl::FailedPreconditionError(
          absl::StrCat("the snapshots were written for different clusters (\"",
                       ids_.front().cluster, "\", \"", id.cluster, "\")"));
    }
  }
  return ids_.front().cluster;
}

absl::StatusOr<std::string> SnapshotFallbackResolver::Canonical(
    absl::string_view name) {
  absl::StatusOr<std::string> canonical = primary_->Canonical(name);
  if (canonical.ok() || !IsApiServerUnreachable(canonical.status())) {
    return canonical;
  }
  absl::StatusOr<informer::client::ApiResource> r = snapshots_->Resolve(name);
  if (!r.ok()) return canonical.status();
  LOG(WARNING) << "resource \"" << name << "\" resolved from its snapshot as "
               << r->GroupVersion() << " " << r->resource
               << ": discovery failed (" << canonical.status().message() << ")";
  return CanonicalResourceName(*r);
}

absl::StatusOr<informer::client::ApiResource> ResolveOrFromSnapshot(
    informer::client::Discovery* discovery, const SnapshotIdentities* snapshots,
    const std::string& name) {
  absl::StatusOr<informer::client::ApiResource> resource =
      discovery->Resolve(name);
  if (resource.ok() || snapshots == nullptr ||
      !IsApiServerUnreachable(resource.status())) {
    return resource;
  }
  absl::StatusOr<informer::client::ApiResource> from_snapshot =
      snapshots->Resolve(name);
  if (!from_snapshot.ok()) return resource.status();
  LOG(WARNING) << "informer_sidecar: " << name << ": discovery failed ("
               << resource.status().message()
               << "): using the group and version of its snapshot, "
               << from_snapshot->GroupVersion();
  return from_snapshot;
}

}  // namespace server

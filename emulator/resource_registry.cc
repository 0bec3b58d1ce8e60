#include "emulator/resource_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Key(JsonWriter& w, absl::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void Str(JsonWriter& w, absl::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}
void StrArray(JsonWriter& w, absl::string_view key,
              const std::vector<std::string>& values) {
  Key(w, key);
  w.StartArray();
  for (const auto& v : values) Str(w, v);
  w.EndArray();
}

ResourceInfo Make(absl::string_view group, absl::string_view resource,
                  absl::string_view kind, bool namespaced,
                  std::vector<std::string> short_names,
                  absl::string_view hash) {
  ResourceInfo info;
  info.group = std::string(group);
  info.version = "v1";
  info.resource = std::string(resource);
  info.kind = std::string(kind);
  info.namespaced = namespaced;
  info.short_names = std::move(short_names);
  info.storage_version_hash = std::string(hash);
  return info;
}

// Discovery lists groups in the order their first resource was registered,
// versions in registration order.
std::vector<std::string> GroupVersionsOf(
    const std::vector<std::unique_ptr<ResourceInfo>>& resources,
    absl::string_view group) {
  std::vector<std::string> versions;
  for (const auto& r : resources) {
    if (r->group != group) continue;
    bool seen = false;
    for (const auto& v : versions) seen = seen || v == r->version;
    if (!seen) versions.push_back(r->version);
  }
  return versions;
}

void WriteGroup(JsonWriter& w, absl::string_view group,
                const std::vector<std::string>& versions) {
  Key(w, "name");
  Str(w, group);
  Key(w, "versions");
  w.StartArray();
  for (const auto& v : versions) {
    w.StartObject();
    Key(w, "groupVersion");
    Str(w, absl::StrCat(group, "/", v));
    Key(w, "version");
    Str(w, v);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "preferredVersion");
  w.StartObject();
  Key(w, "groupVersion");
  Str(w, absl::StrCat(group, "/", versions.front()));
  Key(w, "version");
  Str(w, versions.front());
  w.EndObject();
}

void WriteResource(JsonWriter& w, const ResourceInfo& r, absl::string_view name,
                   absl::string_view kind,
                   const std::vector<std::string>& verbs, bool full) {
  w.StartObject();
  Key(w, "name");
  Str(w, name);
  Key(w, "singularName");
  Str(w, "");
  Key(w, "namespaced");
  w.Bool(r.namespaced);
  Key(w, "kind");
  Str(w, kind);
  StrArray(w, "verbs", verbs);
  if (full) {
    if (!r.short_names.empty()) StrArray(w, "shortNames", r.short_names);
    if (!r.categories.empty()) StrArray(w, "categories", r.categories);
    if (!r.storage_version_hash.empty()) {
      Key(w, "storageVersionHash");
      Str(w, r.storage_version_hash);
    }
  }
  w.EndObject();
}

}  // namespace

std::string ResourceInfo::GroupVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

std::string ResourceInfo::QualifiedResource() const {
  return group.empty() ? resource : absl::StrCat(resource, ".", group);
}

std::unique_ptr<ResourceRegistry> ResourceRegistry::WithBuiltins() {
  auto reg = std::make_unique<ResourceRegistry>();
  std::vector<ResourceInfo> infos;
  // Storage version hashes as a v1.24 server reports them (captures).
  infos.push_back(
      Make("", "configmaps", "ConfigMap", true, {"cm"}, "qFsyl6wFWjQ="));
  infos.push_back(
      Make("", "endpoints", "Endpoints", true, {"ep"}, "fWeeMqaN/OA="));
  infos.push_back(Make("", "events", "Event", true, {"ev"}, "r2yiGXH7wu8="));
  {
    auto& ev = infos.back();
    ev.selectable_fields = {"involvedObject.kind",
                            "involvedObject.name",
                            "involvedObject.namespace",
                            "involvedObject.uid",
                            "reason",
                            "type"};
  }
  infos.push_back(
      Make("", "namespaces", "Namespace", false, {"ns"}, "Q3oi5N2YM8M="));
  infos.back().verbs = {"create", "delete", "get",  "list",
                        "patch",  "update", "watch"};
  infos.back().subresources = {"status"};
  infos.back().selectable_fields = {"status.phase"};
  infos.push_back(Make("", "nodes", "Node", false, {"no"}, "XwShjMxG9Fs="));
  infos.back().subresources = {"status"};
  infos.back().selectable_fields = {"spec.unschedulable"};
  infos.push_back(Make("", "persistentvolumeclaims", "PersistentVolumeClaim",
                       true, {"pvc"}, "QWTyNDq0dC4="));
  infos.back().subresources = {"status"};
  infos.push_back(Make("", "persistentvolumes", "PersistentVolume", false,
                       {"pv"}, "HN/zwEC+JgM="));
  infos.back().subresources = {"status"};
  infos.push_back(Make("", "pods", "Pod", true, {"po"}, "xPOwRZ+Yhw8="));
  infos.back().categories = {"all"};
  infos.back().subresources = {"status"};
  infos.back().selectable_fields = {
      "spec.nodeName",           "spec.restartPolicy", "spec.schedulerName",
      "spec.serviceAccountName", "status.phase",       "status.podIP"};
  infos.push_back(Make("", "secrets", "Secret", true, {}, "S6u1pOWzb84="));
  infos.back().selectable_fields = {"type"};
  infos.push_back(Make("", "serviceaccounts", "ServiceAccount", true, {"sa"},
                       "pbx9ZvyFpBE="));
  infos.push_back(
      Make("", "services", "Service", true, {"svc"}, "0/CO1lhkEBI="));
  infos.back().categories = {"all"};
  infos.back().subresources = {"status"};

  infos.push_back(Make("apps", "controllerrevisions", "ControllerRevision",
                       true, {}, "85nkx63pcBU="));
  infos.push_back(
      Make("apps", "daemonsets", "DaemonSet", true, {"ds"}, "dd7pWHUlMKQ="));
  infos.push_back(Make("apps", "deployments", "Deployment", true, {"deploy"},
                       "8aSe+NMegvE="));
  infos.push_back(
      Make("apps", "replicasets", "ReplicaSet", true, {"rs"}, "P1RzHs8/mWQ="));
  infos.push_back(Make("apps", "statefulsets", "StatefulSet", true, {"sts"},
                       "H+vl74LkKdo="));
  for (auto& info : infos) {
    if (info.group != "apps") continue;
    info.subresources = {"status"};
    info.has_generation = true;
    if (info.resource != "controllerrevisions") info.categories = {"all"};
    if (info.resource == "controllerrevisions") info.subresources.clear();
  }
  infos.push_back(Make("events.k8s.io", "events", "Event", true, {"ev"}, ""));
  infos.push_back(Make("batch", "jobs", "Job", true, {}, ""));
  infos.back().categories = {"all"};
  infos.back().subresources = {"status"};
  infos.back().has_generation = true;
  infos.push_back(Make("batch", "cronjobs", "CronJob", true, {"cj"}, ""));
  infos.back().categories = {"all"};
  infos.back().subresources = {"status"};
  infos.back().has_generation = true;
  infos.push_back(Make("coordination.k8s.io", "leases", "Lease", true, {}, ""));
  for (auto& info : infos) {
    absl::Status s = reg->Register(std::move(info));
    (void)s;  // Built-ins are distinct by construction.
  }
  return reg;
}

absl::Status ResourceRegistry::Register(ResourceInfo info) {
  if (info.version.empty() || info.resource.empty() || info.kind.empty()) {
    return absl::InvalidArgumentError(
        "resource needs a version, a plural name and a kind");
  }
  if (Find(info.group, info.version, info.resource) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("resource ", info.QualifiedResource(), " ", info.version,
                     " is already registered"));
  }
  resources_.push_back(std::make_unique<ResourceInfo>(std::move(info)));
  return absl::OkStatus();
}

const ResourceInfo* ResourceRegistry::Find(absl::string_view group,
                                           absl::string_view version,
                                           absl::string_view resource) const {
  for (const auto& r : resources_) {
    if (r->group == group && r->version == version && r->resource == resource) {
      return r.get();
    }
  }
  return nullptr;
}

const ResourceInfo* ResourceRegistry::FindByName(absl::string_view name) const {
  std::vector<absl::string_view> parts =
      absl::StrSplit(name, absl::MaxSplits('.', 1));
  absl::string_view plural = parts[0];
  absl::string_view rest = parts.size() > 1 ? parts[1] : "";
  const ResourceInfo* fallback = nullptr;
  for (const auto& r : resources_) {
    if (r->resource != plural) continue;
    if (rest.empty()) {
      if (r->group.empty()) return r.get();
      if (fallback == nullptr) fallback = r.get();
      continue;
    }
    if (rest == r->group) return r.get();
    if (rest == absl::StrCat(r->version, ".", r->group)) return r.get();
  }
  return fallback;
}

std::vector<const ResourceInfo*> ResourceRegistry::All() const {
  std::vector<const ResourceInfo*> out;
  for (const auto& r : resources_) out.push_back(r.get());
  return out;
}

std::string ResourceRegistry::ApiVersionsJson(
    absl::string_view server_address) const {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "APIVersions");
  StrArray(w, "versions", GroupVersionsOf(resources_, ""));
  Key(w, "serverAddressByClientCIDRs");
  w.StartArray();
  w.StartObject();
  Key(w, "clientCIDR");
  Str(w, "0.0.0.0/0");
  Key(w, "serverAddress");
  Str(w, server_address);
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

std::string ResourceRegistry::ApiGroupListJson() const {
  std::vector<std::string> groups;
  for (const auto& r : resources_) {
    if (r->group.empty()) continue;
    bool seen = false;
    for (const auto& g : groups) seen = seen || g == r->group;
    if (!seen) groups.push_back(r->group);
  }
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "APIGroupList");
  Key(w, "apiVersion");
  Str(w, "v1");
  Key(w, "groups");
  w.StartArray();
  for (const auto& g : groups) {
    w.StartObject();
    WriteGroup(w, g, GroupVersionsOf(resources_, g));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

absl::optional<std::string> ResourceRegistry::ApiGroupJson(
    absl::string_view group) const {
  std::vector<std::string> versions = GroupVersionsOf(resources_, group);
  if (group.empty() || versions.empty()) return absl::nullopt;
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "APIGroup");
  Key(w, "apiVersion");
  Str(w, "v1");
  WriteGroup(w, group, versions);
  w.EndObject();
  return std::string(buf.GetString());
}

absl::optional<std::string> ResourceRegistry::ResourceListJson(
    absl::string_view group, absl::string_view version) const {
  std::vector<const ResourceInfo*> matching;
  for (const auto& r : resources_) {
    if (r->group == group && r->version == version) matching.push_back(r.get());
  }
  if (matching.empty()) return absl::nullopt;
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "APIResourceList");
  // The core group's list carries no apiVersion (as captured from v1.24).
  if (!group.empty()) {
    Key(w, "apiVersion");
    Str(w, "v1");
  }
  Key(w, "groupVersion");
  Str(w, matching.front()->GroupVersion());
  Key(w, "resources");
  w.StartArray();
  for (const ResourceInfo* r : matching) {
    WriteResource(w, *r, r->resource, r->kind, r->verbs, /*full=*/true);
    for (const auto& sub : r->subresources) {
      WriteResource(w, *r, absl::StrCat(r->resource, "/", sub), r->kind,
                    {"get", "patch", "update"}, /*full=*/false);
    }
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString());
}

}  // namespace emulator

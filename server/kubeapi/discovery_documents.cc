#include "server/kubeapi/discovery_documents.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/kubeapi/api_status.h"

namespace server {
namespace kubeapi {

using informer::client::ApiResource;

std::string ApiVersionsDocument(absl::string_view server_address) {
  return absl::StrCat(
      R"({"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":)",
      JsonQuote(server_address), "}]}");
}

namespace {

std::string GroupVersionJson(absl::string_view group,
                             absl::string_view version) {
  return absl::StrCat(R"({"groupVersion":)",
                      JsonQuote(absl::StrCat(group, "/", version)),
                      R"(,"version":)", JsonQuote(version), "}");
}

// One APIGroup object: versions in first-seen order, the first preferred.
std::string GroupJson(const std::vector<ApiResource>& resources,
                      absl::string_view group) {
  std::vector<std::string> versions;
  for (const ApiResource& r : resources) {
    if (r.group == group && std::find(versions.begin(), versions.end(),
                                      r.version) == versions.end()) {
      versions.push_back(r.version);
    }
  }
  std::string list;
  for (const std::string& v : versions) {
    absl::StrAppend(&list, list.empty() ? "" : ",", GroupVersionJson(group, v));
  }
  return absl::StrCat(R"({"name":)", JsonQuote(group), R"(,"versions":[)", list,
                      R"(],"preferredVersion":)",
                      GroupVersionJson(group, versions.front()), "}");
}

}  // namespace

std::string ApiGroupListDocument(const std::vector<ApiResource>& resources) {
  std::vector<std::string> groups;
  for (const ApiResource& r : resources) {
    if (!r.group.empty() &&
        std::find(groups.begin(), groups.end(), r.group) == groups.end()) {
      groups.push_back(r.group);
    }
  }
  std::string list;
  for (const std::string& g : groups) {
    absl::StrAppend(&list, list.empty() ? "" : ",", GroupJson(resources, g));
  }
  return absl::StrCat(R"({"kind":"APIGroupList","apiVersion":"v1","groups":[)",
                      list, "]}");
}

absl::optional<std::string> ApiGroupDocument(
    const std::vector<ApiResource>& resources, absl::string_view group) {
  for (const ApiResource& r : resources) {
    if (!group.empty() && r.group == group) {
      std::string g = GroupJson(resources, group);
      // {"name":... -> {"kind":"APIGroup","apiVersion":"v1","name":...
      return absl::StrCat(R"({"kind":"APIGroup","apiVersion":"v1",)",
                          g.substr(1));
    }
  }
  return absl::nullopt;
}

absl::optional<std::string> ApiResourceListDocument(
    const std::vector<ApiResource>& resources, absl::string_view group,
    absl::string_view version) {
  std::vector<const ApiResource*> served;
  for (const ApiResource& r : resources) {
    if (r.group == group && r.version == version) served.push_back(&r);
  }
  // The core group always has a (possibly empty) resource list: clients
  // read /api/v1 unconditionally.
  if (served.empty() && !(group.empty() && version == "v1")) {
    return absl::nullopt;
  }
  std::sort(served.begin(), served.end(),
            [](const ApiResource* a, const ApiResource* b) {
              return a->resource < b->resource;
            });
  std::string list;
  for (const ApiResource* r : served) {
    std::string one = absl::StrCat(
        R"({"name":)", JsonQuote(r->resource), R"(,"singularName":)",
        JsonQuote(r->singular_derived ? "" : r->singular), R"(,"namespaced":)",
        r->namespaced ? "true" : "false", R"(,"kind":)", JsonQuote(r->kind),
        R"(,"verbs":["get","list","watch"])");
    // The API server's order: shortNames, then categories, each omitted
    // when empty.
    for (const auto& [key, values] :
         {std::pair<const char*, const std::vector<std::string>*>{
              "shortNames", &r->short_names},
          {"categories", &r->categories}}) {
      if (values->empty()) continue;
      std::string names;
      for (const std::string& n : *values) {
        absl::StrAppend(&names, names.empty() ? "" : ",", JsonQuote(n));
      }
      absl::StrAppend(&one, ",\"", key, "\":[", names, "]");
    }
    absl::StrAppend(&list, list.empty() ? "" : ",", one, "}");
  }
  // The API server writes apiVersion for named groups only.
  std::string gv =
      group.empty() ? std::string(version) : absl::StrCat(group, "/", version);
  return absl::StrCat(R"({"kind":"APIResourceList",)",
                      group.empty() ? "" : R"("apiVersion":"v1",)",
                      R"("groupVersion":)", JsonQuote(gv), R"(,"resources":[)",
                      list, "]}");
}

std::string VersionDocument() {
  // Clients (kubectl version skew warnings, client-go's ServerVersion)
  // parse major/minor; the facade speaks the v1.24 API.
  return R"({"major":"1","minor":"24","gitVersion":"v1.24.0-informer-sidecar","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"})";
}

}  // namespace kubeapi
}  // namespace server

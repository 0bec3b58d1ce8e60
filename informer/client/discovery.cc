#include "informer/client/discovery.h"

#include <glog/logging.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace informer {
namespace client {
namespace {

std::string Str(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::vector<std::string> StrList(const rapidjson::Value& obj, const char* key) {
  std::vector<std::string> out;
  if (!obj.IsObject()) return out;
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsArray()) return out;
  for (const auto& v : it->value.GetArray()) {
    if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
  }
  return out;
}

absl::Status Parse(absl::string_view json, const char* what,
                   rapidjson::Document* doc) {
  doc->Parse(json.data(), json.size());
  if (doc->HasParseError() || !doc->IsObject()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", what, " discovery document"));
  }
  return absl::OkStatus();
}

bool LooksLikeVersion(absl::string_view s) {
  return s.size() >= 2 && s[0] == 'v' && absl::ascii_isdigit(s[1]);
}

bool SameName(absl::string_view a, absl::string_view b) {
  return absl::EqualsIgnoreCase(a, b);
}

bool NameMatches(const ApiResource& r, absl::string_view name) {
  if (SameName(r.resource, name) || SameName(r.singular, name) ||
      SameName(r.kind, name)) {
    return true;
  }
  for (const std::string& s : r.short_names) {
    if (SameName(s, name)) return true;
  }
  return false;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub =
          prev[j - 1] +
          (absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]) ? 0
                                                                          : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

absl::Status NotFoundWithSuggestions(const std::vector<ApiResource>& all,
                                     absl::string_view name) {
  std::string base(name.substr(0, name.find('.')));
  if (base.find('/') != std::string::npos)
    base = base.substr(base.rfind('/') + 1);
  std::vector<std::pair<size_t, std::string>> near;
  for (const ApiResource& r : all) {
    std::vector<std::string> names = {r.resource};
    names.insert(names.end(), r.short_names.begin(), r.short_names.end());
    for (const std::string& n : names) {
      std::string qualified =
          r.group.empty() ? n : absl::StrCat(n, ".", r.group);
      size_t d = EditDistance(base, n);
      bool related = absl::StartsWithIgnoreCase(n, base) && base.size() >= 2;
      if (d <= 2 || related) near.emplace_back(d, qualified);
    }
  }
  std::sort(near.begin(), near.end());
  std::vector<std::string> names;
  for (const auto& [d, n] : near) {
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      names.push_back(n);
    }
    if (names.size() == 5) break;
  }
  std::string msg =
      absl::StrCat("the server doesn't have a resource type \"", name, "\"");
  if (!names.empty()) {
    absl::StrAppend(&msg, "; did you mean: ", absl::StrJoin(names, ", "));
  }
  return absl::NotFoundError(msg);
}

}  // namespace

std::string ApiResource::GroupVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

absl::StatusOr<ApiGroup> ParseApiVersions(absl::string_view json) {
  rapidjson::Document doc;
  absl::Status s = Parse(json, "/api", &doc);
  if (!s.ok()) return s;
  ApiGroup g;
  g.versions = StrList(doc, "versions");
  if (g.versions.empty()) {
    return absl::InvalidArgumentError("/api lists no versions");
  }
  return g;
}

absl::StatusOr<std::vector<ApiGroup>> ParseApiGroupList(
    absl::string_view json) {
  rapidjson::Document doc;
  absl::Status s = Parse(json, "/apis", &doc);
  if (!s.ok()) return s;
  std::vector<ApiGroup> out;
  auto groups = doc.FindMember("groups");
  if (groups == doc.MemberEnd() || !groups->value.IsArray()) return out;
  for (const auto& g : groups->value.GetArray()) {
    ApiGroup group;
    group.name = Str(g, "name");
    if (group.name.empty()) continue;
    std::string preferred;
    auto pv = g.FindMember("preferredVersion");
    if (pv != g.MemberEnd()) preferred = Str(pv->value, "version");
    if (!preferred.empty()) group.versions.push_back(preferred);
    auto versions = g.FindMember("versions");
    if (versions != g.MemberEnd() && versions->value.IsArray()) {
      for (const auto& v : versions->value.GetArray()) {
        std::string version = Str(v, "version");
        if (!version.empty() && version != preferred) {
          group.versions.push_back(version);
        }
      }
    }
    out.push_back(std::move(group));
  }
  return out;
}

absl::StatusOr<std::vector<ApiResource>> ParseApiResourceList(
    absl::string_view json, absl::string_view group) {
  rapidjson::Document doc;
  absl::Status s = Parse(json, "resource list", &doc);
  if (!s.ok()) return s;
  std::string gv = Str(doc, "groupVersion");
  std::string version =
      gv.substr(gv.find('/') == std::string::npos ? 0 : gv.find('/') + 1);
  std::vector<ApiResource> out;
  auto list = doc.FindMember("resources");
  if (list == doc.MemberEnd() || !list->value.IsArray()) return out;
  for (const auto& r : list->value.GetArray()) {
    ApiResource res;
    res.resource = Str(r, "name");
    if (res.resource.empty() || absl::StrContains(res.resource, '/')) continue;
    res.group = std::string(group);
    res.version = version;
    res.kind = Str(r, "kind");
    res.singular = Str(r, "singularName");
    // Built-in resources leave singularName empty (v1.24): kubectl derives
    // it from the kind.
    if (res.singular.empty()) {
      res.singular = absl::AsciiStrToLower(res.kind);
      res.singular_derived = true;
    }
    auto ns = r.FindMember("namespaced");
    res.namespaced =
        ns != r.MemberEnd() && ns->value.IsBool() && ns->value.GetBool();
    res.short_names = StrList(r, "shortNames");
    res.verbs = StrList(r, "verbs");
    res.categories = StrList(r, "categories");
    out.push_back(std::move(res));
  }
  return out;
}

absl::StatusOr<ApiResource> ResolveResource(
    const std::vector<ApiResource>& resources, absl::string_view name) {
  std::vector<std::string> slash = absl::StrSplit(name, '/');
  if (slash.size() == 3 || slash.size() == 2) {
    // group/version/resource, version/resource (core) or group/resource.
    std::string group, version, resource = slash.back();
    if (slash.size() == 3) {
      group = slash[0];
      version = slash[1];
    } else if (LooksLikeVersion(slash[0])) {
      version = slash[0];
    } else {
      group = slash[0];
    }
    for (const ApiResource& r : resources) {
      if (r.group == group && (version.empty() || r.version == version) &&
          NameMatches(r, resource)) {
        return r;
      }
    }
    return NotFoundWithSuggestions(resources, name);
  }
  if (slash.size() > 3) return NotFoundWithSuggestions(resources, name);
  // Plain name first (kubectl: "po", "pods", "Pod").
  for (const ApiResource& r : resources) {
    if (NameMatches(r, name)) return r;
  }
  // resource.group, or resource.version.group.
  size_t dot = name.find('.');
  if (dot != absl::string_view::npos) {
    absl::string_view resource = name.substr(0, dot);
    absl::string_view rest = name.substr(dot + 1);
    for (const ApiResource& r : resources) {
      if (r.group == rest && NameMatches(r, resource)) return r;
    }
    size_t dot2 = rest.find('.');
    if (dot2 != absl::string_view::npos) {
      absl::string_view version = rest.substr(0, dot2);
      absl::string_view group = rest.substr(dot2 + 1);
      for (const ApiResource& r : resources) {
        if (r.group == group && r.version == version &&
            NameMatches(r, resource)) {
          return r;
        }
      }
    }
  }
  return NotFoundWithSuggestions(resources, name);
}

Discovery::Discovery(HttpTransport* transport) : transport_(transport) {}

absl::Status Discovery::Refresh() {
  absl::MutexLock refresh_lock(&refresh_mu_);
  return RefreshLocked();
}

absl::Status Discovery::RefreshLocked() {
  std::vector<ApiResource> all;
  HttpRequest req;
  req.path = "/api";
  absl::StatusOr<HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) return resp.status();
  absl::StatusOr<ApiGroup> core = ParseApiVersions(resp->body);
  if (!core.ok()) return core.status();
  for (const std::string& v : core->versions) {
    req.path = absl::StrCat("/api/", v);
    resp = transport_->Do(req);
    if (!resp.ok()) return resp.status();
    auto list = ParseApiResourceList(resp->body, "");
    if (!list.ok()) return list.status();
    all.insert(all.end(), list->begin(), list->end());
  }
  req.path = "/apis";
  resp = transport_->Do(req);
  if (!resp.ok()) return resp.status();
  absl::StatusOr<std::vector<ApiGroup>> groups = ParseApiGroupList(resp->body);
  if (!groups.ok()) return groups.status();
  for (const ApiGroup& g : *groups) {
    for (const std::string& v : g.versions) {
      req.path = absl::StrCat("/apis/", g.name, "/", v);
      resp = transport_->Do(req);
      if (!resp.ok()) {
        // kubectl carries on with partial discovery (e.g. a metrics API
        // whose backend is down).
        LOG(WARNING) << "discovery of " << g.name << "/" << v
                     << " failed: " << resp.status();
        continue;
      }
      auto list = ParseApiResourceList(resp->body, g.name);
      if (!list.ok()) {
        LOG(WARNING) << "discovery of " << g.name << "/" << v << ": "
                     << list.status();
        continue;
      }
      all.insert(all.end(), list->begin(), list->end());
    }
  }
  absl::MutexLock lock(&mu_);
  resources_ = std::move(all);
  loaded_ = true;
  ++refreshes_;
  return absl::OkStatus();
}

absl::StatusOr<ApiResource> Discovery::Resolve(absl::string_view name) {
  int seen_refreshes = 0;
  {
    absl::MutexLock lock(&mu_);
    seen_refreshes = refreshes_;
    if (loaded_) {
      absl::StatusOr<ApiResource> r = ResolveResource(resources_, name);
      if (r.ok() || !absl::IsNotFound(r.status())) return r;
    }
  }
  {
    // Another caller may have refreshed while we waited: refresh only if
    // nobody did since our lookup.
    absl::MutexLock refresh_lock(&refresh_mu_);
    bool stale;
    {
      absl::MutexLock lock(&mu_);
      stale = refreshes_ == seen_refreshes;
    }
    if (stale) {
      absl::Status s = RefreshLocked();
      if (!s.ok()) return s;
    }
  }
  absl::MutexLock lock(&mu_);
  return ResolveResource(resources_, name);
}

std::vector<ApiResource> Discovery::Resources() const {
  absl::MutexLock lock(&mu_);
  return resources_;
}

int Discovery::refreshes() const {
  absl::MutexLock lock(&mu_);
  return refreshes_;
}

}  // namespace client
}  // namespace informer

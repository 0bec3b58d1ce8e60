#include "server/kubeapi/request_path.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace server {
namespace kubeapi {

absl::optional<RequestPath> ParseRequestPath(absl::string_view path) {
  absl::ConsumeSuffix(&path, "/");
  std::vector<std::string> segs = absl::StrSplit(path, '/', absl::SkipEmpty());
  RequestPath out;
  if (segs.empty()) return absl::nullopt;
  if (segs[0] == "healthz" || segs[0] == "livez" || segs[0] == "readyz") {
    out.type = RequestPath::Type::kHealth;
    out.health = segs[0];
    return out;
  }
  if (segs[0] == "version" && segs.size() == 1) {
    out.type = RequestPath::Type::kVersion;
    return out;
  }
  size_t rest;
  if (segs[0] == "api") {
    if (segs.size() == 1) {
      out.type = RequestPath::Type::kApi;
      return out;
    }
    out.version = segs[1];
    rest = 2;
  } else if (segs[0] == "apis") {
    if (segs.size() == 1) {
      out.type = RequestPath::Type::kApis;
      return out;
    }
    out.group = segs[1];
    if (segs.size() == 2) {
      out.type = RequestPath::Type::kGroup;
      return out;
    }
    out.version = segs[2];
    rest = 3;
  } else {
    return absl::nullopt;
  }
  if (segs.size() == rest) {
    out.type = RequestPath::Type::kGroupVersion;
    return out;
  }
  out.type = RequestPath::Type::kResource;
  // namespaces/<ns>/<resource>... ; "namespaces" and "namespaces/<name>"
  // alone are the Namespace resource itself.
  if (segs[rest] == "namespaces" && segs.size() >= rest + 3) {
    out.namespace_ = segs[rest + 1];
    rest += 2;
  }
  out.resource = segs[rest];
  if (segs.size() > rest + 1) out.name = segs[rest + 1];
  if (segs.size() > rest + 2) out.subresource = segs[rest + 2];
  if (segs.size() > rest + 3) return absl::nullopt;
  return out;
}

}  // namespace kubeapi
}  // namespace server

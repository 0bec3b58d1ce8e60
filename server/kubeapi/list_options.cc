#include "server/kubeapi/list_options.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "simdjson.h"

namespace server {
namespace kubeapi {
namespace {

// Fields every kind supports, plus each kind's own (the API server's
// AddFieldLabelConversionFunc registrations in v1.24).
bool FieldSupported(absl::string_view kind, absl::string_view field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  static const std::map<std::string, std::vector<std::string>>* kByKind =
      new std::map<std::string, std::vector<std::string>>{
          {"Pod",
           {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "status.phase", "status.podIP",
            "status.nominatedNodeName"}},
          {"Event",
           {"involvedObject.kind", "involvedObject.namespace",
            "involvedObject.name", "involvedObject.uid",
            "involvedObject.apiVersion", "involvedObject.resourceVersion",
            "involvedObject.fieldPath", "reason", "reportingComponent",
            "source", "type"}},
          {"Secret", {"type"}},
          {"Namespace", {"status.phase"}},
          {"Node", {"spec.unschedulable"}},
          {"ReplicaSet", {"status.replicas"}},
          {"ReplicationController", {"status.replicas"}},
          {"Job", {"status.successful"}},
      };
  auto it = kByKind->find(std::string(kind));
  if (it == kByKind->end()) return false;
  for (const std::string& f : it->second) {
    if (f == field) return true;
  }
  return false;
}

// The value a field selector compares for `field` of `obj`.
std::string FieldValue(const informer::Object& obj, absl::string_view field) {
  if (field == "metadata.name") return std::string(obj.name());
  if (field == "metadata.namespace") return std::string(obj.namespace_());
  // Event's "source" is source.component in the API server's conversion.
  std::string path =
      field == "source" ? "source.component" : std::string(field);
  std::vector<std::string> values = obj.FieldValues(path);
  return values.empty() ? "" : values.front();
}

// Splits on unescaped ',' and removes the escapes "\,", "\=", "\\"
// (fields.ParseSelector's escaping).
std::vector<std::string> SplitTerms(absl::string_view s) {
  std::vector<std::string> terms(1);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      terms.back().push_back('\\');
      terms.back().push_back(s[++i]);
    } else if (s[i] == ',') {
      terms.emplace_back();
    } else {
      terms.back().push_back(s[i]);
    }
  }
  return terms;
}

std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i]);
  }
  return out;
}

// The first unescaped occurrence of `op` in `term`.
size_t FindOperator(absl::string_view term, absl::string_view op) {
  for (size_t i = 0; i + op.size() <= term.size(); ++i) {
    if (term[i] == '\\') {
      ++i;
      continue;
    }
    if (term.substr(i, op.size()) == op) return i;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::StatusOr<FieldSelector> FieldSelector::Parse(absl::string_view selector,
                                                   absl::string_view kind) {
  FieldSelector out;
  if (absl::StripAsciiWhitespace(selector).empty()) return out;
  for (const std::string& term : SplitTerms(selector)) {
    Requirement r;
    size_t at;
    size_t len;
    if ((at = FindOperator(term, "!=")) != absl::string_view::npos) {
      r.equals = false;
      len = 2;
    } else if ((at = FindOperator(term, "==")) != absl::string_view::npos) {
      len = 2;
    } else if ((at = FindOperator(term, "=")) != absl::string_view::npos) {
      len = 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid selector: '", selector, "'; can't understand '", term, "'"));
    }
    r.field = Unescape(absl::StripAsciiWhitespace(term.substr(0, at)));
    r.value = Unescape(term.substr(at + len));
    if (!FieldSupported(kind, r.field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("field label not supported: ", r.field));
    }
    out.requirements_.push_back(std::move(r));
  }
  return out;
}

bool FieldSelector::Matches(const informer::Object& obj) const {
  for (const Requirement& r : requirements_) {
    if ((FieldValue(obj, r.field) == r.value) != r.equals) return false;
  }
  return true;
}

std::string EncodeContinue(const ContinueToken& token) {
  // The key is followed by a NUL: the next page starts after it.
  std::string start = token.start;
  start.push_back('\0');
  std::string json = absl::StrCat(R"({"v":"meta.k8s.io/v1","rv":)", token.rv,
                                  R"(,"start":)", JsonQuote(start), "}");
  std::string out;
  absl::WebSafeBase64Escape(json, &out);
  return out;
}

absl::StatusOr<ContinueToken> DecodeContinue(absl::string_view token) {
  auto invalid = [](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("continue key is not valid: ", why));
  };
  std::string json;
  if (!absl::WebSafeBase64Unescape(token, &json)) {
    return invalid("illegal base64 data");
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) {
    return invalid("the token is not JSON");
  }
  std::string_view version;
  int64_t rv = 0;
  std::string_view start;
  if (doc["v"].get(version) != simdjson::SUCCESS ||
      version != "meta.k8s.io/v1") {
    return invalid(
        "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (doc["rv"].get(rv) != simdjson::SUCCESS || rv == 0) {
    return invalid(
        "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (doc["start"].get(start) != simdjson::SUCCESS || start.empty()) {
    return invalid("encoded start key is empty");
  }
  ContinueToken out;
  out.rv = rv;
  out.start = std::string(start);
  if (!out.start.empty() && out.start.back() == '\0') out.start.pop_back();
  if (out.start.find("..") != std::string::npos) {
    return invalid("path traversal attempt");
  }
  return out;
}

namespace {

ApiStatus InvalidListOptions(std::vector<std::string> forbidden) {
  ApiStatus s;
  s.code = 422;
  s.reason = "Invalid";
  s.details_group = "meta.k8s.io";
  s.details_kind = "ListOptions";
  std::vector<std::string> parts;
  for (const std::string& why : forbidden) {
    std::string msg = absl::StrCat("Forbidden: ", why);
    parts.push_back(absl::StrCat("resourceVersionMatch: ", msg));
    s.causes.push_back({"FieldValueForbidden", msg, "resourceVersionMatch"});
  }
  s.message = absl::StrCat(
      "ListOptions.meta.k8s.io \"\" is invalid: ",
      parts.size() == 1 ? parts[0]
                        : absl::StrCat("[", absl::StrJoin(parts, ", "), "]"));
  return s;
}

// Whether `accept` offers a form the facade serves; sets *metadata_only for
// PartialObjectMetadata(List). An empty Accept means JSON.
// `tables`: a meta.k8s.io/v1 Table may be chosen (sets *table); watches
// are not served as tables, so kubectl's Table-then-JSON Accept falls back
// to JSON for them.
bool ChooseMediaType(absl::string_view accept, bool tables, bool* metadata_only,
                     bool* table) {
  *metadata_only = false;
  *table = false;
  if (absl::StripAsciiWhitespace(accept).empty()) return true;
  for (absl::string_view alt : absl::StrSplit(accept, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(alt, ';');
    absl::string_view type = absl::StripAsciiWhitespace(parts[0]);
    if (type != "application/json" && type != "*/*" &&
        type != "application/*") {
      continue;
    }
    std::string as, version, group;
    for (size_t i = 1; i < parts.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
      absl::string_view key = absl::StripAsciiWhitespace(kv.first);
      std::string value(absl::StripAsciiWhitespace(kv.second));
      if (key == "as") as = value;
      if (key == "v") version = value;
      if (key == "g") group = value;
    }
    if (as.empty()) return true;
    if (as == "Table" && tables && version == "v1" && group == "meta.k8s.io") {
      *table = true;
      return true;
    }
    if (as == "PartialObjectMetadataList" || as == "PartialObjectMetadata") {
      *metadata_only = true;
      return true;
    }
  }
  return false;
}

// ValidateListOptions' rules for resourceVersionMatch (422 Invalid, or
// NotSupported for an unknown value).
bool ValidateResourceVersionMatch(const RequestOptions& o, ApiStatus* error) {
  const std::string& match = o.resource_version_match;
  std::vector<std::string> forbidden;
  if (!match.empty()) {
    if (o.watch)
      forbidden.push_back("resourceVersionMatch is forbidden for watch");
    if (o.resource_version.empty()) {
      forbidden.push_back(
          "resourceVersionMatch is forbidden unless resourceVersion is "
          "provided");
    }
    if (o.has_continue) {
      forbidden.push_back(
          "resourceVersionMatch is forbidden when continue is provided");
    }
    if (match == "Exact" && o.resource_version == "0") {
      forbidden.push_back(
          "resourceVersionMatch \"exact\" is forbidden for resourceVersion "
          "\"0\"");
    }
    if (match != "Exact" && match != "NotOlderThan") {
      *error = BadRequestStatus(absl::StrCat(
          "resourceVersionMatch: Unsupported value: \"", match,
          "\": supported values: \"Exact\", \"NotOlderThan\", \"\""));
      error->code = 422;
      error->reason = "Invalid";
      return false;
    }
  }
  if (!forbidden.empty()) {
    *error = InvalidListOptions(std::move(forbidden));
    return false;
  }
  return true;
}

}  // namespace

bool ParseRequestOptions(const std::multimap<std::string, std::string>& query,
                         absl::string_view kind, absl::string_view accept,
                         RequestOptions* out, ApiStatus* error) {
  auto get = [&query](const char* key) -> std::string {
    auto it = query.find(key);
    return it == query.end() ? "" : it->second;
  };
  auto truthy = [](const std::string& v) {
    return v == "1" || v == "true" || v == "True";
  };
  auto bad = [error](std::string message) {
    *error = BadRequestStatus(message);
    return false;
  };
  *out = RequestOptions();
  out->watch = truthy(get("watch"));
  if (!ChooseMediaType(accept, /*tables=*/!out->watch, &out->metadata_only,
                       &out->table)) {
    *error = NotAcceptableStatus(absl::StrCat(
        "only the following media types are accepted: application/json, "
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, "
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io (asked: ",
        accept, ")"));
    return false;
  }
  absl::StatusOr<informer::LabelSelector> labels =
      informer::LabelSelector::Parse(get("labelSelector"));
  if (!labels.ok()) return bad(std::string(labels.status().message()));
  out->label_selector = *std::move(labels);
  absl::StatusOr<FieldSelector> fields =
      FieldSelector::Parse(get("fieldSelector"), kind);
  if (!fields.ok()) return bad(std::string(fields.status().message()));
  out->field_selector = *std::move(fields);
  const std::string include = get("includeObject");
  if (include == "None") {
    out->include_object = IncludeObject::kNone;
  } else if (include == "Object") {
    out->include_object = IncludeObject::kObject;
  } else if (!include.empty() && include != "Metadata") {
    return bad(absl::StrCat("invalid includeObject: \"", include, "\""));
  }
  out->allow_watch_bookmarks = truthy(get("allowWatchBookmarks"));
  out->resource_version = get("resourceVersion");
  if (!out->resource_version.empty() &&
      (!absl::SimpleAtoi(out->resource_version, &out->rv) || out->rv < 0)) {
    return bad(absl::StrCat("invalid resource version: \"",
                            out->resource_version, "\""));
  }
  std::string limit = get("limit");
  if (!limit.empty() && !absl::SimpleAtoi(limit, &out->limit)) {
    return bad(absl::StrCat("invalid limit: \"", limit, "\""));
  }
  if (out->limit < 0) out->limit = 0;
  std::string timeout = get("timeoutSeconds");
  int64_t seconds = 0;
  if (!timeout.empty()) {
    if (!absl::SimpleAtoi(timeout, &seconds) || seconds < 0) {
      return bad(absl::StrCat("invalid timeoutSeconds: \"", timeout, "\""));
    }
    out->timeout = absl::Seconds(seconds);
  }
  std::string cont = get("continue");
  if (!cont.empty()) {
    absl::StatusOr<ContinueToken> token = DecodeContinue(cont);
    if (!token.ok()) return bad(std::string(token.status().message()));
    out->has_continue = true;
    out->continue_token = *token;
  }
  out->resource_version_match = get("resourceVersionMatch");
  if (!ValidateResourceVersionMatch(*out, error)) return false;
  if (out->has_continue && !out->resource_version.empty() &&
      out->resource_version != "0") {
    return bad(
        "specifying resource version is not allowed when using continue");
  }
  return true;
}

}  // namespace kubeapi
}  // namespace server

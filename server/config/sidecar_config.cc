#include "server/config/sidecar_config.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "informer/labels/label_selector.h"
#include "informer/util/read_file.h"
#include "informer/util/yaml_reader.h"

namespace server {
namespace {

using informer::YamlReader;

// A config file larger than this is not a config file; a valid one nests
// fewer than ten levels (see YamlLimits).
constexpr informer::YamlLimits kLimits{4 << 20, 64};

// A Go-style duration field (see ParseGoDuration).
bool ReadDuration(YamlReader* r, const YAML::Node& map, const char* key,
                  absl::string_view field, absl::Duration* out,
                  bool* present = nullptr) {
  std::string text;
  bool has = false;
  if (!r->String(map, key, field, &text, &has)) return false;
  if (present != nullptr) *present = has;
  if (!has) return true;
  absl::StatusOr<absl::Duration> d = ParseGoDuration(text);
  if (!d.ok()) {
    return r->Fail(map[key], YamlReader::Join(field, key),
                   d.status().message());
  }
  *out = *d;
  return true;
}

bool IsLabelNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_' || c == '.';
}

// A label key: [prefix/]name, name <= 63 characters of [A-Za-z0-9-_.]
// starting and ending alphanumeric; prefix a DNS subdomain.
absl::Status ValidateLabelKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("empty label key");
  absl::string_view name = key;
  const size_t slash = key.find('/');
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid label key \"", key, "\": bad prefix"));
    }
    for (char c : prefix) {
      if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
            absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' ||
            c == '.')) {
        return absl::InvalidArgumentError(absl::StrCat(
            "invalid label key \"", key, "\": prefix must be a DNS name"));
      }
    }
  }
  if (name.empty() || name.size() > 63 ||
      !absl::ascii_isalnum(static_cast<unsigned char>(name.front())) ||
      !absl::ascii_isalnum(static_cast<unsigned char>(name.back()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid label key \"", key,
                     "\": a name of at most 63 characters that starts and "
                     "ends with a letter or digit"));
  }
  for (char c : name) {
    if (!IsLabelNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid label key \"", key,
                       "\": unexpected character '", std::string(1, c), "'"));
    }
  }
  return absl::OkStatus();
}

// A dotted field path ("spec.nodeName"): non-empty segments without spaces.
absl::Status ValidateFieldPath(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty field path");
  for (absl::string_view seg : absl::StrSplit(path, '.')) {
    if (seg.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid field path \"", path, "\": empty segment (use a.b.c)"));
    }
    for (char c : seg) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '[' ||
          c == ']' || c == '/') {
        return absl::InvalidArgumentError(absl::StrCat(
            "invalid field path \"", path, "\": unexpected character '",
            std::string(1, c), "' (use dotted names like spec.nodeName)"));
      }
    }
  }
  return absl::OkStatus();
}

// Fields an object cannot lose: the cache keys and versions objects by them.
bool IsProtectedField(absl::string_view path) {
  return path == "metadata" || path == "metadata.name" ||
         path == "metadata.namespace" || path == "metadata.uid" ||
         path == "metadata.resourceVersion";
}

bool ReadIndexes(YamlReader* r, const YAML::Node& list,
                 const std::string& field, ResourceConfig* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string f = absl::StrCat(field, "[", i, "]");
    if (!item.IsMap() || item.size() != 1) {
      r->Fail(item, f,
              "expected one of {label: KEY}, {field: PATH}, {ownerUid: true}");
      return false;
    }
    if (!r->KnownKeys(item, f, {"label", "field", "ownerUid"})) return false;
    std::string value;
    if (item["label"].IsDefined()) {
      if (!r->String(item, "label", f, &value)) return false;
      if (absl::Status st = ValidateLabelKey(value); !st.ok()) {
        r->Fail(item["label"], f + ".label", st.message());
        return false;
      }
      out->label_indexes.push_back(value);
    } else if (item["field"].IsDefined()) {
      if (!r->String(item, "field", f, &value)) return false;
      if (absl::Status st = ValidateFieldPath(value); !st.ok()) {
        r->Fail(item["field"], f + ".field", st.message());
        return false;
      }
      out->field_indexes.push_back(value);
    } else {
      bool owner = false;
      if (!r->Bool(item, "ownerUid", f, &owner)) return false;
      if (!owner) {
        r->Fail(item["ownerUid"], f + ".ownerUid",
                "the ownerUid index is always present; only true is allowed");
        return false;
      }
    }
  }
  return true;
}

bool ReadResource(YamlReader* r, const YAML::Node& node,
                  const std::string& field, SidecarConfig::Resource* out) {
  if (!node.IsMap()) {
    r->Fail(node, field, "expected a mapping with at least \"resource\"");
    return false;
  }
  if (!r->KnownKeys(node, field,
                    {"resource", "namespace", "labelSelector", "fieldSelector",
                     "resyncPeriod", "metadataOnly", "transform", "indexes"})) {
    return false;
  }
  ResourceConfig& c = out->config;
  c.origin = r->Where(node);
  bool has_resource = false;
  if (!r->String(node, "resource", field, &c.resource, &has_resource)) {
    return false;
  }
  c.resource = std::string(absl::StripAsciiWhitespace(c.resource));
  if (!has_resource || c.resource.empty()) {
    r->Fail(has_resource ? node["resource"] : node, field + ".resource",
            "required (e.g. pods, deployments.apps)");
    return false;
  }
  if (!r->String(node, "namespace", field, &c.namespace_,
                 &out->has_namespace)) {
    return false;
  }
  if (!r->String(node, "labelSelector", field, &c.label_selector)) {
    return false;
  }
  if (absl::StatusOr<informer::LabelSelector> s =
          informer::LabelSelector::Parse(c.label_selector);
      !s.ok()) {
    r->Fail(node["labelSelector"], field + ".labelSelector",
            s.status().message());
    return false;
  }
  if (!r->String(node, "fieldSelector", field, &c.field_selector)) {
    return false;
  }
  if (absl::Status st = ValidateFieldSelector(c.field_selector); !st.ok()) {
    r->Fail(node["fieldSelector"], field + ".fieldSelector", st.message());
    return false;
  }
  if (!ReadDuration(r, node, "resyncPeriod", field, &c.resync_period) ||
      !r->Bool(node, "metadataOnly", field, &c.metadata_only)) {
    return false;
  }
  YAML::Node transform;
  if (!r->Map(node, "transform", field, &transform)) {
    return false;
  }
  if (transform.IsDefined()) {
    const std::string tf = field + ".transform";
    if (!r->KnownKeys(transform, tf, {"dropFields"})) return false;
    YAML::Node drop;
    if (!r->Sequence(transform, "dropFields", tf, &drop)) {
      return false;
    }
    for (size_t i = 0; drop.IsDefined() && i < drop.size(); ++i) {
      const std::string df = absl::StrCat(tf, ".dropFields[", i, "]");
      if (!drop[i].IsScalar()) {
        r->Fail(drop[i], df, "expected a dotted field path");
        return false;
      }
      const std::string path = drop[i].Scalar();
      if (absl::Status st = ValidateFieldPath(path); !st.ok()) {
        r->Fail(drop[i], df, st.message());
        return false;
      }
      if (IsProtectedField(path)) {
        r->Fail(drop[i], df,
                absl::StrCat("\"", path,
                             "\" cannot be dropped: the cache keys and "
                             "versions objects by it"));
        return false;
      }
      c.drop_fields.push_back(path);
    }
  }
  YAML::Node indexes;
  if (!r->Sequence(node, "indexes", field, &indexes)) {
    return false;
  }
  if (indexes.IsDefined() && !ReadIndexes(r, indexes, field + ".indexes", &c)) {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<absl::Duration> ParseGoDuration(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  absl::Duration d;
  if (t.empty() || absl::StartsWith(t, "-") || absl::StartsWith(t, "+") ||
      absl::EndsWith(t, "inf") || !absl::ParseDuration(t, &d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid duration \"", text,
        "\" (use a non-negative Go duration like 30s, 5m, 1h30m, 0)"));
  }
  return d;
}

absl::Status ValidateFieldSelector(absl::string_view selector) {
  if (absl::StripAsciiWhitespace(selector).empty()) return absl::OkStatus();
  for (absl::string_view term : absl::StrSplit(selector, ',')) {
    term = absl::StripAsciiWhitespace(term);
    size_t op = term.find("!=");
    size_t op_len = 2;
    if (op == absl::string_view::npos) {
      op = term.find("==");
      if (op == absl::string_view::npos) {
        op = term.find('=');
        op_len = 1;
      }
    }
    if (op == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid field selector term \"", term,
          "\": expected FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE"));
    }
    absl::string_view key = absl::StripAsciiWhitespace(term.substr(0, op));
    if (absl::Status st = ValidateFieldPath(key); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid field selector term \"", term, "\": ", st.message()));
    }
    absl::string_view value = term.substr(op + op_len);
    if (absl::StrContains(value, "=")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid field selector term \"", term, "\": more than one '='"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SidecarConfig> ParseSidecarConfig(absl::string_view yaml,
                                                 absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded =
      informer::LoadYaml(yaml, file_name, kLimits);
  if (!loaded.ok()) return loaded.status();
  // "namespace:" with nothing after it is more likely a mistake than "".
  YamlReader r(file_name, YamlReader::NullIs::kWrongType);
  SidecarConfig config;
  try {
    const YAML::Node root = *loaded;
    if (!root.IsDefined() || root.IsNull()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name,
                       ": empty; expected \"resources:\" and/or "
                       "\"allowUnlistedResources: true\""));
    }
    if (!root.IsMap()) {
      r.Fail(root, "(top level)",
             "expected a mapping with \"resources\", "
             "\"allowUnlistedResources\", \"lazyIdleTimeout\"");
      return r.status();
    }
    if (!r.KnownKeys(
            root, "",
            {"resources", "allowUnlistedResources", "lazyIdleTimeout"}) ||
        !r.Bool(root, "allowUnlistedResources", "",
                &config.allow_unlisted_resources) ||
        !ReadDuration(&r, root, "lazyIdleTimeout", "",
                      &config.lazy_idle_timeout,
                      &config.has_lazy_idle_timeout)) {
      return r.status();
    }
    if (config.has_lazy_idle_timeout &&
        config.lazy_idle_timeout <= absl::ZeroDuration()) {
      r.Fail(root["lazyIdleTimeout"], "lazyIdleTimeout", "must be positive");
      return r.status();
    }
    YAML::Node resources;
    if (!r.Sequence(root, "resources", "", &resources)) {
      return r.status();
    }
    // Textual duplicates, by lower-cased name: line of the first.
    std::map<std::string, std::string> seen;
    for (size_t i = 0; resources.IsDefined() && i < resources.size(); ++i) {
      const std::string field = absl::StrCat("resources[", i, "]");
      SidecarConfig::Resource res;
      if (!ReadResource(&r, resources[i], field, &res)) return r.status();
      auto [it, inserted] = seen.emplace(
          absl::AsciiStrToLower(res.config.resource), res.config.origin);
      if (!inserted) {
        r.Fail(resources[i]["resource"], field + ".resource",
               absl::StrCat("duplicate resource \"", res.config.resource,
                            "\" (first listed at ", it->second, ")"));
        return r.status();
      }
      config.resources.push_back(std::move(res));
    }
    if (config.resources.empty() && !config.allow_unlisted_resources) {
      r.Fail(root, "resources",
             "lists no resource and allowUnlistedResources is not true: "
             "the sidecar would serve nothing");
      return r.status();
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": invalid configuration: ", e.what()));
  }
  return config;
}

absl::StatusOr<SidecarConfig> LoadSidecarConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = informer::ReadFile(path);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("the config file: ", text.status().message()));
  }
  return ParseSidecarConfig(*text, path);
}

absl::StatusOr<SidecarConfig> SidecarConfigFromResourceList(
    absl::string_view list) {
  SidecarConfig config;
  std::set<std::string> seen;
  if (absl::StripAsciiWhitespace(list).empty()) return config;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: empty item in \"", list, "\""));
    }
    if (!seen.insert(absl::AsciiStrToLower(item)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: duplicate resource \"", item, "\""));
    }
    SidecarConfig::Resource res;
    res.config.resource = std::string(item);
    res.config.origin = "--resources";
    config.resources.push_back(std::move(res));
  }
  return config;
}

void ApplyDefaultNamespace(SidecarConfig* config,
                           absl::string_view default_namespace) {
  for (SidecarConfig::Resource& r : config->resources) {
    if (!r.has_namespace) r.config.namespace_ = std::string(default_namespace);
  }
}

}  // namespace server

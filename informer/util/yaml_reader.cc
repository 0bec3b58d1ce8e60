#include "informer/util/yaml_reader.h"

#include <algorithm>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace informer {
namespace {

// Upper bound of the nesting depth: flow brackets outside quotes, plus per
// line the indentation and the "- " entries that open block sequences.
// Good enough to refuse pathological input before parsing.
int EstimateNesting(absl::string_view yaml) {
  int max_depth = 0;
  int flow = 0;
  char quote = 0;
  int line_depth = 0;
  bool at_line_start = true;
  for (size_t i = 0; i < yaml.size(); ++i) {
    const char c = yaml[i];
    if (c == '\n') {
      at_line_start = true;
      line_depth = 0;
      if (quote == 0) continue;
    }
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (at_line_start && c == ' ') {
      ++line_depth;
    } else {
      at_line_start = false;
    }
    if (c == '-' && i + 1 < yaml.size() && yaml[i + 1] == ' ') ++line_depth;
    if (c == '"' || c == '\'') quote = c;
    if (c == '[' || c == '{') ++flow;
    if ((c == ']' || c == '}') && flow > 0) --flow;
    if (c == '#') {
      while (i + 1 < yaml.size() && yaml[i + 1] != '\n') ++i;
    }
    max_depth = std::max(max_depth, flow + line_depth / 2);
  }
  return max_depth;
}

}  // namespace

absl::StatusOr<YAML::Node> LoadYaml(absl::string_view text,
                                    absl::string_view file,
                                    const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": larger than ", limits.max_bytes, " bytes"));
  }
  if (EstimateNesting(text) > limits.max_nesting) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": nested more than ", limits.max_nesting, " levels deep"));
  }
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string where(file);
    if (e.mark.line >= 0) {
      absl::StrAppend(&where, ":", e.mark.line + 1, ":", e.mark.column + 1);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": invalid YAML: ", e.what()));
  }
}

std::string YamlReader::Where(const YAML::Node& node) const {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return file_;
  return absl::StrCat(file_, ":", m.line + 1, ":", m.column + 1);
}

bool YamlReader::Fail(const YAML::Node& node, absl::string_view field,
                      absl::string_view problem) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat(Where(node), ": ", field, ": ", problem));
  }
  return false;
}

std::string YamlReader::Join(absl::string_view field, absl::string_view key) {
  return field.empty() ? std::string(key) : absl::StrCat(field, ".", key);
}

bool YamlReader::KnownKeys(const YAML::Node& map, absl::string_view field,
                           const std::vector<absl::string_view>& known) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: the pair is a temporary
    if (!key.IsScalar()) return Fail(key, field, "keys must be strings");
    if (std::find(known.begin(), known.end(), key.Scalar()) == known.end()) {
      return Fail(key, Join(field, key.Scalar()),
                  absl::StrCat("unknown field (known: ",
                               absl::StrJoin(known, ", "), ")"));
    }
  }
  return true;
}

YAML::Node YamlReader::Child(const YAML::Node& map,
                             absl::string_view key) const {
  // Subscripting a scalar throws; a missing key gives a "zombie" node that
  // throws when assigned: both are returned as a plain undefined node.
  if (!map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || (null_is_ == NullIs::kAbsent && n.IsNull())) {
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

bool YamlReader::String(const YAML::Node& map, absl::string_view key,
                        absl::string_view field, std::string* out,
                        bool* present) {
  const YAML::Node n = Child(map, key);
  if (present != nullptr) *present = n.IsDefined();
  if (!n.IsDefined()) return true;
  if (!n.IsScalar()) return Fail(n, Join(field, key), "expected a string");
  *out = n.Scalar();
  return true;
}

bool YamlReader::Bool(const YAML::Node& map, absl::string_view key,
                      absl::string_view field, bool* out) {
  const YAML::Node n = Child(map, key);
  if (!n.IsDefined()) return true;
  bool value = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, value)) {
    return Fail(n, Join(field, key), "expected true or false");
  }
  *out = value;
  return true;
}

bool YamlReader::Kind(const YAML::Node& map, absl::string_view key,
                      absl::string_view field, YAML::NodeType::value type,
                      absl::string_view expected, YAML::Node* out) {
  const YAML::Node n = Child(map, key);
  *out = n;
  if (!n.IsDefined()) return true;
  if (n.Type() != type) return Fail(n, Join(field, key), expected);
  return true;
}

bool YamlReader::Map(const YAML::Node& map, absl::string_view key,
                     absl::string_view field, YAML::Node* out) {
  return Kind(map, key, field, YAML::NodeType::Map, "expected a mapping", out);
}

bool YamlReader::Sequence(const YAML::Node& map, absl::string_view key,
                          absl::string_view field, YAML::Node* out) {
  return Kind(map, key, field, YAML::NodeType::Sequence, "expected a list",
              out);
}

bool YamlReader::StringList(const YAML::Node& map, absl::string_view key,
                            absl::string_view field,
                            std::vector<std::string>* out) {
  const YAML::Node n = Child(map, key);
  if (!n.IsDefined()) return true;
  const std::string f = Join(field, key);
  std::vector<std::string> values;
  if (n.IsScalar()) {
    values.push_back(n.Scalar());
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        return Fail(n[i], absl::StrCat(f, "[", i, "]"), "expected a string");
      }
      values.push_back(n[i].Scalar());
    }
  } else {
    return Fail(n, f, "expected a list of strings");
  }
  for (const std::string& s : values) {
    if (absl::StripAsciiWhitespace(s).empty()) return Fail(n, f, "empty entry");
  }
  out->insert(out->end(), values.begin(), values.end());
  return true;
}

}  // namespace informer

#include "emulator/selector.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace emulator {
namespace {

bool IsLabelChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_' || c == '.' || c == '/';
}

// A tiny cursor over the selector text.
class Lexer {
 public:
  explicit Lexer(absl::string_view s) : s_(s) {}
  void SkipSpace() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= s_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool Consume(absl::string_view tok) {
    SkipSpace();
    if (absl::StartsWith(s_.substr(pos_), tok)) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  std::string Word() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && IsLabelChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  // "in"/"notin" must be followed by a space or '('.
  bool ConsumeKeyword(absl::string_view kw) {
    SkipSpace();
    absl::string_view rest = s_.substr(pos_);
    if (!absl::StartsWith(rest, kw)) return false;
    if (rest.size() > kw.size() && rest[kw.size()] != ' ' &&
        rest[kw.size()] != '(') {
      return false;
    }
    pos_ += kw.size();
    return true;
  }

 private:
  absl::string_view s_;
  size_t pos_ = 0;
};

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("unable to parse requirement: found '", text, "', ", why));
}

// The API server's IsQualifiedName / IsValidLabelValue (apimachinery
// util/validation): selectors naming impossible labels are rejected, not
// silently matched against nothing.
bool IsLabelName(absl::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c));
  };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsDnsSubdomain(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(s, '.')) {
    if (label.empty() || label.size() > 63) return false;
    auto lower_alnum = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    };
    if (!lower_alnum(label.front()) || !lower_alnum(label.back())) return false;
    for (char c : label) {
      if (!lower_alnum(c) && c != '-') return false;
    }
  }
  return true;
}

absl::Status ValidateKey(absl::string_view text, absl::string_view key) {
  absl::string_view name = key;
  if (size_t slash = key.find('/'); slash != absl::string_view::npos) {
    if (!IsDnsSubdomain(key.substr(0, slash))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unable to parse requirement: key: Invalid value: \"", key,
          "\": prefix part a lowercase RFC 1123 subdomain must consist of "
          "lower case alphanumeric characters, '-' or '.', and must start "
          "and end with an alphanumeric character (in \"",
          text, "\")"));
    }
    name = key.substr(slash + 1);
  }
  if (IsLabelName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "unable to parse requirement: key: Invalid value: \"", key,
      "\": name part must consist of alphanumeric characters, '-', '_' or "
      "'.', and must start and end with an alphanumeric character (in \"",
      text, "\")"));
}

// strconv.ParseInt(value, 10, 64).
bool ParseInt64(absl::string_view value, int64_t* out) {
  if (value.empty()) return false;
  size_t i = (value[0] == '+' || value[0] == '-') ? 1 : 0;
  if (i == value.size()) return false;
  const bool negative = value[0] == '-';
  uint64_t v = 0;
  const uint64_t limit = negative ? uint64_t{INT64_MAX} + 1 : INT64_MAX;
  for (; i < value.size(); ++i) {
    const char c = value[i];
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// apimachinery's NewRequirement checks Gt/Lt values for being integers,
// then every value for being a label value, and reports all it found (one
// error alone, several as "[e1, e2]").
absl::Status ValidateValues(absl::string_view text,
                            const LabelSelector::Requirement& req) {
  using Op = LabelSelector::Op;
  std::vector<std::string> errors;
  if (req.op == Op::kGreaterThan || req.op == Op::kLessThan) {
    int64_t unused;
    if (!ParseInt64(req.values[0], &unused)) {
      errors.push_back(absl::StrCat(
          "values[0]: Invalid value: \"", req.values[0],
          "\": for 'Gt', 'Lt' operators, the value must be an integer"));
    }
  }
  for (size_t i = 0; i < req.values.size(); ++i) {
    absl::string_view value = req.values[i];
    if (value.empty() || IsLabelName(value)) continue;
    errors.push_back(absl::StrCat(
        "values[", i, "][", req.key, "]: Invalid value: \"", value,
        "\": a valid label must be an empty string or consist of "
        "alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character"));
  }
  if (errors.empty()) return absl::OkStatus();
  std::string joined =
      errors.size() == 1 ? errors[0]
                         : absl::StrCat("[", absl::StrJoin(errors, ", "), "]");
  return absl::InvalidArgumentError(absl::StrCat(
      "unable to parse requirement: ", joined, " (in \"", text, "\")"));
}

}  // namespace

const std::string* LookupPair(const StringPairs& pairs, absl::string_view key) {
  auto it = std::lower_bound(
      pairs.begin(), pairs.end(), key,
      [](const std::pair<std::string, std::string>& p, absl::string_view k) {
        return absl::string_view(p.first) < k;
      });
  if (it == pairs.end() || it->first != key) return nullptr;
  return &it->second;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelSelector sel;
  Lexer lex(text);
  if (lex.AtEnd()) return sel;
  while (true) {
    Requirement req;
    if (lex.Consume("!")) {
      req.key = lex.Word();
      req.op = Op::kDoesNotExist;
      if (req.key.empty())
        return Invalid(text, "expected a label key after '!'");
    } else {
      req.key = lex.Word();
      if (req.key.empty()) return Invalid(text, "expected a label key");
      if (lex.Consume("==") || lex.Consume("=")) {
        req.op = Op::kEquals;
        req.values.push_back(lex.Word());
      } else if (lex.Consume("!=")) {
        req.op = Op::kNotEquals;
        req.values.push_back(lex.Word());
      } else if (lex.Consume(">")) {
        req.op = Op::kGreaterThan;
        req.values.push_back(lex.Word());
      } else if (lex.Consume("<")) {
        req.op = Op::kLessThan;
        req.values.push_back(lex.Word());
      } else if (bool notin = lex.ConsumeKeyword("notin");
                 notin || lex.ConsumeKeyword("in")) {
        req.op = notin ? Op::kNotIn : Op::kIn;
        if (!lex.Consume("(")) return Invalid(text, "expected '('");
        while (true) {
          req.values.push_back(lex.Word());
          if (lex.Consume(",")) continue;
          if (lex.Consume(")")) break;
          return Invalid(text, "expected ',' or ')'");
        }
      } else {
        req.op = Op::kExists;
      }
    }
    if (absl::Status st = ValidateKey(text, req.key); !st.ok()) return st;
    if (absl::Status st = ValidateValues(text, req); !st.ok()) return st;
    sel.requirements_.push_back(std::move(req));
    if (lex.AtEnd()) break;
    if (!lex.Consume(",")) return Invalid(text, "expected ','");
  }
  return sel;
}

bool LabelSelector::Matches(const StringPairs& labels) const {
  for (const auto& req : requirements_) {
    const std::string* v = LookupPair(labels, req.key);
    switch (req.op) {
      case Op::kEquals:
        if (v == nullptr || *v != req.values[0]) return false;
        break;
      case Op::kNotEquals:
        if (v != nullptr && *v == req.values[0]) return false;
        break;
      case Op::kIn:
        if (v == nullptr || std::find(req.values.begin(), req.values.end(),
                                      *v) == req.values.end()) {
          return false;
        }
        break;
      case Op::kNotIn:
        if (v != nullptr && std::find(req.values.begin(), req.values.end(),
                                      *v) != req.values.end()) {
          return false;
        }
        break;
      case Op::kExists:
        if (v == nullptr) return false;
        break;
      case Op::kDoesNotExist:
        if (v != nullptr) return false;
        break;
      case Op::kGreaterThan:
      case Op::kLessThan: {
        int64_t have, want;
        if (v == nullptr || !ParseInt64(*v, &have) ||
            !ParseInt64(req.values[0], &want)) {
          return false;
        }
        if (req.op == Op::kGreaterThan ? !(have > want) : !(have < want)) {
          return false;
        }
        break;
      }
    }
  }
  return true;
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(
    absl::string_view text, const std::vector<std::string>& allowed) {
  FieldSelector sel;
  // Split on unescaped commas, then on the first unescaped operator.
  std::vector<std::string> terms;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      cur.push_back('\\');
      cur.push_back(text[++i]);
    } else if (text[i] == ',') {
      terms.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(text[i]);
    }
  }
  terms.push_back(std::move(cur));
  for (const std::string& raw : terms) {
    if (absl::StripAsciiWhitespace(raw).empty()) continue;
    std::string field, value;
    bool negated = false;
    bool found_op = false;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size()) {
        (found_op ? value : field).push_back(raw[++i]);
        continue;
      }
      if (!found_op) {
        if (raw.compare(i, 2, "!=") == 0) {
          negated = true;
          found_op = true;
          ++i;
          continue;
        }
        if (raw.compare(i, 2, "==") == 0) {
          found_op = true;
          ++i;
          continue;
        }
        if (raw[i] == '=') {
          found_op = true;
          continue;
        }
        field.push_back(raw[i]);
      } else {
        value.push_back(raw[i]);
      }
    }
    if (!found_op) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid selector: '", text, "'; can't understand '", raw, "'"));
    }
    field = std::string(absl::StripAsciiWhitespace(field));
    bool ok = field == "metadata.name" || field == "metadata.namespace" ||
              std::find(allowed.begin(), allowed.end(), field) != allowed.end();
    if (!ok && allowed.empty()) {
      // The API server's default conversion, for kinds that select on
      // metadata only.
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", field,
          "\" is not a known field selector: only \"metadata.name\", "
          "\"metadata.namespace\""));
    }
    if (!ok) {
      // A kind's own conversion function.
      return absl::InvalidArgumentError(
          absl::StrCat("field label not supported: ", field));
    }
    sel.terms_.push_back({std::move(field), std::move(value), negated});
  }
  return sel;
}

bool FieldSelector::Matches(const StringPairs& fields) const {
  for (const auto& t : terms_) {
    const std::string* v = LookupPair(fields, t.field);
    absl::string_view have = v == nullptr ? absl::string_view() : *v;
    if ((have == t.value) == t.negated) return false;
  }
  return true;
}

}  // namespace emulator

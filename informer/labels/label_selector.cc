#include "informer/labels/label_selector.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxPrefixLength = 253;

bool IsAlnum(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c));
}

// A label name or value: [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside.
bool ValidName(absl::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A DNS subdomain: lower-case alphanumerics, '-' and '.'.
bool ValidPrefix(absl::string_view s) {
  if (s.empty() || s.size() > kMaxPrefixLength) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) return false;
    if (!IsAlnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

absl::Status CheckKey(absl::string_view key, size_t pos) {
  const size_t slash = key.find('/');
  absl::string_view name = key;
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (!ValidPrefix(prefix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label selector: invalid key prefix \"", prefix, "\" at offset ", pos,
          " (must be a lower-case DNS subdomain)"));
    }
  }
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label selector: invalid key \"", key, "\" at offset ", pos,
        " (names are at most 63 characters of [A-Za-z0-9._-], starting and "
        "ending alphanumeric)"));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(absl::string_view value, size_t pos) {
  if (value.empty() || ValidName(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "label selector: invalid value \"", value, "\" at offset ", pos,
      " (values are at most 63 characters of [A-Za-z0-9._-], starting and "
      "ending alphanumeric)"));
}

// strconv.ParseInt(s, 10, 64) for a text that already passed CheckValue
// (so no sign and no spaces): decimal digits that fit an int64.
bool ParseInt64(absl::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const int d = c - '0';
    if (v > (INT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// A hand-written scanner over the selector text.
class Parser {
 public:
  explicit Parser(absl::string_view s) : s_(s) {}

  absl::StatusOr<std::vector<LabelSelector::Requirement>> Parse() {
    std::vector<LabelSelector::Requirement> out;
    SkipSpace();
    if (AtEnd()) return out;
    while (true) {
      absl::StatusOr<LabelSelector::Requirement> req = ParseRequirement();
      if (!req.ok()) return req.status();
      out.push_back(*std::move(req));
      SkipSpace();
      if (AtEnd()) return out;
      if (s_[pos_] != ',') {
        return Error(absl::StrCat("expected ',' or end, found '",
                                  absl::string_view(&s_[pos_], 1), "'"));
      }
      ++pos_;
      SkipSpace();
      if (AtEnd()) return Error("expected a requirement after ','");
    }
  }

 private:
  using Op = LabelSelector::Op;

  bool AtEnd() const { return pos_ >= s_.size(); }
  void SkipSpace() {
    while (!AtEnd() &&
           absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "label selector \"", s_, "\": ", what, " at offset ", pos_));
  }
  static bool IsWordChar(char c) {
    return IsAlnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  }
  // A run of key/value characters (possibly empty).
  absl::string_view Word() {
    const size_t start = pos_;
    while (!AtEnd() && IsWordChar(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  absl::StatusOr<LabelSelector::Requirement> ParseRequirement() {
    LabelSelector::Requirement req;
    bool negated = false;
    if (s_[pos_] == '!') {
      negated = true;
      ++pos_;
      SkipSpace();
    }
    const size_t key_pos = pos_;
    absl::string_view key = Word();
    if (key.empty()) {
      return Error(AtEnd()
                       ? "expected a label key"
                       : absl::StrCat("expected a label key, found '",
                                      absl::string_view(&s_[pos_], 1), "'"));
    }
    if (absl::Status st = CheckKey(key, key_pos); !st.ok()) return st;
    req.key = std::string(key);
    SkipSpace();
    if (negated) {
      req.op = Op::kDoesNotExist;
      if (!AtEnd() && s_[pos_] != ',') {
        return Error(absl::StrCat("'!", key,
                                  "' takes no operator or value; found '",
                                  absl::string_view(&s_[pos_], 1), "'"));
      }
      return req;
    }
    if (AtEnd() || s_[pos_] == ',') {
      req.op = Op::kExists;
      return req;
    }
    if (s_[pos_] == '=' || s_[pos_] == '!') {
      if (s_[pos_] == '!') {
        if (pos_ + 1 >= s_.size() || s_[pos_ + 1] != '=') {
          ++pos_;
          return Error("expected '=' after '!'");
        }
        req.op = Op::kNotEquals;
        pos_ += 2;
      } else {
        req.op = Op::kEquals;
        pos_ += (pos_ + 1 < s_.size() && s_[pos_ + 1] == '=') ? 2 : 1;
      }
      SkipSpace();
      const size_t value_pos = pos_;
      absl::string_view value = Word();
      if (absl::Status st = CheckValue(value, value_pos); !st.ok()) return st;
      req.values.emplace_back(value);
      return req;
    }
    if (s_[pos_] == '>' || s_[pos_] == '<') {
      req.op = s_[pos_] == '>' ? Op::kGreaterThan : Op::kLessThan;
      ++pos_;
      SkipSpace();
      const size_t value_pos = pos_;
      absl::string_view value = Word();
      if (absl::Status st = CheckValue(value, value_pos); !st.ok()) return st;
      // The API server's words (apimachinery's NewRequirement).
      if (!ParseInt64(value, &req.number)) {
        pos_ = value_pos;
        return Error(
            absl::StrCat("for 'Gt', 'Lt' operators, the value must "
                         "be an integer, found \"",
                         value, "\""));
      }
      req.values.emplace_back(value);
      return req;
    }
    return ParseSetRequirement(key, std::move(req));
  }

  // The rest of `key in (v1, v2)` or `key notin (...)`: the operator and
  // the value set (sorted, duplicates dropped).
  absl::StatusOr<LabelSelector::Requirement> ParseSetRequirement(
      absl::string_view key, LabelSelector::Requirement req) {
    const size_t op_pos = pos_;
    absl::string_view op = Word();
    if (op == "in") {
      req.op = Op::kIn;
    } else if (op == "notin") {
      req.op = Op::kNotIn;
    } else {
      pos_ = op_pos;
      return Error(
          absl::StrCat("expected an operator (=, ==, !=, in, notin, >, <) "
                       "after key \"",
                       key, "\""));
    }
    SkipSpace();
    if (AtEnd() || s_[pos_] != '(') {
      return Error(absl::StrCat("expected '(' after '", op, "'"));
    }
    ++pos_;
    while (true) {
      SkipSpace();
      const size_t value_pos = pos_;
      absl::string_view value = Word();
      if (absl::Status st = CheckValue(value, value_pos); !st.ok()) return st;
      req.values.emplace_back(value);
      SkipSpace();
      if (AtEnd()) return Error("missing ')' to close the value set");
      if (s_[pos_] == ')') {
        ++pos_;
        break;
      }
      if (s_[pos_] != ',') {
        return Error(
            absl::StrCat("expected ',' or ')' in the value set, "
                         "found '",
                         absl::string_view(&s_[pos_], 1), "'"));
      }
      ++pos_;
    }
    std::sort(req.values.begin(), req.values.end());
    req.values.erase(std::unique(req.values.begin(), req.values.end()),
                     req.values.end());
    return req;
  }

  const absl::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view selector) {
  absl::StatusOr<std::vector<Requirement>> reqs = Parser(selector).Parse();
  if (!reqs.ok()) return reqs.status();
  LabelSelector out;
  out.requirements_ = *std::move(reqs);
  return out;
}

bool LabelSelector::Matches(const informer::Object& obj) const {
  for (const Requirement& req : requirements_) {
    const std::string* value = obj.Label(req.key);
    bool ok = false;
    switch (req.op) {
      case Op::kExists:
        ok = value != nullptr;
        break;
      case Op::kDoesNotExist:
        ok = value == nullptr;
        break;
      case Op::kEquals:
        ok = value != nullptr && *value == req.values[0];
        break;
      case Op::kNotEquals:
        ok = value == nullptr || *value != req.values[0];
        break;
      case Op::kIn:
        ok = value != nullptr &&
             std::binary_search(req.values.begin(), req.values.end(), *value);
        break;
      case Op::kNotIn:
        ok = value == nullptr ||
             !std::binary_search(req.values.begin(), req.values.end(), *value);
        break;
      case Op::kGreaterThan:
      case Op::kLessThan: {
        // A label that is not a decimal integer never matches, as in
        // apimachinery (which logs and answers false).
        int64_t have = 0;
        ok = value != nullptr && ParseInt64(*value, &have) &&
             (req.op == Op::kGreaterThan ? have > req.number
                                         : have < req.number);
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace informer

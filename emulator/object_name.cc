#include "emulator/object_name.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace emulator {
namespace {

constexpr size_t kSubdomainMax = 253;
constexpr size_t kLabelMax = 63;

// The validators' texts, as apimachinery's IsDNS1123Subdomain and
// IsDNS1123Label word them (RegexError's "e.g." list included, with its
// doubled space when it has two examples).
constexpr char kSubdomainRegexError[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kLabelRegexError[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
    "characters or '-', and must start and end with an alphanumeric "
    "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool IsLabel(absl::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsSubdomain(absl::string_view s) {
  for (absl::string_view part : absl::StrSplit(s, '.')) {
    if (!IsLabel(part)) return false;
  }
  return true;
}

std::vector<std::string> SubdomainErrors(absl::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > kSubdomainMax) {
    errs.push_back(
        absl::StrCat("must be no more than ", kSubdomainMax, " characters"));
  }
  if (!IsSubdomain(s)) errs.push_back(kSubdomainRegexError);
  return errs;
}

std::vector<std::string> LabelErrors(absl::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > kLabelMax) {
    errs.push_back(
        absl::StrCat("must be no more than ", kLabelMax, " characters"));
  }
  if (!IsLabel(s)) {
    errs.push_back(IsSubdomain(s) ? "must not contain dots" : kLabelRegexError);
  }
  return errs;
}

// The kind's name validator; a generateName prefix may end in '-' (the
// server masks one trailing dash before checking it).
std::vector<std::string> NameErrors(const ResourceInfo& r,
                                    absl::string_view name, bool prefix) {
  std::string value(name);
  if (prefix && !value.empty() && value.back() == '-') value.back() = 'a';
  const bool label = r.group.empty() &&
                     (r.resource == "namespaces" || r.resource == "services");
  return label ? LabelErrors(value) : SubdomainErrors(value);
}

FieldError Invalid(absl::string_view field, absl::string_view value,
                   std::string detail) {
  FieldError e;
  e.type = FieldError::Type::kInvalid;
  e.field = std::string(field);
  e.value = std::string(value);
  e.detail = std::move(detail);
  return e;
}

}  // namespace

std::vector<FieldError> ValidateObjectName(const ResourceInfo& r,
                                           absl::string_view name,
                                           absl::string_view generate_name) {
  std::vector<FieldError> errors;
  if (name.empty() && generate_name.empty()) {
    FieldError e;
    e.type = FieldError::Type::kRequired;
    e.field = "metadata.name";
    e.detail = "name or generateName is required";
    errors.push_back(std::move(e));
    return errors;
  }
  // Events' names need only be path segments (v1.37.2 takes generateName
  // "pod-x." for an Event, refuses it for a ConfigMap).
  if (r.kind == "Event") return errors;
  if (!generate_name.empty()) {
    for (std::string& msg : NameErrors(r, generate_name, true)) {
      errors.push_back(
          Invalid("metadata.generateName", generate_name, std::move(msg)));
    }
  }
  if (!name.empty()) {
    for (std::string& msg : NameErrors(r, name, false)) {
      errors.push_back(Invalid("metadata.name", name, std::move(msg)));
    }
  }
  return errors;
}

}  // namespace emulator

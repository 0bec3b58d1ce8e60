#include "emulator/list_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emulator {
namespace {

constexpr char kMatch[] = "resourceVersionMatch";
constexpr char kExact[] = "Exact";
constexpr char kNotOlderThan[] = "NotOlderThan";

FieldError Forbidden(absl::string_view field, absl::string_view detail) {
  FieldError e;
  e.type = FieldError::Type::kForbidden;
  e.field = std::string(field);
  e.detail = std::string(detail);
  return e;
}

FieldError NotSupported(absl::string_view value,
                        std::vector<std::string> supported) {
  FieldError e;
  e.type = FieldError::Type::kNotSupported;
  e.field = kMatch;
  e.value = std::string(value);
  e.supported = std::move(supported);
  return e;
}

// v1.37's validateWatchOptions.
std::vector<FieldError> ValidateWatch(const ListOptions& o) {
  std::vector<FieldError> errors;
  const std::string& match = o.resource_version_match;
  if (o.send_initial_events.has_value() && match != kNotOlderThan) {
    errors.push_back(Forbidden(kMatch,
                               "sendInitialEvents requires setting "
                               "resourceVersionMatch to NotOlderThan"));
  }
  if (!match.empty()) {
    if (!o.send_initial_events.has_value()) {
      errors.push_back(Forbidden(kMatch,
                                 "resourceVersionMatch is forbidden for watch "
                                 "unless sendInitialEvents is provided"));
    }
    if (match != kNotOlderThan) {
      errors.push_back(NotSupported(match, {kNotOlderThan}));
    }
    if (!o.continue_token.empty()) {
      errors.push_back(Forbidden(
          kMatch,
          "resourceVersionMatch is forbidden when continue is provided"));
    }
  }
  return errors;
}

// The list rules (v1.37), and v1.24's rules for lists and watches alike
// (it forbade resourceVersionMatch on a watch outright).
std::vector<FieldError> ValidateList(const ListOptions& o,
                                     ServerVersion version) {
  std::vector<FieldError> errors;
  const std::string& match = o.resource_version_match;
  if (!match.empty()) {
    if (o.watch && version == ServerVersion::kV1_24) {
      errors.push_back(
          Forbidden(kMatch, "resourceVersionMatch is forbidden for watch"));
    }
    if (o.resource_version.empty()) {
      errors.push_back(Forbidden(kMatch,
                                 "resourceVersionMatch is forbidden unless "
                                 "resourceVersion is provided"));
    }
    if (!o.continue_token.empty()) {
      errors.push_back(Forbidden(
          kMatch,
          "resourceVersionMatch is forbidden when continue is provided"));
    }
    if (match != kExact && match != kNotOlderThan) {
      errors.push_back(NotSupported(match, {kExact, kNotOlderThan, ""}));
    }
    if (match == kExact && o.resource_version == "0") {
      errors.push_back(Forbidden(kMatch,
                                 "resourceVersionMatch \"exact\" is forbidden "
                                 "for resourceVersion \"0\""));
    }
  }
  if (version == ServerVersion::kV1_37 && o.send_initial_events.has_value()) {
    errors.push_back(Forbidden("sendInitialEvents",
                               "sendInitialEvents is forbidden for list"));
  }
  return errors;
}

}  // namespace

absl::StatusOr<int64_t> ParseQueryInt(absl::string_view text) {
  int64_t v = 0;
  if (text.empty()) return v;
  if (!absl::SimpleAtoi(text, &v) || text[0] == ' ') {
    return absl::InvalidArgumentError(absl::StrCat(
        "strconv.ParseInt: parsing \"", text, "\": invalid syntax"));
  }
  return v;
}

absl::optional<bool> ParseQueryBool(absl::string_view text) {
  if (text.empty()) return absl::nullopt;
  std::string v = absl::AsciiStrToLower(text);
  return !(v == "false" || v == "0" || v == "f");
}

std::vector<FieldError> ValidateListOptions(const ListOptions& options,
                                            ServerVersion version) {
  if (options.watch && version == ServerVersion::kV1_37) {
    return ValidateWatch(options);
  }
  return ValidateList(options, version);
}

}  // namespace emulator

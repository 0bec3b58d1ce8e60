#ifndef EMULATOR_LIST_OPTIONS_H_
#define EMULATOR_LIST_OPTIONS_H_

// The query parameters of a list or watch (metav1.ListOptions) as the API
// server reads and validates them before it looks at any object: integer
// parsing with Go's error texts, and ValidateListOptions' rules for
// resourceVersion, resourceVersionMatch, continue and sendInitialEvents.
// Pure functions, thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "emulator/api_status.h"

namespace emulator {

// The API server the emulator stands for: what it validates differs.
enum class ServerVersion { kV1_24, kV1_37 };

struct ListOptions {
  bool watch = false;
  std::string resource_version;
  std::string resource_version_match;
  std::string continue_token;
  // sendInitialEvents: unset, or the value given (v1.37 tells "false"
  // from absent).
  absl::optional<bool> send_initial_events;
};

// A query integer (limit, timeoutSeconds) as Go's strconv.ParseInt reads
// it: empty is 0; otherwise InvalidArgument with the API server's 400 text
// ('strconv.ParseInt: parsing "abc": invalid syntax').
absl::StatusOr<int64_t> ParseQueryInt(absl::string_view text);

// A query boolean as the API server's conversion reads it ("true", "1",
// "false", "0", ...); nullopt when absent.
absl::optional<bool> ParseQueryBool(absl::string_view text);

// The field errors ValidateListOptions reports for `options` on `version`,
// in the server's order; empty when valid.
std::vector<FieldError> ValidateListOptions(const ListOptions& options,
                                            ServerVersion version);

}  // namespace emulator

#endif  // EMULATOR_LIST_OPTIONS_H_

#ifndef EMULATOR_OBJECT_NAME_H_
#define EMULATOR_OBJECT_NAME_H_

// metadata.name and metadata.generateName checks of the API server's
// ValidateObjectMeta: most kinds take a lowercase RFC 1123 subdomain,
// Namespaces and Services an RFC 1123 label. Pure functions, thread-safe.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "emulator/api_status.h"
#include "emulator/resource_registry.h"

namespace emulator {

// The field errors of an object of `r` about to be created as `name`
// (already generated when `generate_name` was given), in the server's
// order: generateName's, then name's. Empty when valid.
std::vector<FieldError> ValidateObjectName(const ResourceInfo& r,
                                           absl::string_view name,
                                           absl::string_view generate_name);

}  // namespace emulator

#endif  // EMULATOR_OBJECT_NAME_H_

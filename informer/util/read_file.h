#ifndef INFORMER_UTIL_READ_FILE_H_
#define INFORMER_UTIL_READ_FILE_H_

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace informer {

// Reads a whole file as bytes. Every error names the path and the reason:
//   NotFound          the path does not exist (callers that search several
//                     places, like $KUBECONFIG, skip exactly these)
//   PermissionDenied  it exists but may not be read
//   InvalidArgument   it is a directory, or larger than `max_bytes`
//   DataLoss          reading failed half way
// e.g. `cannot read "/etc/x": No such file or directory`. Callers add what
// the file is for (a flag, a kubeconfig field) in front of the message.
// Thread-safe (no shared state).
absl::StatusOr<std::string> ReadFile(
    absl::string_view path,
    size_t max_bytes = std::numeric_limits<size_t>::max());

// Whether `path` can be opened for reading now, with ReadFile's errors;
// reads nothing. For flags checked at start and read later.
absl::Status CheckReadable(absl::string_view path);

}  // namespace informer

#endif  // INFORMER_UTIL_READ_FILE_H_

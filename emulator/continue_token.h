#ifndef EMULATOR_CONTINUE_TOKEN_H_
#define EMULATOR_CONTINUE_TOKEN_H_

// The API server's continue tokens for paged lists (etcd3 store format), so
// that clients see the same opaque strings a real server hands out.

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emulator {

// Continue tokens: base64url({"v":"meta.k8s.io/v1","rv":RV,"start":KEY\0}).
std::string EncodeContinueToken(int64_t rv, absl::string_view start_key);
absl::StatusOr<std::pair<int64_t, std::string>> DecodeContinueToken(
    absl::string_view token);

}  // namespace emulator

#endif  // EMULATOR_CONTINUE_TOKEN_H_

#ifndef EMULATOR_PATCH_H_
#define EMULATOR_PATCH_H_

// The PATCH bodies the API server accepts, applied to a RapidJSON document.
// Pure functions, thread-safe.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rapidjson/document.h"

namespace emulator {

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kStrategicMerge,  // application/strategic-merge-patch+json (subset)
  kJsonPatch,       // application/json-patch+json (RFC 6902)
};

// Maps a request Content-Type (parameters ignored) to a PatchType;
// InvalidArgument for anything else (server-side apply is not emulated).
absl::StatusOr<PatchType> PatchTypeFromContentType(
    absl::string_view content_type);

// Applies `patch` (JSON text) to `target` in place. InvalidArgument for a
// malformed patch or, for JSON Patch, a failed "test" or a missing path.
//
// Strategic merge patch is emulated as a JSON merge patch (maps merge
// recursively, null deletes a key, lists are replaced wholesale), with the
// directives `$patch: replace` (replace the map), `$patch: delete` (delete
// the map) honoured and other `$`-directives (`$setElementOrder/...`,
// `$retainKeys`, `$deleteFromPrimitiveList/...`) ignored. Real strategic
// merge would merge lists of objects by their merge key (e.g. containers by
// name); that is not emulated.
absl::Status ApplyPatch(PatchType type, absl::string_view patch,
                        rapidjson::Document& target);

}  // namespace emulator

#endif  // EMULATOR_PATCH_H_

#ifndef INFORMER_OBJECT_WIRE_H_
#define INFORMER_OBJECT_WIRE_H_

// Decoding of the Kubernetes API server's JSON envelopes: lists, watch event
// lines and metav1.Status bodies. Pure functions, thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"

namespace informer {

// metav1.Status, as carried by error responses and watch ERROR events.
struct ApiStatus {
  int code = 0;                // HTTP code, e.g. 410
  std::string reason;          // e.g. "Expired", "NotFound"
  std::string message;         // human readable
  std::string continue_token;  // metadata.continue of a 410 on a list page
};

// One page of a list response (e.g. PodList, PartialObjectMetadataList).
struct ObjectList {
  std::vector<ObjectPtr> items;
  std::string resource_version;  // metadata.resourceVersion
  std::string continue_token;    // metadata.continue; empty on the last page
  int64_t remaining_item_count = -1;  // -1 when absent
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };
absl::string_view WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // Set for kAdded, kModified, kDeleted. Null for kBookmark and kError.
  ObjectPtr object;
  // The object's (or bookmark's) metadata.resourceVersion.
  std::string resource_version;
  // kBookmark only: annotated "k8s.io/initial-events-end": "true" (WatchList).
  bool initial_events_end = false;
  // kError only.
  ApiStatus status;
};

// Decodes a list body. Items inherit nothing from the envelope; each is
// transformed. InvalidArgument with the item index for a bad item.
absl::StatusOr<ObjectList> DecodeList(absl::string_view json,
                                      const TransformOptions& transform = {});

// Decodes one watch event line ({"type":...,"object":{...}}); trailing
// newline allowed. InvalidArgument for malformed lines or unknown types.
absl::StatusOr<WatchEvent> DecodeWatchEvent(
    absl::string_view line, const TransformOptions& transform = {});

// Decodes a metav1.Status body.
absl::StatusOr<ApiStatus> DecodeStatus(absl::string_view json);

}  // namespace informer

#endif  // INFORMER_OBJECT_WIRE_H_

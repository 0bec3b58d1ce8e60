#include "emulator/stored_object.h"

#include "absl/strings/str_cat.h"

namespace emulator {

absl::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
    case EventType::kBookmark:
      return "BOOKMARK";
  }
  return "UNKNOWN";
}

std::string ObjectJson(const ResourceInfo& r, const StoredObject& object,
                       bool metadata_only) {
  if (metadata_only) {
    return absl::StrCat(
        "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/"
        "v1\",\"metadata\":",
        object.metadata_json(), "}");
  }
  return absl::StrCat("{\"kind\":\"", r.kind, "\",\"apiVersion\":\"",
                      r.GroupVersion(), "\",",
                      absl::string_view(object.body).substr(1));
}

std::string EventLine(EventType type, const ResourceInfo& r,
                      const StoredObject& object, bool metadata_only) {
  return absl::StrCat("{\"type\":\"", EventTypeName(type),
                      "\",\"object\":", ObjectJson(r, object, metadata_only),
                      "}\n");
}

std::string BookmarkLine(const ResourceInfo& r, int64_t rv,
                         bool initial_events_end, bool metadata_only,
                         bool legacy) {
  absl::string_view kind = metadata_only
                               ? absl::string_view("PartialObjectMetadata")
                               : absl::string_view(r.kind);
  std::string api_version = metadata_only ? "meta.k8s.io/v1" : r.GroupVersion();
  return absl::StrCat(
      "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"", kind,
      "\",\"apiVersion\":\"", api_version,
      "\",\"metadata\":{\"resourceVersion\":\"", rv, "\"",
      legacy ? ",\"creationTimestamp\":null" : "",
      initial_events_end
          ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
          : "",
      "}}}\n");
}

}  // namespace emulator

#ifndef EMULATOR_STORED_OBJECT_H_
#define EMULATOR_STORED_OBJECT_H_

// The emulator's stored representation of an object version, and its
// rendering on the wire (GET bodies, watch event lines, bookmarks).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "emulator/resource_registry.h"
#include "emulator/selector.h"

namespace emulator {

// One stored version of an object. Immutable and shared by the store, its
// history, snapshots and watch streams; each object's JSON text exists once.
struct StoredObject {
  // Compact JSON without kind/apiVersion, "metadata" first: exactly a list
  // item. Watch events and GETs splice kind/apiVersion in front.
  std::string body;
  // body.substr(kMetadataOffset, metadata_len) is the metadata object (for
  // metadata-only responses).
  static constexpr size_t kMetadataOffset = 12;  // strlen("{\"metadata\":")
  size_t metadata_len = 0;
  std::string ns;
  std::string name;
  std::string uid;
  int64_t rv = 0;
  std::string creation_timestamp;
  int64_t generation = 0;
  StringPairs labels;  // sorted
  StringPairs fields;  // selectable field values (metadata.name, ...), sorted

  absl::string_view metadata_json() const {
    return absl::string_view(body).substr(kMetadataOffset, metadata_len);
  }
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
};
using StoredObjectPtr = std::shared_ptr<const StoredObject>;

enum class EventType { kAdded, kModified, kDeleted, kBookmark };
absl::string_view EventTypeName(EventType type);

// One event as a watch delivers it.
struct StoreEvent {
  EventType type = EventType::kAdded;
  StoredObjectPtr object;  // null for bookmarks
  int64_t rv = 0;
  // Bookmark ending a WatchList's initial events
  // (annotation k8s.io/initial-events-end: "true").
  bool initial_events_end = false;
};

// Watch-event text for one object: {"type":T,"object":{"kind":..,...}}\n.
// `metadata_only` renders a PartialObjectMetadata.
std::string EventLine(EventType type, const ResourceInfo& r,
                      const StoredObject& object, bool metadata_only);
// Bookmark line, as the captures show: metadata holds the resourceVersion
// (and the annotation), plus "creationTimestamp":null in v1.24's shape
// (`legacy`).
std::string BookmarkLine(const ResourceInfo& r, int64_t rv,
                         bool initial_events_end, bool metadata_only,
                         bool legacy);
// The object as a GET returns it (kind/apiVersion spliced in).
std::string ObjectJson(const ResourceInfo& r, const StoredObject& object,
                       bool metadata_only);

}  // namespace emulator

#endif  // EMULATOR_STORED_OBJECT_H_

#ifndef SERVER_KUBEAPI_OBJECT_WRITER_H_
#define SERVER_KUBEAPI_OBJECT_WRITER_H_

// Writes cached objects into response buffers in the API server's forms:
// list items (no kind/apiVersion), whole objects and watch event objects
// (kind/apiVersion first), and PartialObjectMetadata. The cached JSON is
// referenced, not copied, whenever the form allows it.
//
// Thread-safe (no state); evbuffers are the caller's.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "informer/object/object.h"

struct evbuffer;

namespace server {
namespace kubeapi {

struct ObjectForm {
  // The resource's kind and group version ("v1", "apps/v1").
  std::string kind;
  std::string api_version;
  // The cache holds PartialObjectMetadata (the informer is metadata-only).
  bool cache_metadata_only = false;
  // The client asked for PartialObjectMetadata(List).
  bool metadata_only = false;
};

// Appends `obj` to `out`. `type_meta`: with kind/apiVersion (get, watch)
// or without (list items of full objects; PartialObjectMetadata items
// always carry them, as the API server writes them). `rv_override` > 0
// replaces metadata.resourceVersion (a watch's DELETED for an object that
// left the selection carries the change's resourceVersion).
void AppendObject(const ObjectForm& form, const informer::ObjectPtr& obj,
                  bool type_meta, int64_t rv_override, evbuffer* out);

// `json` with the first "resourceVersion":"..." member's value replaced.
std::string ReplaceResourceVersion(absl::string_view json, int64_t rv);

// The compact JSON of `json`'s top-level "metadata" member ("{}" when
// absent or malformed).
std::string ExtractMetadata(absl::string_view json);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_OBJECT_WRITER_H_

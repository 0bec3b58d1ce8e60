#ifndef SERVER_KUBEAPI_LIST_OPTIONS_H_
#define SERVER_KUBEAPI_LIST_OPTIONS_H_

// The query of a list, get or watch request (metav1.ListOptions) as the
// facade understands it: parsing and validation with the API server's error
// messages, field selectors, and continue tokens in the API server's format.
//
// Pure values and functions; thread-safe.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/labels/label_selector.h"
#include "informer/object/object.h"
#include "server/kubeapi/api_status.h"

namespace server {
namespace kubeapi {

// A parsed fieldSelector ("metadata.name=x,spec.nodeName!=n1"): a
// conjunction of equality and inequality requirements on field paths.
class FieldSelector {
 public:
  struct Requirement {
    std::string field;
    bool equals = true;
    std::string value;
  };
  // `kind` decides the fields that may be selected, as the API server's
  // field label conversion does: metadata.name and metadata.namespace for
  // every kind, plus the kind's own (Pod: spec.nodeName, spec.restartPolicy,
  // spec.schedulerName, spec.serviceAccountName, status.phase, status.podIP,
  // status.nominatedNodeName; Event: involvedObject.*, reason, source, type,
  // reportingComponent; Secret: type; Namespace: status.phase; Node:
  // spec.unschedulable; ReplicaSet/ReplicationController: status.replicas;
  // Job: status.successful). InvalidArgument "field label not supported:
  // F" (the API server's 400 message) for any other field, and a parse
  // error for a malformed selector.
  static absl::StatusOr<FieldSelector> Parse(absl::string_view selector,
                                             absl::string_view kind);
  FieldSelector() = default;
  bool Matches(const informer::Object& obj) const;
  bool Empty() const { return requirements_.empty(); }

 private:
  std::vector<Requirement> requirements_;
};

// A continue token, as the API server encodes it: base64url (no padding) of
// {"v":"meta.k8s.io/v1","rv":RV,"start":"<key>\u0000"}. `start` is the
// key after which the next page starts (without the trailing NUL): "name"
// in a namespaced list, "namespace/name" across namespaces. rv -1 marks an
// "inconsistent" token that continues at the current state.
struct ContinueToken {
  int64_t rv = 0;
  std::string start;
};
std::string EncodeContinue(const ContinueToken& token);
// InvalidArgument with the API server's message ("continue key is not
// valid: ...") for anything malformed.
absl::StatusOr<ContinueToken> DecodeContinue(absl::string_view token);

// What a Table row carries as its "object" (the includeObject parameter;
// the API server's default is Metadata).
enum class IncludeObject { kNone, kMetadata, kObject };

// The query of a request, validated.
struct RequestOptions {
  informer::LabelSelector label_selector;
  FieldSelector field_selector;
  bool watch = false;
  // resourceVersion as sent ("" when absent) and parsed (-1 when "").
  std::string resource_version;
  int64_t rv = -1;
  // "", "NotOlderThan", "Exact".
  std::string resource_version_match;
  int64_t limit = 0;
  bool has_continue = false;
  ContinueToken continue_token;
  bool allow_watch_bookmarks = false;
  // Zero: the server's default.
  absl::Duration timeout = absl::ZeroDuration();
  // Accept asks for PartialObjectMetadata(List).
  bool metadata_only = false;
  // Accept asks for a meta.k8s.io/v1 Table (never for a watch).
  bool table = false;
  IncludeObject include_object = IncludeObject::kMetadata;
};

// Parses the decoded query parameters of a request for `kind` (decides the
// field selectors allowed); `accept` is the Accept header. False with
// *error set to the API server's answer: 400 BadRequest for a bad selector,
// limit, timeout, resourceVersion or continue token; 422 Invalid (with
// causes, as ValidateListOptions words them) for a resourceVersionMatch
// the request may not carry; 406 when Accept offers no JSON form the facade
// serves (plain JSON, PartialObjectMetadata(List), and for lists and gets
// the meta.k8s.io/v1 Table; the first alternative served wins).
bool ParseRequestOptions(const std::multimap<std::string, std::string>& query,
                         absl::string_view kind, absl::string_view accept,
                         RequestOptions* out, ApiStatus* error);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_LIST_OPTIONS_H_

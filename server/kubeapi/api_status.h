#ifndef SERVER_KUBEAPI_API_STATUS_H_
#define SERVER_KUBEAPI_API_STATUS_H_

// The Kubernetes API server's JSON texts that the facade must reproduce byte
// for byte: metav1.Status error bodies, JSON string quoting as Go's
// encoding/json writes it, and the TypeMeta ("kind"/"apiVersion") that list
// items lack and watch event objects carry.
//
// Pure functions; thread-safe.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace server {
namespace kubeapi {

// `s` as a JSON string literal the way Go's encoding/json writes it: '"',
// '\\', control characters escaped ("\n", "\u0000"), and '<', '>', '&',
// U+2028, U+2029 as \u escapes (Go's HTML-safe default).
std::string JsonQuote(absl::string_view s);

// One cause of a Status' details.
struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;
};

// A metav1.Status with status "Failure" (every error the facade returns).
// Render() writes the API server's field order:
//   {"kind":"Status","apiVersion":"v1","metadata":{...},"status":"Failure",
//    "message":..,"reason":..,"details":{..},"code":N}
// with empty fields omitted as Go's omitempty does.
struct ApiStatus {
  int code = 500;
  std::string reason;
  std::string message;
  // metadata.continue (a 410 on an expired continue token).
  std::string continue_token;
  // details; the object is written when any of these is set (or
  // `empty_details`, as the API server writes "details":{} for an unknown
  // resource).
  std::string details_name;
  std::string details_group;
  std::string details_kind;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;
  bool empty_details = false;

  std::string Render() const;
};

// The API server's errors (apimachinery's k8s.io/apimachinery/pkg/api/errors
// constructors, same messages).

// `resource` "configmaps" (with its group: "deployments.apps"), `name` the
// object: 404 `configmaps "x" not found`.
ApiStatus NotFoundStatus(absl::string_view resource, absl::string_view group,
                         absl::string_view name);
// A path that names no served resource: 404 "the server could not find the
// requested resource", details {}.
ApiStatus UnknownPathStatus();
ApiStatus BadRequestStatus(absl::string_view message);
ApiStatus UnauthorizedStatus();
// `user` may not `verb` `resource` (of API group `group`) in namespace `ns`
// ("" = cluster scope).
// `name` is the object of a get ("" for list and watch); `why`, when set,
// is appended after ": ".
ApiStatus ForbiddenStatus(absl::string_view user, absl::string_view verb,
                          absl::string_view resource, absl::string_view group,
                          absl::string_view ns, absl::string_view name,
                          absl::string_view why = "");
// A write: 405 naming the verb and saying the facade is read-only.
ApiStatus ReadOnlyStatus(absl::string_view verb, absl::string_view resource,
                         absl::string_view group);
// 410: a list's resourceVersion older than the cache's history.
ApiStatus ListTooOldStatus();
// 410: a continue token whose snapshot left the history; `inconsistent` is
// the token that continues from the same key at the current state.
ApiStatus ContinueExpiredStatus(absl::string_view inconsistent);
// 410 as a watch ERROR event's object: "too old resource version: N (M)".
ApiStatus WatchTooOldStatus(int64_t requested, int64_t oldest);
// 504: the cache did not reach `requested` within the wait.
ApiStatus TooLargeResourceVersionStatus(int64_t requested, int64_t current);
// 504: a request that did not complete in time (the API server's timeout
// filter: "Timeout: request did not complete within requested timeout -
// context deadline exceeded", details {}).
ApiStatus RequestTimeoutStatus();
// 503 while a resource's cache has not synced yet.
ApiStatus NotReadyStatus(absl::string_view resource);
// 406: a metadata-only cache asked for full objects.
ApiStatus NotAcceptableStatus(absl::string_view message);

// Removes the leading "kind" and "apiVersion" members (in either order) of
// an object's compact JSON and returns the rest after the opening '{': the
// members that follow (without a leading comma) and the closing '}'. A JSON
// text whose first members are not TypeMeta is returned whole minus its '{'.
// The result is a view into `json`.
absl::string_view BodyAfterTypeMeta(absl::string_view json);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_API_STATUS_H_

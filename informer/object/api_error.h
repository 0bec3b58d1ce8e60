#ifndef INFORMER_OBJECT_API_ERROR_H_
#define INFORMER_OBJECT_API_ERROR_H_

// Turns Kubernetes API server answers (HTTP error responses, watch ERROR
// events, transport failures) into absl::Status values whose code tells the
// caller what to do, and whose message reads like kubectl's:
//
//   404 GET /api/v1/namespaces/demo/pods/x: Error from server (NotFound):
//   pods "x" not found
//
// The message starts with the HTTP code, names the method and request path,
// and ends with the server's Status.message. The HTTP code, the Status reason
// and any Retry-After are also attached as a Status payload, so callers ask
// HttpCode(s), IsExpired(s), RetryAfter(s) ... instead of parsing messages.
//
// Code mapping (what to do):
//   400, 422 -> INVALID_ARGUMENT     give up (fix the request)
//   401      -> UNAUTHENTICATED      refresh credentials, then give up
//   403      -> PERMISSION_DENIED    give up
//   404      -> NOT_FOUND
//   405      -> UNIMPLEMENTED
//   409      -> ALREADY_EXISTS (reason AlreadyExists) or ABORTED (Conflict)
//   410      -> FAILED_PRECONDITION  relist (resource version expired)
//   429      -> RESOURCE_EXHAUSTED   retry after RetryAfter()
//   500      -> INTERNAL             retry with back-off
//   502, 503 -> UNAVAILABLE          retry
//   504      -> DEADLINE_EXCEEDED    retry
//   connection failures -> UNAVAILABLE
//
// All functions are pure and thread-safe.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "informer/object/wire.h"

namespace informer {

// The status code for an HTTP error code (and Status.reason, which
// distinguishes 409 AlreadyExists from 409 Conflict).
absl::StatusCode StatusCodeForHttp(int http_code, absl::string_view reason);

// Parses a Retry-After header value (delay-seconds only, as the API server
// sends). nullopt when empty or not a non-negative integer.
absl::optional<absl::Duration> ParseRetryAfter(absl::string_view header);

// Builds the status for an HTTP response with a non-2xx code. `body` is the
// response body; when it is a metav1.Status its reason and message are used,
// otherwise the (truncated) body text is. `retry_after_header` is the raw
// Retry-After header value ("" when absent).
absl::Status StatusFromHttpResponse(int http_code, absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view body,
                                    absl::string_view retry_after_header = "");

// Builds the status for an already decoded metav1.Status, e.g. a watch ERROR
// event's (its HTTP code is api_status.code; 0 is treated as 500).
absl::Status StatusFromApiStatus(
    const ApiStatus& api_status, absl::string_view method,
    absl::string_view path,
    absl::optional<absl::Duration> retry_after = absl::nullopt);

// A transport failure (refused, reset, TLS, DNS): UNAVAILABLE, no HTTP code.
absl::Status ConnectionError(absl::string_view method, absl::string_view path,
                             absl::string_view detail);

// A refused TCP connection to the API server at `server` (host:port):
// UNAVAILABLE, no HTTP code, worded like kubectl's
//   The connection to the server 10.0.0.1:6443 was refused - did you
//   specify the right host or port? (GET /api: <detail>)
absl::Status ConnectionRefusedError(absl::string_view server,
                                    absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view detail);

// The HTTP code attached to `status`, or 0 when none is.
int HttpCode(const absl::Status& status);
// The metav1.Status reason attached to `status` ("" when none).
std::string Reason(const absl::Status& status);
// The server's Retry-After, when it sent one.
absl::optional<absl::Duration> RetryAfter(const absl::Status& status);

// 410 Gone / reason Expired (from a response or a watch ERROR event): the
// resource version is too old; relist. Also recognises statuses built
// without a payload (FAILED_PRECONDITION whose message starts with "410").
bool IsExpired(const absl::Status& status);
// The server has not yet caught up with a requested resource version (504
// whose message says "Too large resource version"); retry, then relist.
bool IsTooLargeResourceVersion(const absl::Status& status);
// 429, or reason TooManyRequests.
bool IsTooManyRequests(const absl::Status& status);

}  // namespace informer

#endif  // INFORMER_OBJECT_API_ERROR_H_

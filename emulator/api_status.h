#ifndef EMULATOR_API_STATUS_H_
#define EMULATOR_API_STATUS_H_

// metav1.Status bodies exactly as the API server writes them, v1.24 and
// v1.37 alike (field order, escaping, messages), and the mapping from the
// store's absl::Status errors to them. Pure functions, thread-safe.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "emulator/resource_registry.h"

namespace emulator {

struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;
};

struct ApiStatus {
  int code = 500;
  std::string reason;  // "NotFound", "Expired", ...; empty on success
  std::string message;
  bool success = false;  // "status":"Success" instead of "Failure"
  // metadata.continue (a fresh token on an expired-continue 410).
  std::string continue_token;
  // details; written only when has_details (an empty {} is meaningful).
  bool has_details = false;
  std::string details_name;
  std::string details_group;
  std::string details_kind;
  std::string details_uid;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;  // written when > 0
};

// The compact JSON body.
std::string StatusJson(const ApiStatus& status);

// One entry of apimachinery's field.ErrorList: what validation found wrong
// with one field. `detail` is the validator's text; the cause's message is
// derived from the type as the API server writes it.
struct FieldError {
  enum class Type { kInvalid, kRequired, kForbidden, kNotSupported };
  Type type = Type::kInvalid;
  std::string field;  // "metadata.name", "resourceVersionMatch"
  std::string value;  // kInvalid and kNotSupported: the offending value
  std::string detail;
  // kNotSupported: the accepted values, in the server's order.
  std::vector<std::string> supported;
};

// The 422 Invalid of a failed validation, as apierrors.NewInvalid writes
// it: "KIND[.GROUP] \"NAME\" is invalid: " then the one error, or the
// errors in brackets, each also a cause.
ApiStatus InvalidFieldsStatus(absl::string_view group, absl::string_view kind,
                              absl::string_view name,
                              const std::vector<FieldError>& errors);
// ListOptions' validation errors (group meta.k8s.io, kind ListOptions).
ApiStatus InvalidListOptionsStatus(const std::vector<FieldError>& errors);

// Constructors for the errors the emulator serves. `r` names the resource
// (kind in details is the plural, group added for non-core, as kube does).
ApiStatus NotFoundStatus(const ResourceInfo& r, absl::string_view name);
ApiStatus ResourceNotFoundStatus();  // unknown path or resource
ApiStatus UnauthorizedStatus();
ApiStatus ForbiddenStatus(absl::string_view user, absl::string_view verb,
                          const ResourceInfo& r, absl::string_view ns,
                          absl::string_view name);
ApiStatus AlreadyExistsStatus(const ResourceInfo& r, absl::string_view name);
ApiStatus ConflictStatus(const ResourceInfo& r, absl::string_view name);
ApiStatus ExpiredStatus(absl::string_view message);
// 410 for a continue token older than the compaction, carrying a fresh
// "inconsistent" token that continues from the same key.
ApiStatus ExpiredContinueStatus(absl::string_view fresh_token);
ApiStatus TooManyRequestsStatus(int retry_after_seconds);
ApiStatus InternalErrorStatus(absl::string_view message);
ApiStatus BadRequestStatus(absl::string_view message);
ApiStatus InvalidStatus(const ResourceInfo& r, absl::string_view name,
                        absl::string_view message);
ApiStatus MethodNotAllowedStatus();
ApiStatus TooLargeResourceVersionStatus(int64_t requested, int64_t current);
ApiStatus UnsupportedMediaTypeStatus(absl::string_view content_type);
// Store errors whose payload (kInvalidPayload) carries field errors: how
// ObjectStore::Create reports an invalid object name. The message is the
// object's name (as the Status' details name it).
absl::Status InvalidObjectError(absl::string_view name,
                                const std::vector<FieldError>& errors);
// DELETE's success body.
ApiStatus DeletedStatus(const ResourceInfo& r, absl::string_view name,
                        absl::string_view uid);

// Payload key (on store errors) carrying the fresh continue token of an
// expired continue; see ObjectStore::List.
inline constexpr absl::string_view kContinuePayload = "emulator/continue";
// Payload key (FailedPrecondition store errors) carrying field errors.
inline constexpr absl::string_view kInvalidPayload = "emulator/invalid";

// Maps a store error to its Status: NotFound -> 404, AlreadyExists -> 409
// AlreadyExists, Aborted -> 409 Conflict, OutOfRange -> 410 Expired (with the
// continue payload when present), InvalidArgument -> 400, FailedPrecondition
// -> 422 Invalid (with the payload's field errors as causes when present),
// DeadlineExceeded -> 504 (too large resource version;
// message passed through), anything else -> 500.
ApiStatus FromStoreError(const absl::Status& error, const ResourceInfo& r,
                         absl::string_view name);

}  // namespace emulator

#endif  // EMULATOR_API_STATUS_H_

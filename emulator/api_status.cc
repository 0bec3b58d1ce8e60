#include "emulator/api_status.h"

#include "absl/strings/str_cat.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Key(JsonWriter& w, absl::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void Str(JsonWriter& w, absl::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

ApiStatus Failure(int code, absl::string_view reason,
                  absl::string_view message) {
  ApiStatus s;
  s.code = code;
  s.reason = std::string(reason);
  s.message = std::string(message);
  return s;
}

void SetResourceDetails(ApiStatus& s, const ResourceInfo& r,
                        absl::string_view name) {
  s.has_details = true;
  s.details_name = std::string(name);
  s.details_group = r.group;
  s.details_kind = r.resource;
}

}  // namespace

std::string StatusJson(const ApiStatus& s) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "Status");
  Key(w, "apiVersion");
  Str(w, "v1");
  Key(w, "metadata");
  w.StartObject();
  if (!s.continue_token.empty()) {
    Key(w, "continue");
    Str(w, s.continue_token);
  }
  w.EndObject();
  Key(w, "status");
  Str(w, s.success ? "Success" : "Failure");
  if (!s.message.empty()) {
    Key(w, "message");
    Str(w, s.message);
  }
  if (!s.reason.empty()) {
    Key(w, "reason");
    Str(w, s.reason);
  }
  if (s.has_details) {
    Key(w, "details");
    w.StartObject();
    if (!s.details_name.empty()) {
      Key(w, "name");
      Str(w, s.details_name);
    }
    if (!s.details_group.empty()) {
      Key(w, "group");
      Str(w, s.details_group);
    }
    if (!s.details_kind.empty()) {
      Key(w, "kind");
      Str(w, s.details_kind);
    }
    if (!s.details_uid.empty()) {
      Key(w, "uid");
      Str(w, s.details_uid);
    }
    if (!s.causes.empty()) {
      Key(w, "causes");
      w.StartArray();
      for (const auto& c : s.causes) {
        w.StartObject();
        if (!c.reason.empty()) {
          Key(w, "reason");
          Str(w, c.reason);
        }
        if (!c.message.empty()) {
          Key(w, "message");
          Str(w, c.message);
        }
        if (!c.field.empty()) {
          Key(w, "field");
          Str(w, c.field);
        }
        w.EndObject();
      }
      w.EndArray();
    }
    if (s.retry_after_seconds > 0) {
      Key(w, "retryAfterSeconds");
      w.Int(s.retry_after_seconds);
    }
    w.EndObject();
  }
  Key(w, "code");
  w.Int(s.code);
  w.EndObject();
  return buf.GetString();
}

ApiStatus NotFoundStatus(const ResourceInfo& r, absl::string_view name) {
  ApiStatus s =
      Failure(404, "NotFound",
              absl::StrCat(r.QualifiedResource(), " \"", name, "\" not found"));
  SetResourceDetails(s, r, name);
  return s;
}

ApiStatus ResourceNotFoundStatus() {
  ApiStatus s = Failure(404, "NotFound",
                        "the server could not find the requested resource");
  s.has_details = true;
  return s;
}

ApiStatus UnauthorizedStatus() {
  return Failure(401, "Unauthorized", "Unauthorized");
}

ApiStatus ForbiddenStatus(absl::string_view user, absl::string_view verb,
                          const ResourceInfo& r, absl::string_view ns,
                          absl::string_view name) {
  std::string subject = r.QualifiedResource();
  if (!name.empty()) absl::StrAppend(&subject, " \"", name, "\"");
  std::string scope = ns.empty()
                          ? " at the cluster scope"
                          : absl::StrCat(" in the namespace \"", ns, "\"");
  ApiStatus s =
      Failure(403, "Forbidden",
              absl::StrCat(subject, " is forbidden: User \"", user,
                           "\" cannot ", verb, " resource \"", r.resource,
                           "\" in API group \"", r.group, "\"", scope));
  SetResourceDetails(s, r, name);
  return s;
}

ApiStatus AlreadyExistsStatus(const ResourceInfo& r, absl::string_view name) {
  ApiStatus s = Failure(
      409, "AlreadyExists",
      absl::StrCat(r.QualifiedResource(), " \"", name, "\" already exists"));
  SetResourceDetails(s, r, name);
  return s;
}

ApiStatus ConflictStatus(const ResourceInfo& r, absl::string_view name) {
  ApiStatus s = Failure(
      409, "Conflict",
      absl::StrCat("Operation cannot be fulfilled on ", r.QualifiedResource(),
                   " \"", name,
                   "\": the object has been modified; please apply your "
                   "changes to the latest version and try again"));
  SetResourceDetails(s, r, name);
  return s;
}

ApiStatus ExpiredStatus(absl::string_view message) {
  return Failure(410, "Expired", message);
}

ApiStatus ExpiredContinueStatus(absl::string_view fresh_token) {
  ApiStatus s = Failure(
      410, "Expired",
      "The provided continue parameter is too old to display a consistent "
      "list result. You can start a new list without the continue parameter, "
      "or use the continue token in this response to retrieve the remainder "
      "of the results. Continuing with the provided token results in an "
      "inconsistent list - objects that were created, modified, or deleted "
      "between the time the first chunk was returned and now may show up in "
      "the list.");
  s.continue_token = std::string(fresh_token);
  return s;
}

ApiStatus TooManyRequestsStatus(int retry_after_seconds) {
  ApiStatus s = Failure(429, "TooManyRequests",
                        "Too many requests, please try again later.");
  s.has_details = true;
  s.retry_after_seconds = retry_after_seconds;
  return s;
}

ApiStatus InternalErrorStatus(absl::string_view message) {
  ApiStatus s = Failure(500, "InternalError",
                        absl::StrCat("Internal error occurred: ", message));
  s.has_details = true;
  s.causes.push_back({"", std::string(message), ""});
  return s;
}

ApiStatus BadRequestStatus(absl::string_view message) {
  return Failure(400, "BadRequest", message);
}

ApiStatus InvalidStatus(const ResourceInfo& r, absl::string_view name,
                        absl::string_view message) {
  ApiStatus s =
      Failure(422, "Invalid",
              absl::StrCat(r.kind, " \"", name, "\" is invalid: ", message));
  s.has_details = true;
  s.details_name = std::string(name);
  s.details_group = r.group;
  s.details_kind = r.kind;
  return s;
}

ApiStatus MethodNotAllowedStatus() {
  ApiStatus s = Failure(405, "MethodNotAllowed",
                        "the server does not allow this method on the "
                        "requested resource");
  s.has_details = true;
  return s;
}

ApiStatus TooLargeResourceVersionStatus(int64_t requested, int64_t current) {
  // apimachinery's NewTimeoutError prefixes its message with "Timeout: ".
  ApiStatus s =
      Failure(504, "Timeout",
              absl::StrCat("Timeout: Too large resource version: ", requested,
                           ", current: ", current));
  s.has_details = true;
  s.causes.push_back(
      {"ResourceVersionTooLarge", "Too large resource version", ""});
  s.retry_after_seconds = 1;
  return s;
}

ApiStatus UnsupportedMediaTypeStatus(absl::string_view content_type) {
  return Failure(415, "UnsupportedMediaType",
                 absl::StrCat("the body of the request was in an unknown "
                              "format - accepted media types include: "
                              "application/json-patch+json, "
                              "application/merge-patch+json, "
                              "application/strategic-merge-patch+json (got ",
                              content_type, ")"));
}

ApiStatus WatchListUnsupportedStatus(bool has_resource_version) {
  std::string message =
      "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: "
      "Forbidden: resourceVersionMatch is forbidden for watch";
  if (!has_resource_version) {
    message +=
        ", resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
        "unless resourceVersion is provided";
  }
  message += "]";
  ApiStatus s = Failure(422, "Invalid", message);
  s.has_details = true;
  s.details_group = "meta.k8s.io";
  s.details_kind = "ListOptions";
  s.causes.push_back({"FieldValueForbidden",
                      "Forbidden: resourceVersionMatch is forbidden for watch",
                      "resourceVersionMatch"});
  if (!has_resource_version) {
    s.causes.push_back({"FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden unless "
                        "resourceVersion is provided",
                        "resourceVersionMatch"});
  }
  return s;
}

ApiStatus RvMatchWithoutRvStatus() {
  const char kCause[] =
      "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
      "is provided";
  ApiStatus s = Failure(422, "Invalid",
                        absl::StrCat("ListOptions.meta.k8s.io \"\" is invalid: "
                                     "resourceVersionMatch: ",
                                     kCause));
  s.has_details = true;
  s.details_group = "meta.k8s.io";
  s.details_kind = "ListOptions";
  s.causes.push_back({"FieldValueForbidden", kCause, "resourceVersionMatch"});
  return s;
}

ApiStatus DeletedStatus(const ResourceInfo& r, absl::string_view name,
                        absl::string_view uid) {
  ApiStatus s;
  s.code = 200;
  s.success = true;
  SetResourceDetails(s, r, name);
  s.details_uid = std::string(uid);
  return s;
}

ApiStatus FromStoreError(const absl::Status& error, const ResourceInfo& r,
                         absl::string_view name) {
  switch (error.code()) {
    case absl::StatusCode::kNotFound:
      return NotFoundStatus(r, name);
    case absl::StatusCode::kAlreadyExists:
      return AlreadyExistsStatus(r, name);
    case absl::StatusCode::kAborted:
      return ConflictStatus(r, name);
    case absl::StatusCode::kOutOfRange: {
      absl::optional<absl::Cord> token = error.GetPayload(kContinuePayload);
      if (token.has_value()) return ExpiredContinueStatus(std::string(*token));
      return ExpiredStatus(error.message());
    }
    case absl::StatusCode::kInvalidArgument:
      return BadRequestStatus(error.message());
    case absl::StatusCode::kFailedPrecondition:
      return InvalidStatus(r, name, error.message());
    case absl::StatusCode::kDeadlineExceeded: {
      ApiStatus s =
          Failure(504, "Timeout", absl::StrCat("Timeout: ", error.message()));
      s.has_details = true;
      s.causes.push_back(
          {"ResourceVersionTooLarge", "Too large resource version", ""});
      s.retry_after_seconds = 1;
      return s;
    }
    default:
      return InternalErrorStatus(error.message());
  }
}

}  // namespace emulator

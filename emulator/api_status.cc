#include "emulator/api_status.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// Go's %q of a plain string: the emulator's values are ASCII, so quotes
// and backslashes are all that need escaping.
std::string Quote(absl::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

const char* CauseReason(FieldError::Type t) {
  switch (t) {
    case FieldError::Type::kInvalid:
      return "FieldValueInvalid";
    case FieldError::Type::kRequired:
      return "FieldValueRequired";
    case FieldError::Type::kForbidden:
      return "FieldValueForbidden";
    case FieldError::Type::kNotSupported:
      return "FieldValueNotSupported";
  }
  return "";
}

// field.Error's ErrorBody: the type's words, the value, the detail.
std::string CauseMessage(const FieldError& e) {
  switch (e.type) {
    case FieldError::Type::kInvalid:
      return absl::StrCat("Invalid value: ", Quote(e.value), ": ", e.detail);
    case FieldError::Type::kRequired:
      return e.detail.empty() ? "Required value"
                              : absl::StrCat("Required value: ", e.detail);
    case FieldError::Type::kForbidden:
      return absl::StrCat("Forbidden: ", e.detail);
    case FieldError::Type::kNotSupported: {
      std::vector<std::string> quoted;
      for (const auto& v : e.supported) quoted.push_back(Quote(v));
      return absl::StrCat("Unsupported value: ", Quote(e.value),
                          ": supported values: ", absl::StrJoin(quoted, ", "));
    }
  }
  return e.detail;
}

}  // namespace

ApiStatus InvalidFieldsStatus(absl::string_view group, absl::string_view kind,
                              absl::string_view name,
                              const std::vector<FieldError>& errors) {
  std::vector<std::string> texts;
  ApiStatus s;
  s.code = 422;
  s.reason = "Invalid";
  s.has_details = true;
  s.details_name = std::string(name);
  s.details_group = std::string(group);
  s.details_kind = std::string(kind);
  for (const FieldError& e : errors) {
    std::string message = CauseMessage(e);
    texts.push_back(absl::StrCat(e.field, ": ", message));
    s.causes.push_back({CauseReason(e.type), message, e.field});
  }
  // An aggregate of one error prints bare; of several, in brackets.
  std::string aggregate =
      texts.size() == 1 ? texts[0]
                        : absl::StrCat("[", absl::StrJoin(texts, ", "), "]");
  std::string qualified(kind);
  if (!group.empty()) absl::StrAppend(&qualified, ".", group);
  s.message =
      absl::StrCat(qualified, " ", Quote(name), " is invalid: ", aggregate);
  return s;
}

ApiStatus InvalidListOptionsStatus(const std::vector<FieldError>& errors) {
  return InvalidFieldsStatus("meta.k8s.io", "ListOptions", "", errors);
}

namespace {

// kInvalidPayload's encoding: errors separated by \x1e, their parts by
// \x1f, supported values by \x1d.
std::string EncodeFieldErrors(const std::vector<FieldError>& errors) {
  std::vector<std::string> out;
  for (const FieldError& e : errors) {
    out.push_back(absl::StrCat(static_cast<int>(e.type), "\x1f", e.field,
                               "\x1f", e.value, "\x1f", e.detail, "\x1f",
                               absl::StrJoin(e.supported, "\x1d")));
  }
  return absl::StrJoin(out, "\x1e");
}

std::vector<FieldError> DecodeFieldErrors(absl::string_view text) {
  std::vector<FieldError> out;
  for (absl::string_view item : absl::StrSplit(text, '\x1e')) {
    std::vector<std::string> parts = absl::StrSplit(item, '\x1f');
    int type = 0;
    if (parts.size() != 5 || !absl::SimpleAtoi(parts[0], &type)) continue;
    FieldError e;
    e.type = static_cast<FieldError::Type>(type);
    e.field = parts[1];
    e.value = parts[2];
    e.detail = parts[3];
    if (!parts[4].empty()) e.supported = absl::StrSplit(parts[4], '\x1d');
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

absl::Status InvalidObjectError(absl::string_view name,
                                const std::vector<FieldError>& errors) {
  absl::Status s = absl::FailedPreconditionError(name);
  s.SetPayload(kInvalidPayload, absl::Cord(EncodeFieldErrors(errors)));
  return s;
}

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
    case absl::StatusCode::kFailedPrecondition: {
      absl::optional<absl::Cord> fields = error.GetPayload(kInvalidPayload);
      if (fields.has_value()) {
        return InvalidFieldsStatus(r.group, r.kind, name,
                                   DecodeFieldErrors(std::string(*fields)));
      }
      return InvalidStatus(r, name, error.message());
    }
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

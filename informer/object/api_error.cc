#include "informer/object/api_error.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace informer {
namespace {

// The payload rides with the status through every layer (reflector, server)
// without anyone parsing messages. Value: "<code>\n<reason>\n<retry_ms|->".
constexpr absl::string_view kPayloadUrl =
    "type.googleapis.com/informer.HttpError";

// Server bodies that are not a Status (e.g. a proxy's HTML page) are cut so a
// status message never carries a whole document.
constexpr size_t kMaxBodyInMessage = 256;

struct Payload {
  int code = 0;
  std::string reason;
  absl::optional<absl::Duration> retry_after;
};

absl::optional<Payload> GetPayload(const absl::Status& status) {
  absl::optional<absl::Cord> cord = status.GetPayload(kPayloadUrl);
  if (!cord.has_value()) return absl::nullopt;
  std::vector<std::string> parts =
      absl::StrSplit(std::string(*cord), absl::MaxSplits('\n', 2));
  if (parts.size() != 3) return absl::nullopt;
  Payload p;
  if (!absl::SimpleAtoi(parts[0], &p.code)) return absl::nullopt;
  p.reason = parts[1];
  int64_t ms = 0;
  if (parts[2] != "-" && absl::SimpleAtoi(parts[2], &ms)) {
    p.retry_after = absl::Milliseconds(ms);
  }
  return p;
}

void SetPayload(absl::Status* status, int code, absl::string_view reason,
                absl::optional<absl::Duration> retry_after) {
  std::string retry = "-";
  if (retry_after.has_value()) {
    retry = absl::StrCat(absl::ToInt64Milliseconds(*retry_after));
  }
  status->SetPayload(kPayloadUrl,
                     absl::Cord(absl::StrCat(code, "\n", reason, "\n", retry)));
}

// The reason the API server uses for a code when a body has none.
absl::string_view DefaultReason(int http_code) {
  switch (http_code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

absl::Status Build(int http_code, absl::string_view reason,
                   absl::string_view server_message, absl::string_view method,
                   absl::string_view path,
                   absl::optional<absl::Duration> retry_after) {
  if (reason.empty()) reason = DefaultReason(http_code);
  std::string message = absl::StrCat(http_code, " ", method, " ", path,
                                     ": Error from server (", reason, ")");
  if (!server_message.empty()) absl::StrAppend(&message, ": ", server_message);
  if (retry_after.has_value()) {
    absl::StrAppend(&message, " (retry after ",
                    absl::FormatDuration(*retry_after), ")");
  }
  absl::Status status(StatusCodeForHttp(http_code, reason), message);
  SetPayload(&status, http_code, reason, retry_after);
  return status;
}

}  // namespace

absl::StatusCode StatusCodeForHttp(int http_code, absl::string_view reason) {
  switch (http_code) {
    case 400:
    case 406:
    case 413:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 502:
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_code >= 500) return absl::StatusCode::kInternal;
  if (http_code >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

absl::optional<absl::Duration> ParseRetryAfter(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  int64_t seconds = 0;
  if (header.empty() || !absl::SimpleAtoi(header, &seconds) || seconds < 0) {
    return absl::nullopt;
  }
  return absl::Seconds(seconds);
}

absl::Status StatusFromHttpResponse(int http_code, absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view body,
                                    absl::string_view retry_after_header) {
  absl::optional<absl::Duration> retry_after =
      ParseRetryAfter(retry_after_header);
  absl::StatusOr<ApiStatus> api = DecodeStatus(body);
  if (api.ok() && (!api->message.empty() || !api->reason.empty())) {
    // The HTTP code is authoritative: a proxy may wrap a Status.
    return Build(http_code, api->reason, api->message, method, path,
                 retry_after);
  }
  std::string text(absl::StripAsciiWhitespace(body));
  if (text.size() > kMaxBodyInMessage) {
    text.resize(kMaxBodyInMessage);
    text += "...";
  }
  if (text.empty()) text = "(empty body)";
  return Build(http_code, "", text, method, path, retry_after);
}

absl::Status StatusFromApiStatus(const ApiStatus& api_status,
                                 absl::string_view method,
                                 absl::string_view path,
                                 absl::optional<absl::Duration> retry_after) {
  int code = api_status.code == 0 ? 500 : api_status.code;
  return Build(code, api_status.reason, api_status.message, method, path,
               retry_after);
}

absl::Status ConnectionError(absl::string_view method, absl::string_view path,
                             absl::string_view detail) {
  return absl::UnavailableError(
      absl::StrCat("connection error: ", method, " ", path, ": ", detail));
}

absl::Status ConnectionRefusedError(absl::string_view server,
                                    absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view detail) {
  return absl::UnavailableError(
      absl::StrCat("The connection to the server ", server,
                   " was refused - did you specify the right host or port? (",
                   method, " ", path, ": ", detail, ")"));
}

int HttpCode(const absl::Status& status) {
  absl::optional<Payload> p = GetPayload(status);
  return p.has_value() ? p->code : 0;
}

std::string Reason(const absl::Status& status) {
  absl::optional<Payload> p = GetPayload(status);
  return p.has_value() ? p->reason : std::string();
}

absl::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  absl::optional<Payload> p = GetPayload(status);
  return p.has_value() ? p->retry_after : absl::nullopt;
}

bool IsExpired(const absl::Status& status) {
  absl::optional<Payload> p = GetPayload(status);
  if (p.has_value()) {
    return p->code == 410 || p->reason == "Expired" || p->reason == "Gone";
  }
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StartsWith(status.message(), "410");
}

bool IsTooLargeResourceVersion(const absl::Status& status) {
  if (HttpCode(status) != 504 &&
      status.code() != absl::StatusCode::kDeadlineExceeded) {
    return false;
  }
  return absl::StrContains(absl::AsciiStrToLower(status.message()),
                           "too large resource version");
}

bool IsTooManyRequests(const absl::Status& status) {
  absl::optional<Payload> p = GetPayload(status);
  return p.has_value() && (p->code == 429 || p->reason == "TooManyRequests");
}

}  // namespace informer

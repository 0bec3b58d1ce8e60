#include "server/kubeapi/api_status.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace server {
namespace kubeapi {

std::string JsonQuote(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '<':
      case '>':
      case '&':
        absl::StrAppendFormat(&out, "\\u%04x", c);
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else if (c == 0xE2 && i + 2 < s.size() &&
               static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      // U+2028 / U+2029 (line and paragraph separators).
      absl::StrAppend(&out, static_cast<unsigned char>(s[i + 2]) == 0xA8
                                ? "\\u2028"
                                : "\\u2029");
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

std::string ApiStatus::Render() const {
  std::string out = R"({"kind":"Status","apiVersion":"v1","metadata":{)";
  if (!continue_token.empty()) {
    absl::StrAppend(&out, R"("continue":)", JsonQuote(continue_token));
  }
  absl::StrAppend(&out, R"(},"status":"Failure")");
  if (!message.empty())
    absl::StrAppend(&out, R"(,"message":)", JsonQuote(message));
  if (!reason.empty())
    absl::StrAppend(&out, R"(,"reason":)", JsonQuote(reason));
  bool has_details = !details_name.empty() || !details_group.empty() ||
                     !details_kind.empty() || !causes.empty() ||
                     retry_after_seconds != 0;
  if (has_details || empty_details) {
    std::string d;
    auto member = [&d](absl::string_view key, const std::string& value) {
      absl::StrAppend(&d, d.empty() ? "" : ",", "\"", key, "\":", value);
    };
    if (!details_name.empty()) member("name", JsonQuote(details_name));
    if (!details_group.empty()) member("group", JsonQuote(details_group));
    if (!details_kind.empty()) member("kind", JsonQuote(details_kind));
    if (!causes.empty()) {
      std::string list;
      for (const StatusCause& c : causes) {
        std::string one;
        auto add = [&one](absl::string_view key, const std::string& value) {
          if (value.empty()) return;
          absl::StrAppend(&one, one.empty() ? "" : ",", "\"", key,
                          "\":", JsonQuote(value));
        };
        add("reason", c.reason);
        add("message", c.message);
        add("field", c.field);
        absl::StrAppend(&list, list.empty() ? "" : ",", "{", one, "}");
      }
      member("causes", absl::StrCat("[", list, "]"));
    }
    if (retry_after_seconds != 0) {
      member("retryAfterSeconds", absl::StrCat(retry_after_seconds));
    }
    absl::StrAppend(&out, R"(,"details":{)", d, "}");
  }
  absl::StrAppend(&out, R"(,"code":)", code, "}");
  return out;
}

namespace {

std::string Qualified(absl::string_view resource, absl::string_view group) {
  return group.empty() ? std::string(resource)
                       : absl::StrCat(resource, ".", group);
}

}  // namespace

ApiStatus NotFoundStatus(absl::string_view resource, absl::string_view group,
                         absl::string_view name) {
  ApiStatus s;
  s.code = 404;
  s.reason = "NotFound";
  s.message =
      absl::StrCat(Qualified(resource, group), " \"", name, "\" not found");
  s.details_name = std::string(name);
  s.details_group = std::string(group);
  s.details_kind = std::string(resource);
  return s;
}

ApiStatus UnknownPathStatus() {
  ApiStatus s;
  s.code = 404;
  s.reason = "NotFound";
  s.message = "the server could not find the requested resource";
  s.empty_details = true;
  return s;
}

ApiStatus BadRequestStatus(absl::string_view message) {
  ApiStatus s;
  s.code = 400;
  s.reason = "BadRequest";
  s.message = std::string(message);
  return s;
}

ApiStatus UnauthorizedStatus() {
  ApiStatus s;
  s.code = 401;
  s.reason = "Unauthorized";
  s.message = "Unauthorized";
  return s;
}

ApiStatus ForbiddenStatus(absl::string_view user, absl::string_view verb,
                          absl::string_view resource, absl::string_view group,
                          absl::string_view ns, absl::string_view name,
                          absl::string_view why) {
  ApiStatus s;
  s.code = 403;
  s.reason = "Forbidden";
  std::string subject = Qualified(resource, group);
  if (!name.empty()) absl::StrAppend(&subject, " \"", name, "\"");
  s.message =
      absl::StrCat(subject, " is forbidden: User \"", user, "\" cannot ", verb,
                   " resource \"", resource, "\" in API group \"", group, "\"",
                   ns.empty() ? " at the cluster scope"
                              : absl::StrCat(" in the namespace \"", ns, "\""));
  if (!why.empty()) absl::StrAppend(&s.message, ": ", why);
  s.details_name = std::string(name);
  s.details_group = std::string(group);
  s.details_kind = std::string(resource);
  return s;
}

ApiStatus ReadOnlyStatus(absl::string_view verb, absl::string_view resource,
                         absl::string_view group) {
  ApiStatus s;
  s.code = 405;
  s.reason = "MethodNotAllowed";
  s.message = absl::StrCat(
      verb, " is not supported on resources of kind \"",
      Qualified(resource, group),
      "\": this is informer-sidecar's read-only cache of the Kubernetes API; "
      "send writes to the Kubernetes API server");
  s.details_group = std::string(group);
  s.details_kind = std::string(resource);
  return s;
}

ApiStatus ListTooOldStatus() {
  ApiStatus s;
  s.code = 410;
  s.reason = "Expired";
  s.message = "The resourceVersion for the provided list is too old.";
  return s;
}

ApiStatus ContinueExpiredStatus(absl::string_view inconsistent) {
  ApiStatus s;
  s.code = 410;
  s.reason = "Expired";
  s.continue_token = std::string(inconsistent);
  s.message =
      "The provided continue parameter is too old to display a consistent "
      "list result. You can start a new list without the continue "
      "parameter, or use the continue token in this response to retrieve "
      "the remainder of the results. Continuing with the provided token "
      "results in an inconsistent list - objects that were created, "
      "modified, or deleted between the time the first chunk was returned "
      "and now may show up in the list.";
  return s;
}

ApiStatus WatchTooOldStatus(int64_t requested, int64_t oldest) {
  ApiStatus s;
  s.code = 410;
  s.reason = "Expired";
  s.message =
      absl::StrCat("too old resource version: ", requested, " (", oldest, ")");
  return s;
}

ApiStatus TooLargeResourceVersionStatus(int64_t requested, int64_t current) {
  ApiStatus s;
  s.code = 504;
  s.reason = "Timeout";
  s.message = absl::StrCat("Timeout: Too large resource version: ", requested,
                           ", current: ", current);
  s.causes.push_back(
      {"ResourceVersionTooLarge", "Too large resource version", ""});
  s.retry_after_seconds = 1;
  return s;
}

ApiStatus RequestTimeoutStatus() {
  ApiStatus s;
  s.code = 504;
  s.reason = "Timeout";
  s.message =
      "Timeout: request did not complete within requested timeout - context "
      "deadline exceeded";
  s.empty_details = true;
  return s;
}

ApiStatus NotReadyStatus(absl::string_view resource) {
  ApiStatus s;
  s.code = 503;
  s.reason = "ServiceUnavailable";
  s.message = absl::StrCat("the sidecar's cache of ", resource,
                           " has not synced with the API server yet");
  s.retry_after_seconds = 1;
  return s;
}

ApiStatus NotAcceptableStatus(absl::string_view message) {
  ApiStatus s;
  s.code = 406;
  s.reason = "NotAcceptable";
  s.message = std::string(message);
  return s;
}

namespace {

// Skips a JSON string starting at json[i] == '"'; returns the index after
// its closing quote, or npos.
size_t SkipString(absl::string_view json, size_t i) {
  if (i >= json.size() || json[i] != '"') return absl::string_view::npos;
  for (++i; i < json.size(); ++i) {
    if (json[i] == '\\') {
      ++i;
    } else if (json[i] == '"') {
      return i + 1;
    }
  }
  return absl::string_view::npos;
}

// If json[i..] is `"<key>":"<string>",` or `"<key>":"<string>"` (followed
// by '}'), returns the index after it (and its comma); else npos.
size_t SkipStringMember(absl::string_view json, size_t i,
                        absl::string_view key) {
  std::string prefix = absl::StrCat("\"", key, "\":");
  if (json.substr(i, prefix.size()) != prefix) return absl::string_view::npos;
  size_t end = SkipString(json, i + prefix.size());
  if (end == absl::string_view::npos || end >= json.size()) return end;
  if (json[end] == ',') return end + 1;
  return json[end] == '}' ? end : absl::string_view::npos;
}

}  // namespace

absl::string_view BodyAfterTypeMeta(absl::string_view json) {
  if (json.empty() || json[0] != '{') return json;
  size_t i = 1;
  for (int n = 0; n < 2; ++n) {
    size_t next = SkipStringMember(json, i, "kind");
    if (next == absl::string_view::npos) {
      next = SkipStringMember(json, i, "apiVersion");
    }
    if (next == absl::string_view::npos) break;
    i = next;
  }
  return json.substr(i);
}

}  // namespace kubeapi
}  // namespace server

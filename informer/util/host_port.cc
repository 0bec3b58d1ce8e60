#include "informer/util/host_port.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace informer {
namespace {

absl::Status BadAddress(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", address, "\": ", why,
                   " (expected host:port, [ipv6]:port or :port)"));
}

absl::Status BadUrl(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", url, "\": ", why,
      " (expected scheme://host[:port][/path], e.g. https://10.0.0.1:6443)"));
}

bool ParsePort(absl::string_view text, int min, int* port) {
  if (text.empty() ||
      !absl::ascii_isdigit(static_cast<unsigned char>(text.front()))) {
    return false;
  }
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < min || n > 65535) return false;
  *port = n;
  return true;
}

bool IsSchemeChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '+' ||
         c == '-' || c == '.';
}

// Splits "host[:port]" of a URL's authority.
absl::Status SplitAuthority(absl::string_view url, absl::string_view authority,
                            Url* out) {
  if (absl::StrContains(authority, '@')) {
    return BadUrl(url, "user info (user@host) is not allowed");
  }
  absl::string_view host = authority;
  absl::optional<absl::string_view> port_text;
  if (absl::ConsumePrefix(&host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) {
      return BadUrl(url, "unclosed '[' in the host");
    }
    absl::string_view after = host.substr(close + 1);
    host = host.substr(0, close);
    if (!absl::StrContains(host, ':')) {
      return BadUrl(url, "brackets are for an IPv6 host");
    }
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) {
        return BadUrl(url, "unexpected text after the host");
      }
      port_text = after;
    }
  } else {
    const size_t colon = host.find(':');
    if (colon != absl::string_view::npos) {
      port_text = host.substr(colon + 1);
      host = host.substr(0, colon);
      if (absl::StrContains(*port_text, ':')) {
        return BadUrl(url, "an IPv6 host must be in brackets");
      }
    }
  }
  if (host.empty()) return BadUrl(url, "no host");
  out->host = std::string(host);
  if (port_text.has_value()) {
    int port = 0;
    if (!ParsePort(*port_text, 1, &port)) {
      return BadUrl(url, "the port is not a number in 1-65535");
    }
    out->port = port;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return BadAddress(address, "no port");
  absl::string_view host = address.substr(0, colon);
  HostPort out;
  if (!ParsePort(address.substr(colon + 1), 0, &out.port)) {
    return BadAddress(address, "the port is not a number in 0-65535");
  }
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) {
      return BadAddress(address, "unclosed '['");
    }
    if (!absl::StrContains(host, ':')) {
      return BadAddress(address, "brackets are for an IPv6 host");
    }
  } else if (absl::StrContains(host, ':')) {
    return BadAddress(address, "an IPv6 host must be in brackets");
  } else if (absl::StrContains(host, ']')) {
    return BadAddress(address, "unexpected ']'");
  }
  out.host = std::string(host);
  return out;
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string Url::UrlHost() const {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : host;
}

absl::StatusOr<Url> ParseUrl(absl::string_view url) {
  Url out;
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos || scheme_end == 0) {
    return BadUrl(url, "no scheme");
  }
  for (char c : url.substr(0, scheme_end)) {
    if (!IsSchemeChar(c)) return BadUrl(url, "invalid scheme");
  }
  out.scheme = absl::AsciiStrToLower(url.substr(0, scheme_end));
  absl::string_view rest = url.substr(scheme_end + 3);
  const size_t hash = rest.find('#');
  if (hash != absl::string_view::npos) {
    out.has_fragment = true;
    out.fragment = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  const size_t question = rest.find('?');
  if (question != absl::string_view::npos) {
    out.has_query = true;
    out.query = std::string(rest.substr(question + 1));
    rest = rest.substr(0, question);
  }
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    out.path = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
  }
  if (absl::Status st = SplitAuthority(url, rest, &out); !st.ok()) return st;
  return out;
}

}  // namespace informer

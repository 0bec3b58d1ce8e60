#ifndef INFORMER_UTIL_HOST_PORT_H_
#define INFORMER_UTIL_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace informer {

// A listen or dial address split into its parts.
struct HostPort {
  std::string host;  // without brackets; empty for ":port"
  int port = 0;      // 0..65535
};

// Parses "host:port", "[ipv6]:port" or ":port" (every interface). An IPv6
// host must be in brackets. InvalidArgument quotes the address and says
// what is wrong, e.g. `"x": no port (expected host:port, [ipv6]:port or
// :port)`; callers put the flag's name in front. Pure; thread-safe.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// "host:port", with brackets around an IPv6 host: the inverse of
// ParseHostPort.
std::string JoinHostPort(absl::string_view host, int port);

// An absolute URL split into its parts.
struct Url {
  std::string scheme;  // lower case ("http", "https")
  std::string host;    // without brackets
  absl::optional<int> port;
  std::string path;      // "" or starting with '/'
  std::string query;     // after '?', without it
  std::string fragment;  // after '#', without it
  bool has_query = false;
  bool has_fragment = false;

  // "host" or "[ipv6]", as it stands in a URL.
  std::string UrlHost() const;
};

// Parses scheme://host[:port][/path][?query][#fragment]. The host is a
// name, an IPv4 literal or a bracketed IPv6 literal; the port, when
// present, 1..65535. User info ("user@host") is refused: credentials do not
// belong in a URL this program logs. InvalidArgument quotes the URL and
// says what is wrong. Pure; thread-safe.
absl::StatusOr<Url> ParseUrl(absl::string_view url);

}  // namespace informer

#endif  // INFORMER_UTIL_HOST_PORT_H_

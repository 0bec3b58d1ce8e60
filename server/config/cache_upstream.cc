#include "server/config/cache_upstream.h"

#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace server {
namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", problem));
}

// The host of scheme://host[:port][/path] ("[::1]" keeps its brackets);
// empty when there is none.
std::string HostOf(absl::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return "";
  absl::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (absl::StrContains(rest, '@')) return "";  // no userinfo in a URL here
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return "";
    return std::string(rest.substr(0, close + 1));
  }
  return std::string(rest.substr(0, rest.find(':')));
}

// The port after the host, if any, must be a number in 1..65535.
bool PortIsValid(absl::string_view url, absl::string_view host) {
  absl::string_view rest = url.substr(url.find("://") + 3 + host.size());
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (rest.empty()) return true;
  if (!absl::ConsumePrefix(&rest, ":")) return false;
  int port = 0;
  return absl::SimpleAtoi(rest, &port) && port >= 1 && port <= 65535;
}

absl::Status CheckReadable(absl::string_view flag, const std::string& path) {
  std::ifstream in(path);
  if (!in.is_open()) {
    return absl::NotFoundError(
        absl::StrCat("--", flag, ": cannot read ", path));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackUrl(absl::string_view url) {
  const std::string host = absl::AsciiStrToLower(HostOf(url));
  if (host == "localhost" || host == "[::1]") return true;
  std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4 || octets[0] != "127") return false;
  for (absl::string_view o : octets) {
    int v = 0;
    if (!absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
  }
  return true;
}

absl::StatusOr<CacheUpstream> ValidateCacheUpstream(
    absl::string_view url, absl::string_view token_file,
    absl::string_view ca_file, std::vector<std::string>* warnings) {
  CacheUpstream upstream;
  if (url.empty()) {
    if (!token_file.empty()) {
      return Invalid("cache_upstream_token_file", "needs --cache_upstream");
    }
    if (!ca_file.empty()) {
      return Invalid("cache_upstream_ca_file", "needs --cache_upstream");
    }
    return upstream;
  }
  const bool https = absl::StartsWith(url, "https://");
  if (!https && !absl::StartsWith(url, "http://")) {
    return Invalid("cache_upstream",
                   absl::StrCat("must be an http:// or https:// URL, not \"",
                                url, "\""));
  }
  const std::string host = HostOf(url);
  if (host.empty() || !PortIsValid(url, host)) {
    return Invalid("cache_upstream",
                   absl::StrCat("must be scheme://host[:port][/path], not \"",
                                url, "\""));
  }
  if (absl::StrContains(url, '?') || absl::StrContains(url, '#')) {
    return Invalid("cache_upstream",
                   absl::StrCat("must have no query or fragment: \"", url,
                                "\""));
  }
  absl::string_view trimmed = url;
  while (absl::ConsumeSuffix(&trimmed, "/")) {
  }
  upstream.url = std::string(trimmed);
  upstream.token_file = std::string(token_file);
  upstream.ca_file = std::string(ca_file);
  if (!upstream.ca_file.empty()) {
    if (!https) {
      return Invalid("cache_upstream_ca_file",
                     "is for an https:// --cache_upstream; this one is "
                     "http://");
    }
    if (absl::Status st =
            CheckReadable("cache_upstream_ca_file", upstream.ca_file);
        !st.ok()) {
      return st;
    }
  }
  if (!upstream.token_file.empty()) {
    if (absl::Status st =
            CheckReadable("cache_upstream_token_file", upstream.token_file);
        !st.ok()) {
      return st;
    }
    if (!https && !IsLoopbackUrl(upstream.url)) {
      warnings->push_back(absl::StrCat(
          "--cache_upstream_token_file: the token goes in clear text to ",
          upstream.url, ", which is not a loopback address; use https:// "
          "(with --cache_upstream_ca_file)"));
    }
  }
  return upstream;
}

informer::client::RestConfig UpstreamRestConfig(
    const CacheUpstream& upstream,
    const informer::client::RestConfig& transport_settings) {
  informer::client::RestConfig config;
  config.server = upstream.url;
  config.ca_file = upstream.ca_file;
  config.bearer_token_file = upstream.token_file;
  config.connect_timeout = transport_settings.connect_timeout;
  config.request_timeout = transport_settings.request_timeout;
  config.http2 = transport_settings.http2;
  config.compression = transport_settings.compression;
  config.exec_timeout = transport_settings.exec_timeout;
  config.user_agent = transport_settings.user_agent;
  return config;
}

}  // namespace server

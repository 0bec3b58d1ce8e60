#include "server/config/cache_upstream.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "informer/client/rest_config_builder.h"
#include "informer/util/host_port.h"
#include "informer/util/loopback.h"
#include "informer/util/read_file.h"

namespace server {
namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", problem));
}

// A flag's file must be readable now; it is read again when used.
absl::Status CheckReadable(absl::string_view flag, const std::string& path) {
  absl::Status st = informer::CheckReadable(path);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("--", flag, ": ", st.message()));
}

}  // namespace

bool IsLoopbackUrl(absl::string_view url) {
  absl::StatusOr<informer::Url> parsed = informer::ParseUrl(url);
  return parsed.ok() && informer::IsLoopbackHost(parsed->host);
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
    return Invalid(
        "cache_upstream",
        absl::StrCat("must be an http:// or https:// URL, not \"", url, "\""));
  }
  absl::StatusOr<informer::Url> parsed = informer::ParseUrl(url);
  if (!parsed.ok()) return Invalid("cache_upstream", parsed.status().message());
  if (parsed->has_query || parsed->has_fragment) {
    return Invalid(
        "cache_upstream",
        absl::StrCat("must have no query or fragment: \"", url, "\""));
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
          upstream.url,
          ", which is not a loopback address; use https:// "
          "(with --cache_upstream_ca_file)"));
    }
  }
  return upstream;
}

informer::client::RestConfig UpstreamRestConfig(
    const CacheUpstream& upstream,
    const informer::client::RestConfig& transport_settings) {
  return informer::client::RestConfigFor(
      {upstream.url, upstream.ca_file, upstream.token_file},
      transport_settings);
}

}  // namespace server

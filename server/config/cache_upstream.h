#ifndef SERVER_CONFIG_CACHE_UPSTREAM_H_
#define SERVER_CONFIG_CACHE_UPSTREAM_H_

// --cache_upstream: where a chained sidecar's reflectors list and watch.
//
// A pod sidecar can read through a node-level sidecar's Kubernetes API
// facade (--kube_api_listen) instead of the API server, so that a node's
// sidecars cost the API server one list and one watch per resource instead
// of one per sidecar. Only the reflectors (every informer's list and watch,
// lazily started ones too) go to the upstream; writes (Events), discovery
// and resource resolution go to the cluster of --kubeconfig / in-cluster.
// Without a cluster the upstream serves everything (writes then fail with
// the facade's 405).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/client/kubeconfig.h"

namespace server {

// The validated upstream. Plain data; empty url: no upstream.
struct CacheUpstream {
  // scheme://host[:port][/prefix] without a trailing '/'.
  std::string url;
  // A bearer token file, re-read every minute and after a 401 as client-go
  // re-reads projected service-account tokens; empty: no token.
  std::string token_file;
  // A PEM CA bundle for https:// (empty: the system roots).
  std::string ca_file;

  bool enabled() const { return !url.empty(); }
};

// Validates the three flags' values. InvalidArgument naming the flag for a
// URL that is not http:// or https:// with a host, for a CA file with an
// http:// URL, and for a token or CA file given without --cache_upstream;
// NotFound naming the flag for an unreadable file. A token sent in clear
// text to a host other than loopback appends a warning to *warnings.
absl::StatusOr<CacheUpstream> ValidateCacheUpstream(
    absl::string_view url, absl::string_view token_file,
    absl::string_view ca_file, std::vector<std::string>* warnings);

// Whether `url`'s host is a loopback address (localhost, 127.0.0.0/8,
// [::1]). False for anything that does not parse.
bool IsLoopbackUrl(absl::string_view url);

// The connection to the upstream: its URL and credentials, with the
// transport settings (timeouts, http2, compression, user agent) of
// `transport_settings` (the cluster's, so --api_compression applies to both
// connections).
informer::client::RestConfig UpstreamRestConfig(
    const CacheUpstream& upstream,
    const informer::client::RestConfig& transport_settings);

}  // namespace server

#endif  // SERVER_CONFIG_CACHE_UPSTREAM_H_

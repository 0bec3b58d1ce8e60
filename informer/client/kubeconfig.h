#ifndef INFORMER_CLIENT_KUBECONFIG_H_
#define INFORMER_CLIENT_KUBECONFIG_H_

// Loading kubeconfig files the way kubectl does, and turning the selected
// context into a RestConfig (what the transport needs to reach the API
// server). Also the in-cluster configuration of a pod's service account.
//
// Merge rules (KUBECONFIG=a:b:c, as kubectl's loading rules):
//   * files are read in order; missing files in the list are skipped, empty
//     entries ignored, a file that exists but does not parse is an error;
//   * for clusters, users and contexts the first file that defines a name
//     wins (later definitions of the same name are ignored entirely);
//   * current-context comes from the first file that sets it.
// An explicit --kubeconfig path must exist and is not merged with anything.
//
// Relative paths in a file (certificate-authority, client-certificate,
// client-key, tokenFile, and an exec command containing a '/') are resolved
// against that file's directory, as kubectl does.
//
// Every function here is thread-compatible and does no network I/O.

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"

namespace informer {
namespace client {

// users[].user.exec: a credential plugin (client.authentication.k8s.io).
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      // absolute when it contained a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string install_hint;
  bool provide_cluster_info = false;
  std::string interactive_mode;  // Never, IfAvailable, Always
};

struct KubeCluster {
  std::string server;
  std::string certificate_authority;       // path (resolved)
  std::string certificate_authority_data;  // PEM bytes (base64-decoded)
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string proxy_url;
};

struct KubeUser {
  std::string token;
  std::string token_file;               // path (resolved)
  std::string client_certificate;       // path (resolved)
  std::string client_certificate_data;  // PEM bytes
  std::string client_key;               // path (resolved)
  std::string client_key_data;          // PEM bytes
  std::string username;
  std::string password;
  absl::optional<ExecConfig> exec;
  std::string auth_provider;  // name only: not supported, reported on use
};

struct KubeContext {
  std::string cluster;
  std::string user;
  std::string namespace_;
};

struct Kubeconfig {
  std::map<std::string, KubeCluster> clusters;
  std::map<std::string, KubeUser> users;
  std::map<std::string, KubeContext> contexts;
  std::string current_context;
  // The files that contributed, in load order (for error messages).
  std::vector<std::string> files;
};

// Parses one kubeconfig document. `file_name` names the file in errors and
// anchors relative paths. InvalidArgument "file:line:col: field: problem"
// for YAML syntax errors, wrong types, bad base64 and missing names.
absl::StatusOr<Kubeconfig> ParseKubeconfig(absl::string_view yaml,
                                           absl::string_view file_name);

// Reads and parses one file. NotFound when it does not exist.
absl::StatusOr<Kubeconfig> LoadKubeconfigFile(absl::string_view path);

// Merges `later` into `*into` with kubectl's first-wins rules.
void MergeKubeconfig(const Kubeconfig& later, Kubeconfig* into);

struct KubeconfigLoadOptions {
  std::string explicit_path;   // --kubeconfig; wins when set
  std::string kubeconfig_env;  // value of $KUBECONFIG (':'-separated)
  std::string home;            // for ~/.kube/config
};

// Options filled from the process environment ($KUBECONFIG, $HOME).
KubeconfigLoadOptions KubeconfigLoadOptionsFromEnv();

// Applies the precedence: explicit path, else $KUBECONFIG files merged,
// else ~/.kube/config. NotFound when nothing could be loaded.
absl::StatusOr<Kubeconfig> LoadKubeconfig(const KubeconfigLoadOptions& opts);

// Whether responses may come compressed. kNone: requests carry no
// Accept-Encoding at all. kGzip: "Accept-Encoding: gzip" and the transport
// decodes. Why none is the default: the API server gzips every non-watch
// response over 128 KiB for a client that asks, which costs its CPU (shared
// by the whole cluster) and several times the latency of the list itself
// over a fast link (loopback, a pod network); only a thin link gains.
enum class ApiCompression { kNone, kGzip };

// Everything the transport and credential layer need to talk to one API
// server. Built from a kubeconfig context, from in-cluster files, or by hand.
struct RestConfig {
  // scheme://host[:port][/path-prefix], no trailing '/'.
  std::string server;
  std::string ca_file;
  std::string ca_data;  // PEM
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string proxy_url;

  std::string bearer_token;
  // Re-read periodically (projected service-account tokens rotate). Wins
  // over bearer_token when both are set.
  std::string bearer_token_file;
  std::string client_cert_file;
  std::string client_cert_data;  // PEM
  std::string client_key_file;
  std::string client_key_data;  // PEM
  std::string username;
  std::string password;
  absl::optional<ExecConfig> exec;

  // The context's namespace ("default" when it names none).
  std::string namespace_ = "default";

  // Transport settings (flags, not kubeconfig).
  absl::Duration connect_timeout = absl::Seconds(10);
  // Whole-request limit for non-watch requests; zero means none.
  absl::Duration request_timeout = absl::Seconds(60);
  // Dead connections (see docs/operations.md). A connection whose packets
  // stop being acknowledged (a NAT or load balancer forgot the flow, a
  // host vanished) fails after about this long, watches included: TCP
  // keepalive probes start after tcp_timeout/2 of silence, every
  // tcp_timeout/6, and TCP_USER_TIMEOUT bounds data left unacknowledged
  // (keepalive probes are not sent while data is outstanding). Zero: the
  // kernel's defaults (over two hours).
  absl::Duration tcp_timeout = absl::Seconds(30);
  // A non-watch request that receives no byte for this long is abandoned
  // (DeadlineExceeded): the peer acknowledges but sends nothing (a stuck
  // proxy, a server stopped mid-response). Zero: only request_timeout.
  // Watches have their own idle timeout (ResourceClientOptions).
  absl::Duration stall_timeout = absl::Seconds(30);
  // Opt-in: HTTP/2 over TLS (multiplexing). HTTP/1.1 is the default: one
  // connection per watch, which libcurl 7.88 handles without surprises.
  bool http2 = false;
  // Opt-in: ask for gzip-compressed responses (see ApiCompression).
  ApiCompression compression = ApiCompression::kNone;
  // An exec credential plugin that has not exited after this long is
  // killed (with its process group) and the request fails: a hung plugin
  // must not block every request forever.
  absl::Duration exec_timeout = absl::Seconds(30);
  std::string user_agent;  // empty: "informer-sidecar/<version>"
};

// Explicit flags; each non-empty value overrides the kubeconfig's.
struct ConfigOverrides {
  std::string context;
  std::string server;
  std::string token;
  std::string namespace_;
  absl::optional<bool> insecure_skip_tls_verify;
};

// The RestConfig of `overrides.context` (else current-context).
// InvalidArgument naming the missing context/cluster/user;
// Unimplemented for auth-provider users.
absl::StatusOr<RestConfig> RestConfigFromKubeconfig(
    const Kubeconfig& config, const ConfigOverrides& overrides = {});

struct InClusterOptions {
  std::string token_path =
      "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_path =
      "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  // Environment lookup; nullopt when unset. Defaults to getenv.
  std::function<absl::optional<std::string>(const std::string&)> getenv;
};

// The pod's service-account configuration. FailedPrecondition when not
// running in a cluster (KUBERNETES_SERVICE_HOST/_PORT unset, no token).
absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& options);

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_KUBECONFIG_H_

#include "server/kubeapi/kube_api_flags.h"

#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "informer/util/host_port.h"

ABSL_FLAG(std::string, kube_api_listen, "",
          "Serve the informer caches over the Kubernetes API (list, get, "
          "watch, discovery; read-only) on HOST:PORT, e.g. 127.0.0.1:8001. "
          "Off when empty. Without TLS, use a loopback address.");
ABSL_FLAG(std::string, kube_api_tls_cert_file, "",
          "PEM certificate (chain) of the Kubernetes API facade: serve HTTPS.");
ABSL_FLAG(std::string, kube_api_tls_key_file, "",
          "PEM private key of --kube_api_tls_cert_file.");
ABSL_FLAG(std::string, kube_api_tls_client_ca_file, "",
          "PEM CA bundle: the Kubernetes API facade requires client "
          "certificates signed by it.");
ABSL_FLAG(int64_t, kube_api_history, 10000,
          "Changes kept per resource by the Kubernetes API facade, for "
          "watches and lists at an older resourceVersion (older: 410 "
          "Expired).");
ABSL_FLAG(std::string, kube_api_advertised_address, "",
          "host:port the facade reports in /api (default: the listening "
          "address).");

namespace server {
namespace kubeapi {

bool KubeApiEnabled() { return !absl::GetFlag(FLAGS_kube_api_listen).empty(); }

namespace {

absl::Status Readable(const char* flag, const std::string& path) {
  if (path.empty() || access(path.c_str(), R_OK) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", path, ": cannot read the file"));
}

}  // namespace

absl::StatusOr<KubeApiServer::Options> KubeApiOptionsFromFlags() {
  KubeApiServer::Options o;
  o.listen = absl::GetFlag(FLAGS_kube_api_listen);
  o.tls_cert_file = absl::GetFlag(FLAGS_kube_api_tls_cert_file);
  o.tls_key_file = absl::GetFlag(FLAGS_kube_api_tls_key_file);
  o.tls_client_ca_file = absl::GetFlag(FLAGS_kube_api_tls_client_ca_file);
  o.advertised_address = absl::GetFlag(FLAGS_kube_api_advertised_address);
  absl::StatusOr<informer::HostPort> address =
      informer::ParseHostPort(o.listen);
  if (!address.ok() || address->host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube_api_listen=", o.listen,
                     ": expected HOST:PORT, e.g. 127.0.0.1:8001"));
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--kube_api_tls_cert_file and --kube_api_tls_key_file must be set "
        "together");
  }
  if (!o.tls_client_ca_file.empty() && o.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--kube_api_tls_client_ca_file needs --kube_api_tls_cert_file and "
        "--kube_api_tls_key_file");
  }
  for (auto [flag, path] :
       {std::pair<const char*, std::string>{"kube_api_tls_cert_file",
                                            o.tls_cert_file},
        {"kube_api_tls_key_file", o.tls_key_file},
        {"kube_api_tls_client_ca_file", o.tls_client_ca_file}}) {
    absl::Status st = Readable(flag, path);
    if (!st.ok()) return st;
  }
  int64_t history = absl::GetFlag(FLAGS_kube_api_history);
  if (history < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube_api_history=", history, ": must be at least 1"));
  }
  o.history_limit = static_cast<size_t>(history);
  return o;
}

absl::StatusOr<std::vector<informer::client::ApiResource>> ResourcesOf(
    const InformerRegistry& registry, informer::client::Discovery* discovery,
    const SnapshotIdentities* snapshots) {
  std::vector<informer::client::ApiResource> out;
  for (const std::string& name : registry.ResourceNames()) {
    absl::StatusOr<informer::client::ApiResource> r =
        ResolveOrFromSnapshot(discovery, snapshots, name);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("kube API facade: resource ", name, ": ",
                                       r.status().message()));
    }
    out.push_back(*std::move(r));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<KubeApiServer>> StartKubeApiFromFlags(
    InformerRegistry* registry, informer::client::Discovery* discovery,
    const Authorizer* authorizer, metrics::Registry* metrics,
    const SnapshotIdentities* snapshots) {
  if (!KubeApiEnabled()) return std::unique_ptr<KubeApiServer>();
  absl::StatusOr<KubeApiServer::Options> options = KubeApiOptionsFromFlags();
  if (!options.ok()) return options.status();
  absl::StatusOr<std::vector<informer::client::ApiResource>> resources =
      ResourcesOf(*registry, discovery, snapshots);
  if (!resources.ok()) return resources.status();
  options->registry = registry;
  options->resources = *std::move(resources);
  options->authorizer = authorizer;
  // Lazy mode: the facade serves unlisted resources too, starting their
  // informers on first request as the gRPC side does.
  options->lazy = registry->lazy_mode();
  options->discovery = discovery;
  options->metrics = metrics;
  absl::StatusOr<std::unique_ptr<KubeApiServer>> server =
      KubeApiServer::Create(*std::move(options));
  if (!server.ok()) return server.status();
  if (absl::Status st = (*server)->Start(); !st.ok()) return st;
  return server;
}

}  // namespace kubeapi
}  // namespace server

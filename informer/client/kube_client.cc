#include "informer/client/kube_client.h"

#include <cstdlib>
#include <utility>

#include "informer/client/credentials.h"
#include "informer/client/rest_config_builder.h"

namespace informer {
namespace client {

absl::StatusOr<RestConfig> LoadRestConfig(const ConnectionFlags& flags) {
  absl::StatusOr<RestConfig> rc;
  KubeconfigLoadOptions opts = flags.env;
  if (!flags.kubeconfig.empty()) opts.explicit_path = flags.kubeconfig;
  auto getenv = flags.in_cluster.getenv;
  bool in_cluster = false;
  if (getenv) {
    in_cluster = getenv("KUBERNETES_SERVICE_HOST").has_value();
  } else {
    in_cluster = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  }
  if (opts.explicit_path.empty() && opts.kubeconfig_env.empty() && in_cluster) {
    rc = InClusterConfig(flags.in_cluster);
    if (rc.ok()) ApplyOverrides(flags.overrides, &*rc);
  } else {
    absl::StatusOr<Kubeconfig> kc = LoadKubeconfig(opts);
    if (!kc.ok()) return kc.status();
    rc = RestConfigFromKubeconfig(*kc, flags.overrides);
  }
  if (!rc.ok()) return rc.status();
  rc->http2 = flags.http2;
  rc->compression = flags.compression;
  rc->connect_timeout = flags.connect_timeout;
  rc->request_timeout = flags.request_timeout;
  rc->tcp_timeout = flags.tcp_timeout;
  rc->stall_timeout = flags.stall_timeout;
  rc->exec_timeout = flags.exec_timeout;
  return rc;
}

absl::StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(
    const RestConfig& config, Clock* clock, TransportOptions transport) {
  absl::StatusOr<std::unique_ptr<CredentialProvider>> creds =
      MakeCredentialProvider(config, clock);
  if (!creds.ok()) return creds.status();
  absl::StatusOr<std::unique_ptr<HttpTransport>> t = HttpTransport::Create(
      config, *std::move(creds), clock, std::move(transport));
  if (!t.ok()) return t.status();
  return std::unique_ptr<KubeClient>(new KubeClient(*std::move(t)));
}

KubeClient::KubeClient(std::unique_ptr<HttpTransport> transport)
    : transport_(std::move(transport)),
      discovery_(std::make_unique<Discovery>(transport_.get())) {}

absl::StatusOr<std::unique_ptr<ResourceClient>> KubeClient::ForResource(
    absl::string_view resource, absl::string_view ns,
    ResourceClientOptions options) {
  absl::StatusOr<ApiResource> r = discovery_->Resolve(resource);
  if (!r.ok()) return r.status();
  return std::make_unique<ResourceClient>(transport_.get(), *std::move(r),
                                          std::string(ns), std::move(options));
}

}  // namespace client
}  // namespace informer

#ifndef INFORMER_CLIENT_KUBE_CLIENT_H_
#define INFORMER_CLIENT_KUBE_CLIENT_H_

// The entry point for reaching a cluster: pick the connection config the
// way kubectl does, build the transport, discovery and per-resource
// clients.
//
// Config precedence (LoadRestConfig):
//   1. --kubeconfig (must exist),
//   2. $KUBECONFIG (files merged, kubectl rules),
//   3. in-cluster (KUBERNETES_SERVICE_HOST set: service-account token),
//   4. ~/.kube/config;
// then explicit flags (ConfigOverrides) override the chosen context.
//
// Thread-safe. Resource clients borrow the KubeClient's transport: the
// KubeClient must outlive them and their watches.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/client/discovery.h"
#include "informer/client/http_transport.h"
#include "informer/client/kubeconfig.h"
#include "informer/client/resource_client.h"
#include "informer/util/clock.h"

namespace informer {
namespace client {

struct ConnectionFlags {
  std::string kubeconfig;     // --kubeconfig
  ConfigOverrides overrides;  // --context, --server, --token, --namespace
  bool http2 = false;         // --http2 (opt-in multiplexing)
  // --api_compression (opt-in gzip, for thin links).
  ApiCompression compression = ApiCompression::kNone;
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(60);
  // RestConfig::tcp_timeout and stall_timeout.
  absl::Duration tcp_timeout = absl::Seconds(30);
  absl::Duration stall_timeout = absl::Seconds(30);
  // A credential plugin still running after this is killed.
  absl::Duration exec_timeout = absl::Seconds(30);
  // Environment and files (tests override).
  KubeconfigLoadOptions env = KubeconfigLoadOptionsFromEnv();
  InClusterOptions in_cluster;
};

absl::StatusOr<RestConfig> LoadRestConfig(const ConnectionFlags& flags);

class KubeClient {
 public:
  // `clock` must outlive the client. `transport` tunes the HTTP transport
  // (retries, an observer for metrics).
  static absl::StatusOr<std::unique_ptr<KubeClient>> Create(
      const RestConfig& config, Clock* clock = RealClock(),
      TransportOptions transport = {});

  HttpTransport* transport() { return transport_.get(); }
  Discovery* discovery() { return discovery_.get(); }
  const RestConfig& config() const { return transport_->config(); }

  // Resolves `resource` ("po", "deployments.apps", ...) through discovery
  // and returns a client scoped to `ns` ("" = all namespaces).
  absl::StatusOr<std::unique_ptr<ResourceClient>> ForResource(
      absl::string_view resource, absl::string_view ns,
      ResourceClientOptions options = {});

 private:
  explicit KubeClient(std::unique_ptr<HttpTransport> transport);
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<Discovery> discovery_;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_KUBE_CLIENT_H_

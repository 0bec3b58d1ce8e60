#ifndef SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_
#define SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "absl/status/statusor.h"
#include "server/ops/metrics.h"

namespace server {

// GrpcMetricsInterceptorFactory counts the server's gRPC calls in a metrics
// registry (gRPC's experimental server interceptors, stable in practice
// since 1.2x):
//
//   <prefix>grpc_server_started_total{method}        calls started
//   <prefix>grpc_server_handled_total{method,code}   calls ended, by status
//   <prefix>grpc_server_handling_seconds{method}     duration of unary calls
//
// `method` is the full method name ("/informer.v1.Informer/Get"); calls to
// methods this binary does not know (not in the generated descriptor pool,
// nor grpc.health.v1) are counted under "unknown" so that clients cannot
// grow the label set. A call that ends without the
// server sending a status (the client went away) counts as CANCELLED.
//
// Thread-safety: interceptors run on gRPC's threads; the metric families
// are thread-safe. The registry must outlive the server.
class GrpcMetricsInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Registers the families in `registry` (errors if already registered).
  static absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>> Create(
      metrics::Registry* registry, absl::string_view prefix);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  GrpcMetricsInterceptorFactory() = default;
  metrics::CounterFamily* started_ = nullptr;
  metrics::CounterFamily* handled_ = nullptr;
  metrics::HistogramFamily* seconds_ = nullptr;
};

}  // namespace server

#endif  // SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_

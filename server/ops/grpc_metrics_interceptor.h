#ifndef SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_
#define SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/ops/metrics.h"

namespace server {

// One method's call counts (the families below), for whoever sees the call
// start and end: the interceptor, or a handler that counts its own calls
// (GrpcMetricsInterceptorFactory::CountInHandler). Thread-safe; immutable.
class CallMeter {
 public:
  CallMeter(std::string method, bool unary, metrics::CounterFamily* started,
            metrics::CounterFamily* handled, metrics::HistogramFamily* seconds);

  const std::string& method() const { return method_; }
  void Started() const { started_->Increment(); }
  // The call ended with `code` after `took`. A unary call's duration goes to
  // the histogram; a stream's end is logged with `peer` (streams are
  // long-lived, so their end is an event).
  void Ended(grpc::StatusCode code, absl::Duration took,
             absl::string_view peer) const;

 private:
  const std::string method_;
  const bool unary_;
  metrics::Counter* const started_;
  metrics::CounterFamily* const handled_;
  metrics::HistogramFamily* const seconds_;
};

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

  // Before the server starts: calls of the server-streaming `method`
  // ("/pkg.Service/Method") get no interceptor, and its handler counts
  // every call itself with the returned meter (Started when it begins,
  // Ended exactly once when it is over). Why: gRPC runs a call's
  // interceptors on every message the call sends, so a busy Watch stream
  // paid them per write (see docs/benchmarks.md, section 'Fan-out').
  std::shared_ptr<const CallMeter> CountInHandler(absl::string_view method);

 private:
  GrpcMetricsInterceptorFactory() = default;
  std::set<std::string, std::less<>> counted_in_handler_;
  metrics::CounterFamily* started_ = nullptr;
  metrics::CounterFamily* handled_ = nullptr;
  metrics::HistogramFamily* seconds_ = nullptr;
};

}  // namespace server

#endif  // SERVER_OPS_GRPC_METRICS_INTERCEPTOR_H_

#include "server/app/grpc_serving_hook.h"

#include <grpc/grpc.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/app/sidecar_metrics.h"
#include "server/ops/grpc_metrics_interceptor.h"

namespace server {
namespace {

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

}  // namespace

absl::StatusOr<std::function<void(grpc::ServerBuilder&)>> ServingHook(
    const SidecarOptions& o, metrics::Registry* metrics,
    CountWatchCall* count_watch_call) {
  absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>> interceptor =
      GrpcMetricsInterceptorFactory::Create(metrics, kMetricPrefix);
  if (!interceptor.ok()) return interceptor.status();
  std::shared_ptr<const CallMeter> watch_meter =
      (*interceptor)->CountInHandler("/informer.v1.Informer/Watch");
  *count_watch_call = [watch_meter](const grpc::CallbackServerContext& ctx) {
    watch_meter->Started();
    return [watch_meter, peer = ctx.peer(),
            start = std::chrono::steady_clock::now()](const grpc::Status& s) {
      watch_meter->Ended(
          s.error_code(),
          absl::FromChrono(std::chrono::steady_clock::now() - start), peer);
    };
  };
  // The builder hook is a copyable std::function; the factory moves into
  // the builder the one time it runs.
  auto factory =
      std::make_shared<std::unique_ptr<GrpcMetricsInterceptorFactory>>(
          *std::move(interceptor));
  return [=](grpc::ServerBuilder& builder) {
    // Server pings find dead clients (a killed process whose kernel did not
    // reset the connection, a vanished node); their streams then end.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(Millis(o.keepalive_time)));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               static_cast<int>(Millis(o.keepalive_timeout)));
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Clients may ping too (to detect a dead sidecar), also while idle,
    // but not more often than this.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(
        GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
        static_cast<int>(Millis(o.min_ping_interval)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               o.max_concurrent_streams);
    builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
    builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_request_bytes));
    if (*factory != nullptr) {
      std::vector<std::unique_ptr<
          grpc::experimental::ServerInterceptorFactoryInterface>>
          creators;
      creators.push_back(std::move(*factory));
      builder.experimental().SetInterceptorCreators(std::move(creators));
    }
  };
}

}  // namespace server

// The sidecar's gRPC connection settings as a SidecarServer builder hook:
// keepalive (both ways), stream and message limits, and the call metrics
// interceptor (informer_sidecar_grpc_server_*).
#ifndef SERVER_APP_GRPC_SERVING_HOOK_H_
#define SERVER_APP_GRPC_SERVING_HOOK_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/status/statusor.h"
#include "server/app/sidecar_options.h"
#include "server/ops/metrics.h"

namespace server {

// Called as every Watch call starts; what it returns is called once, with
// the call's status, when that call is over (InformerService::Options::
// count_watch_call).
using CountWatchCall = std::function<std::function<void(const grpc::Status&)>(
    const grpc::CallbackServerContext&)>;

// A builder hook applying `o`'s keepalive_time/timeout, min_ping_interval,
// max_concurrent_streams, max_message_bytes (sent) and max_request_bytes
// (received) and installing the call metrics interceptor, registered in
// `metrics` now. Watch calls are counted by the informer service instead,
// through `*count_watch_call` (set here): the interceptor would run on
// every message a Watch stream sends. The hook is copyable but installs
// the interceptor on the first builder it runs on only. `metrics` must
// outlive the server; thread-compatible.
absl::StatusOr<std::function<void(grpc::ServerBuilder&)>> ServingHook(
    const SidecarOptions& o, metrics::Registry* metrics,
    CountWatchCall* count_watch_call);

}  // namespace server

#endif  // SERVER_APP_GRPC_SERVING_HOOK_H_

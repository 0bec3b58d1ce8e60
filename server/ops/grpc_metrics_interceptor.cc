#include "server/ops/grpc_metrics_interceptor.h"

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/server_context.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"

namespace server {

namespace {

using grpc::experimental::InterceptionHookPoints;

// The canonical names gRPC uses in status messages and other tools' metrics.
const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

// Whether `method` ("/pkg.Service/Method") is one this binary can serve:
// known to the generated descriptor pool (informer.v1, reflection), or the
// health service (which gRPC implements without the protobuf runtime).
// Anything else is a client's invention and is counted as "unknown".
std::string MethodLabel(const char* raw) {
  if (raw == nullptr) return "unknown";
  absl::string_view m(raw);
  if (m == "/grpc.health.v1.Health/Check" ||
      m == "/grpc.health.v1.Health/Watch") {
    return std::string(m);
  }
  if (!absl::StartsWith(m, "/") || m.size() > 256) return "unknown";
  const std::string full = absl::StrReplaceAll(m.substr(1), {{"/", "."}});
  if (google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          full) == nullptr) {
    return "unknown";
  }
  return std::string(m);
}

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(grpc::experimental::ServerRpcInfo* info,
                     metrics::CounterFamily* started,
                     metrics::CounterFamily* handled,
                     metrics::HistogramFamily* seconds)
      : meter_(MethodLabel(info->method()),
               info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY,
               started, handled, seconds),
        unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY),
        context_(info->server_context()),
        start_(std::chrono::steady_clock::now()) {}

  // The call is over (with or without a status sent).
  ~MetricsInterceptor() override {
    if (!counted_) Count(grpc::StatusCode::CANCELLED);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      meter_.Started();
      started_counted_ = true;
      if (!unary_ && context_ != nullptr) peer_ = context_->peer();
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      Count(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Count(grpc::StatusCode code) {
    counted_ = true;
    // Not every path passes POST_RECV_INITIAL_METADATA through us; a call
    // that ends was started.
    if (!started_counted_) meter_.Started();
    meter_.Ended(code,
                 absl::FromChrono(std::chrono::steady_clock::now() - start_),
                 peer_);
  }

  const CallMeter meter_;
  const bool unary_;
  grpc::ServerContextBase* const context_;
  std::string peer_;
  const std::chrono::steady_clock::time_point start_;
  bool counted_ = false;
  bool started_counted_ = false;
};

}  // namespace

CallMeter::CallMeter(std::string method, bool unary,
                     metrics::CounterFamily* started,
                     metrics::CounterFamily* handled,
                     metrics::HistogramFamily* seconds)
    : method_(std::move(method)),
      unary_(unary),
      started_(&started->With({method_})),
      handled_(handled),
      seconds_(seconds) {}

void CallMeter::Ended(grpc::StatusCode code, absl::Duration took,
                      absl::string_view peer) const {
  handled_->With({method_, CodeName(code)}).Increment();
  if (unary_) {
    seconds_->With({method_}).Observe(absl::ToDoubleSeconds(took));
  } else {
    LOG(INFO) << "stream closed: " << method_ << " peer=" << peer
              << " status=" << CodeName(code) << " after "
              << absl::FormatDuration(took);
  }
}

absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>>
GrpcMetricsInterceptorFactory::Create(metrics::Registry* registry,
                                      absl::string_view prefix) {
  std::unique_ptr<GrpcMetricsInterceptorFactory> f(
      new GrpcMetricsInterceptorFactory());
  absl::StatusOr<metrics::CounterFamily*> started = registry->AddCounter(
      absl::StrCat(prefix, "grpc_server_started_total"),
      "gRPC calls started, by full method name.", {"method"});
  if (!started.ok()) return started.status();
  absl::StatusOr<metrics::CounterFamily*> handled = registry->AddCounter(
      absl::StrCat(prefix, "grpc_server_handled_total"),
      "gRPC calls ended, by full method name and status code (CANCELLED "
      "when the client went away).",
      {"method", "code"});
  if (!handled.ok()) return handled.status();
  absl::StatusOr<metrics::HistogramFamily*> seconds = registry->AddHistogram(
      absl::StrCat(prefix, "grpc_server_handling_seconds"),
      "Duration of unary gRPC calls, by full method name.", {"method"},
      metrics::LatencyBuckets());
  if (!seconds.ok()) return seconds.status();
  f->started_ = *started;
  f->handled_ = *handled;
  f->seconds_ = *seconds;
  return f;
}

grpc::experimental::Interceptor*
GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() != nullptr &&
      counted_in_handler_.count(absl::string_view(info->method())) > 0) {
    return nullptr;  // its handler counts it (CountInHandler)
  }
  return new MetricsInterceptor(info, started_, handled_, seconds_);
}

std::shared_ptr<const CallMeter> GrpcMetricsInterceptorFactory::CountInHandler(
    absl::string_view method) {
  counted_in_handler_.emplace(method);
  return std::make_shared<const CallMeter>(
      MethodLabel(std::string(method).c_str()), /*unary=*/false, started_,
      handled_, seconds_);
}

}  // namespace server

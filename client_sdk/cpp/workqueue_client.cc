#include "client_sdk/cpp/workqueue_client.h"

#include <utility>

#include "absl/time/clock.h"
#include "client_sdk/cpp/grpc_status.h"

namespace client_sdk {
namespace {

namespace v1 = ::informer::v1;

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
}

}  // namespace

WorkQueueClient::WorkQueueClient(
    std::shared_ptr<grpc::ChannelInterface> channel, absl::Duration timeout)
    : stub_(v1::WorkQueue::NewStub(std::move(channel))), timeout_(timeout) {}

void WorkQueueClient::Prepare(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
}

absl::StatusOr<bool> WorkQueueClient::CreateQueue(const QueueSpec& spec) {
  v1::CreateQueueRequest request;
  request.set_name(spec.name);
  request.set_resource(spec.resource);
  request.set_namespace_(spec.namespace_);
  request.set_label_selector(spec.label_selector);
  for (v1::QueueEvent e : spec.events) request.add_events(e);
  // A duration left unset (not zero) means the sidecar's default.
  const absl::Duration zero = absl::ZeroDuration();
  if (spec.resync_period > zero) {
    SetDuration(spec.resync_period, request.mutable_resync_period());
  }
  if (spec.lease_timeout > zero) {
    SetDuration(spec.lease_timeout, request.mutable_lease_timeout());
  }
  if (spec.base_delay > zero || spec.max_delay > zero || spec.qps > 0 ||
      spec.burst > 0) {
    v1::RateLimiter* rl = request.mutable_rate_limiter();
    if (spec.base_delay > zero) {
      SetDuration(spec.base_delay, rl->mutable_base_delay());
    }
    if (spec.max_delay > zero) {
      SetDuration(spec.max_delay, rl->mutable_max_delay());
    }
    rl->set_qps(spec.qps);
    rl->set_burst(spec.burst);
  }
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::CreateQueueResponse response;
  grpc::Status status = stub_->CreateQueue(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.created();
}

absl::Status WorkQueueClient::DeleteQueue(absl::string_view name) {
  v1::DeleteQueueRequest request;
  request.set_name(std::string(name));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::DeleteQueueResponse response;
  return FromGrpcStatus(stub_->DeleteQueue(&ctx, request, &response));
}

absl::Status WorkQueueClient::AddAfter(absl::string_view queue,
                                       absl::string_view key,
                                       absl::Duration delay) {
  v1::AddAfterRequest request;
  request.set_queue(std::string(queue));
  request.set_key(std::string(key));
  if (delay > absl::ZeroDuration()) {
    SetDuration(delay, request.mutable_delay());
  }
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::AddAfterResponse response;
  return FromGrpcStatus(stub_->AddAfter(&ctx, request, &response));
}

absl::Status WorkQueueClient::Forget(absl::string_view queue,
                                     absl::string_view key) {
  v1::ForgetRequest request;
  request.set_queue(std::string(queue));
  request.set_key(std::string(key));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::ForgetResponse response;
  return FromGrpcStatus(stub_->Forget(&ctx, request, &response));
}

absl::StatusOr<std::vector<v1::QueueStats>> WorkQueueClient::Stats(
    absl::string_view queue) {
  v1::StatsRequest request;
  request.set_queue(std::string(queue));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::StatsResponse response;
  grpc::Status status = stub_->Stats(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<v1::QueueStats>(response.queues().begin(),
                                     response.queues().end());
}

}  // namespace client_sdk

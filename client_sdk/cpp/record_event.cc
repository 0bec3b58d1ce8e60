#include "client_sdk/cpp/record_event.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "client_sdk/cpp/grpc_status.h"

namespace client_sdk {

absl::Status RecordEvent(grpc::ChannelInterface* channel,
                         const informer::v1::RecordEventRequest& request,
                         absl::Duration timeout) {
  // A stub is a thin wrapper; building one per call keeps this a function.
  std::shared_ptr<grpc::ChannelInterface> unowned(
      channel, [](grpc::ChannelInterface*) {});
  auto stub = informer::v1::Events::NewStub(unowned);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  informer::v1::RecordEventResponse response;
  return FromGrpcStatus(stub->Record(&ctx, request, &response));
}

absl::Status RecordEvent(grpc::ChannelInterface* channel,
                         const informer::v1::ObjectReference& object,
                         absl::string_view type, absl::string_view reason,
                         absl::string_view message, absl::Duration timeout) {
  informer::v1::RecordEventRequest request;
  *request.mutable_object() = object;
  request.set_type(std::string(type));
  request.set_reason(std::string(reason));
  request.set_message(std::string(message));
  return RecordEvent(channel, request, timeout);
}

}  // namespace client_sdk

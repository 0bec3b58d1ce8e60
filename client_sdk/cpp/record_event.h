#ifndef CLIENT_SDK_CPP_RECORD_EVENT_H_
#define CLIENT_SDK_CPP_RECORD_EVENT_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/informer/v1/events.grpc.pb.h"

namespace client_sdk {

// Records one Kubernetes Event through the sidecar's Events.Record: OK once
// the sidecar queued it for the API server; INVALID_ARGUMENT naming the bad
// field, RESOURCE_EXHAUSTED when its queue is full (not recorded), or the
// transport's error. Thread-safe.
absl::Status RecordEvent(grpc::ChannelInterface* channel,
                         const informer::v1::RecordEventRequest& request,
                         absl::Duration timeout = absl::Seconds(10));

// Convenience for the common case.
absl::Status RecordEvent(grpc::ChannelInterface* channel,
                         const informer::v1::ObjectReference& object,
                         absl::string_view type, absl::string_view reason,
                         absl::string_view message,
                         absl::Duration timeout = absl::Seconds(10));

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_RECORD_EVENT_H_

#ifndef CLIENT_SDK_CPP_GRPC_STATUS_H_
#define CLIENT_SDK_CPP_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace client_sdk {

// grpc::Status -> absl::Status with the same code number and message (the
// two enums share google.rpc.Code's numbering).
inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_GRPC_STATUS_H_

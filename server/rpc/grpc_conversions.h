#ifndef SERVER_RPC_GRPC_CONVERSIONS_H_
#define SERVER_RPC_GRPC_CONVERSIONS_H_

// The boundary between the informer core (absl::Status, informer::Object)
// and the gRPC API: used by the unary queries and by Watch streams alike.

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.pb.h"

namespace server {

// absl and gRPC share status code numbers; only server/ converts.
grpc::Status ToGrpcStatus(const absl::Status& status);

// InvalidArgument for an encoding value this sidecar does not know (a newer
// client's), naming the field: never silently the default.
absl::Status ValidateEncoding(informer::v1::Encoding encoding);

// Fills `out` with `obj` as compact JSON text (ENCODING_JSON, the default)
// or as a google.protobuf.Struct (ENCODING_STRUCT). Internal error naming
// the object if its JSON cannot become a Struct; ValidateEncoding's error
// for an unknown encoding.
absl::Status EncodeObject(const informer::Object& obj,
                          informer::v1::Encoding encoding,
                          informer::v1::Object* out);

}  // namespace server

#endif  // SERVER_RPC_GRPC_CONVERSIONS_H_

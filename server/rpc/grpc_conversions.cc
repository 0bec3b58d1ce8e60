#include "server/rpc/grpc_conversions.h"

#include <google/protobuf/util/json_util.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status ValidateEncoding(informer::v1::Encoding encoding) {
  // A newer client's encoding this sidecar does not know: refuse rather
  // than answer in a format the client did not ask for.
  if (!informer::v1::Encoding_IsValid(encoding)) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoding: unknown value ", static_cast<int>(encoding),
                     " (this sidecar knows ENCODING_JSON and "
                     "ENCODING_STRUCT)"));
  }
  return absl::OkStatus();
}

absl::Status EncodeObject(const informer::Object& obj,
                          informer::v1::Encoding encoding,
                          informer::v1::Object* out) {
  if (absl::Status st = ValidateEncoding(encoding); !st.ok()) return st;
  if (encoding == informer::v1::ENCODING_STRUCT) {
    google::protobuf::util::JsonParseOptions options;
    auto status = google::protobuf::util::JsonStringToMessage(
        obj.json().str(), out->mutable_struct_(), options);
    if (!status.ok()) {
      return absl::InternalError(absl::StrCat(
          "cannot convert ", obj.Key(), " to a Struct: ", status.ToString()));
    }
    return absl::OkStatus();
  }
  // A compressed object decompresses into the string the message takes.
  out->set_json(obj.json().str());
  return absl::OkStatus();
}

}  // namespace server

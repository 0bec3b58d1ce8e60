#ifndef CLIENT_SDK_CPP_INFORMER_CLIENT_H_
#define CLIENT_SDK_CPP_INFORMER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace client_sdk {

// InformerClient: the sidecar's unary Informer queries with decoded objects
// and absl::Status errors (the sidecar's gRPC code and message). Each call
// has the deadline given at construction. Thread-safe (stateless apart from
// the stub).
class InformerClient {
 public:
  explicit InformerClient(std::shared_ptr<grpc::ChannelInterface> channel,
                          absl::Duration timeout = absl::Seconds(30));

  // Every matching object (all pages of one snapshot), in key order.
  absl::StatusOr<std::vector<informer::ObjectPtr>> List(
      absl::string_view resource, absl::string_view ns = "",
      absl::string_view label_selector = "");
  absl::StatusOr<informer::ObjectPtr> Get(absl::string_view resource,
                                          absl::string_view ns,
                                          absl::string_view name);
  // `index_name` is one the sidecar knows ("namespace", "label:<key>",
  // "field:<path>", ...).
  absl::StatusOr<std::vector<informer::ObjectPtr>> ByIndex(
      absl::string_view resource, absl::string_view index_name,
      absl::string_view index_value);
  // The values `index_name` has objects for, sorted.
  absl::StatusOr<std::vector<std::string>> ListIndexValues(
      absl::string_view resource, absl::string_view index_name);
  absl::StatusOr<std::vector<informer::v1::ResourceStatus>> ListResources();

 private:
  void Prepare(grpc::ClientContext* ctx) const;

  std::unique_ptr<informer::v1::Informer::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_INFORMER_CLIENT_H_

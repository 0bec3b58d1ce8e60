#ifndef INTEGRATION_TESTS_GRPCURL_CLIENT_H_
#define INTEGRATION_TESTS_GRPCURL_CLIENT_H_

// A client that does what grpcurl does, for tests: it knows no service of
// its own (no compiled-in descriptors), learns every service, method and
// message type through the server's reflection service (v1alpha, the one
// gRPC 1.51 serves), turns a -d JSON into the request with protobuf's JSON
// mapping, calls the method and turns the responses back into JSON.
//
// Why: a test with compiled-in descriptors succeeds even when reflection
// cannot describe a service (grpc.health.v1.Health was listed but not
// describable, so grpcurl could not call it while such a test passed).

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor_database.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace integration {

// GrpcurlClient talks to one server over `channel`.
//
// Resolve() fetches the file declaring a symbol (FileContainingSymbol) and
// every file it imports (FileByFilename for any the server did not send
// along) into a private descriptor pool; the lookups then see only what
// reflection served. Thread-compatible (one reflection stream per call).
class GrpcurlClient {
 public:
  explicit GrpcurlClient(std::shared_ptr<grpc::Channel> channel);
  GrpcurlClient(const GrpcurlClient&) = delete;
  GrpcurlClient& operator=(const GrpcurlClient&) = delete;

  // `grpcurl list`: the services the server names through reflection.
  absl::StatusOr<std::vector<std::string>> ListServices();

  // `grpcurl describe SYMBOL` without the printing: loads the file declaring
  // the fully qualified `symbol` and its imports. NotFound when reflection
  // does not know it (what grpcurl reports as "Symbol not found").
  absl::Status Resolve(absl::string_view symbol);

  // A service resolved through reflection, with every method's input and
  // output type (and the types their fields use) loaded as well. NotFound
  // when any of them cannot be resolved.
  absl::StatusOr<const google::protobuf::ServiceDescriptor*> ResolveService(
      absl::string_view service);

  // `grpcurl -d JSON ADDR pkg.Service/Method`: the method is resolved
  // through reflection, `json` ("" = empty request) parsed as its input
  // type. A unary call returns its response; a server stream returns the
  // messages read until `max_messages` arrived (then it cancels the call),
  // the stream ended, or `stream_deadline` passed (a live stream that is
  // quiet, not an error). Responses come back as JSON. The call's error is
  // returned as is.
  absl::StatusOr<std::vector<std::string>> Call(
      absl::string_view full_method, absl::string_view json,
      int max_messages = 1, absl::Duration stream_deadline = absl::Seconds(5));

  // The method `pkg.Service/Method`, resolved through reflection.
  absl::StatusOr<const google::protobuf::MethodDescriptor*> ResolveMethod(
      absl::string_view full_method);

 private:
  // One reflection request on a fresh stream.
  absl::StatusOr<grpc::reflection::v1alpha::ServerReflectionResponse> Ask(
      const grpc::reflection::v1alpha::ServerReflectionRequest& request);
  // Adds the files of a file_descriptor_response, then fetches imports
  // still missing.
  absl::Status AddFiles(
      const grpc::reflection::v1alpha::ServerReflectionResponse& response);
  absl::Status FetchFile(const std::string& name);
  // Resolves `type` and, recursively, the message types of its fields.
  absl::Status ResolveMessage(const google::protobuf::Descriptor* type,
                              std::set<std::string>* seen);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::reflection::v1alpha::ServerReflection::Stub> stub_;
  google::protobuf::SimpleDescriptorDatabase database_;
  google::protobuf::DescriptorPool pool_{&database_};
  google::protobuf::DynamicMessageFactory factory_{&pool_};
};

// The grpcurl command lines of a Markdown document: lines starting with
// "grpcurl " in indented (4 spaces) or fenced (```) code blocks, with
// continuation lines joined and a single-quoted -d argument that spans lines
// kept whole.
std::vector<std::string> GrpcurlCommandsOf(absl::string_view markdown);

// A grpcurl command line, parsed.
struct GrpcurlInvocation {
  std::string data;         // -d
  bool stdin_data = false;  // -d @ (requests from stdin)
  std::string verb;         // "list", "describe" or empty (a call)
  std::string target;       // "pkg.Service/Method" or the described symbol
};
GrpcurlInvocation ParseGrpcurl(absl::string_view command);

}  // namespace integration

#endif  // INTEGRATION_TESTS_GRPCURL_CLIENT_H_

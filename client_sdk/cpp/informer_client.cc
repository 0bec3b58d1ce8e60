#include "client_sdk/cpp/informer_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client_sdk/cpp/grpc_status.h"

namespace client_sdk {
namespace {

using informer::ObjectPtr;

absl::StatusOr<std::vector<ObjectPtr>> Decode(
    const google::protobuf::RepeatedPtrField<informer::v1::Object>& objects,
    std::vector<ObjectPtr> out = {}) {
  for (const informer::v1::Object& o : objects) {
    absl::StatusOr<ObjectPtr> obj = informer::Object::Parse(o.json());
    if (!obj.ok()) return obj.status();
    out.push_back(*std::move(obj));
  }
  return out;
}

}  // namespace

InformerClient::InformerClient(std::shared_ptr<grpc::ChannelInterface> channel,
                               absl::Duration timeout)
    : stub_(informer::v1::Informer::NewStub(std::move(channel))),
      timeout_(timeout) {}

void InformerClient::Prepare(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
}

absl::StatusOr<std::vector<ObjectPtr>> InformerClient::List(
    absl::string_view resource, absl::string_view ns,
    absl::string_view label_selector) {
  std::vector<ObjectPtr> out;
  informer::v1::ListRequest request;
  request.set_resource(std::string(resource));
  request.set_namespace_(std::string(ns));
  request.set_label_selector(std::string(label_selector));
  do {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    informer::v1::ListResponse response;
    grpc::Status status = stub_->List(&ctx, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    absl::StatusOr<std::vector<ObjectPtr>> page =
        Decode(response.objects(), std::move(out));
    if (!page.ok()) return page.status();
    out = *std::move(page);
    request.set_continue_token(response.continue_token());
  } while (!request.continue_token().empty());
  return out;
}

absl::StatusOr<ObjectPtr> InformerClient::Get(absl::string_view resource,
                                              absl::string_view ns,
                                              absl::string_view name) {
  informer::v1::GetRequest request;
  request.set_resource(std::string(resource));
  request.set_namespace_(std::string(ns));
  request.set_name(std::string(name));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  informer::v1::GetResponse response;
  grpc::Status status = stub_->Get(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return informer::Object::Parse(response.object().json());
}

absl::StatusOr<std::vector<ObjectPtr>> InformerClient::ByIndex(
    absl::string_view resource, absl::string_view index_name,
    absl::string_view index_value) {
  informer::v1::ByIndexRequest request;
  request.set_resource(std::string(resource));
  request.set_index_name(std::string(index_name));
  request.set_index_value(std::string(index_value));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  informer::v1::ByIndexResponse response;
  grpc::Status status = stub_->ByIndex(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return Decode(response.objects());
}

absl::StatusOr<std::vector<std::string>> InformerClient::ListIndexValues(
    absl::string_view resource, absl::string_view index_name) {
  informer::v1::ListIndexValuesRequest request;
  request.set_resource(std::string(resource));
  request.set_index_name(std::string(index_name));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  informer::v1::ListIndexValuesResponse response;
  grpc::Status status = stub_->ListIndexValues(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<std::string> values(response.values().begin(),
                                  response.values().end());
  std::sort(values.begin(), values.end());
  return values;
}

absl::StatusOr<std::vector<informer::v1::ResourceStatus>>
InformerClient::ListResources() {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  informer::v1::ListResourcesResponse response;
  grpc::Status status = stub_->ListResources(
      &ctx, informer::v1::ListResourcesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<informer::v1::ResourceStatus>(response.resources().begin(),
                                                   response.resources().end());
}

}  // namespace client_sdk

#include "server/app/grpc_serving_hook.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

// Every method answers UNIMPLEMENTED: the calls only reach the limits and
// the interceptor the hook installs.
class Unimplemented final : public v1::Informer::Service {};

class ServingHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SidecarOptions o;
    o.keepalive_time = absl::Minutes(2);
    o.keepalive_timeout = absl::Seconds(20);
    o.min_ping_interval = absl::Seconds(10);
    o.max_concurrent_streams = 100;
    o.max_message_bytes = 1 << 20;
    o.max_request_bytes = 1024;
    absl::StatusOr<std::function<void(grpc::ServerBuilder&)>> hook =
        ServingHook(o, &metrics_, &count_watch_call_);
    ASSERT_TRUE(hook.ok()) << hook.status();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    (*hook)(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  grpc::StatusCode Get(const std::string& name) {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_resource("configmaps");
    req.set_name(name);
    v1::GetResponse resp;
    return stub_->Get(&ctx, req, &resp).error_code();
  }

  metrics::Registry metrics_;
  CountWatchCall count_watch_call_;
  Unimplemented service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(ServingHookTest, RequestsOverTheLimitAreRefused) {
  EXPECT_EQ(Get("small"), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Get(std::string(4096, 'x')), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ServingHookTest, CallsAreCountedButWatchCallsAreLeftToTheService) {
  EXPECT_TRUE(count_watch_call_ != nullptr);
  EXPECT_EQ(Get("a"), grpc::StatusCode::UNIMPLEMENTED);
  const std::string text = metrics_.Render();
  EXPECT_TRUE(
      absl::StrContains(text, "informer_sidecar_grpc_server_handled_total"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "/informer.v1.Informer/Get")) << text;
}

}  // namespace
}  // namespace server

#include "server/ops/grpc_metrics_interceptor.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/ops/metrics.h"

namespace server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace v1 = informer::v1;

// Get answers NOT_FOUND, ListResources OK; Watch (callback API) sends one
// message and ends CANCELLED when the client goes away.
class TestService final
    : public v1::Informer::WithCallbackMethod_Watch<v1::Informer::Service> {
 public:
  grpc::Status Get(grpc::ServerContext*, const v1::GetRequest*,
                   v1::GetResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such object");
  }
  grpc::Status ListResources(grpc::ServerContext*,
                             const v1::ListResourcesRequest*,
                             v1::ListResourcesResponse*) override {
    return grpc::Status::OK;
  }
  grpc::ServerWriteReactor<v1::WatchResponse>* Watch(
      grpc::CallbackServerContext*, const v1::WatchRequest*) override {
    class Reactor : public grpc::ServerWriteReactor<v1::WatchResponse> {
     public:
      explicit Reactor(std::shared_ptr<const CallMeter> meter)
          : meter_(std::move(meter)) {
        if (meter_ != nullptr) meter_->Started();
        StartWrite(&first_);
      }
      void OnWriteDone(bool) override {}
      void OnCancel() override {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      }
      void OnDone() override {
        if (meter_ != nullptr) {
          meter_->Ended(grpc::StatusCode::CANCELLED, absl::Seconds(1), "peer");
        }
        delete this;
      }

     private:
      const std::shared_ptr<const CallMeter> meter_;
      v1::WatchResponse first_;
    };
    return new Reactor(watch_meter);
  }

  // Set: Watch counts its calls itself (CountInHandler).
  std::shared_ptr<const CallMeter> watch_meter;
};

class InterceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>> f =
        GrpcMetricsInterceptorFactory::Create(&registry_, "t_");
    ASSERT_TRUE(f.ok()) << f.status();
    if (CountWatchInHandler()) {
      service_.watch_meter =
          (*f)->CountInHandler("/informer.v1.Informer/Watch");
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        factories;
    factories.push_back(*std::move(f));
    builder.experimental().SetInterceptorCreators(std::move(factories));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Informer::NewStub(channel_);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  virtual bool CountWatchInHandler() const { return false; }

  // One Watch: reads the first message, then the client cancels.
  void WatchThenCancel() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    v1::WatchRequest req;
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub_->Watch(ctx.get(), req);
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    ctx->TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The metrics once every call is over: the server-side call may still be
  // winding down, and shutting the server down waits for it.
  std::string RenderAfterShutdown() {
    server_->Shutdown();
    server_->Wait();
    return registry_.Render();
  }
  static constexpr char kOneWatchCancelled[] =
      "t_grpc_server_handled_total{method=\"/informer.v1.Informer/Watch\","
      "code=\"CANCELLED\"} 1\n";
  static constexpr char kOneWatchStarted[] =
      "t_grpc_server_started_total{method=\"/informer.v1.Informer/Watch\"} 1\n";

  metrics::Registry registry_;
  TestService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(InterceptorTest, CountsCallsByMethodAndCode) {
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    v1::GetResponse resp;
    EXPECT_EQ(stub_->Get(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::ListResourcesRequest req;
    v1::ListResourcesResponse resp;
    EXPECT_TRUE(stub_->ListResources(&ctx, req, &resp).ok());
  }
  {
    // Not implemented by the service: a known method, UNIMPLEMENTED.
    grpc::ClientContext ctx;
    v1::ListRequest req;
    v1::ListResponse resp;
    EXPECT_EQ(stub_->List(&ctx, req, &resp).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  // The server sends the status before the interceptor is destroyed; the
  // counter is bumped at PRE_SEND_STATUS, so it is there once the client
  // has the status.
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("t_grpc_server_handled_total{method=\"/"
                              "informer.v1.Informer/Get\",code=\"NOT_FOUND\"} "
                              "3\n"));
  EXPECT_THAT(
      text, HasSubstr("t_grpc_server_handled_total{method=\"/"
                      "informer.v1.Informer/ListResources\",code=\"OK\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("t_grpc_server_handled_total{method=\"/"
                              "informer.v1.Informer/List\",code="
                              "\"UNIMPLEMENTED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("t_grpc_server_started_total{method=\"/"
                              "informer.v1.Informer/Get\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("t_grpc_server_handling_seconds_count{method=\"/"
                              "informer.v1.Informer/Get\"} 3\n"));
}

TEST_F(InterceptorTest, UnknownMethodsShareOneLabel) {
  grpc::GenericStub generic(channel_);
  for (const char* method : {"/evil.Service/A", "/evil.Service/B"}) {
    grpc::ClientContext ctx;
    grpc::CompletionQueue cq;
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1);
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        generic.PrepareUnaryCall(&ctx, method, request, &cq);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  const std::string text = registry_.Render();
  EXPECT_THAT(text, Not(HasSubstr("evil")));
  // gRPC answers unknown methods itself, through the interceptors: both
  // land under one label.
  EXPECT_THAT(text, HasSubstr("t_grpc_server_started_total{method="
                              "\"unknown\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("t_grpc_server_handled_total{method="
                              "\"unknown\",code=\"UNIMPLEMENTED\"} 2\n"));
}

TEST_F(InterceptorTest, StreamEndedByTheClientIsCounted) {
  WatchThenCancel();
  const std::string text = RenderAfterShutdown();
  EXPECT_THAT(text, HasSubstr(kOneWatchStarted));
  EXPECT_THAT(text, HasSubstr(kOneWatchCancelled));
  // Streams have no latency histogram.
  EXPECT_THAT(text, Not(HasSubstr("seconds_count{method=\"/informer.v1."
                                  "Informer/Watch\"}")));
}

class HandlerCountedTest : public InterceptorTest {
 protected:
  bool CountWatchInHandler() const override { return true; }
};

TEST_F(HandlerCountedTest, AStreamCountedByItsHandlerGetsNoInterceptor) {
  WatchThenCancel();
  {
    // Other methods still go through the interceptor.
    grpc::ClientContext get_ctx;
    v1::GetRequest get;
    v1::GetResponse got;
    EXPECT_EQ(stub_->Get(&get_ctx, get, &got).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  const std::string text = RenderAfterShutdown();
  // Counted once each, by the handler's meter: an interceptor would have
  // counted the call a second time.
  EXPECT_THAT(text, HasSubstr(kOneWatchStarted));
  EXPECT_THAT(text, HasSubstr(kOneWatchCancelled));
  EXPECT_THAT(text, HasSubstr("t_grpc_server_handled_total{method=\"/"
                              "informer.v1.Informer/Get\",code=\"NOT_FOUND\"} "
                              "1\n"));
}

TEST(InterceptorFactoryTest, RegistersOnce) {
  metrics::Registry registry;
  ASSERT_TRUE(GrpcMetricsInterceptorFactory::Create(&registry, "x_").ok());
  absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>> again =
      GrpcMetricsInterceptorFactory::Create(&registry, "x_");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace server

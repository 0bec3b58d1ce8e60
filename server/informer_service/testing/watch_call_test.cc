#include "server/informer_service/testing/watch_call.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

v1::Event Event(v1::EventType type, const std::string& name = "",
                const std::string& token = "") {
  v1::Event e;
  e.set_type(type);
  if (!name.empty()) {
    e.mutable_object()->set_json(absl::StrCat(
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
        R"(","namespace":"ns","resourceVersion":"1"}})"));
  }
  e.set_resume_token(token);
  return e;
}

// Answers every Watch with `responses`, then ends the stream.
class ScriptedWatch final : public v1::Informer::Service {
 public:
  explicit ScriptedWatch(std::vector<v1::WatchResponse> responses)
      : responses_(std::move(responses)) {}
  grpc::Status Watch(grpc::ServerContext*, const v1::WatchRequest*,
                     grpc::ServerWriter<v1::WatchResponse>* writer) override {
    for (const v1::WatchResponse& r : responses_) writer->Write(r);
    return grpc::Status::OK;
  }

 private:
  const std::vector<v1::WatchResponse> responses_;
};

class WatchCallTest : public ::testing::Test {
 protected:
  void Serve(std::vector<v1::WatchResponse> responses) {
    service_ = std::make_unique<ScriptedWatch>(std::move(responses));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Informer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<ScriptedWatch> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST(DescribeEventTest, TypeKeyAndFlags) {
  v1::Event added = Event(v1::EVENT_TYPE_ADDED, "a");
  added.set_initial(true);
  EXPECT_EQ(DescribeEvent(added), "ADDED ns/a initial");
  v1::Event done = Event(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  done.set_stale(true);
  EXPECT_EQ(DescribeEvent(done), "INITIAL_STATE_DONE stale");
  EXPECT_EQ(DescribeEvent(Event(v1::EVENT_TYPE_FRESH)), "FRESH");
}

TEST_F(WatchCallTest, ReadsUpToEachMarkerKeepingWhatFollows) {
  v1::WatchResponse first;
  *first.add_events() = Event(v1::EVENT_TYPE_ADDED, "a", "t1");
  *first.add_events() = Event(v1::EVENT_TYPE_BOOKMARK, "", "t2");
  v1::WatchResponse second;
  *second.add_events() = Event(v1::EVENT_TYPE_INITIAL_STATE_DONE, "", "t3");
  *second.add_events() = Event(v1::EVENT_TYPE_DELETED, "a", "t4");
  v1::WatchResponse third;
  *third.add_events() = Event(v1::EVENT_TYPE_FRESH, "", "t5");
  ASSERT_NO_FATAL_FAILURE(Serve({first, second, third}));
  WatchCall call(stub_.get(), v1::WatchRequest());

  absl::StatusOr<WatchEvents> initial =
      call.ReadUntil(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  ASSERT_TRUE(initial.ok()) << initial.status();
  EXPECT_EQ(initial->events,
            (std::vector<std::string>{"ADDED ns/a", "INITIAL_STATE_DONE"}));
  EXPECT_EQ(initial->resume_tokens, (std::vector<std::string>{"t1", "t3"}));
  absl::StatusOr<WatchEvents> fresh = call.ReadUntil(v1::EVENT_TYPE_FRESH);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->events, (std::vector<std::string>{"DELETED ns/a", "FRESH"}));
  EXPECT_EQ(fresh->resume_tokens, (std::vector<std::string>{"t4", "t5"}));
}

TEST_F(WatchCallTest, AStreamEndingFirstIsAnErrorNamingWhatCame) {
  v1::WatchResponse only;
  *only.add_events() = Event(v1::EVENT_TYPE_ADDED, "a");
  ASSERT_NO_FATAL_FAILURE(Serve({only}));
  WatchCall call(stub_.get(), v1::WatchRequest());
  absl::StatusOr<WatchEvents> got = call.ReadUntil(v1::EVENT_TYPE_FRESH);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("EVENT_TYPE_FRESH after [ADDED ns/a]"),
            absl::string_view::npos)
      << got.status();
}

}  // namespace
}  // namespace server

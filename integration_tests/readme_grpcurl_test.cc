// The documentation's grpcurl examples, run as printed against the real
// sidecar in demo mode, through a client that knows only what server
// reflection tells it (as grpcurl does), in every build; the real grpcurl
// runs them in real_grpcurl_readme_test (the real-cluster phase). Every
// service the server lists must resolve through reflection with all its
// methods' types; the examples of README.md and of every docs/*.md are
// then parsed, resolved and called. An example that
// names a wrong service, method, field or enum value, that fails against the
// demo cluster, or that reflection cannot describe fails this test.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "integration_tests/grpcurl_client.h"
#include "integration_tests/readme_grpcurl_lines.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

class ReadmeGrpcurlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    SidecarProcess::Options options;
    options.flags = {"--demo", "--print_events=false",
                     "--http_listen=127.0.0.1:0"};
    options.quiet = true;
    auto sidecar = SidecarProcess::Start(*binary, std::move(options));
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = sidecar->release();
  }
  static void TearDownTestSuite() {
    delete sidecar_;
    sidecar_ = nullptr;
  }

  static SidecarProcess* sidecar_;
};
SidecarProcess* ReadmeGrpcurlTest::sidecar_ = nullptr;

TEST_F(ReadmeGrpcurlTest, EveryListedServiceResolvesThroughReflection) {
  GrpcurlClient client(sidecar_->NewChannel());
  absl::StatusOr<std::vector<std::string>> services = client.ListServices();
  ASSERT_TRUE(services.ok()) << services.status();
  for (const char* expected :
       {"informer.v1.Informer", "informer.v1.WorkQueue", "informer.v1.Events",
        "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}) {
    EXPECT_NE(std::find(services->begin(), services->end(), expected),
              services->end())
        << expected << " not listed in " << absl::StrJoin(*services, ", ");
  }
  for (const std::string& service : *services) {
    SCOPED_TRACE(service);
    // `grpcurl describe SERVICE`, then each method's request and response
    // types and the types of their fields.
    auto sd = client.ResolveService(service);
    ASSERT_TRUE(sd.ok()) << sd.status();
    EXPECT_GT((*sd)->method_count(), 0);
  }
}

TEST_F(ReadmeGrpcurlTest, HealthCheckAndWatchThroughReflection) {
  GrpcurlClient client(sidecar_->NewChannel());
  // The sidecar started with health SERVING (SidecarProcess waits for it).
  auto overall =
      client.Call("grpc.health.v1.Health/Check", R"({"service":""})");
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, std::vector<std::string>{R"({"status":"SERVING"})"});
  auto pods =
      client.Call("grpc.health.v1.Health/Check", R"({"service":"pods"})");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(*pods, std::vector<std::string>{R"({"status":"SERVING"})"});
  auto unknown =
      client.Call("grpc.health.v1.Health/Check", R"({"service":"nosuch"})");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound)
      << unknown.status();
  auto watch = client.Call("grpc.health.v1.Health/Watch", "{}");
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ(*watch, std::vector<std::string>{R"({"status":"SERVING"})"});
  // A field health does not have is an error, as grpcurl reports it.
  auto bad = client.Call("grpc.health.v1.Health/Check", R"({"servic":""})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReadmeGrpcurlTest, EveryExampleRunsAsPrinted) {
  const ReadmeGrpcurlLines docs = ReadReadmeGrpcurlLines();
  ASSERT_FALSE(docs.paths.empty()) << "README.md not in the runfiles";
  const std::vector<std::string>& commands = docs.commands;
  ASSERT_GE(commands.size(), 10u)
      << "the docs lost their grpcurl examples? read: "
      << absl::StrJoin(docs.paths, ", ");

  GrpcurlClient client(sidecar_->NewChannel());
  int called = 0;
  int streamed_stdin = 0;
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    const GrpcurlInvocation inv = ParseGrpcurl(command);
    if (inv.verb == "list") {
      auto services = client.ListServices();
      ASSERT_TRUE(services.ok()) << services.status();
      if (!inv.target.empty()) {
        EXPECT_TRUE(client.ResolveService(inv.target).ok()) << inv.target;
      }
      continue;
    }
    if (inv.verb == "describe") {
      EXPECT_TRUE(client.Resolve(inv.target).ok()) << inv.target;
      continue;
    }
    ASSERT_TRUE(absl::StrContains(inv.target, "/")) << inv.target;
    if (inv.stdin_data) {
      // Streams fed from stdin (Lease, RecordStream) by a shell pipeline:
      // the method must take a stream.
      auto md = client.ResolveMethod(inv.target);
      ASSERT_TRUE(md.ok()) << md.status();
      EXPECT_TRUE((*md)->client_streaming());
      ++streamed_stdin;
      continue;
    }
    auto responses = client.Call(inv.target, inv.data);
    EXPECT_TRUE(responses.ok()) << responses.status();
    ++called;
  }
  EXPECT_GE(called, 10);
  EXPECT_GE(streamed_stdin, 1);
}

}  // namespace
}  // namespace integration

// Sidecar::Start/Shutdown in-process, in demo mode (the emulator over real
// HTTP, real gRPC over loopback): what starts, what it serves, and that a
// failed start names the flag and releases what it had started.

#include "server/app/sidecar_app.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/app/sidecar_options.h"

namespace server {
namespace {

void Set(const std::string& name, const std::string& value) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  ASSERT_NE(flag, nullptr) << name;
  std::string error;
  ASSERT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

class SidecarAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Set("demo", "true");
    Set("grpc_listen", "127.0.0.1:0");
    Set("http_listen", "127.0.0.1:0");
    Set("print_events", "false");
    Set("shutdown_grace", "100ms");
  }

 private:
  absl::FlagSaver saver_;
};

TEST_F(SidecarAppTest, DemoStartsServesAndShutsDown) {
  const std::string ports = TempPath("ports");
  Set("ports_file", ports);
  absl::StatusOr<SidecarOptions> options = OptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  absl::StatusOr<std::unique_ptr<Sidecar>> sidecar =
      Sidecar::Start(*std::move(options));
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  EXPECT_TRUE((*sidecar)->demo());
  ASSERT_GT((*sidecar)->grpc_port(), 0);
  ASSERT_GT((*sidecar)->http_port(), 0);
  std::stringstream written;
  written << std::ifstream(ports).rdbuf();
  EXPECT_EQ(written.str(),
            absl::StrCat("grpc=", (*sidecar)->grpc_port(),
                         "\nhttp=", (*sidecar)->http_port(), "\n"));
  EXPECT_EQ((*sidecar)->shutdown_deadline(),
            absl::Milliseconds(100) + absl::Seconds(5) + absl::Seconds(10));

  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*sidecar)->grpc_port()),
                          grpc::InsecureChannelCredentials());
  // Health follows the demo's default resources until they synced.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
  auto watch =
      health->Watch(&watch_ctx, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse status;
  while (watch->Read(&status) &&
         status.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
  }
  ASSERT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  watch_ctx.TryCancel();
  watch->Finish();

  auto informers = informer::v1::Informer::NewStub(channel);
  grpc::ClientContext ctx;
  informer::v1::ListResourcesResponse resources;
  ASSERT_TRUE(informers
                  ->ListResources(&ctx, informer::v1::ListResourcesRequest(),
                                  &resources)
                  .ok());
  EXPECT_EQ(resources.resources_size(), 3);  // pods, configmaps, deployments

  EXPECT_TRUE((*sidecar)->Shutdown());
  EXPECT_TRUE((*sidecar)->Shutdown()) << "idempotent";
  grpc::ClientContext after;
  after.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
  EXPECT_FALSE(informers
                   ->ListResources(&after, informer::v1::ListResourcesRequest(),
                                   &resources)
                   .ok());
}

TEST_F(SidecarAppTest, AFailedStartNamesTheFlagAndReleasesThePorts) {
  Set("http_listen", "127.0.0.1:0");
  Set("grpc_tls_cert_file", TempPath("missing.crt"));
  Set("grpc_tls_key_file", TempPath("missing.key"));
  absl::StatusOr<SidecarOptions> options = OptionsFromFlags();
  ASSERT_TRUE(options.ok()) << options.status();
  absl::StatusOr<std::unique_ptr<Sidecar>> sidecar =
      Sidecar::Start(*std::move(options));
  ASSERT_FALSE(sidecar.ok());
  EXPECT_NE(sidecar.status().message().find("--grpc_tls_cert_file"),
            std::string::npos)
      << sidecar.status();

  // A second start on the same fixed HTTP port works: the first released it.
  const std::string ports = TempPath("ports2");
  Set("grpc_tls_cert_file", "");
  Set("grpc_tls_key_file", "");
  Set("ports_file", ports);
  options = OptionsFromFlags();
  ASSERT_TRUE(options.ok());
  sidecar = Sidecar::Start(*std::move(options));
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  const int http_port = (*sidecar)->http_port();
  EXPECT_TRUE((*sidecar)->Shutdown());
  sidecar->reset();
  Set("http_listen", absl::StrCat("127.0.0.1:", http_port));
  Set("grpc_tls_cert_file", TempPath("missing.crt"));
  Set("grpc_tls_key_file", TempPath("missing.key"));
  options = OptionsFromFlags();
  ASSERT_TRUE(options.ok());
  sidecar = Sidecar::Start(*std::move(options));
  ASSERT_FALSE(sidecar.ok());
  Set("grpc_tls_cert_file", "");
  Set("grpc_tls_key_file", "");
  options = OptionsFromFlags();
  ASSERT_TRUE(options.ok());
  sidecar = Sidecar::Start(*std::move(options));
  ASSERT_TRUE(sidecar.ok())
      << "port " << http_port << " still held: " << sidecar.status();
  EXPECT_EQ((*sidecar)->http_port(), http_port);
  EXPECT_TRUE((*sidecar)->Shutdown());
}

}  // namespace
}  // namespace server

#include "server/security/tls_config.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "emulator/tls_certs.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteTemp(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr) << path;
  if (f != nullptr) {
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
  }
  return path;
}

// Answers ListResources with one resource: a call that gets an answer
// got through the handshake.
class OneResource final : public v1::Informer::Service {
 public:
  grpc::Status ListResources(grpc::ServerContext*,
                             const v1::ListResourcesRequest*,
                             v1::ListResourcesResponse* response) override {
    response->add_resources()->set_resource("pods");
    return grpc::Status::OK;
  }
};

class TlsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<emulator::TestPki> pki =
        emulator::GenerateTestPki({"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *std::move(pki);
    absl::StatusOr<emulator::TestPki> other =
        emulator::GenerateTestPki({"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = *std::move(other);
    files_.cert_file = WriteTemp("server.crt", pki_.server_cert_pem);
    files_.key_file = WriteTemp("server.key", pki_.server_key_pem);
    ca_file_ = WriteTemp("ca.crt", pki_.ca_cert_pem);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Serves ListResources (one resource) with `files`' credentials.
  void StartServer(const TlsFiles& files) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        BuildServerCredentials(files);
    ASSERT_TRUE(creds.ok()) << creds.status();
    ASSERT_NE(*creds, nullptr);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  // ListResources over a channel with `creds`; the call's status.
  grpc::Status Call(std::shared_ptr<grpc::ChannelCredentials> creds) {
    grpc::ChannelArguments args;
    // Each call gets its own connection (no subchannel sharing between
    // credentials of one test). The server certificate names 127.0.0.1
    // (no DNS lookup: c-ares leaks under LeakSanitizer).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = v1::Informer::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port_), creds, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    v1::ListResourcesResponse resp;
    grpc::Status st = stub->ListResources(&ctx, {}, &resp);
    if (st.ok()) {
      EXPECT_EQ(resp.resources_size(), 1);
    }
    return st;
  }

  std::shared_ptr<grpc::ChannelCredentials> ClientCreds(
      const std::string& root, const std::string& cert = "",
      const std::string& key = "") {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = root;
    options.pem_cert_chain = cert;
    options.pem_private_key = key;
    return grpc::SslCredentials(options);
  }

  emulator::TestPki pki_;
  emulator::TestPki other_;
  TlsFiles files_;
  std::string ca_file_;
  OneResource service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(TlsConfigTest, NoFilesMeansNoTls) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
      BuildServerCredentials({});
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ(*creds, nullptr);
}

TEST_F(TlsConfigTest, MistakesNameTheFlagAndFile) {
  struct Case {
    TlsFiles files;
    std::string expected;
  };
  const std::string garbage = WriteTemp("garbage.pem", "not a PEM file\n");
  const std::string other_key = WriteTemp("other.key", other_.server_key_pem);
  const std::vector<Case> cases = {
      {{.cert_file = files_.cert_file},
       "--grpc_tls_cert_file needs --grpc_tls_key_file too"},
      {{.key_file = files_.key_file},
       "--grpc_tls_key_file needs --grpc_tls_cert_file too"},
      {{.client_ca_file = ca_file_},
       "--grpc_tls_client_ca_file (mTLS) needs TLS"},
      {{.cert_file = "/nonexistent/server.crt", .key_file = files_.key_file},
       "--grpc_tls_cert_file: cannot read \"/nonexistent/server.crt\": No "
       "such file or directory"},
      {{.cert_file = files_.cert_file, .key_file = "/nonexistent/k"},
       "--grpc_tls_key_file: cannot read \"/nonexistent/k\""},
      {{.cert_file = garbage, .key_file = files_.key_file},
       absl::StrCat("--grpc_tls_cert_file: \"", garbage,
                    "\" holds no PEM certificate")},
      {{.cert_file = files_.cert_file, .key_file = garbage},
       "--grpc_tls_key_file: \"" + garbage + "\" holds no unencrypted PEM "},
      // The key file holding a certificate (a classic mix-up).
      {{.cert_file = files_.cert_file, .key_file = files_.cert_file},
       "holds no unencrypted PEM private key"},
      {{.cert_file = files_.cert_file, .key_file = other_key},
       "does not belong to the certificate"},
      {{.cert_file = files_.cert_file,
        .key_file = files_.key_file,
        .client_ca_file = garbage},
       "--grpc_tls_client_ca_file: \"" + garbage + "\" holds no PEM"},
      {{.cert_file = files_.cert_file,
        .key_file = files_.key_file,
        .client_ca_file = "/nonexistent/ca"},
       "--grpc_tls_client_ca_file: cannot read"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        BuildServerCredentials(c.files);
    ASSERT_FALSE(creds.ok()) << c.expected;
    EXPECT_EQ(creds.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(creds.status().message()), HasSubstr(c.expected));
    // Key material never appears in errors.
    EXPECT_THAT(std::string(creds.status().message()),
                Not(HasSubstr("PRIVATE KEY-----\n")));
  }
}

TEST_F(TlsConfigTest, TlsServesClientsThatTrustTheCa) {
  StartServer(files_);
  EXPECT_TRUE(Call(ClientCreds(pki_.ca_cert_pem)).ok());
  // A client trusting another CA refuses the server's certificate.
  EXPECT_EQ(Call(ClientCreds(other_.ca_cert_pem)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A plaintext client gets nowhere.
  EXPECT_EQ(Call(grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsConfigTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  TlsFiles files = files_;
  files.client_ca_file = ca_file_;
  StartServer(files);
  // No client certificate: refused in the handshake.
  EXPECT_EQ(Call(ClientCreds(pki_.ca_cert_pem)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A certificate another CA signed: refused.
  EXPECT_EQ(Call(ClientCreds(pki_.ca_cert_pem, other_.client_cert_pem,
                             other_.client_key_pem))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The CA's client certificate: accepted.
  grpc::Status st = Call(
      ClientCreds(pki_.ca_cert_pem, pki_.client_cert_pem, pki_.client_key_pem));
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST(IsLocalListenAddressTest, LoopbackAndUnixOnly) {
  for (const char* local :
       {"127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "[::1]:50051",
        "unix:/run/sidecar.sock", "unix-abstract:sidecar"}) {
    EXPECT_TRUE(IsLocalListenAddress(local)) << local;
  }
  for (const char* remote :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:50051", "example.com:1",
        "127.0.0.1.example.com:1", "127.evil.example:50051", "1270.0.0.1:1",
        ":50051"}) {
    EXPECT_FALSE(IsLocalListenAddress(remote)) << remote;
  }
}

}  // namespace
}  // namespace server

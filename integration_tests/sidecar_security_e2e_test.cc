// The sidecar's security flags end to end, with the real binary (demo
// cluster): mTLS over a unix socket with --grpc_tls_* and bearer tokens
// with --tokens_file; start-up refusals for bad TLS files, Secrets without
// --allow_secrets and bad tokens files; no token in the logs.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "emulator/tls_certs.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

extern char** environ;

namespace integration {
namespace {

namespace v1 = ::informer::v1;

constexpr char kAppToken[] = "e2e-app-token-7f3a9c1b2d4e6f80";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
}

// One informer_sidecar child with its stderr in a file; killed (SIGKILL)
// and reaped on destruction unless it already exited.
class Child {
 public:
  Child(const std::string& binary, std::vector<std::string> flags,
        const std::string& log) {
    // Port 0 for the metrics/probes port (default :9090): tests run in
    // parallel.
    std::vector<std::string> args = {binary, "--http_listen=127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // No cluster from the environment: the demo cluster it is.
    std::vector<std::string> env = {"HOME=/nonexistent", "PATH=/usr/bin:/bin"};
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(),
                    envp.data()) != 0) {
      pid_ = 0;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  // Waits for the exit; the exit code, or -signal.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  int Terminate() {
    kill(pid_, SIGTERM);
    return Wait();
  }

 private:
  pid_t pid_ = 0;
};

class SidecarSecurityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    binary_ = *binary;
    // Short: a unix socket path has at most 107 characters.
    char dir[] = "/tmp/sidecar_sec_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    absl::StatusOr<emulator::TestPki> pki =
        emulator::GenerateTestPki({"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *std::move(pki);
    WriteAll(dir_ + "/server.crt", pki_.server_cert_pem);
    WriteAll(dir_ + "/server.key", pki_.server_key_pem);
    WriteAll(dir_ + "/ca.crt", pki_.ca_cert_pem);
    WriteAll(dir_ + "/app.token", std::string(kAppToken) + "\n");
    WriteAll(dir_ + "/tokens.yaml",
             "tokens:\n"
             "- name: app\n"
             "  tokenFile: app.token\n"
             "  resources: [pods]\n"
             "  namespaces: [demo]\n");
    log_ = dir_ + "/stderr.log";
  }

  void TearDown() override {
    for (const char* f : {"server.crt", "server.key", "ca.crt", "app.token",
                          "tokens.yaml", "stderr.log", "grpc.sock"}) {
      unlink((dir_ + "/" + f).c_str());
    }
    rmdir(dir_.c_str());
  }

  std::vector<std::string> SecureFlags() const {
    return {"--demo",
            "--resources=pods,configmaps",
            "--print_events=false",
            "--http_listen=127.0.0.1:0",
            "--grpc_listen=unix:" + dir_ + "/grpc.sock",
            "--grpc_tls_cert_file=" + dir_ + "/server.crt",
            "--grpc_tls_key_file=" + dir_ + "/server.key",
            "--grpc_tls_client_ca_file=" + dir_ + "/ca.crt",
            "--tokens_file=" + dir_ + "/tokens.yaml"};
  }

  std::shared_ptr<grpc::Channel> Channel(bool with_client_cert) const {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = pki_.ca_cert_pem;
    if (with_client_cert) {
      tls.pem_cert_chain = pki_.client_cert_pem;
      tls.pem_private_key = pki_.client_key_pem;
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("unix:" + dir_ + "/grpc.sock",
                                     grpc::SslCredentials(tls), args);
  }

  static grpc::Status List(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& token,
                           const std::string& resource, const std::string& ns,
                           int* count) {
    auto stub = v1::Informer::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::ListRequest req;
    req.set_resource(resource);
    req.set_namespace_(ns);
    v1::ListResponse resp;
    grpc::Status st = stub->List(&ctx, req, &resp);
    *count = resp.objects_size();
    return st;
  }

  // Runs the binary with `flags` to its exit; its exit code and stderr.
  int RunToExit(std::vector<std::string> flags, std::string* stderr_text) {
    flags.push_back("--http_listen=127.0.0.1:0");
    Child child(binary_, std::move(flags), log_);
    EXPECT_TRUE(child.started());
    const int code = child.Wait();
    *stderr_text = ReadAll(log_);
    return code;
  }

  std::string binary_;
  std::string dir_;
  std::string log_;
  emulator::TestPki pki_;
};

TEST_F(SidecarSecurityE2eTest, MutualTlsAndBearerTokens) {
  Child child(binary_, SecureFlags(), log_);
  ASSERT_TRUE(child.started());
  std::shared_ptr<grpc::Channel> channel = Channel(/*with_client_cert=*/true);
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(60)))
      << ReadAll(log_);
  // Health needs no token (probes), only the TLS client certificate.
  ASSERT_TRUE(WaitForHealthServing(channel, "", absl::Seconds(60)).ok())
      << ReadAll(log_);

  int count = 0;
  grpc::Status st = List(channel, kAppToken, "pods", "demo", &count);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(count, 0);
  st = List(channel, "", "pods", "demo", &count);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  st = List(channel, "wrong-token-0123456789abcdef", "pods", "demo", &count);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  st = List(channel, kAppToken, "pods", "shop", &count);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("namespace \"shop\""), std::string::npos);
  st = List(channel, kAppToken, "configmaps", "demo", &count);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Without a client certificate the handshake fails.
  std::shared_ptr<grpc::Channel> anonymous = Channel(false);
  st = List(anonymous, kAppToken, "pods", "demo", &count);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);

  EXPECT_EQ(child.Terminate(), 0);
  const std::string logs = ReadAll(log_);
  EXPECT_NE(logs.find("bearer tokens required"), std::string::npos) << logs;
  EXPECT_NE(logs.find("with client certificates (mTLS)"), std::string::npos);
  EXPECT_EQ(logs.find(kAppToken), std::string::npos) << "token in the logs";
}

TEST_F(SidecarSecurityE2eTest, StartUpRefusesBadSecuritySettings) {
  std::string err;
  // Secrets without --allow_secrets, under any alias: a bad flag value
  // (exit 2, like every other one).
  EXPECT_EQ(RunToExit({"--demo", "--resources=pods,Secret"}, &err), 2);
  EXPECT_NE(err.find("resource \"Secret\": Secrets are withheld unless "
                     "--allow_secrets is set"),
            std::string::npos)
      << err;
  // A key that is not a key.
  EXPECT_EQ(RunToExit({"--demo", "--grpc_tls_cert_file=" + dir_ + "/server.crt",
                       "--grpc_tls_key_file=" + dir_ + "/ca.crt"},
                      &err),
            1);
  EXPECT_NE(err.find("--grpc_tls_key_file: \"" + dir_ +
                     "/ca.crt\" holds no unencrypted PEM private key"),
            std::string::npos)
      << err;
  // A missing certificate file.
  EXPECT_EQ(RunToExit({"--demo", "--grpc_tls_cert_file=" + dir_ + "/nope.crt",
                       "--grpc_tls_key_file=" + dir_ + "/server.key"},
                      &err),
            1);
  EXPECT_NE(err.find("--grpc_tls_cert_file: cannot read"), std::string::npos)
      << err;
  // A tokens file granting a resource that is not configured.
  WriteAll(dir_ + "/tokens.yaml",
           "tokens:\n- name: app\n  tokenFile: app.token\n"
           "  resources: [deployments]\n");
  EXPECT_EQ(RunToExit({"--demo", "--resources=pods",
                       "--tokens_file=" + dir_ + "/tokens.yaml"},
                      &err),
            1);
  EXPECT_NE(err.find("tokens[0] (\"app\").resources: \"deployments\" is not a "
                     "configured resource"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find(kAppToken), std::string::npos);
}

}  // namespace
}  // namespace integration

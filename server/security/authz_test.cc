#include "server/security/authz.h"

#include <gmock/gmock.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/informer/v1/events.grpc.pb.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/security/authz_test_tokens.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

void WriteFile(const std::string& path, const std::string& content) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(content.data(), 1, content.size(), f);
  std::fclose(f);
}

TEST(IsSecretsResourceTest, EveryWayOfNamingCoreSecrets) {
  for (const char* name :
       {"secrets", "secret", "Secret", "SECRETS", "secrets.v1", "secrets.v1.",
        "secret.v1", "secrets.core", "secrets.v1.core", "v1/secrets",
        "/v1/secrets", "core/v1/secrets", " secrets "}) {
    EXPECT_TRUE(IsSecretsResource(name)) << name;
  }
  for (const char* name : {"pods", "secretstores", "secrets.example.com",
                           "example.com/v1/secrets", "configmaps", ""}) {
    EXPECT_FALSE(IsSecretsResource(name)) << name;
  }
}

TEST(TokensFileTest, LoadsGrantsAndNamesInOrder) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(false));
  ASSERT_TRUE(authz.ok()) << authz.status();
  EXPECT_TRUE((*authz)->requires_token());
  EXPECT_THAT((*authz)->token_names(), ElementsAre("app", "admin"));
}

TEST(TokensFileTest, MistakesAreClearErrorsNamingTheField) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"- a\n", "(top level)"},
      {"tokenz: []\n", "tokenz: unknown field"},
      {"tokens: []\n", "tokens: expected a non-empty list"},
      {"tokens:\n- token: abcdefghijklmnopq\n  resources: [pods]\n",
       "tokens[0].name: required"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n  resource: [pods]\n",
       "tokens[0].resource: unknown field"},
      {"tokens:\n- name: a\n  resources: [pods]\n",
       "set exactly one of \"token\" and \"tokenFile\""},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n"
       "  tokenFile: x\n  resources: [pods]\n",
       "set exactly one"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n",
       "tokens[0] (\"a\").resources: required"},
      {"tokens:\n- name: a\n  token: ''\n  resources: [pods]\n",
       "the token is empty"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n  resources: [po]\n",
       "\"po\" is not a configured resource (configured: configmaps, pods, "
       "secrets"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n"
       "  resources: [pods]\n  namespaces: [[x]]\n",
       "tokens[0] (\"a\").namespaces[0]: expected a string"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n  resources: [pods]\n"
       "- name: a\n  token: bbcdefghijklmnopq\n  resources: [pods]\n",
       "tokens.yaml:5:9: tokens[1] (\"a\").name: duplicate name"},
      {"tokens:\n- name: a\n  token: abcdefghijklmnopq\n  resources: [pods]\n"
       "- name: b\n  token: abcdefghijklmnopq\n  resources: [pods]\n",
       "the same token as \"a\""},
      {"tokens: [\n", "tokens.yaml:2:1: invalid YAML"},
  };
  for (const Case& c : cases) {
    auto authz = LoadTestAuthorizer(c.yaml);
    ASSERT_FALSE(authz.ok()) << c.yaml;
    EXPECT_EQ(authz.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(authz.status().message(), HasSubstr(c.expected)) << c.yaml;
    // Never the token value.
    EXPECT_THAT(authz.status().message(), Not(HasSubstr("bcdefghijklmnopq")));
  }
}

TEST(TokensFileTest, SecretsNeedAllowSecrets) {
  auto refused = LoadTestAuthorizer(AppTokensYaml(true));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("tokens[2] (\"secret-reader\").resources: "
                        "\"secrets\": Secrets are withheld unless the sidecar "
                        "runs with --allow_secrets"));
  EXPECT_TRUE(
      LoadTestAuthorizer(AppTokensYaml(true), /*allow_secrets=*/true).ok());
}

TEST(TokensFileTest, TokenFileIndirectionRelativeToTheTokensFile) {
  const std::string dir = TestTempDir();
  WriteFile(dir + "/app.token", std::string(kAppToken) + "\n");
  const std::string tokens = dir + "/tokens.yaml";
  WriteFile(tokens,
            "tokens:\n- name: app\n  tokenFile: app.token\n"
            "  resources: [pods]\n");
  auto authz = Authorizer::FromTokensFile(tokens, {});
  ASSERT_TRUE(authz.ok()) << authz.status();
  auto grant = (*authz)->Authenticate(absl::StrCat("Bearer ", kAppToken));
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ((*grant)->name, "app");

  WriteFile(tokens,
            "tokens:\n- name: app\n  tokenFile: missing.token\n"
            "  resources: [pods]\n");
  authz = Authorizer::FromTokensFile(tokens, {});
  ASSERT_FALSE(authz.ok());
  EXPECT_THAT(authz.status().message(),
              HasSubstr("tokens[0] (\"app\").tokenFile: cannot read"));
  EXPECT_THAT(authz.status().message(), HasSubstr("missing.token"));

  authz = Authorizer::FromTokensFile(dir + "/absent.yaml", {});
  ASSERT_FALSE(authz.ok());
  EXPECT_THAT(authz.status().message(),
              HasSubstr("--tokens_file: cannot read"));
}

TEST(AuthenticateTest, BearerTokensOnly) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(false));
  ASSERT_TRUE(authz.ok()) << authz.status();
  const Authorizer& a = **authz;
  EXPECT_EQ(a.Authenticate(absl::nullopt).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(a.Authenticate(absl::nullopt).status().message(),
              HasSubstr("authorization: Bearer <token>"));
  EXPECT_EQ(a.Authenticate("Bearer wrong-token-0123456789").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Authenticate(kAppToken).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Authenticate(absl::StrCat("Basic ", kAppToken)).status().code(),
            absl::StatusCode::kUnauthenticated);
  // A prefix or extension of a valid token is not valid.
  EXPECT_FALSE(a.Authenticate(absl::StrCat("Bearer ", kAppToken, "x")).ok());
  EXPECT_FALSE(a.Authenticate("Bearer app-token").ok());
  auto app = a.Authenticate(absl::StrCat("bearer  ", kAppToken, " "));
  ASSERT_TRUE(app.ok()) << app.status();
  EXPECT_EQ((*app)->name, "app");
  auto admin = a.Authenticate(absl::StrCat("Bearer ", kAdminToken));
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ((*admin)->name, "admin");
}

TEST(CheckReadTest, ResourcesAndNamespaces) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(true), /*allow_secrets=*/true);
  ASSERT_TRUE(authz.ok()) << authz.status();
  const Authorizer& a = **authz;
  const TokenGrant& app = **a.Authenticate(absl::StrCat("Bearer ", kAppToken));
  const TokenGrant& admin =
      **a.Authenticate(absl::StrCat("Bearer ", kAdminToken));
  const TokenGrant& secret =
      **a.Authenticate(absl::StrCat("Bearer ", kSecretToken));

  EXPECT_TRUE(a.CheckRead(app, "pods", "default").ok());
  absl::Status st = a.CheckRead(app, "pods", "kube-system");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("token \"app\" may not read \"pods\" in "
                                      "namespace \"kube-system\""));
  st = a.CheckRead(app, "pods", "");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("in all namespaces"));
  st = a.CheckRead(app, "deployments.apps", "default");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("may not read \"deployments.apps\""));

  EXPECT_TRUE(a.CheckRead(admin, "pods", "").ok());
  EXPECT_TRUE(a.CheckRead(admin, "deployments.apps", "x").ok());
  // "*" never covers Secrets, even with --allow_secrets.
  EXPECT_EQ(a.CheckRead(admin, "secrets", "").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(a.CheckRead(secret, "secrets", "").ok());
  EXPECT_FALSE(a.CheckRead(secret, "pods", "").ok());
}

TEST(CheckRecordEventsTest, OnlyTokensWithRecordEventsInTheirNamespaces) {
  auto authz = LoadTestAuthorizer(
      "tokens:\n"
      "- name: app\n  token: app-token-0123456789\n  resources: [pods]\n"
      "  namespaces: [default]\n  recordEvents: true\n"
      "- name: reader\n  token: reader-token-0123456789\n"
      "  resources: [pods]\n");
  ASSERT_TRUE(authz.ok()) << authz.status();
  const Authorizer& a = **authz;
  const TokenGrant& app = **a.Authenticate("Bearer app-token-0123456789");
  const TokenGrant& reader = **a.Authenticate("Bearer reader-token-0123456789");
  EXPECT_TRUE(a.CheckRecordEvents(app, "default").ok());
  absl::Status st = a.CheckRecordEvents(app, "kube-system");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("namespace \"kube-system\""));
  st = a.CheckRecordEvents(reader, "default");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("recordEvents is not set"));
  // Without tokens, everybody may record.
  std::unique_ptr<Authorizer> open = Authorizer::AllowAll({});
  EXPECT_TRUE(
      open->CheckRecordEvents(**open->Authenticate(absl::nullopt), "x").ok());

  auto bad = LoadTestAuthorizer(
      "tokens:\n- name: a\n  token: abcdefghijklmnopq\n  resources: [pods]\n"
      "  recordEvents: maybe\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("tokens[0] (\"a\").recordEvents: expected true or "
                        "false"));
}

TEST(CheckReadTest, WithoutTokensSecretsStillWithheld) {
  std::unique_ptr<Authorizer> a = Authorizer::AllowAll({});
  EXPECT_FALSE(a->requires_token());
  auto grant = a->Authenticate(absl::nullopt);
  ASSERT_TRUE(grant.ok());
  EXPECT_TRUE(a->CheckRead(**grant, "pods", "").ok());
  for (const char* name : {"secrets", "Secret", "secrets.v1"}) {
    absl::Status st = a->CheckRead(**grant, name, "default");
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << name;
    EXPECT_THAT(st.message(), HasSubstr("Secrets are withheld"));
  }
  std::unique_ptr<Authorizer> allowed =
      Authorizer::AllowAll({.allow_secrets = true});
  EXPECT_TRUE(
      allowed->CheckRead(**allowed->Authenticate(absl::nullopt), "secrets", "")
          .ok());
}

// Client-streaming and bidirectional methods refuse with the templates
// (for services such as informer.v1.Events and WorkQueue).
class StreamingRefusals : public ::testing::Test {
 protected:
  class Events final
      : public informer::v1::Events::WithCallbackMethod_RecordStream<
            informer::v1::Events::Service> {
   public:
    explicit Events(const Authorizer* a) : authorizer_(a) {}
    grpc::ServerReadReactor<v1::RecordEventRequest>* RecordStream(
        grpc::CallbackServerContext* context,
        v1::RecordEventStreamResponse*) override {
      grpc::Status access =
          AuthorizeRecordEvents(authorizer_, *context, "default");
      // The test needs no real recording: accepted calls end OK.
      return RefuseReadStream<v1::RecordEventRequest>(std::move(access));
    }

   private:
    const Authorizer* authorizer_;
  };
  // Any bidi method: refused unless authenticated, else ends OK.
  class Generic final : public grpc::CallbackGenericService {
   public:
    explicit Generic(const Authorizer* a) : authorizer_(a) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* context) override {
      return RefuseBidiStream<grpc::ByteBuffer, grpc::ByteBuffer>(
          AuthorizeCall(authorizer_, *context));
    }

   private:
    const Authorizer* authorizer_;
  };

  void SetUp() override {
    auto authz = LoadTestAuthorizer(
        "tokens:\n- name: app\n  token: app-token-0123456789\n"
        "  resources: [pods]\n  recordEvents: true\n"
        "- name: reader\n  token: reader-token-0123456789\n"
        "  resources: [pods]\n");
    ASSERT_TRUE(authz.ok()) << authz.status();
    authorizer_ = *std::move(authz);
    events_ = std::make_unique<Events>(authorizer_.get());
    generic_ = std::make_unique<Generic>(authorizer_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(events_.get());
    builder.RegisterCallbackGenericService(generic_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  grpc::Status RecordStream(absl::string_view token) {
    auto stub = v1::Events::NewStub(channel_);
    grpc::ClientContext ctx;
    if (!token.empty()) {
      ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    }
    v1::RecordEventStreamResponse resp;
    auto writer = stub->RecordStream(&ctx, &resp);
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Bidi(absl::string_view token) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    if (!token.empty()) {
      ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    }
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(&ctx, "/test.Any/Method", &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    call->WritesDone(reinterpret_cast<void*>(2));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(3));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    return status;
  }

  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<Events> events_;
  std::unique_ptr<Generic> generic_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  int port_ = 0;
};

TEST_F(StreamingRefusals, ClientStreamingAndBidiMethods) {
  EXPECT_EQ(RecordStream("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status st = RecordStream("reader-token-0123456789");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("may not record events"));
  EXPECT_TRUE(RecordStream("app-token-0123456789").ok());

  EXPECT_EQ(Bidi("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Bidi("bad-token-0123456789").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Bidi("reader-token-0123456789").ok());
}

}  // namespace
}  // namespace server

// The Informer service's authorization over real gRPC: a SidecarServer
// with an Authorizer (server/security/authz_test.cc tests the Authorizer).

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "informer/cache/testing/fake_source.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/app/sidecar_server.h"
#include "server/registry/informer_registry.h"
#include "server/security/authz.h"
#include "server/security/authz_test_tokens.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The checks over real gRPC: a SidecarServer on loopback over FakeSources
// with pods in two namespaces, configmaps and secrets.
class AuthzServerTest : public ::testing::Test {
 protected:
  void StartServer(std::unique_ptr<Authorizer> authorizer) {
    authorizer_ = std::move(authorizer);
    auto registry = InformerRegistry::Create(
        {{.resource = "configmaps"},
         {.resource = "pods", .label_indexes = {"app"}},
         {.resource = "secrets"}},
        [](const ResourceConfig& config)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          auto source = std::make_unique<informer::FakeSource>();
          if (config.resource == "pods") {
            for (const char* ns : {"default", "kube-system"}) {
              for (const char* name : {"a", "b"}) {
                absl::Status st =
                    source->Add(ns, name, {{"app", "web"}}).status();
                if (!st.ok()) return st;
              }
            }
          } else {
            absl::Status st = source->Add("default", "one").status();
            if (!st.ok()) return st;
          }
          return source;
        });
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    ASSERT_TRUE(registry_->Start().ok());
    SidecarServer::Options options;
    options.informer.authorizer = authorizer_.get();
    auto sidecar =
        SidecarServer::Start(registry_.get(), "127.0.0.1:0", options);
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    ASSERT_TRUE(sidecar_->WaitUntilServing(absl::Seconds(30)));
    stub_ = v1::Informer::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", sidecar_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    sidecar_.reset();
    if (registry_ != nullptr) registry_->Stop();
  }

  static void Prepare(grpc::ClientContext* ctx, absl::string_view token) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(30));
    if (!token.empty()) {
      ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
    }
  }

  grpc::Status Get(absl::string_view token, const std::string& resource,
                   const std::string& ns, const std::string& name) {
    grpc::ClientContext ctx;
    Prepare(&ctx, token);
    v1::GetRequest req;
    req.set_resource(resource);
    req.set_namespace_(ns);
    req.set_name(name);
    v1::GetResponse resp;
    return stub_->Get(&ctx, req, &resp);
  }

  grpc::Status List(absl::string_view token, const std::string& resource,
                    const std::string& ns, std::vector<std::string>* keys) {
    grpc::ClientContext ctx;
    Prepare(&ctx, token);
    v1::ListRequest req;
    req.set_resource(resource);
    req.set_namespace_(ns);
    v1::ListResponse resp;
    grpc::Status st = stub_->List(&ctx, req, &resp);
    for (const v1::Object& obj : resp.objects()) keys->push_back(obj.json());
    return st;
  }

  // Opens a Watch and reads until INITIAL_STATE_DONE; returns the stream's
  // status when it ends first, and the initial objects' count.
  grpc::Status WatchInitial(absl::string_view token,
                            const std::string& resource, const std::string& ns,
                            int* initial) {
    grpc::ClientContext ctx;
    Prepare(&ctx, token);
    v1::WatchRequest req;
    req.set_resource(resource);
    req.set_namespace_(ns);
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub_->Watch(&ctx, req);
    v1::WatchResponse resp;
    *initial = 0;
    while (reader->Read(&resp)) {
      for (const v1::Event& e : resp.events()) {
        if (e.type() == v1::EVENT_TYPE_ADDED) ++*initial;
        if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
          ctx.TryCancel();
          reader->Finish().IgnoreError();
          return grpc::Status::OK;
        }
      }
    }
    return reader->Finish();
  }

  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<InformerRegistry> registry_;
  std::unique_ptr<SidecarServer> sidecar_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(AuthzServerTest, MissingAndWrongTokensAreUnauthenticated) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(false));
  ASSERT_TRUE(authz.ok()) << authz.status();
  StartServer(*std::move(authz));
  grpc::Status st = Get("", "pods", "default", "a");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(st.error_message(), HasSubstr("missing bearer token"));
  st = Get("not-a-valid-token-at-all", "pods", "default", "a");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(st.error_message(), "invalid bearer token");
  // Unauthenticated callers learn nothing about which resources exist.
  EXPECT_EQ(Get("", "nosuch", "default", "a").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  int initial = 0;
  EXPECT_EQ(WatchInitial("", "pods", "default", &initial).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext ctx;
  Prepare(&ctx, "");
  v1::ListResourcesResponse resources;
  EXPECT_EQ(stub_->ListResources(&ctx, {}, &resources).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthzServerTest, TokensReadOnlyTheirResourcesAndNamespaces) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(false));
  ASSERT_TRUE(authz.ok()) << authz.status();
  StartServer(*std::move(authz));

  EXPECT_TRUE(Get(kAppToken, "pods", "default", "a").ok());
  grpc::Status st = Get(kAppToken, "pods", "kube-system", "a");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("namespace \"kube-system\""));
  EXPECT_TRUE(Get(kAdminToken, "pods", "kube-system", "a").ok());

  std::vector<std::string> keys;
  EXPECT_TRUE(List(kAppToken, "pods", "default", &keys).ok());
  EXPECT_EQ(keys.size(), 2u);
  keys.clear();
  st = List(kAppToken, "pods", "", &keys);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("in all namespaces"));
  EXPECT_TRUE(keys.empty());
  EXPECT_TRUE(List(kAdminToken, "pods", "", &keys).ok());
  EXPECT_EQ(keys.size(), 4u);

  // ByIndex spans namespaces: the app token sees only its own.
  {
    grpc::ClientContext ctx;
    Prepare(&ctx, kAppToken);
    v1::ByIndexRequest req;
    req.set_resource("pods");
    req.set_index_name("label:app");
    req.set_index_value("web");
    v1::ByIndexResponse resp;
    ASSERT_TRUE(stub_->ByIndex(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.objects_size(), 2);
    for (const v1::Object& obj : resp.objects()) {
      EXPECT_THAT(obj.json(), HasSubstr("\"namespace\":\"default\""));
    }
  }
  // Index values would reveal other namespaces.
  {
    grpc::ClientContext ctx;
    Prepare(&ctx, kAppToken);
    v1::ListIndexValuesRequest req;
    req.set_resource("pods");
    req.set_index_name("namespace");
    v1::ListIndexValuesResponse resp;
    EXPECT_EQ(stub_->ListIndexValues(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    grpc::ClientContext admin_ctx;
    Prepare(&admin_ctx, kAdminToken);
    ASSERT_TRUE(stub_->ListIndexValues(&admin_ctx, req, &resp).ok());
    EXPECT_THAT(resp.values(), ElementsAre("default", "kube-system"));
  }
  // ListResources shows only what the token may read.
  {
    grpc::ClientContext ctx;
    Prepare(&ctx, kAppToken);
    v1::ListResourcesResponse resp;
    ASSERT_TRUE(stub_->ListResources(&ctx, {}, &resp).ok());
    std::vector<std::string> names;
    for (const auto& r : resp.resources()) names.push_back(r.resource());
    EXPECT_THAT(names, ElementsAre("configmaps", "pods"));
  }
  // Watch: allowed in its namespace, refused elsewhere.
  int initial = 0;
  ASSERT_TRUE(WatchInitial(kAppToken, "pods", "default", &initial).ok());
  EXPECT_EQ(initial, 2);
  st = WatchInitial(kAppToken, "pods", "kube-system", &initial);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("namespace \"kube-system\""));
  st = WatchInitial(kAppToken, "secrets", "default", &initial);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthzServerTest, SecretsWithheldByDefault) {
  // Even an admin token ("*") cannot read Secrets without --allow_secrets.
  auto authz = LoadTestAuthorizer(AppTokensYaml(false));
  ASSERT_TRUE(authz.ok()) << authz.status();
  StartServer(*std::move(authz));
  grpc::Status st = Get(kAdminToken, "secrets", "default", "one");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("Secrets are withheld"));
  std::vector<std::string> keys;
  EXPECT_EQ(List(kAdminToken, "secrets", "", &keys).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(keys.empty());
  grpc::ClientContext ctx;
  Prepare(&ctx, kAdminToken);
  v1::ListResourcesResponse resp;
  ASSERT_TRUE(stub_->ListResources(&ctx, {}, &resp).ok());
  for (const auto& r : resp.resources()) EXPECT_NE(r.resource(), "secrets");
}

TEST_F(AuthzServerTest, SecretsWithheldWithoutATokensFile) {
  StartServer(Authorizer::AllowAll({}));
  EXPECT_TRUE(Get("", "pods", "kube-system", "a").ok());
  grpc::Status st = Get("", "secrets", "default", "one");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  int initial = 0;
  EXPECT_EQ(WatchInitial("", "secrets", "", &initial).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthzServerTest, SecretsServedWhenExplicitlyAllowed) {
  auto authz = LoadTestAuthorizer(AppTokensYaml(true), /*allow_secrets=*/true);
  ASSERT_TRUE(authz.ok()) << authz.status();
  StartServer(*std::move(authz));
  EXPECT_TRUE(Get(kSecretToken, "secrets", "default", "one").ok());
  // Only to the token that names them.
  EXPECT_EQ(Get(kAdminToken, "secrets", "default", "one").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Get(kAppToken, "secrets", "default", "one").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace server

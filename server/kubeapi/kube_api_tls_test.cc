// The facade over HTTPS, with and without client certificates, read by the
// project's API client (libcurl) as any TLS Kubernetes client would.

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "emulator/tls_certs.h"
#include "gtest/gtest.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/client/http_transport.h"
#include "informer/client/kube_client.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace kubeapi {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(dir ? dir : "/tmp", "/", name);
  std::ofstream(path) << text;
  return path;
}

class KubeApiTlsTest : public ::testing::Test {
 protected:
  void Start(bool client_ca) {
    auto pki = emulator::GenerateTestPki({"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    auto registry = InformerRegistry::Create(
        {{.resource = "pods"}},
        [](const ResourceConfig&)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          auto s = std::make_unique<informer::FakeSource>();
          (void)s->Add("a", "tls-pod");
          return s;
        });
    ASSERT_TRUE(registry.ok());
    registry_ = *std::move(registry);
    ASSERT_TRUE(registry_->Start().ok());
    KubeApiServer::Options o;
    o.listen = "127.0.0.1:0";
    o.registry = registry_.get();
    informer::client::ApiResource pods;
    pods.version = "v1";
    pods.resource = "pods";
    pods.kind = "Pod";
    pods.namespaced = true;
    o.resources = {pods};
    o.tls_cert_file = WriteFile("server.crt", pki_.server_cert_pem);
    o.tls_key_file = WriteFile("server.key", pki_.server_key_pem);
    if (client_ca) o.tls_client_ca_file = WriteFile("ca.crt", pki_.ca_cert_pem);
    auto server = KubeApiServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_TRUE(server_->WaitForSync(absl::Seconds(30)));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (registry_) registry_->Stop();
  }

  absl::StatusOr<informer::ObjectList> ListPods(bool with_client_cert) {
    informer::client::RestConfig rest;
    rest.server = absl::StrCat("https://127.0.0.1:", server_->port());
    rest.ca_data = pki_.ca_cert_pem;
    if (with_client_cert) {
      rest.client_cert_data = pki_.client_cert_pem;
      rest.client_key_data = pki_.client_key_pem;
    }
    auto client = informer::client::KubeClient::Create(rest);
    if (!client.ok()) return client.status();
    auto pods = (*client)->ForResource("pods", "");
    if (!pods.ok()) return pods.status();
    return (*pods)->List({});
  }

  emulator::TestPki pki_;
  std::unique_ptr<InformerRegistry> registry_;
  std::unique_ptr<KubeApiServer> server_;
};

TEST_F(KubeApiTlsTest, ServesHttps) {
  Start(/*client_ca=*/false);
  auto list = ListPods(/*with_client_cert=*/false);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]->name(), "tls-pod");
}

TEST_F(KubeApiTlsTest, ClientCertificatesAreRequiredWithAClientCa) {
  Start(/*client_ca=*/true);
  EXPECT_FALSE(ListPods(/*with_client_cert=*/false).ok());
  auto list = ListPods(/*with_client_cert=*/true);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 1u);
}

TEST(KubeApiTlsConfigTest, BadFilesAreClearErrors) {
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}},
      [](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        return std::make_unique<informer::FakeSource>();
      });
  ASSERT_TRUE(registry.ok());
  KubeApiServer::Options o;
  o.listen = "127.0.0.1:0";
  o.registry = registry->get();
  o.tls_cert_file = WriteFile("garbage.crt", "not a certificate");
  o.tls_key_file = WriteFile("garbage.key", "not a key");
  auto server = KubeApiServer::Create(o);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--kube_api_tls_cert_file"),
            std::string::npos);
  o.tls_key_file = "";
  EXPECT_FALSE(KubeApiServer::Create(o).ok());
  o.tls_cert_file = "";
  o.listen = "nonsense";
  EXPECT_NE(KubeApiServer::Create(o).status().message().find("HOST:PORT"),
            std::string::npos);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

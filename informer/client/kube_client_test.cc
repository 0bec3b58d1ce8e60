#include "informer/client/kube_client.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/client/test_server.h"

namespace informer {
namespace client {
namespace {

std::string Recorded(const std::string& name) {
  std::ifstream in("testdata/kube-apiserver-v1.24/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

absl::optional<std::string> NoEnv(const std::string&) { return absl::nullopt; }

TEST(KubeClientTest, KubeconfigToListOverTls) {
  testing::TestCert cert = testing::MakeSelfSignedCert("apiserver");
  testing::TestServer srv(cert);
  std::string auth;
  auto serve = [&](const std::string& file) {
    return [&, file](const httplib::Request& req, httplib::Response& res) {
      auth = req.get_header_value("Authorization");
      res.set_content(Recorded(file), "application/json");
    };
  };
  srv.server().Get("/api", serve("discovery-api.json"));
  srv.server().Get("/api/v1", serve("discovery-api-v1.json"));
  srv.server().Get("/apis",
                   [](const httplib::Request&, httplib::Response& res) {
                     res.set_content(R"({"kind":"APIGroupList","groups":[]})",
                                     "application/json");
                   });
  srv.server().Get("/api/v1/namespaces/demo/configmaps",
                   serve("list-configmaps-limit2.json"));
  srv.Start();
  std::string path = TempDir() + "/kubeconfig";
  std::string ca_path = TempDir() + "/kc-ca.pem";
  std::ofstream(ca_path) << cert.cert_pem;
  std::ofstream(path) << "current-context: c\n"
                      << "contexts: [{name: c, context: {cluster: k, user: u,"
                      << " namespace: demo}}]\n"
                      << "clusters: [{name: k, cluster: {server: '" << srv.url()
                      << "', certificate-authority: kc-ca.pem}}]\n"
                      << "users: [{name: u, user: {token: abc}}]\n";
  ConnectionFlags flags;
  flags.kubeconfig = path;
  flags.in_cluster.getenv = NoEnv;
  auto rc = LoadRestConfig(flags);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->namespace_, "demo");
  EXPECT_EQ(rc->ca_file, ca_path);
  auto client = KubeClient::Create(*rc);
  ASSERT_TRUE(client.ok()) << client.status();
  auto cms = (*client)->ForResource("cm", rc->namespace_);
  ASSERT_TRUE(cms.ok()) << cms.status();
  auto list = (*cms)->List(ListOptions());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 2u);
  EXPECT_EQ(auth, "Bearer abc");
}

TEST(LoadRestConfigTest, InClusterWhenNoKubeconfigGiven) {
  ConnectionFlags flags;
  flags.env = KubeconfigLoadOptions();
  flags.env.home = TempDir() + "/nohome";
  flags.in_cluster.token_path = TempDir() + "/ic-token";
  flags.in_cluster.ca_path = TempDir() + "/ic-ca";
  flags.in_cluster.namespace_path = TempDir() + "/ic-ns";
  std::ofstream(flags.in_cluster.token_path) << "sa-token";
  flags.in_cluster.getenv =
      [](const std::string& n) -> absl::optional<std::string> {
    if (n == "KUBERNETES_SERVICE_HOST") return std::string("10.96.0.1");
    if (n == "KUBERNETES_SERVICE_PORT") return std::string("443");
    return absl::nullopt;
  };
  flags.overrides.namespace_ = "flag-ns";
  flags.http2 = true;
  flags.exec_timeout = absl::Seconds(5);
  auto rc = LoadRestConfig(flags);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->server, "https://10.96.0.1:443");
  EXPECT_EQ(rc->bearer_token_file, flags.in_cluster.token_path);
  EXPECT_EQ(rc->namespace_, "flag-ns");
  EXPECT_TRUE(rc->http2);
  EXPECT_EQ(rc->exec_timeout, absl::Seconds(5));
}

TEST(LoadRestConfigTest, NothingConfiguredIsNotFound) {
  ConnectionFlags flags;
  flags.env = KubeconfigLoadOptions();
  flags.env.home = TempDir() + "/nohome";
  flags.in_cluster.getenv = NoEnv;
  EXPECT_TRUE(absl::IsNotFound(LoadRestConfig(flags).status()));
}

}  // namespace
}  // namespace client
}  // namespace informer

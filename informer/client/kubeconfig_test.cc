#include "informer/client/kubeconfig.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace informer {
namespace client {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char kFull[] = R"(apiVersion: v1
kind: Config
current-context: dev
preferences: {}
clusters:
- name: dev-cluster
  cluster:
    server: https://10.0.0.1:6443/prefix/
    certificate-authority: certs/ca.pem
    certificate-authority-data: Q0EtUEVN
    insecure-skip-tls-verify: true
    tls-server-name: kubernetes.default
    proxy-url: http://proxy:3128
contexts:
- name: dev
  context:
    cluster: dev-cluster
    user: alice
    namespace: team-a
- name: other
  context:
    cluster: dev-cluster
    user: bob
users:
- name: alice
  user:
    token: tok-123
    tokenFile: /abs/token
    client-certificate: cert.pem
    client-certificate-data: Q0VSVA==
    client-key: key.pem
    client-key-data: S0VZ
    username: admin
    password: secret
- name: bob
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      args: ["get-token", "--x"]
      env:
      - name: FOO
        value: bar
      installHint: install it
      provideClusterInfo: true
      interactiveMode: Never
)";

TEST(ParseKubeconfigTest, ReadsEveryClusterField) {
  auto cfg = ParseKubeconfig(kFull, "/home/u/.kube/config");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const KubeCluster& c = cfg->clusters.at("dev-cluster");
  EXPECT_EQ(c.server, "https://10.0.0.1:6443/prefix/");
  EXPECT_EQ(c.certificate_authority, "/home/u/.kube/certs/ca.pem");
  EXPECT_EQ(c.certificate_authority_data, "CA-PEM");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.tls_server_name, "kubernetes.default");
  EXPECT_EQ(c.proxy_url, "http://proxy:3128");
  EXPECT_EQ(cfg->current_context, "dev");
}

TEST(ParseKubeconfigTest, ReadsEveryUserField) {
  auto cfg = ParseKubeconfig(kFull, "/home/u/.kube/config");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const KubeUser& u = cfg->users.at("alice");
  EXPECT_EQ(u.token, "tok-123");
  EXPECT_EQ(u.token_file, "/abs/token");
  EXPECT_EQ(u.client_certificate, "/home/u/.kube/cert.pem");
  EXPECT_EQ(u.client_certificate_data, "CERT");
  EXPECT_EQ(u.client_key, "/home/u/.kube/key.pem");
  EXPECT_EQ(u.client_key_data, "KEY");
  EXPECT_EQ(u.username, "admin");
  EXPECT_EQ(u.password, "secret");
  EXPECT_FALSE(u.exec.has_value());
}

TEST(ParseKubeconfigTest, ReadsExecPlugin) {
  auto cfg = ParseKubeconfig(kFull, "/home/u/.kube/config");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const KubeUser& u = cfg->users.at("bob");
  ASSERT_TRUE(u.exec.has_value());
  EXPECT_EQ(u.exec->api_version, "client.authentication.k8s.io/v1");
  EXPECT_EQ(u.exec->command, "/home/u/.kube/./bin/plugin");
  EXPECT_EQ(u.exec->args, (std::vector<std::string>{"get-token", "--x"}));
  ASSERT_EQ(u.exec->env.size(), 1u);
  EXPECT_EQ(u.exec->env[0].first, "FOO");
  EXPECT_EQ(u.exec->env[0].second, "bar");
  EXPECT_EQ(u.exec->install_hint, "install it");
  EXPECT_TRUE(u.exec->provide_cluster_info);
  EXPECT_EQ(u.exec->interactive_mode, "Never");
}

TEST(ParseKubeconfigTest, ExecCommandWithoutSlashIsLookedUpOnPath) {
  auto cfg = ParseKubeconfig(R"(users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
)",
                             "/etc/kc");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->users.at("u").exec->command, "aws");
}

TEST(ParseKubeconfigTest, ReadsContexts) {
  auto cfg = ParseKubeconfig(kFull, "/k");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->contexts.at("dev").cluster, "dev-cluster");
  EXPECT_EQ(cfg->contexts.at("dev").user, "alice");
  EXPECT_EQ(cfg->contexts.at("dev").namespace_, "team-a");
  EXPECT_EQ(cfg->contexts.at("other").namespace_, "");
}

TEST(ParseKubeconfigTest, EmptyFileIsAnEmptyConfig) {
  auto cfg = ParseKubeconfig("", "/k");
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE(cfg->clusters.empty());
}

struct BadCase {
  const char* yaml;
  const char* want;  // substring of the error
};

TEST(ParseKubeconfigTest, BadFilesNameFileLineAndField) {
  const BadCase cases[] = {
      {"clusters: [\n", "/bad:"},
      {"clusters:\n- name: c\n  cluster:\n    server: [1, 2]\n",
       "/bad:4:13: clusters[0].cluster.server: expected a string"},
      {"clusters:\n- name: c\n  cluster:\n    certificate-authority-data: "
       "'!!notbase64'\n",
       "/bad:4:33: clusters[0].cluster.certificate-authority-data: not "
       "valid base64"},
      {"clusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: "
       "maybe\n",
       "clusters[0].cluster.insecure-skip-tls-verify: expected true or "
       "false"},
      {"clusters: {}\n", "/bad:1:11: clusters: expected a list"},
      {"users:\n- user:\n    token: x\n", "users[0].name: missing"},
      {"contexts:\n- name: c\n  context: 5\n",
       "contexts[0].context: expected a mapping"},
      {"users:\n- name: u\n  user:\n    exec:\n      command: x\n",
       "users[0].user.exec.apiVersion: unsupported exec plugin"},
      {"users:\n- name: u\n  user:\n    exec:\n      apiVersion: "
       "client.authentication.k8s.io/v1\n",
       "users[0].user.exec.command: missing"},
      {"users:\n- name: u\n  user:\n    exec:\n      apiVersion: "
       "client.authentication.k8s.io/v1\n      command: c\n      env:\n      "
       "- value: x\n",
       "users[0].user.exec.env[0].name: missing"},
      {"kind: Pod\n", "kind: expected \"Config\""},
      {"- a\n- b\n", "(top level): expected a mapping"},
      {"a: b: c\n", "/bad:1:5: invalid YAML"},
  };
  for (const BadCase& c : cases) {
    auto cfg = ParseKubeconfig(c.yaml, "/bad");
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(c.want))
        << c.yaml;
  }
}

TEST(ParseKubeconfigTest, DeepNestingIsRejectedBeforeYamlCpp) {
  std::string deep(100000, '[');
  auto cfg = ParseKubeconfig(deep, "/deep");
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("nested"));
}

TEST(LoadKubeconfigTest, MissingExplicitFileIsNotFound) {
  KubeconfigLoadOptions opts;
  opts.explicit_path = TempDir() + "/does-not-exist";
  EXPECT_TRUE(absl::IsNotFound(LoadKubeconfig(opts).status()));
}

TEST(LoadKubeconfigTest, KubeconfigEnvMergesFirstWins) {
  std::string a = WriteFile("a.yaml", R"(clusters:
- name: shared
  cluster: {server: https://a}
users:
- name: ua
  user: {token: from-a}
contexts:
- name: ctx
  context: {cluster: shared, user: ua}
)");
  std::string b = WriteFile("b.yaml", R"(current-context: ctx
clusters:
- name: shared
  cluster: {server: https://b}
- name: only-b
  cluster: {server: https://only-b}
users:
- name: ua
  user: {token: from-b}
contexts:
- name: ctx
  context: {cluster: only-b, user: ua}
)");
  std::string c = WriteFile("c.yaml", "current-context: from-c\n");
  KubeconfigLoadOptions opts;
  opts.kubeconfig_env = a + "::" + TempDir() + "/missing.yaml:" + b + ":" + c;
  auto cfg = LoadKubeconfig(opts);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->clusters.at("shared").server, "https://a");
  EXPECT_EQ(cfg->clusters.at("only-b").server, "https://only-b");
  EXPECT_EQ(cfg->users.at("ua").token, "from-a");
  EXPECT_EQ(cfg->contexts.at("ctx").cluster, "shared");
  EXPECT_EQ(cfg->current_context, "ctx");  // b is the first to set it
  auto rc = RestConfigFromKubeconfig(*cfg);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->server, "https://a");
  EXPECT_EQ(rc->bearer_token, "from-a");
}

TEST(LoadKubeconfigTest, BrokenFileInKubeconfigEnvIsAnError) {
  std::string good = WriteFile("good.yaml", "current-context: x\n");
  std::string bad = WriteFile("broken.yaml", "clusters: [\n");
  KubeconfigLoadOptions opts;
  opts.kubeconfig_env = good + ":" + bad;
  auto cfg = LoadKubeconfig(opts);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(bad));
}

TEST(LoadKubeconfigTest, FallsBackToHomeKubeConfig) {
  std::string home = TempDir() + "/home";
  ASSERT_EQ(system(("mkdir -p " + home + "/.kube").c_str()), 0);
  std::ofstream(home + "/.kube/config") << "current-context: home-ctx\n";
  KubeconfigLoadOptions opts;
  opts.home = home;
  auto cfg = LoadKubeconfig(opts);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->current_context, "home-ctx");
}

TEST(RestConfigFromKubeconfigTest, CurrentContextWithEveryField) {
  auto cfg = ParseKubeconfig(kFull, "/home/u/.kube/config");
  ASSERT_TRUE(cfg.ok());
  auto rc = RestConfigFromKubeconfig(*cfg);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->server, "https://10.0.0.1:6443/prefix");
  EXPECT_EQ(rc->ca_file, "/home/u/.kube/certs/ca.pem");
  EXPECT_EQ(rc->ca_data, "CA-PEM");
  EXPECT_TRUE(rc->insecure_skip_tls_verify);
  EXPECT_EQ(rc->tls_server_name, "kubernetes.default");
  EXPECT_EQ(rc->proxy_url, "http://proxy:3128");
  EXPECT_EQ(rc->bearer_token, "tok-123");
  EXPECT_EQ(rc->bearer_token_file, "/abs/token");
  EXPECT_EQ(rc->client_cert_data, "CERT");
  EXPECT_EQ(rc->client_key_data, "KEY");
  EXPECT_EQ(rc->username, "admin");
  EXPECT_EQ(rc->password, "secret");
  EXPECT_EQ(rc->namespace_, "team-a");
}

TEST(RestConfigFromKubeconfigTest, OverridesWin) {
  auto cfg = ParseKubeconfig(kFull, "/k");
  ASSERT_TRUE(cfg.ok());
  ConfigOverrides o;
  o.context = "other";
  o.server = "https://override:1";
  o.token = "flag-token";
  o.namespace_ = "ns-flag";
  o.insecure_skip_tls_verify = false;
  auto rc = RestConfigFromKubeconfig(*cfg, o);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->server, "https://override:1");
  EXPECT_EQ(rc->bearer_token, "flag-token");
  EXPECT_FALSE(rc->insecure_skip_tls_verify);
  EXPECT_EQ(rc->namespace_, "ns-flag");
  ASSERT_TRUE(rc->exec.has_value());
}

TEST(RestConfigFromKubeconfigTest, DefaultNamespace) {
  auto cfg = ParseKubeconfig(kFull, "/k");
  ASSERT_TRUE(cfg.ok());
  ConfigOverrides o;
  o.context = "other";
  auto rc = RestConfigFromKubeconfig(*cfg, o);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->namespace_, "default");
}

TEST(RestConfigFromKubeconfigTest, DanglingReferencesAreClearErrors) {
  auto cfg = ParseKubeconfig(R"(current-context: a
contexts:
- name: a
  context: {cluster: nope, user: u}
- name: b
  context: {cluster: c, user: nobody}
clusters:
- name: c
  cluster: {}
- name: c2
  cluster: {server: "https://x"}
users:
- name: gcp
  user:
    auth-provider: {name: gcp}
)",
                             "/k");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto missing_cluster = RestConfigFromKubeconfig(*cfg);
  EXPECT_THAT(std::string(missing_cluster.status().message()),
              HasSubstr("names cluster \"nope\""));
  ConfigOverrides o;
  o.context = "b";
  EXPECT_THAT(std::string(RestConfigFromKubeconfig(*cfg, o).status().message()),
              HasSubstr("has no server"));
  o.context = "zzz";
  EXPECT_THAT(std::string(RestConfigFromKubeconfig(*cfg, o).status().message()),
              HasSubstr("context \"zzz\" not found"));
  Kubeconfig empty;
  EXPECT_THAT(std::string(RestConfigFromKubeconfig(empty).status().message()),
              HasSubstr("no current-context"));
}

TEST(RestConfigFromKubeconfigTest, AuthProviderIsUnimplemented) {
  auto cfg = ParseKubeconfig(R"(current-context: a
contexts:
- name: a
  context: {cluster: c, user: gcp}
clusters:
- name: c
  cluster: {server: "https://x"}
users:
- name: gcp
  user:
    auth-provider: {name: gcp}
)",
                             "/k");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto rc = RestConfigFromKubeconfig(*cfg);
  EXPECT_EQ(rc.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(InClusterConfigTest, ReadsEnvTokenCaAndNamespace) {
  InClusterOptions o;
  o.token_path = WriteFile("sa-token", "token-1\n");
  o.ca_path = WriteFile("sa-ca.crt", "PEM");
  o.namespace_path = WriteFile("sa-namespace", "kube-system\n");
  o.getenv = [](const std::string& n) -> absl::optional<std::string> {
    if (n == "KUBERNETES_SERVICE_HOST") return std::string("fd00::1");
    if (n == "KUBERNETES_SERVICE_PORT") return std::string("443");
    return absl::nullopt;
  };
  auto rc = InClusterConfig(o);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->server, "https://[fd00::1]:443");
  EXPECT_EQ(rc->bearer_token, "token-1");
  EXPECT_EQ(rc->bearer_token_file, o.token_path);
  EXPECT_EQ(rc->ca_file, o.ca_path);
  EXPECT_EQ(rc->namespace_, "kube-system");
}

TEST(InClusterConfigTest, OutsideAClusterIsFailedPrecondition) {
  InClusterOptions o;
  o.getenv = [](const std::string&) -> absl::optional<std::string> {
    return absl::nullopt;
  };
  EXPECT_EQ(InClusterConfig(o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.getenv = [](const std::string& n) -> absl::optional<std::string> {
    return std::string("x");
  };
  o.token_path = TempDir() + "/no-token";
  EXPECT_EQ(InClusterConfig(o).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace client
}  // namespace informer

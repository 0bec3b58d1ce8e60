#include "server/kubeapi/kube_api_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

namespace server {
namespace kubeapi {
namespace {

class KubeApiFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_kube_api_listen, "");
    absl::SetFlag(&FLAGS_kube_api_tls_cert_file, "");
    absl::SetFlag(&FLAGS_kube_api_tls_key_file, "");
    absl::SetFlag(&FLAGS_kube_api_tls_client_ca_file, "");
    absl::SetFlag(&FLAGS_kube_api_history, 10000);
  }
};

TEST_F(KubeApiFlagsTest, OffByDefault) {
  EXPECT_FALSE(KubeApiEnabled());
  auto s = StartKubeApiFromFlags(nullptr, nullptr, nullptr, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, nullptr);
}

TEST_F(KubeApiFlagsTest, ListenAndHistory) {
  absl::SetFlag(&FLAGS_kube_api_listen, "127.0.0.1:8001");
  absl::SetFlag(&FLAGS_kube_api_history, 50);
  EXPECT_TRUE(KubeApiEnabled());
  auto o = KubeApiOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "127.0.0.1:8001");
  EXPECT_EQ(o->history_limit, 50u);
  EXPECT_TRUE(o->tls_cert_file.empty());
}

TEST_F(KubeApiFlagsTest, BadValuesNameTheFlag) {
  for (const char* bad : {"8001", ":8001", "127.0.0.1:x", "127.0.0.1:70000"}) {
    absl::SetFlag(&FLAGS_kube_api_listen, bad);
    auto o = KubeApiOptionsFromFlags();
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("--kube_api_listen"),
              std::string::npos);
  }
  absl::SetFlag(&FLAGS_kube_api_listen, "[::1]:8001");
  EXPECT_TRUE(KubeApiOptionsFromFlags().ok());
  absl::SetFlag(&FLAGS_kube_api_history, 0);
  EXPECT_NE(
      KubeApiOptionsFromFlags().status().message().find("--kube_api_history"),
      std::string::npos);
}

TEST_F(KubeApiFlagsTest, TlsFlagsGoTogetherAndMustBeReadable) {
  absl::SetFlag(&FLAGS_kube_api_listen, "0.0.0.0:8443");
  absl::SetFlag(&FLAGS_kube_api_tls_cert_file, "/nonexistent/cert.pem");
  EXPECT_NE(KubeApiOptionsFromFlags().status().message().find("together"),
            std::string::npos);
  absl::SetFlag(&FLAGS_kube_api_tls_key_file, "/nonexistent/key.pem");
  EXPECT_NE(KubeApiOptionsFromFlags().status().message().find(
                "--kube_api_tls_cert_file=/nonexistent/cert.pem"),
            std::string::npos);
  absl::SetFlag(&FLAGS_kube_api_tls_cert_file, "");
  absl::SetFlag(&FLAGS_kube_api_tls_key_file, "");
  absl::SetFlag(&FLAGS_kube_api_tls_client_ca_file, "/etc/hostname");
  EXPECT_NE(KubeApiOptionsFromFlags().status().message().find("needs"),
            std::string::npos);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

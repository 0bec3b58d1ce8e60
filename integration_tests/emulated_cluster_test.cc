#include "integration_tests/emulated_cluster.h"

#include <httplib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace integration {
namespace {

std::string Dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

TEST(EmulatedClusterTest, TheEmulatorItsKubeconfigAndTheSidecar) {
  EmulatedClusterOptions options;
  options.emulator_flags = {"--seed_configmaps=3"};
  options.dir = Dir("plain");
  absl::StatusOr<EmulatedCluster> c = StartEmulatedCluster(options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(access(c->sidecar_bin.c_str(), X_OK), 0) << c->sidecar_bin;
  std::ifstream in(c->kubeconfig);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), c->emulator->url())) << text.str();
  httplib::Client cli("127.0.0.1", c->emulator->port());
  httplib::Result seeded = cli.Get("/api/v1/configmaps");
  ASSERT_TRUE(seeded);
  EXPECT_EQ(seeded->status, 200);
  httplib::Result ns = cli.Get("/api/v1/namespaces/kube-system");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->status, 404);
}

TEST(EmulatedClusterTest, KubeSystemWhenAsked) {
  EmulatedClusterOptions options;
  options.dir = Dir("kube-system");
  options.kube_system = true;
  absl::StatusOr<EmulatedCluster> c = StartEmulatedCluster(options);
  ASSERT_TRUE(c.ok()) << c.status();
  httplib::Client cli("127.0.0.1", c->emulator->port());
  httplib::Result ns = cli.Get("/api/v1/namespaces/kube-system");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->status, 200) << ns->body;
}

}  // namespace
}  // namespace integration

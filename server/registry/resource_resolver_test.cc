#include "server/registry/resource_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "emulator/emulator.h"
#include "informer/client/kube_client.h"
#include "informer/util/clock.h"

namespace server {
namespace {

using ::testing::HasSubstr;

class ResourceResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulator_ =
        std::make_unique<emulator::Emulator>(emulator::EmulatorOptions{});
    ASSERT_TRUE(emulator_->Start().ok());
    informer::client::RestConfig rest;
    rest.server = emulator_->url();
    auto kube = informer::client::KubeClient::Create(rest);
    ASSERT_TRUE(kube.ok()) << kube.status();
    kube_ = *std::move(kube);
  }
  void TearDown() override {
    kube_.reset();
    emulator_->Stop();
  }

  std::unique_ptr<emulator::Emulator> emulator_;
  std::unique_ptr<informer::client::KubeClient> kube_;
};

TEST_F(ResourceResolverTest, EveryNameResolvesToTheCanonicalOne) {
  informer::FakeClock clock;
  DiscoveryResolver resolver(kube_->discovery(), &clock);
  const std::pair<const char*, const char*> cases[] = {
      {"pods", "pods"},
      {"pod", "pods"},
      {"po", "pods"},
      {"Pod", "pods"},
      {"cm", "configmaps"},
      {"configmap", "configmaps"},
      {"deploy", "deployments.apps"},
      {"deployment", "deployments.apps"},
      {"Deployment", "deployments.apps"},
      {"deployments.apps", "deployments.apps"},
  };
  for (const auto& [name, canonical] : cases) {
    absl::StatusOr<std::string> got = resolver.Canonical(name);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    EXPECT_EQ(*got, canonical) << name;
  }
  // One discovery load served them all.
  EXPECT_EQ(kube_->discovery()->refreshes(), 1);
}

TEST_F(ResourceResolverTest,
       UnknownNamesRefreshDiscoveryAtMostOncePerInterval) {
  informer::FakeClock clock;
  DiscoveryResolver resolver(kube_->discovery(), &clock, absl::Seconds(10));
  ASSERT_TRUE(resolver.Canonical("pods").ok());
  const int loaded = kube_->discovery()->refreshes();
  // Discovery was loaded just now: a miss does not reload it.
  absl::StatusOr<std::string> nope = resolver.Canonical("nope");
  ASSERT_EQ(nope.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(nope.status().message()), HasSubstr("nope"));
  EXPECT_EQ(kube_->discovery()->refreshes(), loaded);
  // Later, a miss refreshes once (a CRD may have been installed)...
  clock.Advance(absl::Seconds(11));
  EXPECT_FALSE(resolver.Canonical("nope").ok());
  EXPECT_EQ(kube_->discovery()->refreshes(), loaded + 1);
  // ...but a client asking again and again causes no discovery storm.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(resolver.Canonical("nope").status().code(),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(kube_->discovery()->refreshes(), loaded + 1);
  clock.Advance(absl::Seconds(11));
  EXPECT_FALSE(resolver.Canonical("nope").ok());
  EXPECT_EQ(kube_->discovery()->refreshes(), loaded + 2);
}

TEST(StaticResolverTest, ResolvesAgainstAFixedList) {
  informer::client::ApiResource pods;
  pods.version = "v1";
  pods.resource = "pods";
  pods.singular = "pod";
  pods.kind = "Pod";
  pods.short_names = {"po"};
  informer::client::ApiResource jobs;
  jobs.group = "batch";
  jobs.version = "v1";
  jobs.resource = "jobs";
  jobs.singular = "job";
  jobs.kind = "Job";
  StaticResolver resolver({pods, jobs});
  EXPECT_EQ(*resolver.Canonical("po"), "pods");
  EXPECT_EQ(*resolver.Canonical("jobs.batch"), "jobs.batch");
  EXPECT_EQ(*resolver.Canonical("Job"), "jobs.batch");
  EXPECT_EQ(resolver.Canonical("cronjobs").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CanonicalResourceName(pods), "pods");
  EXPECT_EQ(CanonicalResourceName(jobs), "jobs.batch");
}

}  // namespace
}  // namespace server

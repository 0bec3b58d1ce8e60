#include "emulator/seed.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace emulator {
namespace {

class SeedTest : public ::testing::Test {
 protected:
  SeedTest() : registry_(ResourceRegistry::WithBuiltins()) {
    ObjectStore::Options o;
    o.clock = &clock_;
    store_ = std::make_unique<ObjectStore>(o);
  }
  const ResourceInfo& R(absl::string_view name) {
    return *registry_->FindByName(name);
  }
  informer::FakeClock clock_;
  std::unique_ptr<ResourceRegistry> registry_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(SeedTest, PodsAreRealisticallySized) {
  ASSERT_TRUE(SeedPods(*store_, *registry_, 50).ok());
  EXPECT_EQ(store_->Count(R("pods")), 50u);
  EXPECT_EQ(store_->Count(R("namespaces")), 1u);
  auto pod = store_->Get(R("pods"), "benchpods", "pod-000007");
  ASSERT_TRUE(pod.ok());
  EXPECT_GT((*pod)->body.size(), 5000u);
  EXPECT_LT((*pod)->body.size(), 8000u);
  EXPECT_TRUE(absl::StrContains((*pod)->body, "\"managedFields\""));
  EXPECT_EQ(*LookupPair((*pod)->fields, "spec.nodeName"), "node-007");
  EXPECT_EQ(*LookupPair((*pod)->labels, "app"), "app-7");
}

TEST_F(SeedTest, SpreadPodsAreOwnedByReplicaSetsAcrossNamespacesAndNodes) {
  PodSpread spread;
  spread.namespaces = 4;
  spread.nodes = 7;
  ASSERT_TRUE(SeedSpreadPods(*store_, *registry_, 40, spread).ok());
  EXPECT_EQ(store_->Count(R("pods")), 40u);
  EXPECT_EQ(store_->Count(R("namespaces")), 4u);
  ListRequest all;
  absl::StatusOr<ListResult> pods = store_->List(R("pods"), all);
  ASSERT_TRUE(pods.ok());
  std::map<std::string, int> per_ns;
  std::set<std::string> nodes, names;
  for (const auto& pod : pods->items) {
    ++per_ns[pod->ns];
    nodes.insert(std::string(*LookupPair(pod->fields, "spec.nodeName")));
    names.insert(pod->name);
    const std::string hash(*LookupPair(pod->labels, "pod-template-hash"));
    EXPECT_EQ(hash.size(), 10u);
    const std::string app(*LookupPair(pod->labels, "app"));
    // <app>-<template hash>-<5 letters>, as a ReplicaSet names its Pods.
    EXPECT_TRUE(absl::StartsWith(pod->name, absl::StrCat(app, "-", hash, "-")))
        << pod->name;
    EXPECT_EQ(pod->name.size(), app.size() + 1 + 10 + 1 + 5);
    EXPECT_TRUE(absl::StrContains(
        pod->body, absl::StrCat("\"generateName\":\"", app, "-", hash)));
    EXPECT_TRUE(absl::StrContains(pod->body, "\"kind\":\"ReplicaSet\""));
    EXPECT_TRUE(absl::StrContains(pod->body, "\"f:ownerReferences\""));
    EXPECT_GT(pod->body.size(), 5000u);
    EXPECT_LT(pod->body.size(), 8000u);
  }
  EXPECT_EQ(per_ns.size(), 4u);
  for (const auto& [ns, n] : per_ns) {
    EXPECT_TRUE(absl::StartsWith(ns, "tenant-00")) << ns;
    EXPECT_EQ(n, 10) << ns;
  }
  EXPECT_EQ(nodes.size(), 7u);
  EXPECT_TRUE(nodes.count("node-0006"));
  EXPECT_EQ(names.size(), 40u) << "names are unique";
  // Deterministic: a second store seeded alike holds the same names.
  ObjectStore::Options o;
  o.clock = &clock_;
  ObjectStore again(o);
  ASSERT_TRUE(SeedSpreadPods(again, *registry_, 40, spread).ok());
  absl::StatusOr<ListResult> pods2 = again.List(R("pods"), all);
  ASSERT_TRUE(pods2.ok());
  std::set<std::string> names2;
  for (const auto& pod : pods2->items) names2.insert(pod->name);
  EXPECT_EQ(names, names2);
}

TEST_F(SeedTest, SpreadPodsRejectAnEmptySpread) {
  PodSpread spread;
  spread.nodes = 0;
  EXPECT_EQ(SeedSpreadPods(*store_, *registry_, 1, spread).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SeedTest, ConfigMapsHaveAKibOfDataAndAboutOneAndAHalfKbOfJson) {
  ASSERT_TRUE(SeedConfigMaps(*store_, *registry_, 20).ok());
  EXPECT_EQ(store_->Count(R("configmaps")), 20u);
  EXPECT_EQ(store_->Count(R("namespaces")), 1u);
  ListRequest all;
  absl::StatusOr<ListResult> cms = store_->List(R("configmaps"), all);
  ASSERT_TRUE(cms.ok());
  ASSERT_EQ(cms->items.size(), 20u);
  std::set<std::string> payloads;
  for (const auto& cm : cms->items) {
    EXPECT_EQ(cm->ns, "benchcms");
    EXPECT_GT(cm->body.size(), 1350u) << cm->body;
    EXPECT_LT(cm->body.size(), 1650u) << cm->body;
    EXPECT_TRUE(absl::StrContains(cm->body, "\"managedFields\""));
    const size_t at = cm->body.find("\"payload\":\"");
    ASSERT_NE(at, std::string::npos);
    payloads.insert(cm->body.substr(at + 11, 1024));
  }
  EXPECT_EQ(payloads.size(), 20u) << "each ConfigMap has its own data";
  EXPECT_EQ(cms->items[3]->name, "cm-000003");
  EXPECT_EQ(*LookupPair(cms->items[3]->labels, "app"), "app-3");
}

TEST_F(SeedTest, DemoHasOwnedPodsOnNodes) {
  ASSERT_TRUE(SeedDemo(*store_, *registry_).ok());
  EXPECT_EQ(store_->Count(R("nodes")), 3u);
  EXPECT_EQ(store_->Count(R("deployments")), 4u);
  EXPECT_EQ(store_->Count(R("replicasets")), 4u);
  EXPECT_EQ(store_->Count(R("pods")), 8u);
  ListRequest all;
  absl::StatusOr<ListResult> pods = store_->List(R("pods"), all);
  ASSERT_TRUE(pods.ok());
  for (const auto& pod : pods->items) {
    EXPECT_TRUE(absl::StrContains(pod->body, "\"kind\":\"ReplicaSet\""));
    EXPECT_TRUE(
        absl::StartsWith(*LookupPair(pod->fields, "spec.nodeName"), "node-"));
  }
  // Seeding twice is harmless.
  EXPECT_TRUE(SeedDemo(*store_, *registry_).ok());
  EXPECT_EQ(store_->Count(R("pods")), 8u);
}

TEST_F(SeedTest, ChurnChangesObjectsEveryInterval) {
  ASSERT_TRUE(SeedDemo(*store_, *registry_).ok());
  int64_t rv = store_->CurrentRv();
  Churner churner(store_.get(), registry_.get(), &clock_, absl::Seconds(1));
  churner.Start();
  clock_.WaitForWaiters(1);
  EXPECT_EQ(churner.ticks(), 0);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(churner.AwaitTicks(1, absl::Seconds(30)));
  EXPECT_GT(store_->CurrentRv(), rv);
  EXPECT_EQ(store_->Count(R("pods")), 8u) << "a pod replaced, not added";
  EXPECT_EQ(store_->Count(R("events")), 1u);
  auto cm = store_->Get(R("configmaps"), "demo", "web-config");
  ASSERT_TRUE(cm.ok());
  EXPECT_TRUE(absl::StrContains((*cm)->body, "\"tick\":\"1\""));
  churner.Stop();
}

}  // namespace
}  // namespace emulator

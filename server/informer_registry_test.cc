#include "server/informer_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "informer/fake_source.h"

namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Builds FakeSources and remembers them so tests can mutate them.
class Sources {
 public:
  ListerWatcherFactory Factory() {
    return [this](const ResourceConfig& config)
               -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      if (config.resource == "broken") {
        return absl::UnavailableError("discovery failed");
      }
      auto source = std::make_unique<informer::FakeSource>();
      by_resource_[config.resource] = source.get();
      return source;
    };
  }
  informer::FakeSource* Get(const std::string& r) { return by_resource_[r]; }

 private:
  std::map<std::string, informer::FakeSource*> by_resource_;
};

TEST(InformerRegistryTest, FindReturnsTheConfiguredInformer) {
  Sources sources;
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}, {.resource = "configmaps"}}, sources.Factory());
  ASSERT_TRUE(registry.ok()) << registry.status();
  absl::StatusOr<InformerEntry*> pods = (*registry)->Find("pods");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)->config.resource, "pods");
  EXPECT_EQ((*pods)->informer->name(), "pods");
  EXPECT_THAT((*registry)->ResourceNames(), ElementsAre("configmaps", "pods"));
}

TEST(InformerRegistryTest, FindUnknownResourceNamesTheAvailableOnes) {
  Sources sources;
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}, {.resource = "configmaps"}}, sources.Factory());
  ASSERT_TRUE(registry.ok());
  absl::StatusOr<InformerEntry*> found = (*registry)->Find("secrets");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("unknown resource \"secrets\"; available: "
                        "configmaps, pods"));
}

TEST(InformerRegistryTest, RejectsDuplicateAndEmptyNames) {
  Sources sources;
  auto dup = InformerRegistry::Create(
      {{.resource = "pods"}, {.resource = "pods"}}, sources.Factory());
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("twice"));
  auto empty = InformerRegistry::Create({{.resource = ""}}, sources.Factory());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InformerRegistryTest, FactoryErrorNamesTheResource) {
  Sources sources;
  auto registry =
      InformerRegistry::Create({{.resource = "broken"}}, sources.Factory());
  ASSERT_FALSE(registry.ok());
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(registry.status().message()),
              HasSubstr("resource \"broken\": discovery failed"));
}

TEST(InformerRegistryTest, StartedInformersSyncAndServeExtraIndexes) {
  Sources sources;
  auto registry =
      InformerRegistry::Create({{.resource = "pods",
                                 .label_indexes = {"app"},
                                 .field_indexes = {"spec.nodeName"}},
                                {.resource = "configmaps"}},
                               sources.Factory());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(sources.Get("pods")->Add("ns", "a", {{"app", "web"}}, "n1").ok());
  ASSERT_TRUE(sources.Get("pods")->Add("ns", "b", {{"app", "api"}}, "n1").ok());
  EXPECT_FALSE((*registry)->AllSynced());
  ASSERT_TRUE((*registry)->Start().ok());
  for (const auto& entry : (*registry)->entries()) {
    ASSERT_TRUE(entry->informer->WaitForSync(absl::Seconds(30)));
  }
  EXPECT_TRUE((*registry)->AllSynced());

  InformerEntry* pods = *(*registry)->Find("pods");
  const informer::Indexer& indexer = pods->informer->GetIndexer();
  EXPECT_EQ(indexer.Size(), 2u);
  auto web = indexer.ByIndex(informer::LabelIndexName("app"), "web");
  ASSERT_TRUE(web.ok()) << web.status();
  ASSERT_EQ(web->size(), 1u);
  EXPECT_EQ((*web)[0]->name(), "a");
  auto on_n1 = indexer.ByIndex(informer::FieldIndexName("spec.nodeName"), "n1");
  ASSERT_TRUE(on_n1.ok()) << on_n1.status();
  EXPECT_EQ(on_n1->size(), 2u);
  EXPECT_TRUE(indexer.ByIndex(informer::kOwnerUidIndex, "x").ok());
  EXPECT_TRUE(indexer.ByIndex(informer::kNamespaceIndex, "ns").ok());
  (*registry)->Stop();
}

}  // namespace
}  // namespace server

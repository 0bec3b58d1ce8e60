#include "server/registry/informer_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "server/registry/resource_resolver.h"

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
      absl::MutexLock lock(&mu_);
      by_resource_[config.resource] = source.get();
      ++built_;
      return source;
    };
  }
  informer::FakeSource* Get(const std::string& r) {
    absl::MutexLock lock(&mu_);
    return by_resource_[r];
  }
  int built() {
    absl::MutexLock lock(&mu_);
    return built_;
  }

 private:
  absl::Mutex mu_;
  // The latest source of each resource (a lazy one is rebuilt on restart).
  std::map<std::string, informer::FakeSource*> by_resource_
      ABSL_GUARDED_BY(mu_);
  int built_ ABSL_GUARDED_BY(mu_) = 0;
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

TEST(InformerRegistryTest, ObserversHearOfEachRelistInTheCache) {
  Sources sources;
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}, {.resource = "configmaps"}}, sources.Factory());
  ASSERT_TRUE(registry.ok());
  absl::Mutex mu;
  std::vector<std::string> relisted;
  const int id =
      (*registry)->AddObserver({.on_relist_applied = [&](InformerEntry* e) {
        absl::MutexLock lock(&mu);
        relisted.push_back(e->config.resource);
      }});
  ASSERT_TRUE(sources.Get("pods")->Add("ns", "a").ok());
  ASSERT_TRUE((*registry)->Start().ok());
  for (const auto& entry : (*registry)->entries()) {
    ASSERT_TRUE(entry->informer->WaitForSync(absl::Seconds(30)));
  }
  informer::FakeSource* pods = sources.Get("pods");
  pods->WaitForWatches(1);
  // A cut watch whose resourceVersion is gone meanwhile: a relist.
  pods->BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(pods->Add("ns", "b").ok());
  pods->CompactHistory();
  auto heard = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !relisted.empty();
  };
  {
    absl::MutexLock lock(&mu);
    // The reflector's back-off before the re-watch and the relist.
    ASSERT_TRUE(
        mu.AwaitWithTimeout(absl::Condition(&heard), absl::Seconds(60)));
    EXPECT_THAT(relisted, ElementsAre("pods"));
  }
  InformerEntry* entry = *(*registry)->Find("pods");
  EXPECT_EQ(entry->informer->GetIndexer().Size(), 2u);
  EXPECT_EQ(entry->informer->GetReflectorCounters().relists, 1);
  (*registry)->RemoveObserver(id);
  (*registry)->Stop();
  absl::MutexLock lock(&mu);
  EXPECT_THAT(relisted, ElementsAre("pods"));
}

informer::client::ApiResource Api(std::string group, std::string plural,
                                  std::string singular, std::string kind,
                                  std::vector<std::string> short_names) {
  informer::client::ApiResource r;
  r.group = std::move(group);
  r.version = "v1";
  r.resource = std::move(plural);
  r.singular = std::move(singular);
  r.kind = std::move(kind);
  r.namespaced = true;
  r.short_names = std::move(short_names);
  r.verbs = {"list", "watch"};
  return r;
}

StaticResolver TestResolver() {
  return StaticResolver(
      {Api("", "pods", "pod", "Pod", {"po"}),
       Api("", "secrets", "secret", "Secret", {}),
       Api("", "configmaps", "configmap", "ConfigMap", {"cm"}),
       Api("apps", "deployments", "deployment", "Deployment", {"deploy"})});
}

TEST(InformerRegistryTest, EveryNameOfAResourceReachesOneInformer) {
  Sources sources;
  StaticResolver resolver = TestResolver();
  InformerRegistry::Options options;
  options.resolver = &resolver;
  auto registry = InformerRegistry::Create(
      {{.resource = "po"}, {.resource = "deploy"}}, sources.Factory(), options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  // Configured names are stored canonical.
  EXPECT_THAT((*registry)->ResourceNames(),
              ElementsAre("deployments.apps", "pods"));
  InformerEntry* pods = *(*registry)->Find("pods");
  for (const char* name : {"po", "pod", "Pod", "pods"}) {
    absl::StatusOr<InformerRef> found = (*registry)->Find(name);
    ASSERT_TRUE(found.ok()) << name << ": " << found.status();
    EXPECT_EQ(found->get(), pods) << name;
  }
  InformerEntry* deploy = *(*registry)->Find("deployments.apps");
  for (const char* name : {"deploy", "deployment", "Deployment", "deployments",
                           "deployments.apps"}) {
    absl::StatusOr<InformerRef> found = (*registry)->Find(name);
    ASSERT_TRUE(found.ok()) << name << ": " << found.status();
    EXPECT_EQ(found->get(), deploy) << name;
  }
  EXPECT_EQ(sources.built(), 2);

  // Known to the server but not configured, lazy mode off.
  absl::StatusOr<InformerRef> secrets = (*registry)->Find("secrets");
  ASSERT_EQ(secrets.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(secrets.status().message(),
            "unknown resource \"secrets\"; available: deployments.apps, "
            "pods; lazy mode is off: only configured resources are served");
  // Unknown to the server.
  absl::StatusOr<InformerRef> bogus = (*registry)->Find("bogus");
  ASSERT_EQ(bogus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(bogus.status().message()),
              HasSubstr("unknown resource \"bogus\" ("));
  EXPECT_THAT(std::string(bogus.status().message()),
              HasSubstr("available: deployments.apps, pods; lazy mode is "
                        "off"));
}

TEST(InformerRegistryTest, AliasesOfOneResourceAreDuplicates) {
  Sources sources;
  StaticResolver resolver = TestResolver();
  InformerRegistry::Options options;
  options.resolver = &resolver;
  auto dup =
      InformerRegistry::Create({{.resource = "po", .origin = "cfg.yaml:2:3"},
                                {.resource = "pods", .origin = "cfg.yaml:4:3"}},
                               sources.Factory(), options);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(),
            "resource \"pods\" is listed twice (cfg.yaml:2:3) (cfg.yaml:4:3)");
  auto unknown =
      InformerRegistry::Create({{.resource = "nope", .origin = "cfg.yaml:7:3"}},
                               sources.Factory(), options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("resource \"nope\" (cfg.yaml:7:3): "));
}

class LazyRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.clock = &clock_;
    options_.resolver = &resolver_;
    options_.allow_unlisted = true;
    options_.lazy_namespace = "team";
    options_.lazy_idle_timeout = absl::Minutes(1);  // checks every 15s
    auto registry = InformerRegistry::Create({{.resource = "pods"}},
                                             sources_.Factory(), options_);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    observer_ =
        registry_->AddObserver({.on_lazy_synced =
                                    [this](InformerEntry* e) {
                                      absl::MutexLock lock(&mu_);
                                      synced_.push_back(e->config.resource);
                                    },
                                .on_retired =
                                    [this](InformerEntry* e) {
                                      absl::MutexLock lock(&mu_);
                                      retired_.push_back(e->config.resource);
                                    }});
    ASSERT_TRUE(registry_->Start().ok());
  }
  void TearDown() override {
    registry_->RemoveObserver(observer_);
    registry_->Stop();
  }

  // Advances fake time and waits until the idle thread checked at least
  // once at the new time.
  void AdvanceAndCheck(absl::Duration d) {
    clock_.Advance(d);
    registry_->WaitForIdleCheck(clock_.Now());
  }
  std::vector<std::string> retired() {
    absl::MutexLock lock(&mu_);
    return retired_;
  }
  std::vector<std::string> synced() {
    absl::MutexLock lock(&mu_);
    return synced_;
  }

  informer::FakeClock clock_;
  StaticResolver resolver_ = TestResolver();
  Sources sources_;
  InformerRegistry::Options options_;
  std::unique_ptr<InformerRegistry> registry_;
  int observer_ = 0;
  absl::Mutex mu_;
  std::vector<std::string> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> retired_ ABSL_GUARDED_BY(mu_);
};

TEST_F(LazyRegistryTest, FirstFindStartsASharedSyncedInformer) {
  EXPECT_THAT(registry_->entries().size(), 1u);
  absl::StatusOr<InformerRef> secret = registry_->Find("secret");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_TRUE((*secret)->lazy);
  EXPECT_EQ((*secret)->config.resource, "secrets");
  EXPECT_EQ((*secret)->config.namespace_, "team");
  EXPECT_EQ((*secret)->config.origin, "lazy");
  // Find waited for the first sync, so a first Get is answered.
  EXPECT_TRUE((*secret)->informer->HasSynced());
  EXPECT_THAT(synced(), ElementsAre("secrets"));
  absl::StatusOr<InformerRef> secrets = registry_->Find("secrets");
  ASSERT_TRUE(secrets.ok());
  EXPECT_EQ(secrets->get(), secret->get());
  EXPECT_EQ(registry_->lazy_starts(), 1);
  // ListResources sees it; health's configured names do not.
  EXPECT_EQ(registry_->entries().size(), 2u);
  EXPECT_THAT(registry_->ResourceNames(), ElementsAre("pods"));
  EXPECT_THAT(synced(), ElementsAre("secrets"));  // reported once
}

TEST_F(LazyRegistryTest, ConcurrentFirstFindsStartOneInformer) {
  std::vector<std::thread> threads;
  std::vector<InformerEntry*> found(8, nullptr);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([this, i, &found] {
      absl::StatusOr<InformerRef> ref =
          registry_->Find(i % 2 == 0 ? "cm" : "configmaps");
      if (ref.ok()) found[i] = ref->get();
    });
  }
  for (std::thread& t : threads) t.join();
  for (InformerEntry* e : found) EXPECT_EQ(e, found[0]);
  EXPECT_NE(found[0], nullptr);
  EXPECT_EQ(registry_->lazy_starts(), 1);
  EXPECT_EQ(sources_.built(), 2);  // pods + configmaps
}

TEST_F(LazyRegistryTest, IdleInformerStopsAndRestartsOnNextFind) {
  absl::StatusOr<InformerRef> ref = registry_->Find("secrets");
  ASSERT_TRUE(ref.ok());
  std::weak_ptr<InformerEntry> first;
  for (const auto& e : registry_->entries()) {
    if (e.get() == ref->get()) first = e;
  }
  ASSERT_FALSE(first.expired());

  // In use (a handle, then a copy of it): never idle.
  AdvanceAndCheck(absl::Minutes(5));
  InformerRef copy = *ref;
  ref = absl::UnknownError("dropped");
  AdvanceAndCheck(absl::Minutes(5));
  EXPECT_EQ(registry_->lazy_stops(), 0);
  // A Watch stream keeps it too.
  copy->streams.fetch_add(1);
  InformerEntry* raw = copy.get();
  copy = InformerRef();
  AdvanceAndCheck(absl::Minutes(5));
  EXPECT_EQ(registry_->lazy_stops(), 0);
  raw->streams.fetch_sub(1);

  // Idle from the last busy check on: not yet after 45s, stopped after 1m.
  AdvanceAndCheck(absl::Seconds(45));
  EXPECT_EQ(registry_->lazy_stops(), 0);
  EXPECT_TRUE(retired().empty());
  AdvanceAndCheck(absl::Seconds(30));
  EXPECT_EQ(registry_->lazy_stops(), 1);
  EXPECT_THAT(retired(), ElementsAre("secrets"));
  EXPECT_EQ(registry_->entries().size(), 1u);  // pods, configured, stays
  // The retired entry's memory goes at the next check (nobody holds it).
  AdvanceAndCheck(absl::Seconds(15));
  EXPECT_TRUE(first.expired());

  absl::StatusOr<InformerRef> again = registry_->Find("secret");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->informer->HasSynced());
  EXPECT_EQ(registry_->lazy_starts(), 2);
  EXPECT_THAT(synced(), ElementsAre("secrets", "secrets"));
  // Configured informers are never stopped for idleness.
  AdvanceAndCheck(absl::Minutes(10));
  absl::StatusOr<InformerRef> pods = registry_->Find("pods");
  ASSERT_TRUE(pods.ok());
  EXPECT_FALSE((*pods)->lazy);
}

TEST_F(LazyRegistryTest, RetiredEntryStaysReadableWhileReferenced) {
  // A retired entry still referenced (e.g. by entries() of ListResources)
  // stays readable until released.
  absl::StatusOr<InformerRef> ref = registry_->Find("secrets");
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(sources_.Get("secrets")->Add("team", "s1").ok());
  std::shared_ptr<InformerEntry> held;
  for (const auto& e : registry_->entries()) {
    if (e.get() == ref->get()) held = e;
  }
  ref = absl::UnknownError("dropped");
  AdvanceAndCheck(absl::Minutes(2));
  AdvanceAndCheck(absl::Minutes(2));
  EXPECT_EQ(registry_->lazy_stops(), 1);
  AdvanceAndCheck(absl::Minutes(2));
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->config.resource, "secrets");
  held->informer->GetIndexer().List();  // still valid memory
}

TEST_F(LazyRegistryTest, UnknownResourceSaysLazyModeIsOn) {
  absl::StatusOr<InformerRef> bogus = registry_->Find("bogus");
  ASSERT_EQ(bogus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(bogus.status().message()),
              HasSubstr("available: pods; lazy mode is on"));
}

TEST_F(LazyRegistryTest, LazyFactoryErrorIsReturnedAndRetried) {
  StaticResolver resolver({Api("", "broken", "broken", "Broken", {})});
  InformerRegistry::Options options = options_;
  options.resolver = &resolver;
  auto registry = InformerRegistry::Create({}, sources_.Factory(), options);
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE((*registry)->Start().ok());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<InformerRef> ref = (*registry)->Find("broken");
    ASSERT_FALSE(ref.ok());
    EXPECT_EQ(ref.status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ((*registry)->lazy_starts(), 0);
  (*registry)->Stop();
  absl::StatusOr<InformerRef> after = (*registry)->Find("broken");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace server

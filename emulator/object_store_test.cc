#include "emulator/object_store.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "emulator/api_status.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"
#include "rapidjson/document.h"

namespace emulator {
namespace {

class ObjectStoreTest : public ::testing::Test {
 protected:
  ObjectStoreTest()
      : registry_(ResourceRegistry::WithBuiltins()),
        cm_(*registry_->FindByName("configmaps")),
        nodes_(*registry_->FindByName("nodes")),
        deploy_(*registry_->FindByName("deployments")) {
    options_.clock = &clock_;
    options_.history_length = 5;
    store_ = std::make_unique<ObjectStore>(options_);
  }

  StoredObjectPtr MustCreate(absl::string_view ns, absl::string_view name,
                             absl::string_view labels = "{}") {
    auto obj = store_->Create(
        cm_, ns,
        absl::StrCat(
            R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")",
            name, R"(","labels":)", labels, R"(},"data":{"k":"v"}})"));
    EXPECT_TRUE(obj.ok()) << obj.status();
    return obj.ok() ? *obj : nullptr;
  }

  // Drains what a watcher has queued (never blocks: deadline = now).
  std::vector<StoreEvent> Drain(Watcher& w) {
    std::vector<StoreEvent> out;
    Watcher::Directives d;
    Watcher::CloseKind close;
    w.Next(&clock_, clock_.Now(), 1000, &out, &d, &close);
    return out;
  }

  informer::FakeClock clock_;
  std::unique_ptr<ResourceRegistry> registry_;
  const ResourceInfo& cm_;
  const ResourceInfo& nodes_;
  const ResourceInfo& deploy_;
  ObjectStore::Options options_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(ObjectStoreTest, CreateFillsServerFieldsAndPutsMetadataFirst) {
  StoredObjectPtr o = MustCreate("demo", "a");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->rv, 1);
  EXPECT_EQ(o->ns, "demo");
  EXPECT_EQ(o->uid.size(), 36u);
  EXPECT_EQ(o->creation_timestamp, "2023-11-14T22:13:20Z");
  EXPECT_EQ(o->body.rfind("{\"metadata\":{\"name\":\"a\",\"namespace\":\"demo\""
                          ",\"uid\":",
                          0),
            0u)
      << o->body;
  EXPECT_EQ(o->body.find("\"kind\""), std::string::npos);
  rapidjson::Document md;
  md.Parse(std::string(o->metadata_json()).c_str());
  ASSERT_FALSE(md.HasParseError());
  EXPECT_STREQ(md["resourceVersion"].GetString(), "1");
  EXPECT_EQ(
      ObjectJson(cm_, *o, false)
          .rfind("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":",
                 0),
      0u);
}

TEST_F(ObjectStoreTest, CreateRejectsDuplicatesWrongKindAndMissingName) {
  MustCreate("demo", "a");
  EXPECT_EQ(store_->Create(cm_, "demo", R"({"metadata":{"name":"a"}})")
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      store_->Create(cm_, "demo", R"({"kind":"Pod","metadata":{"name":"b"}})")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(cm_, "demo", R"({"metadata":{}})").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      store_
          ->Create(cm_, "demo", R"({"metadata":{"name":"c","namespace":"x"}})")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(cm_, "demo", "{oops").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, GenerateNameAddsASuffix) {
  auto o =
      store_->Create(cm_, "demo", R"({"metadata":{"generateName":"ev-"}})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)->name.size(), 8u);
  EXPECT_EQ((*o)->name.rfind("ev-", 0), 0u);
  // The prefix is validated as a name (after one trailing dash), as the
  // API server does: "ev." cannot start a ConfigMap's name.
  EXPECT_EQ(
      store_->Create(cm_, "demo", R"({"metadata":{"generateName":"ev."}})")
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST_F(ObjectStoreTest, ResourceVersionIsOneCounterAcrossResources) {
  StoredObjectPtr a = MustCreate("demo", "a");
  auto node = store_->Create(nodes_, "", R"({"metadata":{"name":"n1"}})");
  ASSERT_TRUE(node.ok());
  StoredObjectPtr b = MustCreate("demo", "b");
  EXPECT_LT(a->rv, (*node)->rv);
  EXPECT_LT((*node)->rv, b->rv);
  EXPECT_EQ(store_->CurrentRv(), b->rv);
  EXPECT_EQ((*node)->ns, "") << "cluster-scoped objects have no namespace";
}

TEST_F(ObjectStoreTest, UpdateChecksResourceVersionAndKeepsIdentity) {
  StoredObjectPtr a = MustCreate("demo", "a");
  auto stale = store_->Update(
      cm_, "demo", "a",
      R"({"metadata":{"name":"a","resourceVersion":"999"},"data":{"k":"x"}})");
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  auto updated = store_->Update(
      cm_, "demo", "a",
      absl::StrCat(R"({"metadata":{"name":"a","resourceVersion":")", a->rv,
                   R"("},"data":{"k":"x"}})"));
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_GT((*updated)->rv, a->rv);
  EXPECT_EQ((*updated)->uid, a->uid);
  EXPECT_EQ((*updated)->creation_timestamp, a->creation_timestamp);
  EXPECT_EQ(
      store_->Update(cm_, "demo", "zz", R"({"metadata":{}})").status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Update(cm_, "demo", "a", R"({"metadata":{"name":"b"}})")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, NoOpUpdateKeepsResourceVersion) {
  StoredObjectPtr a = MustCreate("demo", "a");
  auto same = store_->Patch(cm_, "demo", "a", PatchType::kMerge,
                            R"({"data":{"k":"v"}})");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)->rv, a->rv);
  EXPECT_EQ(store_->CurrentRv(), a->rv);
}

TEST_F(ObjectStoreTest, PatchMergesAndHonoursResourceVersionPrecondition) {
  StoredObjectPtr a = MustCreate("demo", "a", R"({"x":"1"})");
  auto p =
      store_->Patch(cm_, "demo", "a", PatchType::kStrategicMerge,
                    R"({"metadata":{"labels":{"y":"2"}},"data":{"n":"m"}})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->labels.size(), 2u);
  EXPECT_NE((*p)->body.find("\"n\":\"m\""), std::string::npos);
  auto conflict =
      store_->Patch(cm_, "demo", "a", PatchType::kMerge,
                    R"({"metadata":{"resourceVersion":"1"},"data":{"q":"r"}})");
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAborted);
}

TEST_F(ObjectStoreTest, GenerationFollowsSpecChanges) {
  auto d = store_->Create(deploy_, "demo",
                          R"({"metadata":{"name":"d"},"spec":{"replicas":1}})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->generation, 1);
  auto status_only = store_->Patch(deploy_, "demo", "d", PatchType::kMerge,
                                   R"({"status":{"ready":1}})");
  ASSERT_TRUE(status_only.ok());
  EXPECT_EQ((*status_only)->generation, 1);
  auto spec = store_->Patch(deploy_, "demo", "d", PatchType::kMerge,
                            R"({"spec":{"replicas":3}})");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)->generation, 2);
}

TEST_F(ObjectStoreTest, DeleteCarriesANewResourceVersion) {
  StoredObjectPtr a = MustCreate("demo", "a");
  auto del = store_->Delete(cm_, "demo", "a");
  ASSERT_TRUE(del.ok());
  EXPECT_GT((*del)->rv, a->rv);
  EXPECT_EQ(store_->Get(cm_, "demo", "a").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete(cm_, "demo", "a").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Count(cm_), 0u);
  // The name can be reused.
  EXPECT_NE(MustCreate("demo", "a"), nullptr);
}

TEST_F(ObjectStoreTest, ListFiltersByNamespaceAndSelectors) {
  MustCreate("a", "x", R"({"app":"web"})");
  MustCreate("a", "y", R"({"app":"api"})");
  MustCreate("b", "z", R"({"app":"web"})");
  ListRequest all;
  EXPECT_EQ(store_->List(cm_, all)->items.size(), 3u);
  ListRequest ns;
  ns.ns = "a";
  EXPECT_EQ(store_->List(cm_, ns)->items.size(), 2u);
  ListRequest web;
  web.labels = *LabelSelector::Parse("app=web");
  auto result = store_->List(cm_, web);
  ASSERT_EQ(result->items.size(), 2u);
  EXPECT_EQ(result->items[0]->Key(), "a/x");
  EXPECT_EQ(result->items[1]->Key(), "b/z");
  ListRequest by_name;
  by_name.fields = *FieldSelector::Parse("metadata.name=y", {});
  ASSERT_EQ(store_->List(cm_, by_name)->items.size(), 1u);
  ListRequest by_ns;
  by_ns.fields = *FieldSelector::Parse("metadata.namespace=b", {});
  EXPECT_EQ(store_->List(cm_, by_ns)->items.size(), 1u);
}

TEST_F(ObjectStoreTest, PagingIsAConsistentSnapshot) {
  for (int i = 0; i < 5; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  ListRequest req;
  req.ns = "demo";
  req.limit = 2;
  auto page1 = store_->List(cm_, req);
  ASSERT_TRUE(page1.ok());
  ASSERT_EQ(page1->items.size(), 2u);
  EXPECT_EQ(page1->remaining_item_count, 3);
  ASSERT_FALSE(page1->continue_token.empty());
  auto decoded = DecodeContinueToken(page1->continue_token);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->first, 5);
  EXPECT_EQ(decoded->second, std::string("cm-1\0", 5));
  // Writes after the first page do not show up in later pages.
  ASSERT_TRUE(store_->Delete(cm_, "demo", "cm-3").ok());
  MustCreate("demo", "cm-9");
  ASSERT_TRUE(store_
                  ->Patch(cm_, "demo", "cm-4", PatchType::kMerge,
                          R"({"data":{"k":"changed"}})")
                  .ok());
  req.continue_token = page1->continue_token;
  auto page2 = store_->List(cm_, req);
  ASSERT_TRUE(page2.ok());
  ASSERT_EQ(page2->items.size(), 2u);
  EXPECT_EQ(page2->items[0]->name, "cm-2");
  EXPECT_EQ(page2->items[1]->name, "cm-3")
      << "deleted later, still in snapshot";
  req.continue_token = page2->continue_token;
  auto page3 = store_->List(cm_, req);
  ASSERT_TRUE(page3.ok());
  ASSERT_EQ(page3->items.size(), 1u);
  EXPECT_EQ(page3->items[0]->name, "cm-4");
  EXPECT_EQ(page3->items[0]->rv, 5) << "the version as of the snapshot";
  EXPECT_TRUE(page3->continue_token.empty());
  EXPECT_EQ(page3->resource_version, 5);
}

TEST_F(ObjectStoreTest, RemainingItemCountStaysRightOnEveryPage) {
  for (int i = 0; i < 7; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  MustCreate("other", "cm-x");
  ListRequest req;
  req.ns = "demo";
  req.limit = 2;
  std::vector<int64_t> counts;
  std::vector<std::string> names;
  while (true) {
    auto page = store_->List(cm_, req);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& o : page->items) names.push_back(o->name);
    if (page->continue_token.empty()) {
      EXPECT_EQ(page->remaining_item_count, -1);
      break;
    }
    counts.push_back(page->remaining_item_count);
    // Writes between pages change neither the pages nor the counts.
    MustCreate("demo", absl::StrCat("late-", counts.size()));
    req.continue_token = page->continue_token;
  }
  EXPECT_EQ(counts, (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(names.size(), 7u);
  // The same token asked twice gets the same answer.
  ListRequest again;
  again.ns = "demo";
  again.limit = 2;
  auto first = store_->List(cm_, again);
  ASSERT_TRUE(first.ok());
  again.continue_token = first->continue_token;
  auto second_a = store_->List(cm_, again);
  auto second_b = store_->List(cm_, again);
  ASSERT_TRUE(second_a.ok() && second_b.ok());
  EXPECT_EQ(second_a->remaining_item_count, second_b->remaining_item_count);
  EXPECT_EQ(second_a->remaining_item_count,
            static_cast<int64_t>(first->remaining_item_count) - 2);
}

TEST_F(ObjectStoreTest, ResourceVersionZeroListPagesByDefault) {
  for (int i = 0; i < 3; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  ListRequest req;
  req.resource_version = "0";
  req.limit = 2;
  auto page = store_->List(cm_, req);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->items.size(), 2u);
  EXPECT_FALSE(page->continue_token.empty());
}

TEST_F(ObjectStoreTest, ResourceVersionZeroListIgnoresLimitLikeAWatchCache) {
  options_.rv0_list_ignores_limit = true;
  store_ = std::make_unique<ObjectStore>(options_);
  for (int i = 0; i < 3; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  ListRequest req;
  req.resource_version = "0";
  req.limit = 2;
  auto whole = store_->List(cm_, req);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->items.size(), 3u);
  EXPECT_TRUE(whole->continue_token.empty());
  EXPECT_EQ(whole->remaining_item_count, -1);
  EXPECT_EQ(whole->resource_version, 3);
  // Any other resourceVersion, and RV=0 with match=Exact, still page.
  req.resource_version = "";
  EXPECT_EQ(store_->List(cm_, req)->items.size(), 2u);
  req.resource_version = "3";
  EXPECT_EQ(store_->List(cm_, req)->items.size(), 2u);
  req.resource_version = "0";
  req.resource_version_match = "Exact";
  auto exact = store_->List(cm_, req);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->items.size(), 2u);
}

// list-resourceversion-semantics.txt: which lists are exact etcd reads.
TEST_F(ObjectStoreTest, ListAtAnOlderRvIsExactOnlyWithALimitOrMatchExact) {
  for (int i = 0; i < 3; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  const int64_t old_rv = store_->CurrentRv();
  MustCreate("demo", "cm-new");
  ListRequest req;
  req.resource_version = absl::StrCat(old_rv);
  req.limit = 2;
  // RV + limit, no match: exact at the RV (the new object is absent).
  auto exact = store_->List(cm_, req);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->resource_version, old_rv);
  EXPECT_EQ(exact->remaining_item_count, 1);
  req.resource_version_match = "Exact";
  EXPECT_EQ(store_->List(cm_, req)->resource_version, old_rv);
  // NotOlderThan, paged: the current state.
  req.resource_version_match = "NotOlderThan";
  auto current = store_->List(cm_, req);
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->resource_version, store_->CurrentRv());
  EXPECT_EQ(current->remaining_item_count, 2);
  // No limit: the current state, not older than the RV.
  req.resource_version_match = "";
  req.limit = 0;
  auto whole = store_->List(cm_, req);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->resource_version, store_->CurrentRv());
  EXPECT_EQ(whole->items.size(), 4u);
}

TEST_F(ObjectStoreTest, ExactListAtACompactedRvIsExpired) {
  MustCreate("demo", "a");
  const int64_t old_rv = store_->CurrentRv();
  MustCreate("demo", "b");
  ListRequest req;
  req.resource_version = absl::StrCat(old_rv);
  req.limit = 500;
  store_->Restart();
  // A restart leaves etcd's history alone: still an exact read.
  auto before = store_->List(cm_, req);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->items.size(), 1u);
  store_->Compact();
  auto after = store_->List(cm_, req);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(after.status().message(),
            "The resourceVersion for the provided list is too old.");
  // Without a limit it is served from the current state.
  req.limit = 0;
  EXPECT_EQ(store_->List(cm_, req)->items.size(), 2u);
}

TEST_F(ObjectStoreTest, AfterARestartTheWatchWindowStartsAtTheRestartRv) {
  MustCreate("demo", "a");
  const int64_t old_rv = store_->CurrentRv();
  MustCreate("demo", "b");
  store_->Restart();
  const int64_t restart_rv = store_->CurrentRv();
  MustCreate("demo", "c");
  WatchRequest req;
  req.resource_version = absl::StrCat(old_rv);
  auto old = store_->Watch(cm_, req);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(old.status().message(),
            absl::StrCat("too old resource version: ", old_rv, " (", restart_rv,
                         ")"));
  req.resource_version = absl::StrCat(restart_rv);
  auto ok = store_->Watch(cm_, req);
  ASSERT_TRUE(ok.ok()) << ok.status();
  store_->StopWatch(*ok);
}

TEST_F(ObjectStoreTest, ContinueTokenExpiresAfterCompaction) {
  for (int i = 0; i < 3; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  ListRequest req;
  req.limit = 1;
  auto page1 = store_->List(cm_, req);
  ASSERT_TRUE(page1.ok());
  MustCreate("demo", "later");
  store_->Compact();
  req.continue_token = page1->continue_token;
  auto expired = store_->List(cm_, req);
  ASSERT_EQ(expired.status().code(), absl::StatusCode::kOutOfRange);
  auto fresh = expired.status().GetPayload(kContinuePayload);
  ASSERT_TRUE(fresh.has_value());
  auto tok = DecodeContinueToken(std::string(*fresh));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->first, -1);
  // The inconsistent token continues from the same key at the current state.
  req.continue_token = std::string(*fresh);
  auto rest = store_->List(cm_, req);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->items[0]->Key(), "demo/cm-1");
}

TEST_F(ObjectStoreTest, PeriodicCompactionExpiresTokensOlderThanOneTick) {
  MustCreate("demo", "a");
  MustCreate("demo", "b");
  ListRequest req;
  req.limit = 1;
  auto page1 = store_->List(cm_, req);
  clock_.Advance(options_.compaction_interval);
  MustCreate("demo", "c");  // tick 1: compacts to the RV of tick 0 (0)
  req.continue_token = page1->continue_token;
  EXPECT_TRUE(store_->List(cm_, req).ok());
  clock_.Advance(options_.compaction_interval);
  MustCreate("demo", "d");  // tick 2: compacts to the RV of tick 1
  EXPECT_EQ(store_->List(cm_, req).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(ObjectStoreTest, TooLargeAndExactResourceVersions) {
  MustCreate("demo", "a");
  ListRequest req;
  req.resource_version = "100";
  EXPECT_EQ(store_->List(cm_, req).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  MustCreate("demo", "b");
  req.resource_version = "1";
  req.resource_version_match = "Exact";
  auto exact = store_->List(cm_, req);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->items.size(), 1u);
  EXPECT_EQ(exact->resource_version, 1);
}

TEST_F(ObjectStoreTest, WatchReplaysHistoryAfterResourceVersion) {
  StoredObjectPtr a = MustCreate("demo", "a");
  ASSERT_TRUE(
      store_
          ->Patch(cm_, "demo", "a", PatchType::kMerge, R"({"data":{"k":"2"}})")
          .ok());
  ASSERT_TRUE(store_->Delete(cm_, "demo", "a").ok());
  WatchRequest req;
  req.resource_version = absl::StrCat(a->rv);
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  std::vector<StoreEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kModified);
  EXPECT_EQ(events[1].type, EventType::kDeleted);
  EXPECT_EQ(events[1].rv, 3);
  // Live events follow.
  MustCreate("demo", "b");
  events = Drain(**w);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kAdded);
  EXPECT_EQ(events[0].object->name, "b");
  store_->StopWatch(*w);
  EXPECT_EQ(store_->NumWatchers(&cm_), 0);
}

TEST_F(ObjectStoreTest, WatchFromEmptyOrZeroStartsWithAddedEvents) {
  MustCreate("demo", "a");
  MustCreate("other", "b");
  WatchRequest req;
  req.ns = "demo";
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  std::vector<StoreEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kAdded);
  EXPECT_EQ(events[0].object->name, "a");
  store_->StopWatch(*w);
}

TEST_F(ObjectStoreTest, WatchListEndsInitialEventsWithMarkedBookmark) {
  MustCreate("demo", "a");
  MustCreate("demo", "b");
  WatchRequest req;
  req.send_initial_events = true;
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  std::vector<StoreEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].type, EventType::kBookmark);
  EXPECT_TRUE(events[2].initial_events_end);
  EXPECT_EQ(events[2].rv, 2);
  store_->StopWatch(*w);
}

TEST_F(ObjectStoreTest, WatchFromBeforeHistoryIsExpired) {
  for (int i = 0; i < 8; ++i) MustCreate("demo", absl::StrCat("cm-", i));
  WatchRequest req;
  req.resource_version = "1";
  auto w = store_->Watch(cm_, req);
  ASSERT_EQ(w.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(w.status().message(), "too old resource version: 1 (3)");
  req.resource_version = "3";
  EXPECT_TRUE(store_->Watch(cm_, req).ok()) << "history covers (3, 8]";
}

TEST_F(ObjectStoreTest, SelectorTransitionsBecomeAddedAndDeleted) {
  MustCreate("demo", "a", R"({"app":"web"})");
  WatchRequest req;
  req.resource_version = "1";
  req.labels = *LabelSelector::Parse("app=web");
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(store_
                  ->Patch(cm_, "demo", "a", PatchType::kMerge,
                          R"({"metadata":{"labels":{"app":"api"}}})")
                  .ok());
  ASSERT_TRUE(store_
                  ->Patch(cm_, "demo", "a", PatchType::kMerge,
                          R"({"metadata":{"labels":{"app":"web"}}})")
                  .ok());
  std::vector<StoreEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kDeleted);
  EXPECT_EQ(events[0].object->rv, 2) << "previous content at the new RV";
  EXPECT_EQ(*LookupPair(events[0].object->labels, "app"), "web");
  EXPECT_EQ(events[1].type, EventType::kAdded);
  store_->StopWatch(*w);
}

TEST_F(ObjectStoreTest, RestartDropsWatchesAndExpiresOldVersions) {
  MustCreate("demo", "a");
  WatchRequest req;
  req.resource_version = "1";
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  MustCreate("demo", "b");
  store_->Restart();
  std::vector<StoreEvent> out;
  Watcher::Directives d;
  Watcher::CloseKind close;
  (*w)->Next(&clock_, clock_.Now(), 10, &out, &d, &close);
  EXPECT_EQ(close, Watcher::CloseKind::kAbrupt);
  EXPECT_EQ(store_->Watch(cm_, req).status().code(),
            absl::StatusCode::kOutOfRange);
  req.resource_version = absl::StrCat(store_->CurrentRv());
  EXPECT_TRUE(store_->Watch(cm_, req).ok());
}

TEST_F(ObjectStoreTest, BookmarkRvWaitsForQueuedEvents) {
  WatchRequest req;
  req.resource_version = "0";
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  MustCreate("demo", "a");
  EXPECT_FALSE(store_->BookmarkRv(**w).has_value());
  Drain(**w);
  ASSERT_TRUE(store_->BookmarkRv(**w).has_value());
  EXPECT_EQ(*store_->BookmarkRv(**w), 1);
  store_->StopWatch(*w);
}

TEST_F(ObjectStoreTest, StalledWatcherKeepsEventsQueued) {
  WatchRequest req;
  req.resource_version = "0";
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  (*w)->Update([](Watcher::Directives& d) { d.stalled = true; });
  MustCreate("demo", "a");
  EXPECT_TRUE(Drain(**w).empty());
  EXPECT_EQ((*w)->QueueSize(), 1u);
  (*w)->Update([](Watcher::Directives& d) { d.stalled = false; });
  EXPECT_EQ(Drain(**w).size(), 1u);
  store_->StopWatch(*w);
}

// kube-apiserver's watch cache keeps a resourceVersion per resource: a
// write to another resource moves etcd's revision, not this cache's, until
// a progress notification brings it there (v1.37 asks etcd for one when a
// consistent read waits for the cache).
class WatchCacheRvTest : public ObjectStoreTest {
 protected:
  void UseWatchCache(bool consistent_reads_from_cache) {
    options_.per_resource_cache_rv = true;
    options_.consistent_reads_from_cache = consistent_reads_from_cache;
    store_ = std::make_unique<ObjectStore>(options_);
  }
  void CreateNode(absl::string_view name) {
    ASSERT_TRUE(
        store_
            ->Create(nodes_, "",
                     absl::StrCat(R"({"metadata":{"name":")", name, R"("}})"))
            .ok());
  }
  int64_t ListRv(const ResourceInfo& r, absl::string_view rv,
                 absl::string_view match = "") {
    ListRequest req;
    req.resource_version = std::string(rv);
    req.resource_version_match = std::string(match);
    absl::StatusOr<ListResult> list = store_->List(r, req);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? list->resource_version : -1;
  }
};

TEST_F(WatchCacheRvTest, ListsAtZeroAndBookmarksCarryTheResourcesOwnRv) {
  UseWatchCache(true);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2: etcd moves, the ConfigMaps' cache not
  EXPECT_EQ(ListRv(cm_, "0"), 1);
  EXPECT_EQ(ListRv(nodes_, "0"), 2);
  WatchRequest req;
  req.resource_version = "1";
  auto w = store_->Watch(cm_, req);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->request().start_rv, 1);
  // Nothing past the watch's start to bookmark: the pump sends none.
  EXPECT_EQ(store_->BookmarkRv(**w), absl::optional<int64_t>(1));
  // A consistent list waits for the cache to catch up with etcd.
  EXPECT_EQ(ListRv(cm_, ""), 2);
  EXPECT_EQ(ListRv(cm_, "0"), 2);
  EXPECT_EQ(store_->BookmarkRv(**w), absl::optional<int64_t>(2));
  store_->StopWatch(*w);
  // Its own events move it again.
  MustCreate("demo", "b");  // rv 3
  CreateNode("m");          // rv 4
  EXPECT_EQ(ListRv(cm_, "0"), 3);
}

TEST_F(WatchCacheRvTest, ReadsNotOlderThanALaterRvCatchTheCacheUp) {
  UseWatchCache(true);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2
  // Not older than 1: the cache as it is; than 2: after a progress
  // notification.
  EXPECT_EQ(ListRv(cm_, "1"), 1);
  EXPECT_EQ(ListRv(cm_, "1", "NotOlderThan"), 1);
  EXPECT_EQ(ListRv(cm_, "2", "NotOlderThan"), 2);
  EXPECT_EQ(ListRv(cm_, "0"), 2);
}

TEST_F(WatchCacheRvTest, V124ReadsConsistentListsFromEtcd) {
  UseWatchCache(false);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2
  EXPECT_EQ(ListRv(cm_, ""), 2);
  EXPECT_EQ(ListRv(cm_, "0"), 1);
  // An exact read is etcd's too.
  ListRequest exact;
  exact.resource_version = "2";
  exact.limit = 10;
  ASSERT_TRUE(store_->List(cm_, exact).ok());
  EXPECT_EQ(ListRv(cm_, "0"), 1);
}

TEST_F(WatchCacheRvTest, WatchesStartAtTheCachesRv) {
  UseWatchCache(true);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2
  // The legacy initial state (RV 0) is the cache's as it is.
  WatchRequest legacy;
  legacy.resource_version = "0";
  auto w0 = store_->Watch(cm_, legacy);
  ASSERT_TRUE(w0.ok());
  EXPECT_EQ((*w0)->request().start_rv, 1);
  // A consistent WatchList catches the cache up first: its end bookmark
  // carries etcd's revision.
  WatchRequest watch_list;
  watch_list.send_initial_events = true;
  auto w1 = store_->Watch(cm_, watch_list);
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ((*w1)->request().start_rv, 2);
  std::vector<StoreEvent> events = Drain(**w1);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[1].initial_events_end);
  EXPECT_EQ(events[1].rv, 2);
  store_->StopWatch(*w0);
  store_->StopWatch(*w1);
}

TEST_F(WatchCacheRvTest, EtcdsProgressNotificationsMoveEveryCache) {
  options_.progress_notify_interval = absl::Seconds(5);
  UseWatchCache(true);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2
  EXPECT_EQ(ListRv(cm_, "0"), 1);
  clock_.Advance(absl::Seconds(5));
  // Due: the ConfigMaps' cache hears etcd's revision.
  EXPECT_EQ(ListRv(cm_, "0"), 2);
  CreateNode("m");  // rv 3, after the notification (at rv 2)
  EXPECT_EQ(ListRv(cm_, "0"), 2);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(ListRv(cm_, "0"), 3);
}

TEST_F(WatchCacheRvTest, ARestartedCacheStartsAtTheCurrentRv) {
  UseWatchCache(true);
  MustCreate("demo", "a");  // rv 1
  CreateNode("n");          // rv 2
  store_->Restart();
  EXPECT_EQ(ListRv(cm_, "0"), 2);
}

TEST_F(ObjectStoreTest, WithoutAWatchCacheEveryReadIsAtTheStoresRv) {
  MustCreate("demo", "a");
  ASSERT_TRUE(store_->Create(nodes_, "", R"({"metadata":{"name":"n"}})").ok());
  ListRequest req;
  req.resource_version = "0";
  absl::StatusOr<ListResult> list = store_->List(cm_, req);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->resource_version, 2);
}

TEST(ContinueTokenTest, MatchesTheCapturedEncoding) {
  EXPECT_EQ(EncodeContinueToken(158251, std::string("cm-0001\0", 8)),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjUxLCJzdGFydCI6ImNtLTAwMD"
            "FcdTAwMDAifQ");
  EXPECT_FALSE(DecodeContinueToken("!!!").ok());
  EXPECT_FALSE(DecodeContinueToken("e30").ok()) << "{} lacks rv and start";
}

}  // namespace
}  // namespace emulator

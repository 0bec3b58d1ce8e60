#include "server/informer_service/watch/watch_resume_store.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/watch_history_section.h"
#include "server/registry/snapshot_keeper.h"

namespace server {
namespace {

informer::ObjectPtr Cm(const std::string& name, int rv) {
  return *informer::Object::Parse(absl::StrCat(
      R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":"uid-)", name, R"(","resourceVersion":")", rv,
      R"("}})"));
}

informer::SnapshotIdentity Identity() {
  informer::SnapshotIdentity id;
  id.cluster = "c";
  id.version = "v1";
  id.resource = "configmaps";
  return id;
}

// A fan-out as the store sees it.
class FakeSource : public WatchResumeStore::Source {
 public:
  std::optional<WatchResumeStore::Capture> CaptureForSnapshot() override {
    ++captures;
    return capture;
  }
  std::optional<WatchResumeStore::Capture> capture;
  int captures = 0;
};

WatchResumeStore::Capture TwoEvents() {
  WatchResumeStore::Capture c;
  informer::ObjectPtr a1 = Cm("a", 1), a2 = Cm("a", 2);
  c.objects = {a2};
  c.resource_version = "2";
  c.history.last_seq = 8;
  c.history.aliases = {{"run-1", 1, 8}};
  informer::PersistedWatchEvent e1, e2;
  e1.seq = 7;
  e1.obj = a1;
  e2.seq = 8;
  e2.obj = a2;
  e2.prev = a1;
  c.history.events = {e1, e2};
  c.change_tag = "run-1/1/8";
  return c;
}

// What a SnapshotKeeper writes for `target` and reads back.
informer::LoadedSnapshot WriteAndRead(SnapshotKeeper::Target* target) {
  std::optional<SnapshotKeeper::Captured> captured = target->capture();
  EXPECT_TRUE(captured.has_value());
  informer::LoadedSnapshot loaded;
  loaded.path = "snapshot";
  loaded.resource_version = captured->resource_version;
  loaded.objects = captured->objects;
  loaded.sections = captured->sections;
  return loaded;
}

TEST(WatchResumeStoreTest, ASnapshotCarriesTheHistoryToTheNextRun) {
  WatchResumeStore store;
  SnapshotKeeper::Target target;
  target.identity = Identity();
  store.Wire("configmaps", &target);
  EXPECT_EQ(target.keep_sections,
            std::vector<std::string>{informer::kWatchHistorySection});
  // No fan-out yet: nothing to keep, the keeper writes CopyState.
  EXPECT_FALSE(target.capture().has_value());
  FakeSource source;
  source.capture = TwoEvents();
  store.Attach("configmaps", &source);
  informer::LoadedSnapshot loaded = WriteAndRead(&target);
  EXPECT_EQ(loaded.resource_version, "2");
  ASSERT_EQ(loaded.sections.size(), 1u);

  WatchResumeStore next;
  SnapshotKeeper::Target next_target;
  next_target.identity = Identity();
  next.Wire("configmaps", &next_target);
  next_target.on_read(loaded);
  std::optional<WatchResumeStore::Seed> seed = next.TakeSeed("configmaps");
  ASSERT_TRUE(seed.has_value());
  EXPECT_EQ(seed->history.last_seq, 8u);
  ASSERT_EQ(seed->history.events.size(), 2u);
  EXPECT_EQ(seed->history.aliases[0].run_id, "run-1");
  EXPECT_EQ(seed->objects.size(), 1u);
  // Taken once.
  EXPECT_FALSE(next.TakeSeed("configmaps").has_value());
}

TEST(WatchResumeStoreTest, OnlyWiredResourcesAreKept) {
  WatchResumeStore store;
  FakeSource source;
  source.capture = TwoEvents();
  // No snapshot keeps it (a lazy informer's): nothing is held for it.
  EXPECT_FALSE(store.Attach("secrets", &source));
  store.Detach("secrets", &source, TwoEvents());
  EXPECT_FALSE(store.CaptureNow("secrets").has_value());
}

TEST(WatchResumeStoreTest, ADetachedFanOutLeavesItsLastCapture) {
  WatchResumeStore store;
  SnapshotKeeper::Target target;
  target.identity = Identity();
  store.Wire("configmaps", &target);
  FakeSource source;
  store.Attach("configmaps", &source);
  store.Detach("configmaps", &source, TwoEvents());
  // The hub is gone (a shutdown): the last snapshot stores its capture.
  std::optional<SnapshotKeeper::Captured> captured = target.capture();
  ASSERT_TRUE(captured.has_value());
  EXPECT_EQ(captured->change_tag, "run-1/1/8");
  EXPECT_EQ(source.captures, 0);
}

// A history that cannot be used is dropped (its tokens get RESET): the
// snapshot's objects are still used, as the keeper loaded them already.
TEST(WatchResumeStoreTest, AnUnusableHistoryIsDropped) {
  WatchResumeStore store;
  SnapshotKeeper::Target target;
  target.identity = Identity();
  store.Wire("configmaps", &target);
  FakeSource source;
  source.capture = TwoEvents();
  store.Attach("configmaps", &source);
  const informer::LoadedSnapshot good = WriteAndRead(&target);

  std::vector<informer::LoadedSnapshot> bad(5, good);
  bad[0].sections.clear();                  // a build without it
  bad[1].sections[0].version = 2;           // a future version
  bad[2].sections[0].records[1].resize(4);  // garbled
  bad[3].resource_version = "3";            // another write's
  bad[4].objects = {Cm("a", 3)};            // not its objects
  for (size_t i = 0; i < bad.size(); ++i) {
    WatchResumeStore next;
    SnapshotKeeper::Target t;
    t.identity = Identity();
    next.Wire("configmaps", &t);
    t.on_read(bad[i]);
    EXPECT_FALSE(next.TakeSeed("configmaps").has_value()) << i;
  }
  // Another identity's history.
  WatchResumeStore next;
  SnapshotKeeper::Target t;
  t.identity = Identity();
  t.identity.namespace_ = "other";
  next.Wire("configmaps", &t);
  t.on_read(good);
  EXPECT_FALSE(next.TakeSeed("configmaps").has_value());
}

}  // namespace
}  // namespace server

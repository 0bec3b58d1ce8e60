#include "informer/persist/watch_history_section.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_section.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace informer {
namespace {

using snapshot_testing::ConfigMapsIdentity;
using snapshot_testing::MakeTempDir;
using snapshot_testing::ReadAll;
using snapshot_testing::WriteAll;

ObjectPtr Cm(const std::string& name, const std::string& uid, int rv) {
  return *Object::Parse(absl::StrCat(
      R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":")", uid, R"(","resourceVersion":")", rv,
      R"("},"data":{"v":")", rv, R"("}})"));
}

PersistedWatchEvent Event(uint64_t seq, ObjectPtr obj, ObjectPtr prev,
                          bool deleted = false) {
  PersistedWatchEvent ev;
  ev.seq = seq;
  ev.obj = std::move(obj);
  ev.prev = std::move(prev);
  ev.deleted = deleted;
  ev.tombstone = deleted && ev.seq == 8;
  return ev;
}

// A history of positions 5..9 that ends at Snapshot()'s objects: a added
// and modified, b added and deleted, c (older than the history) modified.
struct Fixture {
  ObjectPtr a10 = Cm("a", "uid-a", 10), b11 = Cm("b", "uid-b", 11);
  ObjectPtr a12 = Cm("a", "uid-a", 12), b13 = Cm("b", "uid-b", 13);
  ObjectPtr c3 = Cm("c", "uid-c", 3), c14 = Cm("c", "uid-c", 14);
  ObjectPtr d2 = Cm("d", "uid-d", 2);

  std::vector<ObjectPtr> Snapshot() const { return {a12, c14, d2}; }

  PersistedWatchHistory History() const {
    PersistedWatchHistory h;
    h.identity = WatchHistoryIdentity(ConfigMapsIdentity());
    h.resource_version = "14";
    h.last_seq = 9;
    h.aliases = {{"run-1", 2, 9}, {"run-0", 1, 6}};
    h.events = {Event(5, a10, nullptr), Event(6, b11, nullptr),
                Event(7, a12, a10), Event(8, b13, b11, /*deleted=*/true),
                Event(9, c14, c3)};
    return h;
  }
};

absl::StatusOr<PersistedWatchHistory> Decode(const SnapshotSection& section,
                                             const Fixture& f,
                                             absl::string_view rv = "14") {
  return DecodeWatchHistorySection(section, ConfigMapsIdentity(), rv,
                                   f.Snapshot(), TransformOptions());
}

std::string Rv(const ObjectPtr& o) {
  return std::string(o->resource_version());
}

TEST(WatchHistorySectionTest, RoundTripsThroughASnapshotFile) {
  const Fixture f;
  const std::string dir = MakeTempDir();
  SnapshotWriteOptions wo;
  wo.extra_sections.push_back(EncodeWatchHistorySection(f.History()));
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "14", f.Snapshot(), wo).ok());
  SnapshotReadOptions ro;
  ro.keep_sections = {kWatchHistorySection};
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions(), ro);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->sections.size(), 1u);
  EXPECT_FALSE(loaded->sections[0].required);
  absl::StatusOr<PersistedWatchHistory> h = DecodeWatchHistorySection(
      loaded->sections[0], ConfigMapsIdentity(), loaded->resource_version,
      loaded->objects, TransformOptions());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->last_seq, 9u);
  ASSERT_EQ(h->aliases.size(), 2u);
  EXPECT_EQ(h->aliases[0].run_id, "run-1");
  EXPECT_EQ(h->aliases[0].epoch, 2u);
  EXPECT_EQ(h->aliases[1].last_seq, 6u);
  ASSERT_EQ(h->events.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(h->events[i].seq, 5 + i);
  EXPECT_EQ(h->events[0].prev, nullptr);
  EXPECT_EQ(Rv(h->events[2].obj), "12");
  // The state before is the key's previous event's state, shared.
  EXPECT_EQ(h->events[2].prev, h->events[0].obj);
  EXPECT_TRUE(h->events[3].deleted);
  EXPECT_TRUE(h->events[3].tombstone);
  EXPECT_EQ(h->events[3].prev, h->events[1].obj);
  EXPECT_EQ(Rv(h->events[4].prev), "3");
  // States the snapshot holds are its objects (no second copy).
  EXPECT_EQ(h->events[2].obj, loaded->objects[0]);
  EXPECT_EQ(h->events[4].obj, loaded->objects[1]);
}

TEST(WatchHistorySectionTest, AReaderNotAskingForItSkipsIt) {
  const Fixture f;
  const std::string dir = MakeTempDir();
  SnapshotWriteOptions wo;
  wo.extra_sections.push_back(EncodeWatchHistorySection(f.History()));
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "14", f.Snapshot(), wo).ok());
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->objects.size(), 3u);
  EXPECT_TRUE(loaded->sections.empty());
}

TEST(WatchHistorySectionTest, AnEmptyHistoryKeepsItsPosition) {
  const Fixture f;
  PersistedWatchHistory h = f.History();
  h.events.clear();
  absl::StatusOr<PersistedWatchHistory> back =
      Decode(EncodeWatchHistorySection(h), f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->last_seq, 9u);
  EXPECT_TRUE(back->events.empty());
}

TEST(WatchHistorySectionTest, AFutureSectionVersionIsRefused) {
  const Fixture f;
  SnapshotSection s = EncodeWatchHistorySection(f.History());
  s.version = kWatchHistorySectionVersion + 1;
  absl::StatusOr<PersistedWatchHistory> h = Decode(s, f);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kUnimplemented) << h.status();
  EXPECT_TRUE(absl::StrContains(h.status().message(), "version 2"));
}

TEST(WatchHistorySectionTest, AnotherIdentityIsRefused) {
  const Fixture f;
  SnapshotIdentity other = ConfigMapsIdentity();
  other.namespace_ = "elsewhere";
  PersistedWatchHistory h = f.History();
  h.identity = WatchHistoryIdentity(other);
  absl::StatusOr<PersistedWatchHistory> back =
      Decode(EncodeWatchHistorySection(h), f);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(back.status().message(), "another informer"))
      << back.status();
}

TEST(WatchHistorySectionTest, AnotherSnapshotsResourceVersionIsRefused) {
  const Fixture f;
  absl::StatusOr<PersistedWatchHistory> h =
      Decode(EncodeWatchHistorySection(f.History()), f, "15");
  EXPECT_EQ(h.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(h.status().message(), "written at"))
      << h.status();
}

TEST(WatchHistorySectionTest, AHistoryNotEndingAtTheSnapshotIsRefused) {
  const Fixture f;
  // The snapshot holds a@12; the history says a went on to 15.
  PersistedWatchHistory h = f.History();
  h.events.push_back(Event(10, Cm("a", "uid-a", 15), f.a12));
  h.last_seq = 10;
  absl::StatusOr<PersistedWatchHistory> back =
      Decode(EncodeWatchHistorySection(h), f);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(back.status().message(), "object ns/a"))
      << back.status();
}

TEST(WatchHistorySectionTest, ADeletionTheSnapshotDoesNotReflectIsRefused) {
  const Fixture f;
  // The history says d was deleted; the snapshot still holds it.
  PersistedWatchHistory h = f.History();
  h.events.push_back(Event(10, Cm("d", "uid-d", 15), f.d2, /*deleted=*/true));
  h.last_seq = 10;
  absl::StatusOr<PersistedWatchHistory> back =
      Decode(EncodeWatchHistorySection(h), f);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(back.status().message(), "object ns/d"))
      << back.status();
}

TEST(WatchHistorySectionTest, GarbledRecordsAreDataLoss) {
  const Fixture f;
  const SnapshotSection good = EncodeWatchHistorySection(f.History());
  SnapshotSection cut = good;
  cut.records[3].resize(cut.records[3].size() / 2);
  EXPECT_EQ(Decode(cut, f).status().code(), absl::StatusCode::kDataLoss);
  SnapshotSection header = good;
  header.records[0].resize(3);
  EXPECT_EQ(Decode(header, f).status().code(), absl::StatusCode::kDataLoss);
  SnapshotSection missing = good;
  missing.records.pop_back();
  EXPECT_EQ(Decode(missing, f).status().code(), absl::StatusCode::kDataLoss);
  SnapshotSection gap = good;
  std::swap(gap.records[1], gap.records[2]);
  absl::StatusOr<PersistedWatchHistory> h = Decode(gap, f);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(h.status().message(), "consecutive"))
      << h.status();
}

// The file is checksummed as a whole: damage inside the section (flipped
// bytes, a file cut inside it) makes the whole snapshot untrustworthy, and
// the reader refuses all of it (a cold start), never a part.
TEST(WatchHistorySectionTest, DamageInTheSectionFailsTheWholeFile) {
  const Fixture f;
  const std::string dir = MakeTempDir();
  SnapshotWriteOptions wo;
  wo.extra_sections.push_back(EncodeWatchHistorySection(f.History()));
  absl::StatusOr<SnapshotWriteStats> w =
      WriteSnapshot(dir, ConfigMapsIdentity(), "14", f.Snapshot(), wo);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string bytes = ReadAll(w->path);
  const size_t at = bytes.find(kWatchHistorySection);
  ASSERT_NE(at, std::string::npos);
  SnapshotReadOptions ro;
  ro.keep_sections = {kWatchHistorySection};
  // A byte of an event's JSON, well inside the section's records.
  std::string flipped = bytes;
  flipped[at + 200] ^= 0x20;
  WriteAll(w->path, flipped);
  absl::Status s =
      ReadSnapshotFile(w->path, ConfigMapsIdentity(), TransformOptions(), ro)
          .status();
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kChecksum) << s;
  WriteAll(w->path, bytes.substr(0, at + 200));
  s = ReadSnapshotFile(w->path, ConfigMapsIdentity(), TransformOptions(), ro)
          .status();
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kTruncated) << s;
}

}  // namespace
}  // namespace informer

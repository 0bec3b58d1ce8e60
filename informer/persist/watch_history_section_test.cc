#include "informer/persist/watch_history_section.h"

#include <functional>
#include <ostream>
#include <string>
#include <utility>
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

// Writes a snapshot of the fixture's objects at "14" with its history as an
// extra section, into a new directory `*dir`; `*path` is the file.
void WriteWithHistory(const Fixture& f, std::string* dir,
                      std::string* path = nullptr) {
  *dir = MakeTempDir();
  SnapshotWriteOptions wo;
  wo.extra_sections.push_back(EncodeWatchHistorySection(f.History()));
  absl::StatusOr<SnapshotWriteStats> w =
      WriteSnapshot(*dir, ConfigMapsIdentity(), "14", f.Snapshot(), wo);
  ASSERT_TRUE(w.ok()) << w.status();
  if (path != nullptr) *path = w->path;
}

SnapshotReadOptions KeepingHistory() {
  SnapshotReadOptions ro;
  ro.keep_sections = {kWatchHistorySection};
  return ro;
}

TEST(WatchHistorySectionTest, RoundTripsThroughASnapshotFile) {
  const Fixture f;
  std::string dir;
  ASSERT_NO_FATAL_FAILURE(WriteWithHistory(f, &dir));
  absl::StatusOr<LoadedSnapshot> loaded = ReadSnapshot(
      dir, ConfigMapsIdentity(), TransformOptions(), KeepingHistory());
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
  std::string dir;
  ASSERT_NO_FATAL_FAILURE(WriteWithHistory(f, &dir));
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

// A section the decoder refuses: the fixture's history changed by
// `change`, encoded, the encoding changed by `damage`, decoded against a
// snapshot at `rv`; refused with `code`, the message saying `says`.
struct Refusal {
  std::string name;
  std::function<void(const Fixture&, PersistedWatchHistory*)> change;
  std::function<void(SnapshotSection*)> damage;
  std::string rv;
  absl::StatusCode code;
  std::string says;  // "": any message
};

void PrintTo(const Refusal& r, std::ostream* os) { *os << r.name; }

Refusal HistoryRefused(
    std::string name,
    std::function<void(const Fixture&, PersistedWatchHistory*)> change,
    absl::StatusCode code, std::string says) {
  return {std::move(name), std::move(change), nullptr, "14", code,
          std::move(says)};
}

Refusal SectionRefused(std::string name,
                       std::function<void(SnapshotSection*)> damage,
                       absl::StatusCode code, std::string says = "") {
  return {std::move(name), nullptr, std::move(damage), "14", code,
          std::move(says)};
}

class WatchHistoryRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(WatchHistoryRefusalTest, IsRefused) {
  const Refusal& r = GetParam();
  const Fixture f;
  PersistedWatchHistory h = f.History();
  if (r.change) r.change(f, &h);
  SnapshotSection section = EncodeWatchHistorySection(h);
  if (r.damage) r.damage(&section);
  absl::StatusOr<PersistedWatchHistory> back = Decode(section, f, r.rv);
  EXPECT_EQ(back.status().code(), r.code) << back.status();
  EXPECT_TRUE(absl::StrContains(back.status().message(), r.says))
      << back.status();
}

INSTANTIATE_TEST_SUITE_P(
    WatchHistorySectionTest, WatchHistoryRefusalTest,
    ::testing::Values(
        SectionRefused(
            "AFutureSectionVersion",
            [](SnapshotSection* s) {
              s->version = kWatchHistorySectionVersion + 1;
            },
            absl::StatusCode::kUnimplemented, "version 2"),
        HistoryRefused(
            "AnotherIdentity",
            [](const Fixture&, PersistedWatchHistory* h) {
              SnapshotIdentity other = ConfigMapsIdentity();
              other.namespace_ = "elsewhere";
              h->identity = WatchHistoryIdentity(other);
            },
            absl::StatusCode::kFailedPrecondition, "another informer"),
        Refusal{"AnotherSnapshotsResourceVersion", nullptr, nullptr, "15",
                absl::StatusCode::kFailedPrecondition, "written at"},
        // The snapshot holds a@12; the history says a went on to 15.
        HistoryRefused(
            "AHistoryNotEndingAtTheSnapshot",
            [](const Fixture& f, PersistedWatchHistory* h) {
              h->events.push_back(Event(10, Cm("a", "uid-a", 15), f.a12));
              h->last_seq = 10;
            },
            absl::StatusCode::kFailedPrecondition, "object ns/a"),
        // The history says d was deleted; the snapshot still holds it.
        HistoryRefused(
            "ADeletionTheSnapshotDoesNotReflect",
            [](const Fixture& f, PersistedWatchHistory* h) {
              h->events.push_back(
                  Event(10, Cm("d", "uid-d", 15), f.d2, /*deleted=*/true));
              h->last_seq = 10;
            },
            absl::StatusCode::kFailedPrecondition, "object ns/d"),
        // Garbled records are data loss.
        SectionRefused(
            "ACutRecord",
            [](SnapshotSection* s) {
              s->records[3].resize(s->records[3].size() / 2);
            },
            absl::StatusCode::kDataLoss),
        SectionRefused(
            "ACutHeader", [](SnapshotSection* s) { s->records[0].resize(3); },
            absl::StatusCode::kDataLoss),
        SectionRefused(
            "AMissingRecord", [](SnapshotSection* s) { s->records.pop_back(); },
            absl::StatusCode::kDataLoss),
        SectionRefused(
            "RecordsOutOfOrder",
            [](SnapshotSection* s) { std::swap(s->records[1], s->records[2]); },
            absl::StatusCode::kDataLoss, "consecutive")),
    [](const ::testing::TestParamInfo<Refusal>& info) {
      return info.param.name;
    });

// The file is checksummed as a whole: damage inside the section (flipped
// bytes, a file cut inside it) makes the whole snapshot untrustworthy, and
// the reader refuses all of it (a cold start), never a part.
TEST(WatchHistorySectionTest, DamageInTheSectionFailsTheWholeFile) {
  const Fixture f;
  std::string dir, path;
  ASSERT_NO_FATAL_FAILURE(WriteWithHistory(f, &dir, &path));
  const std::string bytes = ReadAll(path);
  const size_t at = bytes.find(kWatchHistorySection);
  ASSERT_NE(at, std::string::npos);
  const SnapshotReadOptions ro = KeepingHistory();
  // A byte of an event's JSON, well inside the section's records.
  std::string flipped = bytes;
  flipped[at + 200] ^= 0x20;
  WriteAll(path, flipped);
  absl::Status s =
      ReadSnapshotFile(path, ConfigMapsIdentity(), TransformOptions(), ro)
          .status();
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kChecksum) << s;
  WriteAll(path, bytes.substr(0, at + 200));
  s = ReadSnapshotFile(path, ConfigMapsIdentity(), TransformOptions(), ro)
          .status();
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kTruncated) << s;
}

}  // namespace
}  // namespace informer

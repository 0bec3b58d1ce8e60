#include "informer/persist/snapshot_reader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_format.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace informer {
namespace {

namespace sf = snapshot_format;
using snapshot_testing::ConfigMapJson;
using snapshot_testing::ConfigMaps;
using snapshot_testing::ConfigMapsIdentity;
using snapshot_testing::MakeTempDir;
using snapshot_testing::ReadAll;
using snapshot_testing::WriteAll;

// Reads `path` as a ConfigMaps snapshot.
absl::Status ReadStatus(const std::string& path) {
  return ReadSnapshotFile(path, ConfigMapsIdentity(), TransformOptions())
      .status();
}

// Writes a small valid snapshot (3 objects, two blocks) and returns its
// bytes; `path` is where it is.
std::string SmallSnapshot(std::string* path) {
  const std::string dir = MakeTempDir();
  SnapshotWriteOptions options;
  options.block_bytes = 500;
  absl::StatusOr<SnapshotWriteStats> s =
      WriteSnapshot(dir, ConfigMapsIdentity(), "77", ConfigMaps(3), options);
  EXPECT_TRUE(s.ok()) << s.status();
  *path = s->path;
  return ReadAll(*path);
}

void ExpectProblem(const absl::Status& s, SnapshotProblem problem,
                   absl::StatusCode code, absl::string_view text,
                   absl::string_view path) {
  EXPECT_EQ(GetSnapshotProblem(s), problem) << s;
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), text)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
}

TEST(SnapshotReaderTest, AMissingFileIsNotFound) {
  const std::string dir = MakeTempDir();
  absl::StatusOr<LoadedSnapshot> s =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ExpectProblem(s.status(), SnapshotProblem::kMissing,
                absl::StatusCode::kNotFound, "no snapshot file",
                dir + "/configmaps.snapshot");
}

TEST(SnapshotReaderTest, TheIdentityIsReadFromTheHeaderAlone) {
  std::string path;
  SmallSnapshot(&path);
  absl::StatusOr<SnapshotIdentity> id = ReadSnapshotFileIdentity(path);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(*id == ConfigMapsIdentity());
  // Damage past the header is not its concern (the full read catches it).
  std::string bytes = ReadAll(path);
  bytes.resize(bytes.size() - 10);
  WriteAll(path, bytes);
  EXPECT_TRUE(ReadSnapshotFileIdentity(path).ok());
  ExpectProblem(ReadSnapshotFileIdentity(path + ".none").status(),
                SnapshotProblem::kMissing, absl::StatusCode::kNotFound,
                "no snapshot file", path);
  WriteAll(path, "not a snapshot");
  ExpectProblem(
      ReadSnapshotFileIdentity(path).status(), SnapshotProblem::kNotSnapshot,
      absl::StatusCode::kInvalidArgument, "not a snapshot file", path);
}

TEST(SnapshotReaderTest, AnEmptyFileIsTruncated) {
  const std::string path = MakeTempDir() + "/configmaps.snapshot";
  WriteAll(path, "");
  ExpectProblem(ReadStatus(path), SnapshotProblem::kTruncated,
                absl::StatusCode::kDataLoss, "the file is empty", path);
}

TEST(SnapshotReaderTest, EveryTruncationIsCaught) {
  std::string path;
  const std::string whole = SmallSnapshot(&path);
  ASSERT_TRUE(ReadStatus(path).ok());
  for (size_t n = 1; n < whole.size(); ++n) {
    WriteAll(path, whole.substr(0, n));
    const absl::Status s = ReadStatus(path);
    ASSERT_EQ(GetSnapshotProblem(s), SnapshotProblem::kTruncated)
        << "cut at " << n << ": " << s;
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss);
    ASSERT_TRUE(absl::StrContains(s.message(), "truncated")) << s;
  }
  WriteAll(path, whole.substr(0, whole.size() - 3));
  ExpectProblem(ReadStatus(path), SnapshotProblem::kTruncated,
                absl::StatusCode::kDataLoss, "ends inside the END frame", path);
}

TEST(SnapshotReaderTest, EveryFlippedByteIsCaught) {
  std::string path;
  const std::string whole = SmallSnapshot(&path);
  for (size_t i = 0; i < whole.size(); ++i) {
    {
      // The lowest bit, or the highest (alternately, to keep it quick).
      const unsigned char mask = i % 2 == 0 ? 0x01 : 0x80;
      std::string damaged = whole;
      damaged[i] = static_cast<char>(damaged[i] ^ mask);
      WriteAll(path, damaged);
      const absl::Status s = ReadStatus(path);
      // The magic's bytes make it another kind of file; every other byte
      // is under a checksum.
      const SnapshotProblem want =
          i < 8 ? SnapshotProblem::kNotSnapshot : SnapshotProblem::kChecksum;
      ASSERT_EQ(GetSnapshotProblem(s), want) << "byte " << i << ": " << s;
    }
  }
  std::string damaged = whole;
  damaged[whole.size() / 2] ^= 0x10;
  WriteAll(path, damaged);
  ExpectProblem(ReadStatus(path), SnapshotProblem::kChecksum,
                absl::StatusCode::kDataLoss, "checksum mismatch in the", path);
}

TEST(SnapshotReaderTest, AFutureFormatVersionIsUnsupported) {
  std::string path;
  const std::string whole = SmallSnapshot(&path);
  WriteAll(path, sf::EncodePrologue(2) + whole.substr(sf::kPrologueBytes));
  ExpectProblem(ReadStatus(path), SnapshotProblem::kUnsupportedVersion,
                absl::StatusCode::kUnimplemented,
                "format version 2 is not supported (this build reads "
                "version 1)",
                path);
}

TEST(SnapshotReaderTest, OtherFilesAreNotSnapshots) {
  const std::string path = MakeTempDir() + "/configmaps.snapshot";
  for (const std::string& content :
       {ConfigMapJson(1), std::string("\x89INFSNQ\n", 8) + std::string(99, 0),
        std::string("x")}) {
    WriteAll(path, content);
    ExpectProblem(ReadStatus(path), SnapshotProblem::kNotSnapshot,
                  absl::StatusCode::kInvalidArgument, "not a snapshot file",
                  path);
  }
  WriteAll(path, std::string("\x89INF", 4));  // a snapshot's first bytes
  EXPECT_EQ(GetSnapshotProblem(ReadStatus(path)), SnapshotProblem::kTruncated);
}

TEST(SnapshotReaderTest, AnotherInformersSnapshotNamesTheDifference) {
  struct Case {
    void (*change)(SnapshotIdentity&);
    const char* field;
  };
  const Case cases[] = {
      {[](SnapshotIdentity& id) { id.cluster = "other-cluster"; }, "cluster"},
      {[](SnapshotIdentity& id) { id.resource = "secrets"; }, "resource"},
      {[](SnapshotIdentity& id) { id.group = "apps"; }, "group"},
      {[](SnapshotIdentity& id) { id.version = "v2"; }, "version"},
      {[](SnapshotIdentity& id) { id.namespace_ = "kube-system"; },
       "namespace"},
      {[](SnapshotIdentity& id) { id.label_selector = "app=x"; },
       "label selector"},
      {[](SnapshotIdentity& id) { id.field_selector = "a=b"; },
       "field selector"},
      {[](SnapshotIdentity& id) { id.transform = "managed_fields=keep;drop="; },
       "transform"},
      {[](SnapshotIdentity& id) { id.metadata_only = true; }, "metadata-only"},
  };
  const std::string dir = MakeTempDir();
  for (const Case& c : cases) {
    SnapshotIdentity written = ConfigMapsIdentity();
    c.change(written);
    absl::StatusOr<SnapshotWriteStats> w =
        WriteSnapshot(dir, written, "5", ConfigMaps(2));
    ASSERT_TRUE(w.ok()) << w.status();
    // Under the expected name whatever its identity (a copied file, or a
    // changed setting of the same informer).
    const std::string path = SnapshotPath(dir, ConfigMapsIdentity());
    if (w->path != path) {
      ASSERT_EQ(rename(w->path.c_str(), path.c_str()), 0);
    }
    ExpectProblem(ReadStatus(path), SnapshotProblem::kIdentityMismatch,
                  absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("another informer's snapshot: ", c.field,
                               " differs: snapshot \""),
                  path);
  }
}

// Builds snapshot files frame by frame, valid checksums and all, to reach
// the checks behind them.
class RawSnapshot {
 public:
  RawSnapshot() : bytes_(sf::EncodePrologue(sf::kFormatVersion)) {}
  RawSnapshot& Frame(uint32_t type, const std::string& payload) {
    char h[sf::kFrameHeaderBytes];
    sf::EncodeFrameHeader(type, payload.size(), h);
    bytes_.append(h, sizeof(h));
    bytes_ += payload;
    char crc[4];
    sf::PutFixed32(sf::Crc32(payload), crc);
    bytes_.append(crc, 4);
    return *this;
  }
  RawSnapshot& Header() {
    sf::Header h;
    h.identity = ConfigMapsIdentity();
    h.resource_version = "3";
    return Frame(sf::kHeaderFrame, sf::EncodeHeader(h));
  }
  RawSnapshot& Begin(const std::string& name, uint64_t version, uint64_t flags,
                     uint64_t count) {
    std::string p;
    sf::AppendString(name, &p);
    sf::AppendVarint(version, &p);
    sf::AppendVarint(flags, &p);
    sf::AppendVarint(count, &p);
    return Frame(sf::kSectionBeginFrame, p);
  }
  RawSnapshot& Records(const std::vector<std::string>& records) {
    std::string p;
    for (const std::string& r : records) sf::AppendString(r, &p);
    return Frame(sf::kRecordsFrame, p);
  }
  RawSnapshot& End(uint64_t count, uint64_t bytes) {
    std::string p;
    sf::AppendVarint(count, &p);
    sf::AppendVarint(bytes, &p);
    return Frame(sf::kSectionEndFrame, p);
  }
  RawSnapshot& Finish(uint64_t sections) {
    std::string p;
    sf::AppendVarint(sections, &p);
    return Frame(sf::kEndFrame, p);
  }
  RawSnapshot& Objects(const std::vector<std::string>& jsons) {
    uint64_t bytes = 0;
    for (const std::string& j : jsons) bytes += j.size();
    return Begin("objects", 1, sf::kSectionRequired, jsons.size())
        .Records(jsons)
        .End(jsons.size(), bytes);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

absl::Status ReadRaw(const RawSnapshot& raw, std::string* path) {
  *path = MakeTempDir() + "/configmaps.snapshot";
  WriteAll(*path, raw.bytes());
  return ReadStatus(*path);
}

TEST(SnapshotReaderTest, TheRawBuilderMakesValidSnapshots) {
  std::string path;
  RawSnapshot raw;
  raw.Header().Objects({ConfigMapJson(1), ConfigMapJson(2)}).Finish(1);
  const absl::Status s = ReadRaw(raw, &path);
  ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshotFile(path, ConfigMapsIdentity(), TransformOptions());
  ASSERT_EQ(loaded->objects.size(), 2u);
  EXPECT_EQ(loaded->resource_version, "3");
}

TEST(SnapshotReaderTest, UnknownOptionalSectionsAreSkipped) {
  std::string path;
  RawSnapshot raw;
  raw.Header()
      .Begin("watch_history", 1, 0, 2)
      .Records({"e1", "e2"})
      .End(2, 4)
      .Objects({ConfigMapJson(1)})
      .Finish(2);
  absl::Status s = ReadRaw(raw, &path);
  ASSERT_TRUE(s.ok()) << s;
}

TEST(SnapshotReaderTest, UnknownRequiredSectionsAreUnsupported) {
  std::string path;
  RawSnapshot raw;
  raw.Header()
      .Begin("watch_history", 1, sf::kSectionRequired, 0)
      .End(0, 0)
      .Objects({})
      .Finish(2);
  absl::Status s = ReadRaw(raw, &path);
  ExpectProblem(s, SnapshotProblem::kUnsupportedVersion,
                absl::StatusCode::kUnimplemented,
                "section \"watch_history\" version 1 is required", path);
  RawSnapshot v3;
  v3.Header().Begin("objects", 3, sf::kSectionRequired, 0).End(0, 0).Finish(1);
  s = ReadRaw(v3, &path);
  ExpectProblem(s, SnapshotProblem::kUnsupportedVersion,
                absl::StatusCode::kUnimplemented,
                "section \"objects\" version 3", path);
}

TEST(SnapshotReaderTest, InvalidContentBehindGoodChecksumsIsMalformed) {
  struct Case {
    RawSnapshot raw;
    const char* message;
  };
  std::vector<Case> cases(7);
  cases[0].raw.Header().Objects({"{not json"}).Finish(1);
  cases[0].message = "object 1 (in the RECORDS frame at offset";
  cases[1].raw.Header().Objects({ConfigMapJson(1)}).Finish(1).Finish(1);
  cases[1].message = "bytes follow the END frame";
  cases[2].raw.Header().Finish(0);
  cases[2].message = "no objects section";
  cases[3].raw.Objects({}).Finish(1);
  cases[3].message = "the first frame is SECTION_BEGIN, not HEADER";
  cases[4].raw.Header().Begin("objects", 1, 1, 2).Records({ConfigMapJson(1)});
  cases[4].raw.End(2, ConfigMapJson(1).size());
  cases[4].raw.Finish(1);
  cases[4].message = "announced 2 records";
  cases[5].raw.Header().Records({ConfigMapJson(1)});
  cases[5].message = "unexpected RECORDS frame";
  cases[6].raw.Header().Frame(9, "").Finish(0);
  cases[6].message = "unexpected unknown frame (type 9)";
  for (const Case& c : cases) {
    std::string path;
    const absl::Status s = ReadRaw(c.raw, &path);
    ExpectProblem(s, SnapshotProblem::kMalformed, absl::StatusCode::kDataLoss,
                  c.message, path);
  }
}

TEST(SnapshotReaderTest, AnObjectThatIsNotAnObjectIsMalformed) {
  std::string path;
  RawSnapshot raw;
  raw.Header().Objects({ConfigMapJson(1), "[1,2]"}).Finish(1);
  const absl::Status s = ReadRaw(raw, &path);
  ExpectProblem(s, SnapshotProblem::kMalformed, absl::StatusCode::kDataLoss,
                "object 2", path);
}

TEST(SnapshotReaderTest, LargeSnapshotsDecodeInOrderWithAndWithoutThreads) {
  // Enough objects for a threaded decode, in many blocks.
  const std::string dir = MakeTempDir();
  const std::vector<ObjectPtr> objects = ConfigMaps(3000, 8);
  SnapshotWriteOptions options;
  options.block_bytes = 8192;
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", objects, options).ok());
  for (int threads : {0, 2}) {
    SnapshotReadOptions read_options;
    read_options.decode_threads = threads;
    absl::StatusOr<LoadedSnapshot> loaded = ReadSnapshot(
        dir, ConfigMapsIdentity(), TransformOptions(), read_options);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(snapshot_testing::JsonsOf(loaded->objects),
              snapshot_testing::JsonsOf(objects));
  }
}

TEST(SnapshotReaderTest, AnInvalidObjectInALargeSnapshotIsNamed) {
  RawSnapshot raw;
  raw.Header().Begin("objects", 1, sf::kSectionRequired, 3000);
  uint64_t bytes = 0;
  for (int block = 0; block < 30; ++block) {
    std::vector<std::string> jsons;
    for (int i = block * 100; i < (block + 1) * 100; ++i) {
      jsons.push_back(i == 1233 ? std::string("{}") : ConfigMapJson(i, 8));
      bytes += jsons.back().size();
    }
    raw.Records(jsons);
  }
  raw.End(3000, bytes).Finish(1);
  std::string path;
  ExpectProblem(ReadRaw(raw, &path), SnapshotProblem::kMalformed,
                absl::StatusCode::kDataLoss,
                "object 1234 (in the RECORDS frame at offset", "");
  SnapshotReadOptions threaded;
  threaded.decode_threads = 2;
  ExpectProblem(
      ReadSnapshotFile(path, ConfigMapsIdentity(), TransformOptions(), threaded)
          .status(),
      SnapshotProblem::kMalformed, absl::StatusCode::kDataLoss,
      "object 1234 (in the RECORDS frame at offset", path);
}

TEST(SnapshotReaderTest, ADirectoryIsAnIoError) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/configmaps.snapshot";
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
  ExpectProblem(ReadStatus(path), SnapshotProblem::kIo,
                absl::StatusCode::kFailedPrecondition, "Is a directory", path);
}

TEST(SnapshotReaderTest, ObjectsAreDecodedWithTheTransform) {
  const std::string dir = MakeTempDir();
  TransformOptions drop;
  drop.drop_fields = {"data"};
  SnapshotIdentity id = ConfigMapsIdentity();
  id.transform = TransformIdentity(drop);
  // Written as an informer caches them: already transformed.
  std::vector<ObjectPtr> objects;
  for (int i = 0; i < 20; ++i) {
    objects.push_back(*Object::Parse(ConfigMapJson(i, 100), drop));
  }
  ASSERT_TRUE(WriteSnapshot(dir, id, "8", objects).ok());
  absl::StatusOr<LoadedSnapshot> loaded = ReadSnapshot(dir, id, drop);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->objects.size(), 20u);
  const std::string json = snapshot_testing::JsonOf(*loaded->objects[3]);
  EXPECT_FALSE(absl::StrContains(json, "\"data\""));
  EXPECT_FALSE(absl::StrContains(json, "managedFields"));
  EXPECT_EQ(*loaded->objects[3]->Label("app"), "app-3");
}

}  // namespace
}  // namespace informer

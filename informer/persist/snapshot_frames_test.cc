// Snapshots whose objects are kept as zstd frames (the objects section's
// version 2): written by WriteSnapshot, read back by ReadSnapshot.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_format.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace informer {
namespace {

namespace sf = snapshot_format;
using snapshot_testing::ConfigMapJson;
using snapshot_testing::ConfigMapsIdentity;
using snapshot_testing::JsonsOf;
using snapshot_testing::MakeTempDir;
using snapshot_testing::ReadAll;
using snapshot_testing::WriteAll;

TransformOptions WithCompressor(size_t train = 32) {
  ZstdJsonCompressor::Options o;
  o.train_objects = train;
  TransformOptions t;
  t.compressor = std::make_shared<ZstdJsonCompressor>(o);
  return t;
}

ZstdJsonCompressor& Zstd(const TransformOptions& t) {
  return *static_cast<ZstdJsonCompressor*>(t.compressor.get());
}

std::vector<ObjectPtr> Objects(int n, const TransformOptions& transform) {
  std::vector<ObjectPtr> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(*Object::Parse(ConfigMapJson(i, 700), transform));
  }
  return out;
}

// Writes `objects` to a fresh directory; returns the file's path.
std::string Write(const std::vector<ObjectPtr>& objects, bool frames,
                  SnapshotWriteStats* stats = nullptr) {
  SnapshotWriteOptions o;
  o.block_bytes = 16 << 10;  // several blocks
  o.compressed_frames = frames;
  absl::StatusOr<SnapshotWriteStats> w =
      WriteSnapshot(MakeTempDir(), ConfigMapsIdentity(), "42", objects, o);
  EXPECT_TRUE(w.ok()) << w.status();
  if (stats != nullptr) *stats = *w;
  return w->path;
}

absl::StatusOr<LoadedSnapshot> Read(const std::string& path,
                                    const TransformOptions& transform,
                                    int threads = 0) {
  SnapshotReadOptions o;
  o.decode_threads = threads;
  return ReadSnapshotFile(path, ConfigMapsIdentity(), transform, o);
}

TEST(SnapshotFramesTest, FramesRoundTripAndAreAdopted) {
  const std::vector<ObjectPtr> objects = Objects(300, WithCompressor());
  SnapshotWriteStats stats;
  const std::string path = Write(objects, true, &stats);
  EXPECT_TRUE(stats.frames);
  // Smaller than the JSON it holds (random payloads compress little).
  EXPECT_LT(stats.file_bytes, stats.json_bytes * 9 / 10);
  const TransformOptions transform = WithCompressor();
  absl::StatusOr<LoadedSnapshot> loaded = Read(path, transform);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->resource_version, "42");
  EXPECT_EQ(JsonsOf(loaded->objects), JsonsOf(objects));
  const ZstdJsonCompressor::Stats z = Zstd(transform).stats();
  EXPECT_EQ(z.dictionaries_trained, 0u);
  EXPECT_EQ(z.dictionaries_adopted, 1u);
  EXPECT_EQ(z.objects_compressed, 300u);
  for (size_t i = 0; i < objects.size(); ++i) {
    if (objects[i]->compressed()) {
      EXPECT_EQ(loaded->objects[i]->stored_json(), objects[i]->stored_json());
    }
  }
}

TEST(SnapshotFramesTest, ThreadedDecodeKeepsTheOrder) {
  const std::vector<ObjectPtr> objects = Objects(2500, WithCompressor());
  const std::string path = Write(objects, true);
  const TransformOptions transform = WithCompressor();
  absl::StatusOr<LoadedSnapshot> loaded = Read(path, transform, 2);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(loaded->objects), JsonsOf(objects));
  EXPECT_EQ(Zstd(transform).stats().dictionaries_trained, 0u);
}

TEST(SnapshotFramesTest, JsonSnapshotsStillLoad) {
  // Version 1 (every object as JSON): as older builds wrote, and as this
  // one writes when asked, or when nothing is held compressed.
  const std::vector<ObjectPtr> objects = Objects(100, WithCompressor());
  SnapshotWriteStats stats;
  const std::string path = Write(objects, false, &stats);
  EXPECT_FALSE(stats.frames);
  EXPECT_GT(stats.file_bytes, stats.json_bytes);
  const TransformOptions transform = WithCompressor();
  absl::StatusOr<LoadedSnapshot> loaded = Read(path, transform);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(loaded->objects), JsonsOf(objects));
  // Compressed again, by a dictionary trained on them.
  EXPECT_EQ(Zstd(transform).stats().dictionaries_trained, 1u);
  EXPECT_FALSE(Write(Objects(5, TransformOptions()), true, &stats).empty());
  EXPECT_FALSE(stats.frames);
}

TEST(SnapshotFramesTest, EveryFlippedByteAndEveryCutIsCaught) {
  // A small file (a dictionary trained on 4 objects), and a byte of every
  // few (the reader's own tests flip every byte of a version 1 file).
  const std::vector<ObjectPtr> objects = Objects(12, WithCompressor(4));
  const std::string path = Write(objects, true);
  const std::string whole = ReadAll(path);
  for (size_t i = 8; i < whole.size(); i += 7) {
    std::string damaged = whole;
    damaged[i] = static_cast<char>(damaged[i] ^ (1 << (i % 8)));
    WriteAll(path, damaged);
    const absl::Status s = Read(path, WithCompressor()).status();
    ASSERT_EQ(GetSnapshotProblem(s), SnapshotProblem::kChecksum)
        << "byte " << i << ": " << s;
  }
  for (size_t n = 1; n < whole.size(); n += 11) {
    WriteAll(path, whole.substr(0, n));
    ASSERT_EQ(GetSnapshotProblem(Read(path, WithCompressor()).status()),
              SnapshotProblem::kTruncated)
        << "cut at " << n;
  }
}

TEST(SnapshotFramesTest, ADamagedFileLeavesTheCompressorAsItWas) {
  // A byte of the last RECORDS frame flipped: the dictionary's record, in
  // the first, checks out and is read before the damage is found.
  const std::vector<ObjectPtr> objects = Objects(300, WithCompressor());
  const std::string path = Write(objects, true);
  std::string damaged = ReadAll(path);
  damaged[damaged.size() - 100] ^= 0x10;
  WriteAll(path, damaged);
  const TransformOptions transform = WithCompressor();
  const absl::Status s = Read(path, transform, 0).status();
  ASSERT_EQ(GetSnapshotProblem(s), SnapshotProblem::kChecksum) << s;
  const ZstdJsonCompressor::Stats z = Zstd(transform).stats();
  EXPECT_EQ(Zstd(transform).dictionary(), nullptr);
  EXPECT_EQ(z.dictionaries_adopted, 0u);
  EXPECT_EQ(z.dictionaries_trained, 0u);
  EXPECT_EQ(z.objects_compressed, 0u);
  EXPECT_EQ(z.objects_kept, 0u);
  // The cold start that follows: the objects listed again are held
  // exactly as by a compressor that never saw the file (its own
  // dictionary, trained on them, the same bytes).
  const TransformOptions fresh = WithCompressor();
  const std::vector<ObjectPtr> after_damage = Objects(300, transform);
  const std::vector<ObjectPtr> never_saw = Objects(300, fresh);
  EXPECT_EQ(Zstd(transform).stats().dictionaries_trained, 1u);
  EXPECT_EQ(Zstd(transform).stats().dictionaries_adopted, 0u);
  ASSERT_NE(Zstd(transform).dictionary(), nullptr);
  EXPECT_EQ(Zstd(transform).dictionary()->bytes(),
            Zstd(fresh).dictionary()->bytes());
  EXPECT_EQ(JsonsOf(after_damage), JsonsOf(objects));
  for (size_t i = 0; i < never_saw.size(); ++i) {
    ASSERT_EQ(after_damage[i]->stored_json(), never_saw[i]->stored_json()) << i;
  }
  // An intact file read with two decode threads: adopted at the end, all
  // of it.
  const std::string big = Write(Objects(2500, WithCompressor()), true);
  const TransformOptions threaded = WithCompressor();
  ASSERT_TRUE(Read(big, threaded, 2).ok());
  EXPECT_EQ(Zstd(threaded).stats().dictionaries_adopted, 1u);
  EXPECT_EQ(Zstd(threaded).stats().objects_compressed, 2500u);
}

// The file with its objects section's version replaced (checksum fixed).
std::string WithSectionVersion(std::string file, char version) {
  const size_t header = sf::kPrologueBytes;
  const size_t header_payload = sf::GetFixed32(&file[header + 4]);
  const size_t begin =
      header + sf::kFrameHeaderBytes + header_payload + sf::kFrameTrailerBytes;
  const size_t payload = begin + sf::kFrameHeaderBytes;
  const size_t size = sf::GetFixed32(&file[begin + 4]);
  // "objects" as a varint-sized string, then the version (one byte).
  EXPECT_EQ(file.substr(payload, 8), "\x07objects");
  file[payload + 8] = version;
  sf::PutFixed32(sf::Crc32(absl::string_view(&file[payload], size)),
                 &file[payload + size]);
  return file;
}

TEST(SnapshotFramesTest, AnEncodingThisBuildDoesNotKnowIsRefusedClearly) {
  const std::string path = Write(Objects(40, WithCompressor()), true);
  const std::string whole = ReadAll(path);
  ASSERT_EQ(whole, WithSectionVersion(whole, 2));
  // What a build that knows only version 1 does with version 2, and this
  // build with a version 3.
  WriteAll(path, WithSectionVersion(whole, 3));
  const absl::Status s = Read(path, WithCompressor()).status();
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kUnsupportedVersion) << s;
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "section \"objects\" version 3 is required"))
      << s;
  // Version 2's tagged records read as version 1's JSON: malformed, not
  // wrong objects.
  WriteAll(path, WithSectionVersion(whole, 1));
  EXPECT_EQ(GetSnapshotProblem(Read(path, WithCompressor()).status()),
            SnapshotProblem::kMalformed);
}

}  // namespace
}  // namespace informer

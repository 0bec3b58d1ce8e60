#include "informer/persist/object_record_codec.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "informer/persist/snapshot_test_util.h"

namespace informer {
namespace object_records {
namespace {

using snapshot_testing::ConfigMapJson;
using snapshot_testing::JsonOf;
using snapshot_testing::JsonsOf;

// A compressor that trains on its first `train` objects, as the sidecar's
// does on its first 512.
std::shared_ptr<ZstdJsonCompressor> Compressor(size_t train = 16) {
  ZstdJsonCompressor::Options o;
  o.train_objects = train;
  return std::make_shared<ZstdJsonCompressor>(o);
}

TransformOptions With(std::shared_ptr<JsonCompressor> compressor) {
  TransformOptions t;
  t.compressor = std::move(compressor);
  return t;
}

// ConfigMaps `first`..`first + n - 1` decoded through `transform`.
std::vector<ObjectPtr> Decoded(int first, int n,
                               const TransformOptions& transform) {
  std::vector<ObjectPtr> out;
  for (int i = first; i < first + n; ++i) {
    absl::StatusOr<ObjectPtr> obj =
        Object::Parse(ConfigMapJson(i, 512), transform);
    EXPECT_TRUE(obj.ok()) << obj.status();
    out.push_back(*obj);
  }
  return out;
}

// Every record of `objects`: the dictionaries, then one per object.
std::vector<std::string> Records(const std::vector<ObjectPtr>& objects) {
  const Encoder encoder(objects);
  std::vector<std::string> out = encoder.DictionaryRecords();
  for (const ObjectPtr& obj : objects) {
    std::string record;
    encoder.Encode(*obj, &record);
    out.push_back(record);
  }
  return out;
}

// Decodes `records` as a reader does: dictionaries first, then objects,
// then (when `adopt`: the file checked out) Adopt.
absl::StatusOr<std::vector<ObjectPtr>> DecodeAll(
    const std::vector<std::string>& records, Decoder& decoder,
    bool adopt = true) {
  std::vector<ObjectPtr> out;
  for (const std::string& r : records) {
    uint8_t tag = 0;
    if (Decoder::Tag(r, &tag) && tag == kDictionaryTag) {
      absl::Status s = decoder.AddDictionary(r);
      if (!s.ok()) return s;
      continue;
    }
    absl::StatusOr<ObjectPtr> obj = decoder.Decode(r);
    if (!obj.ok()) return obj.status();
    out.push_back(*obj);
  }
  if (adopt) decoder.Adopt(out);
  return out;
}

TEST(ObjectRecordCodecTest, FramesAreAdoptedWithTheirDictionary) {
  const std::vector<ObjectPtr> written = Decoded(0, 64, With(Compressor()));
  const std::vector<std::string> records = Records(written);
  // One dictionary; the 15 objects sampled before it was trained are JSON
  // records (as they are held: mixed frames).
  ASSERT_EQ(records.size(), 65u);
  size_t frames = 0;
  for (size_t i = 1; i < records.size(); ++i) {
    frames += records[i][0] == static_cast<char>(kFrameTag);
  }
  EXPECT_EQ(frames, 49u);

  auto compressor = Compressor();
  Decoder decoder(With(compressor));
  absl::StatusOr<std::vector<ObjectPtr>> loaded = DecodeAll(records, decoder);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(*loaded), JsonsOf(written));
  const std::shared_ptr<const ZstdJsonDictionary> adopted =
      compressor->dictionary();
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(adopted->bytes(),
            std::dynamic_pointer_cast<const ZstdJsonDictionary>(
                written.back()->dictionary())
                ->bytes());
  for (size_t i = 0; i < loaded->size(); ++i) {
    const Object& o = *(*loaded)[i];
    EXPECT_EQ(o.Key(), written[i]->Key());
    EXPECT_EQ(o.resource_version(), written[i]->resource_version());
    EXPECT_EQ(o.labels(), written[i]->labels());
    if (written[i]->compressed()) {
      // The frame as it was, with the adopted dictionary: not compressed
      // again.
      EXPECT_EQ(o.dictionary(), adopted);
      EXPECT_EQ(o.stored_json(), written[i]->stored_json());
    } else {
      // A JSON record is compressed with the snapshot's current
      // dictionary, the one adopted: compressed now too.
      EXPECT_EQ(o.dictionary(), adopted) << i;
    }
  }
  const ZstdJsonCompressor::Stats stats = compressor->stats();
  EXPECT_EQ(stats.dictionaries_trained, 0u);
  EXPECT_EQ(stats.dictionaries_adopted, 1u);
  EXPECT_EQ(stats.objects_compressed, 64u);
  // Objects that arrive later are compressed with it; no sample, no
  // training.
  const std::vector<ObjectPtr> later = Decoded(100, 20, With(compressor));
  EXPECT_EQ(later.back()->dictionary(), adopted);
  EXPECT_EQ(compressor->stats().dictionaries_trained, 0u);
}

TEST(ObjectRecordCodecTest, TheCompressorTakesNothingBeforeAdopt) {
  const std::vector<ObjectPtr> written = Decoded(0, 64, With(Compressor()));
  auto compressor = Compressor();
  Decoder decoder(With(compressor));
  absl::StatusOr<std::vector<ObjectPtr>> loaded =
      DecodeAll(Records(written), decoder, /*adopt=*/false);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // Readable, held with the snapshot's dictionary (JSON records too)...
  EXPECT_EQ(JsonsOf(*loaded), JsonsOf(written));
  const std::shared_ptr<const JsonDictionary> snapshot_dictionary =
      loaded->back()->dictionary();
  ASSERT_NE(snapshot_dictionary, nullptr);
  EXPECT_EQ((*loaded)[0]->dictionary(), snapshot_dictionary);
  // ... but the compressor neither uses nor counts it, nor sampled the
  // JSON records: as if it had never seen them.
  EXPECT_EQ(compressor->dictionary(), nullptr);
  ZstdJsonCompressor::Stats stats = compressor->stats();
  EXPECT_EQ(stats.dictionaries_adopted, 0u);
  EXPECT_EQ(stats.dictionaries_trained, 0u);
  EXPECT_EQ(stats.objects_compressed, 0u);
  EXPECT_EQ(stats.version, 0u);
  decoder.Adopt(*loaded);
  EXPECT_EQ(compressor->dictionary(), snapshot_dictionary);
  stats = compressor->stats();
  EXPECT_EQ(stats.dictionaries_adopted, 1u);
  EXPECT_EQ(stats.objects_compressed, 64u);
}

TEST(ObjectRecordCodecTest, EveryDictionaryVersionIsKeptAndTheNewestAdopted) {
  auto writer = Compressor();
  std::vector<ObjectPtr> written = Decoded(0, 40, With(writer));
  writer->Retrain();
  std::vector<ObjectPtr> more = Decoded(40, 40, With(writer));
  written.insert(written.end(), more.begin(), more.end());
  ASSERT_EQ(writer->stats().dictionaries_trained, 2u);
  const std::vector<std::string> records = Records(written);
  ASSERT_EQ(records.size(), 82u);

  auto compressor = Compressor();
  Decoder decoder(With(compressor));
  absl::StatusOr<std::vector<ObjectPtr>> loaded = DecodeAll(records, decoder);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(*loaded), JsonsOf(written));
  EXPECT_EQ(compressor->stats().dictionaries_adopted, 2u);
  EXPECT_EQ(compressor->dictionary()->bytes(), writer->dictionary()->bytes());
  EXPECT_NE((*loaded)[20]->dictionary(), (*loaded)[79]->dictionary());
  EXPECT_EQ((*loaded)[79]->dictionary(), compressor->dictionary());
  // The adopted compressor retrains as any does: the next version.
  compressor->Retrain();
  Decoded(200, 20, With(compressor));
  EXPECT_EQ(compressor->stats().dictionaries_trained, 1u);
  EXPECT_EQ(compressor->stats().version, 3u);
  const std::vector<ObjectPtr> after = Decoded(300, 4, With(compressor));
  EXPECT_EQ(after.back()->dictionary(), compressor->dictionary());
  EXPECT_EQ(JsonOf(*after.back()), JsonOf(*Decoded(303, 1, {})[0]));
}

TEST(ObjectRecordCodecTest, WithoutACompressorFramesLoadAsPlainJson) {
  const std::vector<ObjectPtr> written = Decoded(0, 40, With(Compressor()));
  Decoder decoder{TransformOptions()};
  absl::StatusOr<std::vector<ObjectPtr>> loaded =
      DecodeAll(Records(written), decoder);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(*loaded), JsonsOf(written));
  for (const ObjectPtr& o : *loaded) EXPECT_FALSE(o->compressed());
}

TEST(ObjectRecordCodecTest, ACompressorWithADictionaryKeepsItsOwn) {
  const std::vector<ObjectPtr> written = Decoded(0, 40, With(Compressor()));
  auto compressor = Compressor();
  Decoded(500, 20, With(compressor));  // trains its own
  const auto own = compressor->dictionary();
  ASSERT_NE(own, nullptr);
  Decoder decoder(With(compressor));
  absl::StatusOr<std::vector<ObjectPtr>> loaded =
      DecodeAll(Records(written), decoder);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(*loaded), JsonsOf(written));
  EXPECT_EQ(compressor->dictionary(), own);
  // The frames keep the snapshot's dictionary, which reads them.
  EXPECT_NE(loaded->back()->dictionary(), own);
  EXPECT_EQ(loaded->back()->stored_json(), written.back()->stored_json());
}

// The parts of a frame record.
struct FrameParts {
  std::string head;  // tag, index, JSON size
  std::string crc;
  std::string frame;
};

FrameParts Split(const std::string& record) {
  size_t at = 1;
  for (int varints = 0; varints < 2; ++at) {
    if ((static_cast<unsigned char>(record[at]) & 0x80) == 0) ++varints;
  }
  return {record.substr(0, at), record.substr(at, 4), record.substr(at + 4)};
}

absl::Status DecodeLast(std::vector<std::string> records) {
  Decoder decoder(With(Compressor()));
  return DecodeAll(records, decoder).status();
}

void ExpectFails(const std::vector<std::string>& records,
                 absl::string_view text) {
  const absl::Status s = DecodeLast(records);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), text)) << s;
}

TEST(ObjectRecordCodecTest, DamagedFramesAndDictionariesFail) {
  const std::vector<ObjectPtr> written = Decoded(0, 20, With(Compressor()));
  const std::vector<std::string> records = Records(written);
  ASSERT_TRUE(DecodeLast(records).ok());
  const std::string& last = records.back();
  ASSERT_EQ(last[0], static_cast<char>(kFrameTag));
  const FrameParts p = Split(last);
  auto with_last = [&](std::string r) {
    std::vector<std::string> out = records;
    out.back() = std::move(r);
    return out;
  };
  ExpectFails(with_last(p.head + p.crc + p.frame.substr(0, 10)),
              "does not decompress");
  ExpectFails(with_last(p.head + "\x01\x02\x03\x04" + p.frame),
              "does not match the JSON's checksum");
  ExpectFails(with_last(p.head.substr(0, 2)), "garbled");
  std::string other_index = p.head;
  other_index[1] = 5;
  ExpectFails(with_last(other_index + p.crc + p.frame),
              "names dictionary 5 of 1");
  std::string huge(1, static_cast<char>(kFrameTag));
  huge += std::string("\x00\xff\xff\xff\xff\x0f", 6);
  ExpectFails(with_last(huge + p.crc + p.frame), "claims");
  ExpectFails(with_last("\x07{}"), "unknown record tag 7");
  ExpectFails(with_last(""), "empty record");
  // Every bit of the frame flipped in turn: an error or the same JSON,
  // never other JSON.
  for (size_t i = 0; i < p.frame.size() * 8; i += 7) {
    std::string frame = p.frame;
    frame[i / 8] ^= static_cast<char>(1 << (i % 8));
    Decoder decoder(With(Compressor()));
    absl::StatusOr<std::vector<ObjectPtr>> got =
        DecodeAll(with_last(p.head + p.crc + frame), decoder);
    if (got.ok()) {
      EXPECT_EQ(JsonOf(*got->back()), JsonOf(*written.back()));
    }
  }
}

TEST(ObjectRecordCodecTest, AnotherDictionaryOrABadOneIsRefused) {
  const std::vector<ObjectPtr> written = Decoded(0, 20, With(Compressor()));
  std::vector<std::string> records = Records(written);
  // Another resource's dictionary in place of the frames' own.
  std::vector<ObjectPtr> others;
  auto other = Compressor();
  for (int i = 0; i < 20; ++i) {
    others.push_back(*Object::Parse(
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":"
        "{\"name\":\"s" +
            std::to_string(i) +
            "\",\"namespace\":\"x\"},\"type\":\"Opaque\","
            "\"data\":{\"k\":\"" +
            std::string(300, 'a' + i % 20) + "\"}}",
        With(other)));
  }
  const std::vector<std::string> other_records = Records(others);
  std::vector<std::string> swapped = records;
  swapped[0] = other_records[0];
  const absl::Status s = DecodeLast(swapped);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "dictionary 0")) << s;
  // Out of order, garbled, and bytes zstd refuses (its dictionary magic
  // before nonsense).
  std::string out_of_order = records[0];
  out_of_order[1] = 1;
  ExpectFails({out_of_order}, "dictionary 1 comes where dictionary 0");
  ExpectFails({std::string(1, static_cast<char>(kDictionaryTag))}, "garbled");
  std::string bad = std::string(1, static_cast<char>(kDictionaryTag)) +
                    std::string("\x00\x01", 2) +
                    std::string("\x37\xa4\x30\xec", 4) +
                    std::string(64, '\xff');
  ExpectFails({bad}, "dictionary 0 is unusable");
  // A frame record whose dictionary record is missing.
  ExpectFails({records.back()}, "names dictionary 0 of 0");
}

}  // namespace
}  // namespace object_records
}  // namespace informer

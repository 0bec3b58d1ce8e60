#ifndef INFORMER_PERSIST_OBJECT_RECORD_CODEC_H_
#define INFORMER_PERSIST_OBJECT_RECORD_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"

namespace informer {

// The records of the objects section, version 2 (see snapshot_format.h):
// objects kept as the cache holds them, each either its JSON or the zstd
// frame it is held compressed as, with the dictionaries that read the
// frames back. A load then adopts the dictionaries and the frames instead
// of compressing every object again (most of a version 1 load's CPU).
//
// A record starts with a tag byte:
//   kJsonTag:       the object's JSON;
//   kDictionaryTag: varint index (0, 1, ... in order), varint flags
//                   (kCurrentDictionary: the one new objects were being
//                   compressed with), then the dictionary's bytes;
//   kFrameTag:      varint dictionary index, varint JSON size, the
//                   JSON's CRC-32 (4 bytes, little-endian), then the zstd
//                   frame (no dictionary ID, content size or checksum of
//                   its own) that decompresses to the JSON with that
//                   dictionary. The file's checksums cover the record's
//                   bytes; the JSON's makes a frame read with any other
//                   dictionary fail instead of giving other JSON.
// Every dictionary record comes before the first object record, so a
// reader knows them all before any frame is decoded.
namespace object_records {

inline constexpr uint8_t kJsonTag = 0;
inline constexpr uint8_t kDictionaryTag = 1;
inline constexpr uint8_t kFrameTag = 2;
inline constexpr uint64_t kCurrentDictionary = 1;

// The writer's side: which dictionaries the objects are held with, and
// each object's record. Built once per snapshot on the writing thread;
// const methods are thread-safe.
class Encoder {
 public:
  // Numbers the distinct zstd dictionaries `objects` are compressed with
  // (by version, the newest marked current). Objects held uncompressed, or
  // compressed by another kind of dictionary, are written as JSON.
  explicit Encoder(const std::vector<ObjectPtr>& objects);

  // Whether any object is held as a zstd frame (else version 1, plain
  // JSON records, is the better encoding: readable by older builds).
  bool has_frames() const { return !dictionaries_.empty(); }
  // The dictionary records, in index order.
  std::vector<std::string> DictionaryRecords() const;
  // `obj`'s record, into *out (replacing its contents).
  void Encode(const Object& obj, std::string* out) const;

 private:
  std::vector<const ZstdJsonDictionary*> dictionaries_;
  absl::flat_hash_map<const JsonDictionary*, uint64_t> index_;
};

// The reader's side: the section's dictionaries, and records to Objects.
// AddDictionary is called by the reading thread for every dictionary
// record, all before any Decode; Decode is then thread-safe (the decode
// workers call it); Adopt once, after every Decode, when the whole file
// is known good.
class Decoder {
 public:
  // Objects are decoded with `transform`. When its compressor is a
  // ZstdJsonCompressor, each frame is kept as the object's stored JSON
  // without compressing it again: decompressed once, parsed and checked
  // (Object::Parse, as a version 1 record is), and held compressed with
  // the snapshot's dictionary, which the compressor prepares but does not
  // take (ZstdJsonCompressor::PrepareDictionary) until Adopt: a file
  // found damaged after its dictionaries leaves the compressor as it was.
  // Until then a JSON record is compressed with the compressor's own
  // dictionary if it has one, else with the snapshot's current one (never
  // sampled for training). With another compressor, or none, frames are
  // decompressed and decoded as JSON records are (compressed again by that
  // compressor, if any).
  explicit Decoder(const TransformOptions& transform);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // A kDictionaryTag record. InvalidArgument naming the problem: an
  // index out of order, bytes zstd rejects, a garbled record.
  absl::Status AddDictionary(absl::string_view record);
  // One record: its Object, or null for a dictionary record (already
  // added). InvalidArgument naming the problem: an unknown tag, a frame
  // of an unknown dictionary, a frame that does not decompress to its
  // size, JSON that does not parse.
  absl::StatusOr<ObjectPtr> Decode(absl::string_view record) const;
  // The file is known good and `objects` are what it loaded: the
  // compressor takes the dictionaries (the current one installed when it
  // has none) and counts the objects held with them
  // (ZstdJsonCompressor::AdoptPrepared). Never called for a file that
  // failed anywhere.
  void Adopt(const std::vector<ObjectPtr>& objects);

  // The tag of a record (its first byte); false for an empty record.
  static bool Tag(absl::string_view record, uint8_t* tag);

 private:
  class PreparedCompressor;

  // A frame record: decompressed, parsed, and kept as its frame.
  absl::StatusOr<ObjectPtr> DecodeFrame(absl::string_view body) const;

  const TransformOptions transform_;
  // transform_.compressor when it is a ZstdJsonCompressor (frames are
  // adopted), else null.
  ZstdJsonCompressor* const zstd_;
  // With zstd_: compresses JSON records until Adopt (see the
  // constructor), and json_transform_ is transform_ with it.
  const std::unique_ptr<PreparedCompressor> prepared_;
  TransformOptions json_transform_;
  std::vector<std::shared_ptr<const ZstdJsonDictionary>> dictionaries_;
  // The dictionary flagged current, if any.
  std::shared_ptr<const ZstdJsonDictionary> current_;
};

}  // namespace object_records
}  // namespace informer

#endif  // INFORMER_PERSIST_OBJECT_RECORD_CODEC_H_

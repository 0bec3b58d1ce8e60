#include "informer/persist/object_record_codec.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "informer/persist/snapshot_format.h"

namespace informer {
namespace object_records {
namespace {

namespace sf = snapshot_format;

// No object comes near it (etcd refuses requests over 3 MiB); it bounds
// what a damaged or hostile record can make the reader allocate.
constexpr uint64_t kMaxJsonBytes = 64u << 20;

// The JsonCompressor of one Object::Parse of a frame's JSON: the parse
// hands the JSON as cached to the compressor, and that is the text the
// frame decompressed to, so the frame is kept instead of compressing it
// again. Any other text (not expected: the JSON is stored compact, and the
// transform, part of the snapshot's identity, finds nothing more to drop)
// goes to `fallback`. One per parse, on its thread.
class FrameAdopter final : public JsonCompressor {
 public:
  FrameAdopter(absl::string_view json, absl::string_view frame,
               std::shared_ptr<const ZstdJsonDictionary> dictionary,
               JsonCompressor* fallback)
      : json_(json),
        frame_(frame),
        dictionary_(std::move(dictionary)),
        fallback_(fallback) {}

  std::shared_ptr<const JsonDictionary> Compress(absl::string_view json,
                                                 std::string* out) override {
    if (json != json_) return fallback_->Compress(json, out);
    out->assign(frame_.data(), frame_.size());
    return dictionary_;
  }

 private:
  const absl::string_view json_;
  const absl::string_view frame_;
  const std::shared_ptr<const ZstdJsonDictionary> dictionary_;
  JsonCompressor* const fallback_;
};

// The decompressed JSON of the frame being decoded on this thread: reused,
// so that a load does not allocate a buffer per object.
std::string& ThreadBuffer() {
  thread_local std::string buffer;
  return buffer;
}

}  // namespace

Encoder::Encoder(const std::vector<ObjectPtr>& objects) {
  for (const ObjectPtr& obj : objects) {
    const JsonDictionary* d = obj->dictionary().get();
    if (d == nullptr || index_.contains(d)) continue;
    const auto* zstd = dynamic_cast<const ZstdJsonDictionary*>(d);
    if (zstd == nullptr) continue;
    index_[d] = 0;
    dictionaries_.push_back(zstd);
  }
  // By version: the last is the compressor's newest (its current one,
  // unless nothing was compressed with that yet).
  std::stable_sort(
      dictionaries_.begin(), dictionaries_.end(),
      [](const ZstdJsonDictionary* a, const ZstdJsonDictionary* b) {
        return a->version() < b->version();
      });
  for (size_t i = 0; i < dictionaries_.size(); ++i) {
    index_[dictionaries_[i]] = i;
  }
}

std::vector<std::string> Encoder::DictionaryRecords() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < dictionaries_.size(); ++i) {
    std::string record(1, static_cast<char>(kDictionaryTag));
    sf::AppendVarint(i, &record);
    sf::AppendVarint(i + 1 == dictionaries_.size() ? kCurrentDictionary : 0,
                     &record);
    record.append(dictionaries_[i]->bytes().data(),
                  dictionaries_[i]->bytes().size());
    out.push_back(std::move(record));
  }
  return out;
}

void Encoder::Encode(const Object& obj, std::string* out) const {
  out->clear();
  const auto it = index_.find(obj.dictionary().get());
  if (it != index_.end()) {
    // The JSON's checksum: decompressed with another dictionary than its
    // own (a bug), a frame may give other bytes of the same size.
    const JsonText json = obj.json();
    char crc[4];
    sf::PutFixed32(sf::Crc32(json.view()), crc);
    out->push_back(static_cast<char>(kFrameTag));
    sf::AppendVarint(it->second, out);
    sf::AppendVarint(obj.json_size(), out);
    out->append(crc, 4);
    out->append(obj.stored_json().data(), obj.stored_json().size());
    return;
  }
  const JsonText json = obj.json();
  out->push_back(static_cast<char>(kJsonTag));
  out->append(json.view().data(), json.size());
}

// A JSON record's compressor until the file is known good: the resource's
// compressor once it has a dictionary of its own (nothing to learn then),
// else the snapshot's current dictionary, so that the compressor neither
// samples nor trains on a file that may yet fail. Thread-safe once the
// dictionaries are added.
class Decoder::PreparedCompressor final : public JsonCompressor {
 public:
  explicit PreparedCompressor(ZstdJsonCompressor* compressor)
      : compressor_(compressor) {}
  void set_current(std::shared_ptr<const ZstdJsonDictionary> current) {
    current_ = std::move(current);
  }

  std::shared_ptr<const JsonDictionary> Compress(absl::string_view json,
                                                 std::string* out) override {
    if (compressor_->dictionary() != nullptr) {
      return compressor_->Compress(json, out);
    }
    if (current_ == nullptr || json.size() < compressor_->min_json_bytes() ||
        !current_->Compress(json, out) || out->size() >= json.size()) {
      return nullptr;
    }
    return current_;
  }

 private:
  ZstdJsonCompressor* const compressor_;
  std::shared_ptr<const ZstdJsonDictionary> current_;
};

Decoder::Decoder(const TransformOptions& transform)
    : transform_(transform),
      zstd_(dynamic_cast<ZstdJsonCompressor*>(transform.compressor.get())),
      prepared_(zstd_ != nullptr ? std::make_unique<PreparedCompressor>(zstd_)
                                 : nullptr),
      json_transform_(transform) {
  if (prepared_ != nullptr) {
    // Aliasing constructor: the decoder owns it (nothing to delete).
    json_transform_.compressor = std::shared_ptr<JsonCompressor>(
        std::shared_ptr<void>(), prepared_.get());
  }
}

Decoder::~Decoder() = default;

void Decoder::Adopt(const std::vector<ObjectPtr>& objects) {
  if (zstd_ == nullptr || dictionaries_.empty()) return;
  zstd_->AdoptPrepared(dictionaries_, current_, objects);
}

bool Decoder::Tag(absl::string_view record, uint8_t* tag) {
  if (record.empty()) return false;
  *tag = static_cast<uint8_t>(record[0]);
  return true;
}

absl::Status Decoder::AddDictionary(absl::string_view record) {
  uint8_t tag = 0;
  if (!Tag(record, &tag) || tag != kDictionaryTag) {
    return absl::InvalidArgumentError("not a dictionary record");
  }
  sf::PayloadCursor cursor(record.substr(1));
  uint64_t index = 0, flags = 0;
  if (!cursor.ReadVarint(&index) || !cursor.ReadVarint(&flags)) {
    return absl::InvalidArgumentError("a dictionary record is garbled");
  }
  if (index != dictionaries_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dictionary ", index, " comes where dictionary ",
                     dictionaries_.size(), " should"));
  }
  std::string bytes(record.substr(record.size() - cursor.remaining()));
  absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> dict =
      zstd_ != nullptr ? zstd_->PrepareDictionary(std::move(bytes))
                       : ZstdJsonDictionary::FromBytes(std::move(bytes),
                                                       /*level=*/3,
                                                       /*version=*/0);
  if (!dict.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dictionary ", index, " is unusable: ", dict.status().message()));
  }
  if ((flags & kCurrentDictionary) != 0) {
    current_ = *dict;
    if (prepared_ != nullptr) prepared_->set_current(current_);
  }
  dictionaries_.push_back(*std::move(dict));
  return absl::OkStatus();
}

absl::StatusOr<ObjectPtr> Decoder::Decode(absl::string_view record) const {
  uint8_t tag = 0;
  if (!Tag(record, &tag)) return absl::InvalidArgumentError("empty record");
  switch (tag) {
    case kJsonTag:
      return Object::Parse(record.substr(1), json_transform_);
    case kDictionaryTag:
      return ObjectPtr();
    case kFrameTag:
      return DecodeFrame(record.substr(1));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown record tag ", static_cast<int>(tag)));
}

absl::StatusOr<ObjectPtr> Decoder::DecodeFrame(absl::string_view body) const {
  sf::PayloadCursor cursor(body);
  uint64_t index = 0, json_size = 0;
  if (!cursor.ReadVarint(&index) || !cursor.ReadVarint(&json_size)) {
    return absl::InvalidArgumentError("a frame record is garbled");
  }
  if (index >= dictionaries_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its frame names dictionary ", index, " of ", dictionaries_.size()));
  }
  if (json_size == 0 || json_size > kMaxJsonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("its frame claims ", json_size, " bytes of JSON"));
  }
  if (cursor.remaining() < 4) {
    return absl::InvalidArgumentError("a frame record is garbled");
  }
  const absl::string_view rest = body.substr(body.size() - cursor.remaining());
  const uint32_t crc = sf::GetFixed32(rest.data());
  const absl::string_view frame = rest.substr(4);
  const std::shared_ptr<const ZstdJsonDictionary>& dict = dictionaries_[index];
  std::string& json = ThreadBuffer();
  json.resize(json_size);
  if (!dict->Decompress(frame, json.data(), json.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its ", frame.size(), "-byte frame does not decompress to ", json_size,
        " bytes with dictionary ", index));
  }
  if (sf::Crc32(json) != crc) {
    return absl::InvalidArgumentError(
        absl::StrCat("its frame decompressed with dictionary ", index,
                     " does not match the JSON's checksum"));
  }
  if (zstd_ == nullptr) return Object::Parse(json, transform_);
  TransformOptions adopt = transform_;
  FrameAdopter adopter(json, frame, dict, prepared_.get());
  // Aliasing constructor: no allocation, and nothing to delete (the
  // adopter lives on this stack frame, past the parse).
  adopt.compressor =
      std::shared_ptr<JsonCompressor>(std::shared_ptr<void>(), &adopter);
  return Object::Parse(json, adopt);
}

}  // namespace object_records
}  // namespace informer

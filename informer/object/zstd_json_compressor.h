#ifndef INFORMER_OBJECT_ZSTD_JSON_COMPRESSOR_H_
#define INFORMER_OBJECT_ZSTD_JSON_COMPRESSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/object/object.h"

// zstd's types, kept out of this header.
struct ZSTD_CDict_s;
struct ZSTD_DDict_s;

namespace informer {

// One zstd dictionary version: compresses and decompresses JSON with it.
// Objects of one resource share most of their bytes (field names, images,
// probes, tolerations), so a dictionary trained on a sample of them lets
// zstd code each object as little more than what makes it differ.
//
// Immutable once built; Compress and Decompress are thread-safe (each
// thread uses its own zstd contexts). Shared: every object compressed with
// it holds a reference, so a version lives as long as its objects.
class ZstdJsonDictionary final : public JsonDictionary {
 public:
  // A dictionary trained on `samples` (zstd's fastCover) of at most
  // `capacity` bytes. When zstd cannot train one (too few or too small
  // samples) the samples' last `capacity` bytes serve as a raw-content
  // dictionary instead, which still finds the repeated text. Fails only
  // for no samples at all. `version` labels it (see version()).
  static absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> Train(
      const std::vector<std::string>& samples, size_t capacity, int level,
      uint32_t version);
  // A dictionary from its bytes (as bytes() returned them, or any raw
  // content). InvalidArgument when zstd rejects them.
  static absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> FromBytes(
      std::string bytes, int level, uint32_t version);

  ~ZstdJsonDictionary() override;
  ZstdJsonDictionary(const ZstdJsonDictionary&) = delete;
  ZstdJsonDictionary& operator=(const ZstdJsonDictionary&) = delete;

  // Compresses `json` into `*out` (a zstd frame without checksum, content
  // size or dictionary ID: the Object keeps the size, and the dictionary
  // reference says which one). False on a zstd error.
  bool Compress(absl::string_view json, std::string* out) const;
  bool Decompress(absl::string_view stored, char* out,
                  size_t json_size) const override;

  uint32_t version() const { return version_; }
  absl::string_view bytes() const { return bytes_; }
  // Heap held: the dictionary's bytes and zstd's two digested forms.
  size_t MemoryUsage() const;

 private:
  ZstdJsonDictionary(std::string bytes, uint32_t version)
      : bytes_(std::move(bytes)), version_(version) {}

  const std::string bytes_;
  const uint32_t version_;
  ZSTD_CDict_s* cdict_ = nullptr;
  ZSTD_DDict_s* ddict_ = nullptr;
};

// ZstdJsonCompressor is the JsonCompressor for one resource: it keeps the
// first objects it sees as they are, copies them as samples, trains a
// dictionary on them, and from then on compresses every object with it.
//
// Versioning: each dictionary gets the next version number. When the
// objects drift (their compression ratio over a window of objects grows
// worse than retrain_factor times the ratio of the first window after
// training), or when Retrain() is called, it samples the objects that
// follow and trains the next version; objects compressed before keep the
// version they were compressed with (see ZstdJsonDictionary).
//
// Thread-safe: one compressor serves every decoding thread of a resource.
// The thread whose object completes the sample trains the dictionary
// (tens of milliseconds), outside the lock; objects compressed meanwhile by
// other threads use the previous version, or none (kept as they are).
class ZstdJsonCompressor final : public JsonCompressor {
 public:
  struct Options {
    // Objects sampled to train a dictionary, and the most sample bytes
    // (whichever comes first). The sample is a copy, held until the
    // dictionary is trained: a resource with fewer objects holds a copy of
    // each. A few hundred Pods train a dictionary as good as a thousand.
    size_t train_objects = 512;
    size_t max_sample_bytes = 2 << 20;
    // The dictionary's size: 64 KiB holds the shared text of most kinds
    // (a Pod's JSON without managedFields is 3-6 KB).
    size_t dictionary_bytes = 64 << 10;
    // zstd's level. Decompression speed barely depends on it.
    int level = 3;
    // Smaller JSON is kept as it is (a frame costs about 10 bytes).
    size_t min_json_bytes = 64;
    // Drift check: every window_objects compressed objects.
    size_t window_objects = 20000;
    double retrain_factor = 1.5;
  };

  struct Stats {
    uint32_t version = 0;  // of the current dictionary; 0: none yet
    uint64_t dictionaries_trained = 0;
    // Taken from elsewhere (a snapshot) by AdoptDictionary.
    uint64_t dictionaries_adopted = 0;
    uint64_t objects_compressed = 0;
    uint64_t objects_kept = 0;  // stored as they are
    uint64_t json_bytes_compressed = 0;
    uint64_t stored_bytes_compressed = 0;
    size_t dictionary_bytes = 0;  // of the current dictionary
  };

  ZstdJsonCompressor() : ZstdJsonCompressor(Options()) {}
  explicit ZstdJsonCompressor(Options options);

  std::shared_ptr<const JsonDictionary> Compress(absl::string_view json,
                                                 std::string* out) override;

  // Samples the next objects and trains a new version on them (unless a
  // sample is being collected already). Objects compressed meanwhile use
  // the current version.
  void Retrain() ABSL_LOCKS_EXCLUDED(mu_);

  // Taking another compressor's dictionaries (a snapshot keeps them with
  // the frames they compressed) is two steps, so that a snapshot found
  // damaged after its dictionaries were read changes nothing here:
  //
  // PrepareDictionary: a dictionary from `bytes` (as bytes() gave them),
  // built at this compressor's level with a version number of its own
  // (never handed out again), and nothing else: this compressor neither
  // uses nor counts it. Frames it compressed are readable through it at
  // once. InvalidArgument when zstd rejects the bytes.
  absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> PrepareDictionary(
      std::string bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // AdoptPrepared, once what they came with is known good: counts
  // `dictionaries` (PrepareDictionary's) as adopted; `current` (one of
  // them, or null) becomes the current dictionary unless the compressor
  // has one already, and the sample being collected is dropped: objects
  // compressed from then on use it, as they would a trained one, and a
  // later drift or Retrain() trains the next version as usual. Each of
  // `objects` held compressed with one of `dictionaries` is counted as if
  // compressed here (the statistics and the drift check see it).
  void AdoptPrepared(
      const std::vector<std::shared_ptr<const ZstdJsonDictionary>>&
          dictionaries,
      const std::shared_ptr<const ZstdJsonDictionary>& current,
      const std::vector<ObjectPtr>& objects) ABSL_LOCKS_EXCLUDED(mu_);
  // Objects below this size are kept as they are (Options::min_json_bytes).
  size_t min_json_bytes() const { return options_.min_json_bytes; }

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The current dictionary; null until the first one is trained.
  std::shared_ptr<const ZstdJsonDictionary> dictionary() const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Adds `json` to the sample if one is being collected; returns the
  // completed sample when this object completed it (empty otherwise).
  std::vector<std::string> SampleLocked(absl::string_view json)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Train(const std::vector<std::string>& samples) ABSL_LOCKS_EXCLUDED(mu_);
  // The version number of the next dictionary trained or prepared.
  uint32_t TakeVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ++last_version_;
  }
  // Makes `dict` the current dictionary; restarts the drift check.
  void InstallLocked(std::shared_ptr<const ZstdJsonDictionary> dict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts one compressed object for the drift check.
  void CountLocked(size_t json_size, size_t stored_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ZstdJsonDictionary> current_ ABSL_GUARDED_BY(mu_);
  bool collecting_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<std::string> samples_ ABSL_GUARDED_BY(mu_);
  size_t sample_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The drift check's window, and the ratio (stored / JSON bytes) of the
  // first full window after the current version was trained (0: not yet).
  size_t window_objects_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t window_json_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t window_stored_ ABSL_GUARDED_BY(mu_) = 0;
  double trained_ratio_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // The last version number handed out (trained or prepared).
  uint32_t last_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace informer

#endif  // INFORMER_OBJECT_ZSTD_JSON_COMPRESSOR_H_

#include "informer/object/zstd_json_compressor.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// fastCover with fixed parameters is in zdict's advanced section (Debian's
// shared libzstd exports it).
#define ZDICT_STATIC_LINKING_ONLY
#include "zdict.h"
#include "zstd.h"

namespace informer {
namespace {

// One compression and one decompression context per thread: creating them
// costs far more than compressing one object, and they are not
// thread-safe. Freed when the thread exits.
struct ThreadContexts {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  ~ThreadContexts() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }
};

ThreadContexts& Contexts() {
  thread_local ThreadContexts contexts;
  return contexts;
}

ZSTD_CCtx* CompressionContext() {
  ThreadContexts& c = Contexts();
  if (c.cctx == nullptr) {
    c.cctx = ZSTD_createCCtx();
    // The Object keeps the JSON's size, and its dictionary reference says
    // which dictionary: the frame need not repeat either (5 bytes less).
    ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_dictIDFlag, 0);
    ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_checksumFlag, 0);
  }
  return c.cctx;
}

ZSTD_DCtx* DecompressionContext() {
  ThreadContexts& c = Contexts();
  if (c.dctx == nullptr) c.dctx = ZSTD_createDCtx();
  return c.dctx;
}

// fastCover with the parameters zstd's own trainer settles on for JSON-like
// text, fixed rather than searched for: the search tries dozens of
// parameter sets and takes seconds; one set takes tens of milliseconds and
// compresses Kubernetes objects within a few percent of the searched one.
size_t TrainFastCover(const std::string& buffer,
                      const std::vector<size_t>& sizes, int level,
                      std::string* dict) {
  ZDICT_fastCover_params_t params = {};
  params.k = 200;
  params.d = 8;
  params.f = 20;
  params.steps = 0;
  params.accel = 1;
  params.zParams.compressionLevel = level;
  return ZDICT_trainFromBuffer_fastCover(
      dict->data(), dict->size(), buffer.data(), sizes.data(),
      static_cast<unsigned>(sizes.size()), params);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>>
ZstdJsonDictionary::Train(const std::vector<std::string>& samples,
                          size_t capacity, int level, uint32_t version) {
  if (samples.empty()) {
    return absl::InvalidArgumentError("no samples to train a dictionary on");
  }
  std::string buffer;
  std::vector<size_t> sizes;
  sizes.reserve(samples.size());
  for (const std::string& s : samples) {
    buffer.append(s);
    sizes.push_back(s.size());
  }
  std::string dict(capacity, '\0');
  const size_t n = TrainFastCover(buffer, sizes, level, &dict);
  if (ZDICT_isError(n)) {
    // Too little to train on: the samples' own text is a dictionary too.
    dict = buffer.substr(buffer.size() - std::min(capacity, buffer.size()));
  } else {
    dict.resize(n);
  }
  return FromBytes(std::move(dict), level, version);
}

absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>>
ZstdJsonDictionary::FromBytes(std::string bytes, int level, uint32_t version) {
  std::shared_ptr<ZstdJsonDictionary> d(
      new ZstdJsonDictionary(std::move(bytes), version));
  d->cdict_ = ZSTD_createCDict(d->bytes_.data(), d->bytes_.size(), level);
  d->ddict_ = ZSTD_createDDict(d->bytes_.data(), d->bytes_.size());
  if (d->cdict_ == nullptr || d->ddict_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("zstd rejects the ", d->bytes_.size(),
                     "-byte dictionary of version ", version));
  }
  return std::shared_ptr<const ZstdJsonDictionary>(std::move(d));
}

ZstdJsonDictionary::~ZstdJsonDictionary() {
  ZSTD_freeCDict(cdict_);
  ZSTD_freeDDict(ddict_);
}

bool ZstdJsonDictionary::Compress(absl::string_view json,
                                  std::string* out) const {
  ZSTD_CCtx* cctx = CompressionContext();
  if (cctx == nullptr) return false;
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
  if (ZSTD_isError(ZSTD_CCtx_refCDict(cctx, cdict_))) return false;
  out->resize(ZSTD_compressBound(json.size()));
  const size_t n =
      ZSTD_compress2(cctx, out->data(), out->size(), json.data(), json.size());
  if (ZSTD_isError(n)) return false;
  out->resize(n);
  return true;
}

bool ZstdJsonDictionary::Decompress(absl::string_view stored, char* out,
                                    size_t json_size) const {
  ZSTD_DCtx* dctx = DecompressionContext();
  if (dctx == nullptr) return false;
  const size_t n = ZSTD_decompress_usingDDict(
      dctx, out, json_size, stored.data(), stored.size(), ddict_);
  return !ZSTD_isError(n) && n == json_size;
}

size_t ZstdJsonDictionary::MemoryUsage() const {
  return bytes_.capacity() + ZSTD_sizeof_CDict(cdict_) +
         ZSTD_sizeof_DDict(ddict_);
}

ZstdJsonCompressor::ZstdJsonCompressor(Options options) : options_(options) {}

std::vector<std::string> ZstdJsonCompressor::SampleLocked(
    absl::string_view json) {
  if (!collecting_) return {};
  samples_.emplace_back(json);
  sample_bytes_ += json.size();
  if (samples_.size() < options_.train_objects &&
      sample_bytes_ < options_.max_sample_bytes) {
    return {};
  }
  collecting_ = false;
  sample_bytes_ = 0;
  return std::move(samples_);
}

void ZstdJsonCompressor::Train(const std::vector<std::string>& samples) {
  uint32_t version;
  {
    absl::MutexLock lock(&mu_);
    version = TakeVersionLocked();
  }
  absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> dict =
      ZstdJsonDictionary::Train(samples, options_.dictionary_bytes,
                                options_.level, version);
  absl::MutexLock lock(&mu_);
  samples_.clear();
  if (!dict.ok()) return;  // only for no samples: keep what there is
  ++stats_.dictionaries_trained;
  InstallLocked(*std::move(dict));
}

void ZstdJsonCompressor::InstallLocked(
    std::shared_ptr<const ZstdJsonDictionary> dict) {
  current_ = std::move(dict);
  stats_.version = current_->version();
  stats_.dictionary_bytes = current_->bytes().size();
  window_objects_ = 0;
  window_json_ = 0;
  window_stored_ = 0;
  trained_ratio_ = 0;
}

absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>>
ZstdJsonCompressor::PrepareDictionary(std::string bytes) {
  uint32_t version = 0;
  {
    absl::MutexLock lock(&mu_);
    version = TakeVersionLocked();
  }
  // Outside the lock: zstd digests the bytes (a few milliseconds).
  return ZstdJsonDictionary::FromBytes(std::move(bytes), options_.level,
                                       version);
}

void ZstdJsonCompressor::AdoptPrepared(
    const std::vector<std::shared_ptr<const ZstdJsonDictionary>>& dictionaries,
    const std::shared_ptr<const ZstdJsonDictionary>& current,
    const std::vector<ObjectPtr>& objects) {
  absl::flat_hash_set<const JsonDictionary*> adopted;
  for (const auto& d : dictionaries) adopted.insert(d.get());
  absl::MutexLock lock(&mu_);
  stats_.dictionaries_adopted += dictionaries.size();
  if (current != nullptr && current_ == nullptr) {
    InstallLocked(current);
    // A sample being collected would train a needless second version.
    collecting_ = false;
    samples_.clear();
    sample_bytes_ = 0;
  }
  for (const ObjectPtr& obj : objects) {
    if (obj->compressed() && adopted.contains(obj->dictionary().get())) {
      CountLocked(obj->json_size(), obj->stored_json_size());
    }
  }
}

void ZstdJsonCompressor::CountLocked(size_t json_size, size_t stored_size) {
  ++stats_.objects_compressed;
  stats_.json_bytes_compressed += json_size;
  stats_.stored_bytes_compressed += stored_size;
  ++window_objects_;
  window_json_ += json_size;
  window_stored_ += stored_size;
  if (window_objects_ < options_.window_objects) return;
  const double ratio = static_cast<double>(window_stored_) / window_json_;
  if (trained_ratio_ == 0) {
    trained_ratio_ = ratio;
  } else if (ratio > trained_ratio_ * options_.retrain_factor) {
    collecting_ = true;
  }
  window_objects_ = 0;
  window_json_ = 0;
  window_stored_ = 0;
}

std::shared_ptr<const JsonDictionary> ZstdJsonCompressor::Compress(
    absl::string_view json, std::string* out) {
  std::shared_ptr<const ZstdJsonDictionary> dict;
  std::vector<std::string> sample;
  {
    absl::MutexLock lock(&mu_);
    if (json.size() < options_.min_json_bytes) {
      ++stats_.objects_kept;
      return nullptr;
    }
    sample = SampleLocked(json);
    dict = current_;
  }
  if (!sample.empty()) {
    Train(sample);
    absl::MutexLock lock(&mu_);
    dict = current_;
  }
  const bool ok =
      dict != nullptr && dict->Compress(json, out) && out->size() < json.size();
  absl::MutexLock lock(&mu_);
  if (!ok) {
    ++stats_.objects_kept;
    return nullptr;
  }
  CountLocked(json.size(), out->size());
  return dict;
}

void ZstdJsonCompressor::Retrain() {
  absl::MutexLock lock(&mu_);
  collecting_ = true;
}

ZstdJsonCompressor::Stats ZstdJsonCompressor::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::shared_ptr<const ZstdJsonDictionary> ZstdJsonCompressor::dictionary()
    const {
  absl::MutexLock lock(&mu_);
  return current_;
}

}  // namespace informer

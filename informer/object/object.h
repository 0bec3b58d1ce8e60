#ifndef INFORMER_OBJECT_OBJECT_H_
#define INFORMER_OBJECT_OBJECT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace informer {

// String type policy: every interface of ours takes and returns
// absl::string_view (Debian's Abseil 20220623 does not alias it to
// std::string_view). Conversions to std::string_view (simdjson) happen only
// inside the .cc files that call such libraries.

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool block_owner_deletion = false;
};

class JsonCompressor;

// What happens to an object's JSON before it is cached (client-go's
// SetTransform). Applied once at decode time.
struct TransformOptions {
  // client-go caches keep metadata.managedFields, often half of an object's
  // bytes; nobody reading a cache needs them.
  bool drop_managed_fields = true;
  // Further dotted field paths to remove, e.g. "metadata.annotations" or
  // "status.containerStatuses". A path that does not exist is ignored.
  std::vector<std::string> drop_fields;
  // Compresses each object's JSON at rest (see JsonCompressor); null keeps
  // it as decoded. Shared: every object of one resource should go through
  // the same compressor, whose dictionary is trained on that resource.
  std::shared_ptr<JsonCompressor> compressor;
};

// Reads back JSON that a JsonCompressor compressed: one dictionary version.
// Every compressed Object holds the dictionary it was compressed with, so
// a compressor may train new versions while older objects stay readable.
// Thread-safe and immutable once published.
class JsonDictionary {
 public:
  virtual ~JsonDictionary() = default;
  // Writes the `json_size` bytes that `stored` decompresses to into `out`
  // (which has room for exactly that many). False when `stored` is not what
  // this dictionary compressed (a bug or memory corruption: never expected).
  virtual bool Decompress(absl::string_view stored, char* out,
                          size_t json_size) const = 0;
};

// Compresses objects' JSON as they are built (ObjectBuilder::Build, i.e. in
// the decoding threads). Implementations decide when compression pays (for
// example only once a dictionary is trained on the resource's first
// objects). Thread-safe: one compressor serves every thread that decodes
// its resource.
class JsonCompressor {
 public:
  virtual ~JsonCompressor() = default;
  // Compresses `json` into `*out` (replacing its contents) and returns the
  // dictionary that reads it back, or null to store `json` uncompressed.
  virtual std::shared_ptr<const JsonDictionary> Compress(absl::string_view json,
                                                         std::string* out) = 0;
};

// An object's JSON text as Object::json() returns it: a view of the bytes
// inside the Object when it is stored uncompressed (borrowed(): valid while
// the Object lives), or a decompressed copy this JsonText owns. Bind it to
// a variable for as long as its bytes are used; view() on a temporary does
// not compile, since the bytes it views could die with it. Move-only.
class JsonText {
 public:
  JsonText() = default;
  JsonText(JsonText&& other) noexcept { *this = std::move(other); }
  JsonText& operator=(JsonText&& other) noexcept {
    owns_ = other.owns_;
    owned_ = std::move(other.owned_);
    // A moved std::string's bytes may move too (the inline buffer).
    view_ = owns_ ? absl::string_view(owned_) : other.view_;
    other.owns_ = false;
    other.owned_.clear();
    other.view_ = absl::string_view();
    return *this;
  }
  JsonText(const JsonText&) = delete;
  JsonText& operator=(const JsonText&) = delete;

  absl::string_view view() const& { return view_; }
  absl::string_view view() const&& = delete;
  size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  // True when the bytes are the Object's own (it must outlive this view);
  // false when this JsonText owns them.
  bool borrowed() const { return !owns_; }
  // A copy of the text; from a temporary, the owned bytes are moved out.
  std::string str() const& { return std::string(view_); }
  std::string str() && {
    if (!owns_) return std::string(view_);
    view_ = absl::string_view();
    owns_ = false;
    return std::move(owned_);
  }

  friend bool operator==(const JsonText& a, absl::string_view b) {
    return a.view_ == b;
  }
  friend bool operator==(absl::string_view a, const JsonText& b) {
    return a == b.view_;
  }
  friend bool operator==(const JsonText& a, const JsonText& b) {
    return a.view_ == b.view_;
  }
  friend bool operator!=(const JsonText& a, absl::string_view b) {
    return !(a == b);
  }
  friend bool operator!=(absl::string_view a, const JsonText& b) {
    return !(a == b);
  }
  friend bool operator!=(const JsonText& a, const JsonText& b) {
    return !(a == b);
  }
  friend std::ostream& operator<<(std::ostream& os, const JsonText& t) {
    return os << t.view_;
  }

 private:
  friend class Object;
  explicit JsonText(absl::string_view borrowed) : view_(borrowed) {}
  explicit JsonText(std::string owned)
      : owns_(true), owned_(std::move(owned)), view_(owned_) {}

  bool owns_ = false;
  std::string owned_;
  absl::string_view view_;
};

class Object;
using ObjectPtr = std::shared_ptr<const Object>;

// Object is one cached Kubernetes object: its compact JSON text (after the
// transform) plus the metadata extracted once at decode time.
//
// The JSON is kept as decoded, or compressed when the decode had a
// JsonCompressor (TransformOptions::compressor): then json() decompresses a
// copy on every call (a few microseconds for a Pod), while the metadata
// accessors, Key(), labels() and the rest never touch the JSON.
//
// Immutable once built and shared by every holder (store, FIFO, handlers,
// streams) through ObjectPtr, so it is safe to read from any thread without
// locking. Build one with Object::Parse (or ObjectBuilder in tests).
class Object {
 public:
  // Decodes one object from JSON text, applying `transform`. Returns
  // InvalidArgument naming the problem (and byte offset where known) for
  // malformed JSON, a non-object top level, or a missing metadata.name.
  static absl::StatusOr<ObjectPtr> Parse(
      absl::string_view json, const TransformOptions& transform = {});

  // The compact JSON text as cached (transform applied): a view of the
  // object's own bytes, or a decompressed copy when it is stored compressed
  // (see JsonText: hold the result while using its bytes).
  JsonText json() const;
  // The JSON's length, without decompressing it.
  size_t json_size() const { return json_size_; }
  // Whether the JSON is stored compressed, and the bytes it takes stored.
  bool compressed() const { return dictionary_ != nullptr; }
  size_t stored_json_size() const { return stored_size_; }
  // The JSON as stored (the compressed frame when compressed(), else the
  // JSON itself), and the dictionary that reads it back (null when stored
  // as is): a snapshot keeps the frame as it is instead of decompressing
  // it on write and compressing it again on load.
  absl::string_view stored_json() const { return Part(0, stored_size_); }
  const std::shared_ptr<const JsonDictionary>& dictionary() const {
    return dictionary_;
  }

  absl::string_view api_version() const { return Field(kApiVersion); }
  absl::string_view kind() const { return Field(kKind); }
  absl::string_view namespace_() const {
    return absl::string_view(key_.data(), ns_size_);
  }
  absl::string_view name() const {
    return ns_size_ == 0 ? absl::string_view(key_)
                         : absl::string_view(key_).substr(ns_size_ + 1);
  }
  absl::string_view uid() const { return Field(kUid); }
  absl::string_view resource_version() const { return Field(kResourceVersion); }
  // metadata.generation; 0 when absent. Kept as its digits (few objects
  // have one, and nothing reads it per event).
  int64_t generation() const;
  // Empty when the object is not being deleted.
  absl::string_view deletion_timestamp() const {
    return Field(kDeletionTimestamp);
  }

  // Sorted by key.
  const std::vector<std::pair<std::string, std::string>>& labels() const;
  const std::vector<std::pair<std::string, std::string>>& annotations() const;
  const std::vector<OwnerReference>& owner_references() const;

  // Label value lookup (binary search). nullptr when absent.
  const std::string* Label(absl::string_view key) const;
  const std::string* Annotation(absl::string_view key) const;

  // Values found at a dotted field path into the JSON (e.g. "spec.nodeName",
  // "metadata.labels.app"). Strings are returned unquoted, numbers and bools
  // as their JSON text; an array along the path yields one value per element
  // ("spec.containers.image"). Missing path -> empty vector.
  std::vector<std::string> FieldValues(absl::string_view path) const;

  // The longest uid, resourceVersion, deletionTimestamp, apiVersion or kind
  // an Object holds (real ones are tens of bytes).
  static constexpr size_t kMaxFieldBytes = 4096;

  // Heap bytes held by this object, its shared_ptr control block included
  // (for metrics and benchmarks; malloc's own rounding not included).
  size_t MemoryUsage() const;

  // The cache key: "namespace/name", or "name" for cluster-scoped objects.
  // Built once with the object: every queue, store and index asks for it.
  const std::string& Key() const { return key_; }

 private:
  friend class ObjectBuilder;
  friend class ObjectStorage;
  struct Extras;
  Object() = default;
  ~Object();
  // Never copied: its text lives in the allocation right past it.
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  // The short metadata strings, each a slice of the object's text.
  enum FieldIndex {
    kUid,
    kResourceVersion,
    kDeletionTimestamp,
    kApiVersion,
    kKind,
    kGeneration,  // its decimal digits
    kFieldCount
  };
  // An offset with this bit set counts from the end of the stored JSON (a
  // string appended after it); without it, from the JSON's start (a string
  // found in the uncompressed JSON's first 32 KiB).
  static constexpr uint16_t kAppended = 0x8000;

  // The stored JSON (compressed or not), followed by the metadata strings
  // it does not contain verbatim: ObjectBuilder allocates them right past
  // this header.
  const char* text() const {
    return reinterpret_cast<const char*>(this) + sizeof(Object);
  }
  absl::string_view Part(size_t offset, size_t size) const {
    return absl::string_view(text() + offset, size);
  }
  size_t FieldStart(int f) const {
    const uint16_t off = field_offset_[f];
    return (off & kAppended) != 0 ? stored_size_ + (off & ~kAppended) : off;
  }
  absl::string_view Field(FieldIndex f) const {
    return Part(FieldStart(f), field_size_[f]);
  }
  // The bytes of text past the header (stored JSON and appended strings).
  size_t TextSize() const;

  // Memory layout: a cache holds one Object per cached object, so every
  // byte here is paid per object. ObjectBuilder allocates the shared_ptr
  // control block, this header and the text in ONE malloc chunk, the text
  // right past the header (so no pointer to it is kept). The metadata
  // strings are offsets and sizes into the text: into the JSON itself
  // wherever it holds the same bytes (uid, resourceVersion, apiVersion
  // and kind usually do) and is not compressed, else into copies appended
  // after the stored JSON.
  // Labels, annotations and owner references, which many objects lack, are
  // a separate allocation only when there are any.
  //
  // MetaNamespaceKey(namespace, name); the namespace is its first ns_size_
  // bytes, the name follows the '/' (the whole key when ns_size_ is 0).
  std::string key_;
  // The JSON's length, and the bytes it takes in the text (the same when
  // it is not compressed).
  uint32_t json_size_ = 0;
  uint32_t stored_size_ = 0;
  uint32_t ns_size_ = 0;
  // See kAppended. Sizes are at most kMaxFieldBytes (the decoder refuses
  // longer strings), so every appended string starts within 32 KiB.
  uint16_t field_offset_[kFieldCount] = {};
  uint16_t field_size_[kFieldCount] = {};
  // Null when the object has no labels, annotations or owner references.
  std::unique_ptr<const Extras> extras_;
  // Reads the stored JSON back; null when it is stored as is.
  std::shared_ptr<const JsonDictionary> dictionary_;
};

// Builds Objects field by field: the decoder uses it, and so do tests that
// want an object without writing JSON. Build() synthesises compact JSON from
// the fields when no JSON was given.
class ObjectBuilder {
 public:
  ObjectBuilder() = default;
  ObjectBuilder& SetJson(std::string json);
  ObjectBuilder& SetApiVersion(absl::string_view v);
  ObjectBuilder& SetKind(absl::string_view v);
  ObjectBuilder& SetNamespace(absl::string_view v);
  ObjectBuilder& SetName(absl::string_view v);
  ObjectBuilder& SetUid(absl::string_view v);
  ObjectBuilder& SetResourceVersion(absl::string_view v);
  ObjectBuilder& SetGeneration(int64_t v);
  ObjectBuilder& SetDeletionTimestamp(absl::string_view v);
  ObjectBuilder& AddLabel(absl::string_view k, absl::string_view v);
  ObjectBuilder& AddAnnotation(absl::string_view k, absl::string_view v);
  ObjectBuilder& AddOwnerReference(OwnerReference ref);
  // Stores the JSON compressed by `compressor` (when it chooses to); null,
  // the default, stores it as is. Not owned; used by Build() only.
  ObjectBuilder& SetCompressor(JsonCompressor* compressor);
  ObjectPtr Build();

 private:
  // Synthesises compact JSON from the fields.
  std::string SynthesizeJson() const;

  std::string json_;
  std::string api_version_;
  std::string kind_;
  std::string ns_;
  std::string name_;
  std::string uid_;
  std::string resource_version_;
  std::string deletion_timestamp_;
  int64_t generation_ = 0;
  std::vector<std::pair<std::string, std::string>> labels_;
  std::vector<std::pair<std::string, std::string>> annotations_;
  std::vector<OwnerReference> owner_references_;
  JsonCompressor* compressor_ = nullptr;
};

// Key function (client-go's MetaNamespaceKeyFunc) and its inverse.
std::string MetaNamespaceKey(absl::string_view ns, absl::string_view name);
// "ns/name" -> {ns, name}; "name" -> {"", name}. InvalidArgument for more than
// one '/' or an empty name.
absl::StatusOr<std::pair<std::string, std::string>> SplitMetaNamespaceKey(
    absl::string_view key);

}  // namespace informer

#endif  // INFORMER_OBJECT_OBJECT_H_

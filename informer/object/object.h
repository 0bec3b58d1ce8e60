#ifndef INFORMER_OBJECT_OBJECT_H_
#define INFORMER_OBJECT_OBJECT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
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

// What happens to an object's JSON before it is cached (client-go's
// SetTransform). Applied once at decode time.
struct TransformOptions {
  // client-go caches keep metadata.managedFields, often half of an object's
  // bytes; nobody reading a cache needs them.
  bool drop_managed_fields = true;
  // Further dotted field paths to remove, e.g. "metadata.annotations" or
  // "status.containerStatuses". A path that does not exist is ignored.
  std::vector<std::string> drop_fields;
};

class Object;
using ObjectPtr = std::shared_ptr<const Object>;

// Object is one cached Kubernetes object: its compact JSON text (after the
// transform) plus the metadata extracted once at decode time.
//
// Immutable once built and shared by every holder (store, FIFO, handlers,
// streams) through ObjectPtr, so it is safe to read from any thread without
// locking. Build one with Object::Parse (or FromParts in tests).
class Object {
 public:
  // Decodes one object from JSON text, applying `transform`. Returns
  // InvalidArgument naming the problem (and byte offset where known) for
  // malformed JSON, a non-object top level, or a missing metadata.name.
  static absl::StatusOr<ObjectPtr> Parse(
      absl::string_view json, const TransformOptions& transform = {});

  // The compact JSON text as cached (transform applied).
  absl::string_view json() const { return Part(0, json_size_); }

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
  // An offset with this bit set counts from the end of the JSON (a string
  // appended after it); without it, from the JSON's start (a string found
  // in the JSON's first 32 KiB).
  static constexpr uint16_t kAppended = 0x8000;

  // The JSON, followed by the metadata strings the JSON does not contain
  // verbatim: ObjectBuilder allocates them right past this header.
  const char* text() const {
    return reinterpret_cast<const char*>(this) + sizeof(Object);
  }
  absl::string_view Part(size_t offset, size_t size) const {
    return absl::string_view(text() + offset, size);
  }
  size_t FieldStart(int f) const {
    const uint16_t off = field_offset_[f];
    return (off & kAppended) != 0 ? json_size_ + (off & ~kAppended) : off;
  }
  absl::string_view Field(FieldIndex f) const {
    return Part(FieldStart(f), field_size_[f]);
  }
  // The bytes of text past the header (JSON and appended strings).
  size_t TextSize() const;

  // Memory layout: a cache holds one Object per cached object, so every
  // byte here is paid per object. ObjectBuilder allocates the shared_ptr
  // control block, this header and the text in ONE malloc chunk, the text
  // right past the header (so no pointer to it is kept). The metadata
  // strings are offsets and sizes into the text: into the JSON itself
  // wherever it holds the same bytes (uid, resourceVersion, apiVersion
  // and kind usually do), else into copies appended after the JSON.
  // Labels, annotations and owner references, which many objects lack, are
  // a separate allocation only when there are any.
  //
  // MetaNamespaceKey(namespace, name); the namespace is its first ns_size_
  // bytes, the name follows the '/' (the whole key when ns_size_ is 0).
  std::string key_;
  uint32_t json_size_ = 0;
  uint32_t ns_size_ = 0;
  // See kAppended. Sizes are at most kMaxFieldBytes (the decoder refuses
  // longer strings), so every appended string starts within 32 KiB.
  uint16_t field_offset_[kFieldCount] = {};
  uint16_t field_size_[kFieldCount] = {};
  // Null when the object has no labels, annotations or owner references.
  std::unique_ptr<const Extras> extras_;
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
};

// Key function (client-go's MetaNamespaceKeyFunc) and its inverse.
std::string MetaNamespaceKey(absl::string_view ns, absl::string_view name);
// "ns/name" -> {ns, name}; "name" -> {"", name}. InvalidArgument for more than
// one '/' or an empty name.
absl::StatusOr<std::pair<std::string, std::string>> SplitMetaNamespaceKey(
    absl::string_view key);

}  // namespace informer

#endif  // INFORMER_OBJECT_OBJECT_H_

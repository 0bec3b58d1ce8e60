#include "informer/object/object.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "informer/object/json_decode.h"
#include "simdjson.h"

namespace informer {
namespace {

using json_internal::ParsedJson;

// Heap bytes of a std::string beyond the object itself (0 when the text fits
// the small-string buffer).
size_t StringHeap(const std::string& s) {
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

size_t PairsHeap(const std::vector<std::pair<std::string, std::string>>& v) {
  size_t n = v.capacity() * sizeof(v[0]);
  for (const auto& kv : v) n += StringHeap(kv.first) + StringHeap(kv.second);
  return n;
}

const std::string* FindSorted(
    const std::vector<std::pair<std::string, std::string>>& v,
    absl::string_view key) {
  auto it = std::lower_bound(
      v.begin(), v.end(), key,
      [](const std::pair<std::string, std::string>& kv, absl::string_view k) {
        return absl::string_view(kv.first) < k;
      });
  if (it == v.end() || it->first != key) return nullptr;
  return &it->second;
}

// Sorts by key; for duplicate keys the last added wins (like a JSON object
// decoded into a Go map).
void SortUnique(std::vector<std::pair<std::string, std::string>>* v) {
  std::stable_sort(v->begin(), v->end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });
  auto out = v->begin();
  for (auto it = v->begin(); it != v->end(); ++it) {
    auto next = it + 1;
    if (next != v->end() && next->first == it->first) continue;
    if (out != it) *out = std::move(*it);
    ++out;
  }
  v->erase(out, v->end());
}

void AppendJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Appends `"key":"value"` preceded by a comma unless it is the first member.
void AppendStringMember(absl::string_view key, absl::string_view value,
                        bool* first, std::string* out) {
  if (!*first) out->push_back(',');
  *first = false;
  AppendJsonString(key, out);
  out->push_back(':');
  AppendJsonString(value, out);
}

void AppendStringMap(absl::string_view key,
                     const std::vector<std::pair<std::string, std::string>>& m,
                     bool* first, std::string* out) {
  if (m.empty()) return;
  if (!*first) out->push_back(',');
  *first = false;
  AppendJsonString(key, out);
  out->append(":{");
  bool inner_first = true;
  for (const auto& kv : m) {
    AppendStringMember(kv.first, kv.second, &inner_first, out);
  }
  out->push_back('}');
}

void AppendFieldValue(simdjson::dom::element e, std::vector<std::string>* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING: {
      std::string_view s;
      if (!e.get_string().get(s)) out->emplace_back(s.data(), s.size());
      return;
    }
    case simdjson::dom::element_type::BOOL: {
      bool b = false;
      if (!e.get_bool().get(b)) out->emplace_back(b ? "true" : "false");
      return;
    }
    case simdjson::dom::element_type::INT64: {
      int64_t v = 0;
      if (!e.get_int64().get(v)) out->push_back(absl::StrCat(v));
      return;
    }
    case simdjson::dom::element_type::UINT64: {
      uint64_t v = 0;
      if (!e.get_uint64().get(v)) out->push_back(absl::StrCat(v));
      return;
    }
    case simdjson::dom::element_type::NULL_VALUE:
      return;  // null means "not set"
    default:
      // Doubles and objects: their compact JSON text.
      out->push_back(simdjson::minify(e));
      return;
  }
}

// Walks `parts` from `e`. Arrays fan out without consuming a path part. A key
// containing dots (e.g. an annotation "example.com/owner") is found by
// joining consecutive parts when the single part is absent.
void CollectFieldValues(simdjson::dom::element e,
                        const std::vector<absl::string_view>& parts, size_t i,
                        std::vector<std::string>* out) {
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    simdjson::dom::array arr;
    if (e.get_array().get(arr)) return;
    for (simdjson::dom::element child : arr) {
      CollectFieldValues(child, parts, i, out);
    }
    return;
  }
  if (i == parts.size()) {
    AppendFieldValue(e, out);
    return;
  }
  simdjson::dom::object obj;
  if (e.get_object().get(obj)) return;
  std::string key(parts[i]);
  for (size_t j = i; j < parts.size(); ++j) {
    if (j > i) absl::StrAppend(&key, ".", parts[j]);
    simdjson::dom::element child;
    if (!obj.at_key(key).get(child)) {
      CollectFieldValues(child, parts, j + 1, out);
      return;
    }
  }
}

}  // namespace

struct Object::Extras {
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<OwnerReference> owner_references;
};

Object::~Object() = default;

namespace {

// What ObjectBuilder asks TrailingAllocator for, and where it learns the
// address of the bytes allocated past the control block and header.
struct TrailingRequest {
  size_t extra = 0;
  char* trailing = nullptr;
};

// The request of the allocate_shared call running on this thread. Not an
// allocator member: a stateful allocator is stored in every control block,
// 8 bytes per cached object.
thread_local TrailingRequest* current_request = nullptr;

// A std::allocator for std::allocate_shared that allocates the current
// request's `extra` bytes more than asked, right after the control block
// and the object it holds, and reports where they start: one malloc chunk
// per object for the control block, the Object and its text. Stateless
// (the request is thread-local, set around the one allocation), so the
// control block holds no copy of it; deallocation needs no state either
// (operator delete does not need the size).
template <typename T>
class TrailingAllocator {
 public:
  using value_type = T;
  TrailingAllocator() = default;
  template <typename U>
  TrailingAllocator(const TrailingAllocator<U>&) {}  // NOLINT

  T* allocate(size_t n) {
    const size_t head = n * sizeof(T);
    TrailingRequest* request = current_request;
    const size_t extra = request != nullptr ? request->extra : 0;
    char* p = static_cast<char*>(::operator new(head + extra));
    if (request != nullptr) {
      request->trailing = p + head;
      current_request = nullptr;  // one allocation per request
    }
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { ::operator delete(p); }

  template <typename U>
  bool operator==(const TrailingAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const TrailingAllocator<U>&) const {
    return false;
  }
};

[[noreturn]] void Fatal(const char* message) {
  std::fprintf(stderr, "%s\n", message);
  std::abort();
}

// make_shared's control block ahead of the object: a vtable pointer and the
// two reference counts (the allocator is empty).
constexpr size_t kControlBlockBytes = 16;

const std::vector<std::pair<std::string, std::string>>& EmptyPairs() {
  static const auto* empty =
      new std::vector<std::pair<std::string, std::string>>();
  return *empty;
}

}  // namespace

// An Object that std::allocate_shared can construct and destroy (Object's
// constructor and destructor are private).
class ObjectStorage final : public Object {
 public:
  ObjectStorage() = default;
  ~ObjectStorage() = default;
};

absl::StatusOr<ObjectPtr> Object::Parse(absl::string_view json,
                                        const TransformOptions& transform) {
  const std::shared_ptr<const json_internal::DropNode> drops =
      json_internal::BuildDropTree(transform);
  return json_internal::WithParsedJson(
      json, [&](ParsedJson& parsed) -> absl::StatusOr<ObjectPtr> {
        absl::Status st = parsed.Parse(json);
        if (!st.ok()) return st;
        return json_internal::BuildObject(parsed.root(), parsed.compact(),
                                          *drops, "",
                                          transform.compressor.get());
      });
}

const std::vector<std::pair<std::string, std::string>>& Object::labels() const {
  return extras_ != nullptr ? extras_->labels : EmptyPairs();
}

const std::vector<std::pair<std::string, std::string>>& Object::annotations()
    const {
  return extras_ != nullptr ? extras_->annotations : EmptyPairs();
}

const std::vector<OwnerReference>& Object::owner_references() const {
  static const auto* empty = new std::vector<OwnerReference>();
  return extras_ != nullptr ? extras_->owner_references : *empty;
}

const std::string* Object::Label(absl::string_view key) const {
  return FindSorted(labels(), key);
}

const std::string* Object::Annotation(absl::string_view key) const {
  return FindSorted(annotations(), key);
}

JsonText Object::json() const {
  if (dictionary_ == nullptr) return JsonText(Part(0, json_size_));
  std::string out;
  out.resize(json_size_);
  if (!dictionary_->Decompress(Part(0, stored_size_), out.data(), json_size_)) {
    // The bytes were compressed in this process and never change: only a
    // bug or memory corruption gets here, and wrong JSON would be worse.
    Fatal("Object::json(): the stored JSON does not decompress");
  }
  return JsonText(std::move(out));
}

std::vector<std::string> Object::FieldValues(absl::string_view path) const {
  std::vector<std::string> out;
  if (path.empty()) return out;
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  const JsonText text = this->json();
  const absl::string_view json = text.view();
  json_internal::WithParsedJson(json, [&](ParsedJson& parsed) {
    // The JSON was validated when the object was built (or synthesised by
    // ObjectBuilder); a failure here means "no values".
    if (!parsed.Parse(json).ok()) return 0;
    CollectFieldValues(parsed.root(), parts, 0, &out);
    return 0;
  });
  return out;
}

int64_t Object::generation() const {
  int64_t g = 0;
  // Digits the decoder read as an int64 (or the builder printed).
  return absl::SimpleAtoi(Field(kGeneration), &g) ? g : 0;
}

size_t Object::TextSize() const {
  size_t end = stored_size_;
  for (int f = 0; f < kFieldCount; ++f) {
    end = std::max<size_t>(end, FieldStart(f) + field_size_[f]);
  }
  return end;
}

size_t Object::MemoryUsage() const {
  size_t n = kControlBlockBytes + sizeof(Object) + TextSize();
  n += StringHeap(key_);
  if (extras_ != nullptr) {
    n += sizeof(Extras);
    n += PairsHeap(extras_->labels) + PairsHeap(extras_->annotations);
    n += extras_->owner_references.capacity() * sizeof(OwnerReference);
    for (const OwnerReference& r : extras_->owner_references) {
      n += StringHeap(r.api_version) + StringHeap(r.kind) + StringHeap(r.name) +
           StringHeap(r.uid);
    }
  }
  return n;
}

ObjectBuilder& ObjectBuilder::SetJson(std::string json) {
  json_ = std::move(json);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetApiVersion(absl::string_view v) {
  api_version_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetKind(absl::string_view v) {
  kind_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetNamespace(absl::string_view v) {
  ns_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetName(absl::string_view v) {
  name_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetUid(absl::string_view v) {
  uid_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetResourceVersion(absl::string_view v) {
  resource_version_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::SetGeneration(int64_t v) {
  generation_ = v;
  return *this;
}
ObjectBuilder& ObjectBuilder::SetDeletionTimestamp(absl::string_view v) {
  deletion_timestamp_ = std::string(v);
  return *this;
}
ObjectBuilder& ObjectBuilder::AddLabel(absl::string_view k,
                                       absl::string_view v) {
  labels_.emplace_back(std::string(k), std::string(v));
  return *this;
}
ObjectBuilder& ObjectBuilder::AddAnnotation(absl::string_view k,
                                            absl::string_view v) {
  annotations_.emplace_back(std::string(k), std::string(v));
  return *this;
}
ObjectBuilder& ObjectBuilder::AddOwnerReference(OwnerReference ref) {
  owner_references_.push_back(std::move(ref));
  return *this;
}
ObjectBuilder& ObjectBuilder::SetCompressor(JsonCompressor* compressor) {
  compressor_ = compressor;
  return *this;
}

std::string ObjectBuilder::SynthesizeJson() const {
  std::string out;
  out.push_back('{');
  bool first = true;
  if (!api_version_.empty()) {
    AppendStringMember("apiVersion", api_version_, &first, &out);
  }
  if (!kind_.empty()) AppendStringMember("kind", kind_, &first, &out);
  if (!first) out.push_back(',');
  out.append("\"metadata\":{");
  bool m = true;
  AppendStringMember("name", name_, &m, &out);
  if (!ns_.empty()) AppendStringMember("namespace", ns_, &m, &out);
  if (!uid_.empty()) AppendStringMember("uid", uid_, &m, &out);
  if (!resource_version_.empty()) {
    AppendStringMember("resourceVersion", resource_version_, &m, &out);
  }
  if (generation_ != 0) {
    absl::StrAppend(&out, ",\"generation\":", generation_);
  }
  if (!deletion_timestamp_.empty()) {
    AppendStringMember("deletionTimestamp", deletion_timestamp_, &m, &out);
  }
  AppendStringMap("labels", labels_, &m, &out);
  AppendStringMap("annotations", annotations_, &m, &out);
  if (!owner_references_.empty()) {
    out.append(",\"ownerReferences\":[");
    bool first_ref = true;
    for (const OwnerReference& r : owner_references_) {
      if (!first_ref) out.push_back(',');
      first_ref = false;
      out.push_back('{');
      bool f = true;
      AppendStringMember("apiVersion", r.api_version, &f, &out);
      AppendStringMember("kind", r.kind, &f, &out);
      AppendStringMember("name", r.name, &f, &out);
      AppendStringMember("uid", r.uid, &f, &out);
      if (r.controller) out.append(",\"controller\":true");
      if (r.block_owner_deletion) out.append(",\"blockOwnerDeletion\":true");
      out.push_back('}');
    }
    out.push_back(']');
  }
  out.append("}}");
  return out;
}

ObjectPtr ObjectBuilder::Build() {
  SortUnique(&labels_);
  SortUnique(&annotations_);
  // Duplicate keys were dropped above, so the JSON synthesised from the
  // fields has each label once.
  if (json_.empty()) json_ = SynthesizeJson();
  // One allocation: control block, Object, then the JSON and the metadata
  // strings the JSON does not hold verbatim (any occurrence of the same
  // bytes will do: "v1" or "ConfigMap" are found near the start, the uid
  // and resourceVersion in metadata).
  const std::string generation =
      generation_ != 0 ? absl::StrCat(generation_) : std::string();
  std::string compressed;
  std::shared_ptr<const JsonDictionary> dictionary;
  if (compressor_ != nullptr && json_.size() <= UINT32_MAX) {
    dictionary = compressor_->Compress(json_, &compressed);
  }
  // The bytes stored past the header: the compressed JSON, or the JSON.
  const absl::string_view stored = dictionary != nullptr
                                       ? absl::string_view(compressed)
                                       : absl::string_view(json_);
  const std::string* fields[Object::kFieldCount] = {};
  fields[Object::kUid] = &uid_;
  fields[Object::kResourceVersion] = &resource_version_;
  fields[Object::kDeletionTimestamp] = &deletion_timestamp_;
  fields[Object::kApiVersion] = &api_version_;
  fields[Object::kKind] = &kind_;
  fields[Object::kGeneration] = &generation;
  // Found within the JSON's first 32 KiB: an offset from its start. Not
  // in compressed JSON, whose bytes are not the text's.
  const absl::string_view searched =
      dictionary != nullptr
          ? absl::string_view()
          : absl::string_view(json_).substr(0, Object::kAppended);
  uint16_t offsets[Object::kFieldCount] = {};
  size_t appended = 0;
  for (int f = 0; f < Object::kFieldCount; ++f) {
    const std::string& v = *fields[f];
    if (v.size() > Object::kMaxFieldBytes) {
      // The decoder refuses such objects; only a caller of the builder
      // could get here.
      Fatal("ObjectBuilder: a metadata string longer than 4096 bytes");
    }
    const size_t at = v.empty() ? 0 : searched.find(v);
    // (An empty string is "found" at offset 0 even in compressed JSON.)
    if (at != absl::string_view::npos && at + v.size() <= searched.size()) {
      offsets[f] = static_cast<uint16_t>(at);
    } else {
      offsets[f] = static_cast<uint16_t>(Object::kAppended | appended);
      appended += v.size();
    }
  }
  TrailingRequest request;
  request.extra = stored.size() + appended;
  current_request = &request;
  std::shared_ptr<ObjectStorage> storage =
      std::allocate_shared<ObjectStorage>(TrailingAllocator<ObjectStorage>());
  Object* obj = storage.get();
  // The text() the Object computes must be where the allocator put it
  // (true of libstdc++'s in-place control block, whose object comes last).
  if (request.trailing != obj->text()) {
    Fatal("ObjectBuilder: allocate_shared laid out its block unexpectedly");
  }
  char* out = request.trailing;
  if (!stored.empty()) std::memcpy(out, stored.data(), stored.size());
  obj->json_size_ = static_cast<uint32_t>(json_.size());
  obj->stored_size_ = static_cast<uint32_t>(stored.size());
  obj->dictionary_ = std::move(dictionary);
  for (int f = 0; f < Object::kFieldCount; ++f) {
    const std::string& v = *fields[f];
    obj->field_offset_[f] = offsets[f];
    obj->field_size_[f] = static_cast<uint16_t>(v.size());
    if ((offsets[f] & Object::kAppended) != 0 && !v.empty()) {
      std::memcpy(out + obj->FieldStart(f), v.data(), v.size());
    }
  }
  obj->key_ = MetaNamespaceKey(ns_, name_);
  obj->ns_size_ = static_cast<uint32_t>(ns_.size());
  if (!labels_.empty() || !annotations_.empty() || !owner_references_.empty()) {
    auto extras = std::make_unique<Object::Extras>();
    extras->labels = std::move(labels_);
    extras->annotations = std::move(annotations_);
    extras->owner_references = std::move(owner_references_);
    extras->labels.shrink_to_fit();
    extras->annotations.shrink_to_fit();
    extras->owner_references.shrink_to_fit();
    obj->extras_ = std::move(extras);
  }
  *this = ObjectBuilder();
  return storage;
}

std::string MetaNamespaceKey(absl::string_view ns, absl::string_view name) {
  if (ns.empty()) return std::string(name);
  return absl::StrCat(ns, "/", name);
}

absl::StatusOr<std::pair<std::string, std::string>> SplitMetaNamespaceKey(
    absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  if (parts.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected key format \"", key, "\": more than one '/'"));
  }
  absl::string_view ns = parts.size() == 2 ? parts[0] : absl::string_view();
  absl::string_view name = parts.back();
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected key format \"", key, "\": empty name"));
  }
  return std::make_pair(std::string(ns), std::string(name));
}

}  // namespace informer

#include "informer/object/json_decode.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace informer {
namespace json_internal {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// p points at an opening quote of a string in valid JSON; returns one past the
// closing quote.
inline const char* SkipString(const char* p, const char* end) {
  const char* q = p + 1;
  for (;;) {
    while (q < end && *q != '"') ++q;
    if (q >= end) return end;  // not reached for valid JSON
    // The quote is escaped iff an odd number of backslashes precede it. The
    // opening quote bounds the backward scan.
    const char* b = q;
    while (b[-1] == '\\') --b;
    if (((q - b) & 1) == 0) return q + 1;
    ++q;
  }
}

struct Cut {
  const char* begin;
  const char* end;
};

const DropNode* FindChild(const DropNode& node, absl::string_view key) {
  for (const DropNode& c : node.children) {
    if (c.key == key) return &c;
  }
  return nullptr;
}

void WalkArray(const char* p, const char* end, const DropNode& node,
               std::vector<Cut>* cuts);

// Records the cuts that remove node's dropped members from the object at `p`.
// Stops as soon as every child of `node` was seen: later bytes are copied
// verbatim, so they need not be scanned at all.
void WalkObject(const char* p, const char* end, const DropNode& node,
                std::vector<Cut>* cuts) {
  size_t remaining = node.children.size();
  bool kept_before = false;
  const char* q = p + 1;
  if (q >= end || *q == '}') return;
  while (q < end) {
    const char* member = q;
    const char* key_end = SkipString(q, end);
    absl::string_view key(q + 1, static_cast<size_t>(key_end - q - 2));
    const char* value = key_end + 1;  // past ':'
    const char* value_end = nullptr;
    const DropNode* child = FindChild(node, key);
    if (child != nullptr && child->drop) {
      value_end = SkipValue(value, end);
      // Each kept member keeps exactly the comma before it: a dropped member
      // after a kept one takes its preceding comma, one before any kept
      // member takes its following comma.
      if (kept_before) {
        cuts->push_back({member - 1, value_end});
      } else {
        cuts->push_back(
            {member, value_end + (value_end < end && *value_end == ',')});
      }
      --remaining;
    } else {
      if (child != nullptr) {
        if (*value == '{') {
          WalkObject(value, end, *child, cuts);
        } else if (*value == '[') {
          WalkArray(value, end, *child, cuts);
        }
        --remaining;
      }
      kept_before = true;
    }
    if (remaining == 0) return;
    if (value_end == nullptr) value_end = SkipValue(value, end);
    if (value_end >= end || *value_end != ',') return;
    q = value_end + 1;
  }
}

// Arrays on a path fan out: the path applies to every element object.
void WalkArray(const char* p, const char* end, const DropNode& node,
               std::vector<Cut>* cuts) {
  const char* q = p + 1;
  if (q >= end || *q == ']') return;
  while (q < end) {
    if (*q == '{') WalkObject(q, end, node, cuts);
    const char* e = SkipValue(q, end);
    if (e >= end || *e != ',') return;
    q = e + 1;
  }
}

std::string ApplyDrops(absl::string_view compact, const DropNode& drops) {
  if (drops.children.empty() || compact.empty() || compact[0] != '{') {
    return std::string(compact);
  }
  std::vector<Cut> cuts;
  const char* begin = compact.data();
  const char* end = begin + compact.size();
  WalkObject(begin, end, drops, &cuts);
  if (cuts.empty()) return std::string(compact);
  size_t removed = 0;
  for (const Cut& c : cuts) removed += static_cast<size_t>(c.end - c.begin);
  std::string out;
  out.resize(compact.size() - removed);
  char* w = &out[0];
  const char* r = begin;
  for (const Cut& c : cuts) {
    std::memcpy(w, r, static_cast<size_t>(c.begin - r));
    w += c.begin - r;
    r = c.end;
  }
  std::memcpy(w, r, static_cast<size_t>(end - r));
  return out;
}

void AddPath(DropNode* root, absl::string_view path) {
  DropNode* node = root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (node->drop) return;  // an ancestor is dropped whole already
    DropNode* next = nullptr;
    for (DropNode& c : node->children) {
      if (c.key == part) next = &c;
    }
    if (next == nullptr) {
      node->children.push_back(DropNode{std::string(part), false, {}});
      next = &node->children.back();
    }
    node = next;
  }
  node->drop = true;
  node->children.clear();
}

absl::Status WrongType(absl::string_view where, absl::string_view field,
                       element value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      where, field, ": got ", TypeName(value.type()), ", want ", want));
}

absl::Status ReadStringMap(element value, absl::string_view where,
                           absl::string_view field, ObjectBuilder* b,
                           ObjectBuilder& (ObjectBuilder::*add)(
                               absl::string_view, absl::string_view)) {
  if (value.is_null()) return absl::OkStatus();
  simdjson::dom::object obj;
  if (value.get_object().get(obj)) {
    return WrongType(where, field, value, "object");
  }
  for (simdjson::dom::key_value_pair kv : obj) {
    std::string_view v;
    if (kv.value.get_string().get(v)) {
      return WrongType(where, absl::StrCat(field, ".", ToAbsl(kv.key)),
                       kv.value, "string");
    }
    (b->*add)(ToAbsl(kv.key), ToAbsl(v));
  }
  return absl::OkStatus();
}

absl::Status ReadOwnerReferences(element value, absl::string_view where,
                                 ObjectBuilder* b) {
  if (value.is_null()) return absl::OkStatus();
  simdjson::dom::array refs;
  if (value.get_array().get(refs)) {
    return WrongType(where, "metadata.ownerReferences", value, "array");
  }
  size_t i = 0;
  for (element e : refs) {
    const std::string field = absl::StrCat("metadata.ownerReferences[", i, "]");
    simdjson::dom::object ref;
    if (e.get_object().get(ref)) return WrongType(where, field, e, "object");
    OwnerReference out;
    const std::string ref_where = absl::StrCat(where, field, ".");
    absl::string_view s;
    absl::Status st;
    if (!(st = GetOptionalString(ref, "apiVersion", ref_where, &s)).ok()) {
      return st;
    }
    out.api_version = std::string(s);
    if (!(st = GetOptionalString(ref, "kind", ref_where, &s)).ok()) return st;
    out.kind = std::string(s);
    if (!(st = GetOptionalString(ref, "name", ref_where, &s)).ok()) return st;
    out.name = std::string(s);
    if (!(st = GetOptionalString(ref, "uid", ref_where, &s)).ok()) return st;
    out.uid = std::string(s);
    for (const char* flag : {"controller", "blockOwnerDeletion"}) {
      element f;
      if (ref.at_key(flag).get(f) || f.is_null()) continue;
      bool v = false;
      if (f.get_bool().get(v)) return WrongType(ref_where, flag, f, "bool");
      (std::strcmp(flag, "controller") == 0 ? out.controller
                                            : out.block_owner_deletion) = v;
    }
    b->AddOwnerReference(std::move(out));
    ++i;
  }
  return absl::OkStatus();
}

absl::Status ReadMetadata(simdjson::dom::object meta, absl::string_view where,
                          ObjectBuilder* b, bool* has_name) {
  for (simdjson::dom::key_value_pair kv : meta) {
    const std::string_view key = kv.key;
    ObjectBuilder& (ObjectBuilder::*set)(absl::string_view) = nullptr;
    if (key == "name") {
      set = &ObjectBuilder::SetName;
      *has_name = true;
    } else if (key == "namespace") {
      set = &ObjectBuilder::SetNamespace;
    } else if (key == "uid") {
      set = &ObjectBuilder::SetUid;
    } else if (key == "resourceVersion") {
      set = &ObjectBuilder::SetResourceVersion;
    } else if (key == "deletionTimestamp") {
      set = &ObjectBuilder::SetDeletionTimestamp;
    } else if (key == "generation") {
      if (kv.value.is_null()) continue;
      int64_t g = 0;
      if (kv.value.get_int64().get(g)) {
        return WrongType(where, "metadata.generation", kv.value, "integer");
      }
      b->SetGeneration(g);
      continue;
    } else if (key == "labels") {
      absl::Status st = ReadStringMap(kv.value, where, "metadata.labels", b,
                                      &ObjectBuilder::AddLabel);
      if (!st.ok()) return st;
      continue;
    } else if (key == "annotations") {
      absl::Status st = ReadStringMap(kv.value, where, "metadata.annotations",
                                      b, &ObjectBuilder::AddAnnotation);
      if (!st.ok()) return st;
      continue;
    } else if (key == "ownerReferences") {
      absl::Status st = ReadOwnerReferences(kv.value, where, b);
      if (!st.ok()) return st;
      continue;
    } else {
      continue;
    }
    if (kv.value.is_null()) {
      if (key == "name") *has_name = false;
      continue;
    }
    std::string_view v;
    if (kv.value.get_string().get(v)) {
      return WrongType(where, absl::StrCat("metadata.", ToAbsl(key)), kv.value,
                       "string");
    }
    if (key == "name" && v.empty()) *has_name = false;
    if (v.size() > Object::kMaxFieldBytes && key != "name" &&
        key != "namespace") {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "metadata.", ToAbsl(key), " is ", v.size(),
          " bytes long; at most ", Object::kMaxFieldBytes, " are supported"));
    }
    (b->*set)(ToAbsl(v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParsedJson::Parse(absl::string_view json) {
  const size_t need = json.size() + simdjson::SIMDJSON_PADDING;
  if (compact_capacity_ < need) {
    compact_.reset(new char[need]);
    compact_capacity_ = need;
  }
  size_t n = 0;
  const simdjson::error_code minify_error =
      simdjson::minify(json.data(), json.size(), compact_.get(), n);
  compact_size_ = minify_error ? 0 : n;
  const char* to_parse = compact_.get();
  if (minify_error || n != json.size()) {
    // Whitespace was removed. Validate the ORIGINAL text: minify would turn
    // e.g. "tr ue" into a valid "true".
    if (original_capacity_ < need) {
      original_.reset(new char[need]);
      original_capacity_ = need;
    }
    std::memcpy(original_.get(), json.data(), json.size());
    to_parse = original_.get();
  }
  // simdjson reads (but does not use) the padding; keep it deterministic.
  std::memset(const_cast<char*>(to_parse) + json.size(), 0,
              simdjson::SIMDJSON_PADDING);
  const simdjson::error_code error =
      parser_.parse(to_parse, json.size(), /*realloc_if_needed=*/false)
          .get(root_);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: ", simdjson::error_message(error)));
  }
  if (minify_error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed JSON: ", simdjson::error_message(minify_error)));
  }
  return absl::OkStatus();
}

std::shared_ptr<const DropNode> BuildDropTree(
    const TransformOptions& transform) {
  if (transform.drop_fields.empty()) {
    static const auto* const kNone =
        new std::shared_ptr<const DropNode>(std::make_shared<const DropNode>());
    static const auto* const kManaged = new std::shared_ptr<const DropNode>([] {
      auto root = std::make_shared<DropNode>();
      AddPath(root.get(), "metadata.managedFields");
      return root;
    }());
    return transform.drop_managed_fields ? *kManaged : *kNone;
  }
  auto root = std::make_shared<DropNode>();
  if (transform.drop_managed_fields) {
    AddPath(root.get(), "metadata.managedFields");
  }
  for (const std::string& path : transform.drop_fields) {
    if (!path.empty()) AddPath(root.get(), path);
  }
  return root;
}

absl::StatusOr<ObjectPtr> BuildObject(element value, absl::string_view compact,
                                      const DropNode& drops,
                                      absl::string_view where,
                                      JsonCompressor* compressor) {
  simdjson::dom::object top;
  if (value.get_object().get(top)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "top-level JSON value is ", TypeName(value.type()),
                     ", want an object"));
  }
  ObjectBuilder b;
  bool has_meta = false;
  bool has_name = false;
  for (simdjson::dom::key_value_pair kv : top) {
    const std::string_view key = kv.key;
    if (key == "apiVersion" || key == "kind") {
      if (kv.value.is_null()) continue;
      std::string_view v;
      if (kv.value.get_string().get(v)) {
        return WrongType(where, ToAbsl(key), kv.value, "string");
      }
      if (v.size() > Object::kMaxFieldBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ToAbsl(key), " is ", v.size(), " bytes long; at most ",
            Object::kMaxFieldBytes, " are supported"));
      }
      if (key == "kind") {
        b.SetKind(ToAbsl(v));
      } else {
        b.SetApiVersion(ToAbsl(v));
      }
    } else if (key == "metadata") {
      simdjson::dom::object meta;
      if (kv.value.get_object().get(meta)) {
        return WrongType(where, "metadata", kv.value, "object");
      }
      has_meta = true;
      absl::Status st = ReadMetadata(meta, where, &b, &has_name);
      if (!st.ok()) return st;
    }
  }
  if (!has_meta) {
    return absl::InvalidArgumentError(absl::StrCat(where, "missing metadata"));
  }
  if (!has_name) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "missing metadata.name"));
  }
  b.SetJson(ApplyDrops(compact, drops));
  b.SetCompressor(compressor);
  return b.Build();
}

namespace {

using json_internal::kByteClasses;
using json_internal::kClose;
using json_internal::kOpen;
using json_internal::kOther;
using json_internal::kQuote;

inline const char* SkipWhitespace(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) {
    ++p;
  }
  return p;
}

}  // namespace

const char* SkipValue(const char* p, const char* end) {
  if (p >= end) return end;
  const char c = *p;
  if (c == '"') return SkipString(p, end);
  if (c == '{' || c == '[') {
    int depth = 0;
    while (p < end) {
      switch (kByteClasses.c[static_cast<unsigned char>(*p)]) {
        case kOther:
          ++p;
          break;
        case kQuote:
          p = SkipString(p, end);
          break;
        case kOpen:
          ++depth;
          ++p;
          break;
        default:  // kClose
          ++p;
          if (--depth == 0) return p;
      }
    }
    return end;
  }
  while (p < end && *p != ',' && *p != '}' && *p != ']') ++p;
  return p;
}

bool SplitList(absl::string_view json, ListSplit* out) {
  out->items.clear();
  const char* const begin = json.data();
  const char* const end = begin + json.size();
  const char* p = SkipWhitespace(begin, end);
  if (p >= end || *p != '{') return false;
  ++p;
  for (;;) {
    p = SkipWhitespace(p, end);
    if (p >= end || *p != '"') return false;
    const char* key_end = SkipString(p, end);
    if (key_end >= end || key_end[-1] != '"' || key_end - p < 2) return false;
    const absl::string_view key(p + 1, static_cast<size_t>(key_end - p - 2));
    p = SkipWhitespace(key_end, end);
    if (p >= end || *p != ':') return false;
    p = SkipWhitespace(p + 1, end);
    if (p >= end) return false;
    if (key == "items" && *p == '[') {
      out->items_begin = static_cast<size_t>(p - begin);
      const char* q = SkipWhitespace(p + 1, end);
      if (q < end && *q == ']') {
        out->items_end = static_cast<size_t>(q + 1 - begin);
        return true;
      }
      while (q < end) {
        const char* e = SkipValue(q, end);
        if (e >= end || e == q) return false;
        out->items.emplace_back(q, static_cast<size_t>(e - q));
        const char* r = SkipWhitespace(e, end);
        if (r >= end) return false;
        if (*r == ']') {
          out->items_end = static_cast<size_t>(r + 1 - begin);
          return true;
        }
        if (*r != ',') return false;
        q = SkipWhitespace(r + 1, end);
      }
      return false;
    }
    const char* value_end = SkipValue(p, end);
    if (value_end >= end || value_end == p) return false;
    p = SkipWhitespace(value_end, end);
    if (p >= end || *p != ',') return false;
    ++p;
  }
}

absl::string_view FindMemberValue(const char* p, const char* end,
                                  absl::string_view key) {
  if (p >= end || *p != '{') return {};
  const char* q = p + 1;
  if (q >= end || *q == '}') return {};
  while (q < end) {
    const char* key_end = SkipString(q, end);
    absl::string_view k(q + 1, static_cast<size_t>(key_end - q - 2));
    const char* value = key_end + 1;
    const char* value_end = SkipValue(value, end);
    if (k == key) {
      return absl::string_view(value, static_cast<size_t>(value_end - value));
    }
    if (value_end >= end || *value_end != ',') return {};
    q = value_end + 1;
  }
  return {};
}

std::vector<absl::string_view> ArrayElements(const char* p, const char* end) {
  std::vector<absl::string_view> out;
  if (p >= end || *p != '[') return out;
  const char* q = p + 1;
  if (q >= end || *q == ']') return out;
  while (q < end) {
    const char* e = SkipValue(q, end);
    out.emplace_back(q, static_cast<size_t>(e - q));
    if (e >= end || *e != ',') break;
    q = e + 1;
  }
  return out;
}

absl::string_view TypeName(element_type type) {
  switch (type) {
    case element_type::ARRAY:
      return "array";
    case element_type::OBJECT:
      return "object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "number";
    case element_type::STRING:
      return "string";
    case element_type::BOOL:
      return "bool";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

absl::Status GetOptionalString(simdjson::dom::object obj, const char* key,
                               absl::string_view where,
                               absl::string_view* out) {
  *out = absl::string_view();
  element e;
  if (obj.at_key(key).get(e) || e.is_null()) return absl::OkStatus();
  std::string_view v;
  if (e.get_string().get(v)) return WrongType(where, key, e, "string");
  *out = ToAbsl(v);
  return absl::OkStatus();
}

}  // namespace json_internal
}  // namespace informer

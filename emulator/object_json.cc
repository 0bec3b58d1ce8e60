#include "emulator/object_json.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

rapidjson::Value::ConstMemberIterator FindView(const rapidjson::Value& obj,
                                               absl::string_view key) {
  rapidjson::Value k(rapidjson::StringRef(
      key.data(), static_cast<rapidjson::SizeType>(key.size())));
  return obj.FindMember(k);
}
rapidjson::Value::MemberIterator FindView(rapidjson::Value& obj,
                                          absl::string_view key) {
  rapidjson::Value k(rapidjson::StringRef(
      key.data(), static_cast<rapidjson::SizeType>(key.size())));
  return obj.FindMember(k);
}

std::string ScalarText(const rapidjson::Value& v) {
  if (v.IsString()) return std::string(View(v));
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsNumber()) {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    v.Accept(w);
    return buf.GetString();
  }
  return "";
}

// Metadata fields in the order the API server writes them.
constexpr absl::string_view kMetadataOrder[] = {
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
};

}  // namespace

absl::string_view View(const rapidjson::Value& v) {
  return absl::string_view(v.GetString(), v.GetStringLength());
}

rapidjson::Value Str(absl::string_view s, rapidjson::Document& doc) {
  return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()),
                          doc.GetAllocator());
}

// FindMember by a view that need not be NUL-terminated. (Passing a
// StringRef directly would pick the `const Ch*` overload, which uses strlen.)
// String member of an object, "" when absent or not a string.
absl::string_view StringMember(const rapidjson::Value& obj,
                               absl::string_view key) {
  if (!obj.IsObject()) return {};
  auto it = FindView(obj, key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return View(it->value);
}

void SetMember(rapidjson::Value& obj, absl::string_view key,
               rapidjson::Value value, rapidjson::Document& doc) {
  auto it = FindView(obj, key);
  if (it != obj.MemberEnd()) {
    it->value = value;
  } else {
    obj.AddMember(Str(key, doc), value, doc.GetAllocator());
  }
}

void RemoveMember(rapidjson::Value& obj, absl::string_view key) {
  auto it = FindView(obj, key);
  if (it != obj.MemberEnd()) obj.EraseMember(it);
}

absl::Status ParseObject(absl::string_view json, rapidjson::Document& doc) {
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at offset ", doc.GetErrorOffset(), ": ",
                     rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) {
    return absl::InvalidArgumentError("the object must be a JSON object");
  }
  auto md = doc.FindMember("metadata");
  if (md == doc.MemberEnd()) {
    doc.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType),
                  doc.GetAllocator());
  } else if (!md->value.IsObject()) {
    return absl::InvalidArgumentError("metadata must be an object");
  }
  return absl::OkStatus();
}

// Kind and namespace checks shared by create and update; fills in the
// request's namespace when the body has none.
absl::Status CheckKindAndNamespace(const ResourceInfo& r, absl::string_view ns,
                                   rapidjson::Document& doc) {
  absl::string_view kind = StringMember(doc, "kind");
  if (!kind.empty() && kind != r.kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kind of the provided object (", kind,
                     ") does not match the resource (", r.kind, ")"));
  }
  rapidjson::Value& md = doc["metadata"];
  if (!r.namespaced) {
    RemoveMember(md, "namespace");
    return absl::OkStatus();
  }
  absl::string_view body_ns = StringMember(md, "namespace");
  if (!body_ns.empty() && !ns.empty() && body_ns != ns) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace "
        "sent on the request");
  }
  if (body_ns.empty()) {
    if (ns.empty()) {
      return absl::FailedPreconditionError(
          "metadata.namespace: Required value");
    }
    SetMember(md, "namespace", Str(ns, doc), doc);
  }
  return absl::OkStatus();
}

const rapidjson::Value* FindPath(const rapidjson::Value& root,
                                 absl::string_view path) {
  const rapidjson::Value* cur = &root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->IsObject()) return nullptr;
    auto it = FindView(*cur, part);
    if (it == cur->MemberEnd()) return nullptr;
    cur = &it->value;
  }
  return cur;
}

// Serializes `doc` (metadata complete) into a StoredObject: metadata first
// in canonical order, kind/apiVersion dropped, other members in order.
StoredObjectPtr Materialize(const ResourceInfo& r,
                            const rapidjson::Document& doc) {
  auto obj = std::make_shared<StoredObject>();
  const rapidjson::Value& md = doc["metadata"];
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("metadata");
  w.StartObject();
  for (absl::string_view k : kMetadataOrder) {
    auto it = FindView(md, k);
    if (it == md.MemberEnd()) continue;
    w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
    it->value.Accept(w);
  }
  for (auto it = md.MemberBegin(); it != md.MemberEnd(); ++it) {
    absl::string_view k = View(it->name);
    if (std::find(std::begin(kMetadataOrder), std::end(kMetadataOrder), k) !=
        std::end(kMetadataOrder)) {
      continue;
    }
    w.Key(it->name.GetString(), it->name.GetStringLength());
    it->value.Accept(w);
  }
  w.EndObject();
  obj->metadata_len = buf.GetSize() - StoredObject::kMetadataOffset;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    absl::string_view k = View(it->name);
    if (k == "metadata" || k == "kind" || k == "apiVersion") continue;
    w.Key(it->name.GetString(), it->name.GetStringLength());
    it->value.Accept(w);
  }
  w.EndObject();
  obj->body.assign(buf.GetString(), buf.GetSize());

  obj->ns = std::string(StringMember(md, "namespace"));
  obj->name = std::string(StringMember(md, "name"));
  obj->uid = std::string(StringMember(md, "uid"));
  // A stored object always carries the numeric RV this store assigned.
  if (!absl::SimpleAtoi(StringMember(md, "resourceVersion"), &obj->rv)) {
    obj->rv = 0;
  }
  obj->creation_timestamp = std::string(StringMember(md, "creationTimestamp"));
  auto gen = md.FindMember("generation");
  if (gen != md.MemberEnd() && gen->value.IsInt64()) {
    obj->generation = gen->value.GetInt64();
  }
  auto labels = md.FindMember("labels");
  if (labels != md.MemberEnd() && labels->value.IsObject()) {
    for (auto it = labels->value.MemberBegin(); it != labels->value.MemberEnd();
         ++it) {
      if (!it->value.IsString()) continue;
      obj->labels.emplace_back(std::string(View(it->name)),
                               std::string(View(it->value)));
    }
    std::sort(obj->labels.begin(), obj->labels.end());
  }
  obj->fields.emplace_back("metadata.name", obj->name);
  obj->fields.emplace_back("metadata.namespace", obj->ns);
  for (const std::string& path : r.selectable_fields) {
    const rapidjson::Value* v = FindPath(doc, path);
    if (v != nullptr) obj->fields.emplace_back(path, ScalarText(*v));
  }
  std::sort(obj->fields.begin(), obj->fields.end());
  return obj;
}

// A copy of `object` whose metadata.resourceVersion is `rv`.
StoredObjectPtr WithResourceVersion(const ResourceInfo& r,
                                    const StoredObject& object, int64_t rv) {
  rapidjson::Document doc;
  doc.Parse(object.body.data(), object.body.size());
  CHECK(!doc.HasParseError()) << "stored JSON must parse";
  SetMember(doc["metadata"], "resourceVersion", Str(absl::StrCat(rv), doc),
            doc);
  return Materialize(r, doc);
}

}  // namespace emulator

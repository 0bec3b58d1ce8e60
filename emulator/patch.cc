#include "emulator/patch.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rapidjson/error/en.h"

namespace emulator {
namespace {

using Allocator = rapidjson::Document::AllocatorType;

void MergeInto(rapidjson::Value& target, const rapidjson::Value& patch,
               Allocator& alloc, bool strategic) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, alloc);
    return;
  }
  if (strategic) {
    auto directive = patch.FindMember("$patch");
    if (directive != patch.MemberEnd() && directive->value.IsString()) {
      absl::string_view d(directive->value.GetString(),
                          directive->value.GetStringLength());
      if (d == "replace") {
        target.SetObject();
        for (auto m = patch.MemberBegin(); m != patch.MemberEnd(); ++m) {
          if (absl::StartsWith(m->name.GetString(), "$")) continue;
          target.AddMember(rapidjson::Value(m->name, alloc),
                           rapidjson::Value(m->value, alloc), alloc);
        }
        return;
      }
    }
  }
  if (!target.IsObject()) target.SetObject();
  for (auto m = patch.MemberBegin(); m != patch.MemberEnd(); ++m) {
    absl::string_view name(m->name.GetString(), m->name.GetStringLength());
    if (strategic && absl::StartsWith(name, "$")) continue;
    auto existing = target.FindMember(m->name);
    if (m->value.IsNull()) {
      if (existing != target.MemberEnd()) target.EraseMember(existing);
      continue;
    }
    if (strategic && m->value.IsObject()) {
      auto d = m->value.FindMember("$patch");
      if (d != m->value.MemberEnd() && d->value.IsString() &&
          absl::string_view(d->value.GetString()) == "delete") {
        if (existing != target.MemberEnd()) target.EraseMember(existing);
        continue;
      }
    }
    if (existing == target.MemberEnd()) {
      rapidjson::Value v(rapidjson::kObjectType);
      MergeInto(v, m->value, alloc, strategic);
      target.AddMember(rapidjson::Value(m->name, alloc), v, alloc);
    } else {
      MergeInto(existing->value, m->value, alloc, strategic);
    }
  }
}

// RFC 6901 pointer tokens ("~1" is '/', "~0" is '~').
absl::StatusOr<std::vector<std::string>> PointerTokens(absl::string_view ptr) {
  if (ptr.empty()) return std::vector<std::string>{};
  if (ptr[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON pointer: ", ptr));
  }
  std::vector<std::string> out;
  for (absl::string_view t : absl::StrSplit(ptr.substr(1), '/')) {
    out.push_back(absl::StrReplaceAll(t, {{"~1", "/"}, {"~0", "~"}}));
  }
  return out;
}

// Resolves all but the last token; returns the parent container.
absl::StatusOr<rapidjson::Value*> Parent(rapidjson::Value& root,
                                         const std::vector<std::string>& toks) {
  rapidjson::Value* cur = &root;
  for (size_t i = 0; i + 1 < toks.size(); ++i) {
    const std::string& t = toks[i];
    if (cur->IsObject()) {
      auto it = cur->FindMember(rapidjson::StringRef(t.data(), t.size()));
      if (it == cur->MemberEnd()) {
        return absl::InvalidArgumentError(absl::StrCat("path not found: ", t));
      }
      cur = &it->value;
    } else if (cur->IsArray()) {
      size_t idx;
      if (!absl::SimpleAtoi(t, &idx) || idx >= cur->Size()) {
        return absl::InvalidArgumentError(absl::StrCat("bad index: ", t));
      }
      cur = &(*cur)[static_cast<rapidjson::SizeType>(idx)];
    } else {
      return absl::InvalidArgumentError("path goes through a scalar");
    }
  }
  return cur;
}

// A JSON patch op on member `key` of object `obj`; `value` is the op's
// value (null for remove), `path` its path (for errors).
absl::Status PatchObjectMember(rapidjson::Value& obj, const std::string& kind,
                               const std::string& key,
                               const rapidjson::Value* value, const char* path,
                               rapidjson::Document::AllocatorType& alloc) {
  auto it = obj.FindMember(rapidjson::StringRef(key.data(), key.size()));
  bool exists = it != obj.MemberEnd();
  if (kind == "add" || (kind == "replace" && exists)) {
    if (exists) {
      it->value.CopyFrom(*value, alloc);
    } else {
      obj.AddMember(rapidjson::Value(key.c_str(), alloc),
                    rapidjson::Value(*value, alloc), alloc);
    }
    return absl::OkStatus();
  }
  if (kind == "remove" && exists) {
    obj.EraseMember(it);
    return absl::OkStatus();
  }
  if (kind == "test" && exists) {
    if (it->value == *value) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("test failed at ", path));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kind, ": path not found: ", path));
}

// A JSON patch op on element `index` ("-": past the end) of array `arr`.
absl::Status PatchArrayElement(rapidjson::Value& arr, const std::string& kind,
                               const std::string& index,
                               const rapidjson::Value* value,
                               rapidjson::Document::AllocatorType& alloc) {
  size_t idx = arr.Size();
  if (index != "-" && (!absl::SimpleAtoi(index, &idx) || idx > arr.Size())) {
    return absl::InvalidArgumentError(absl::StrCat("bad index: ", index));
  }
  if (kind == "add") {
    // Appended, then swapped down into place.
    arr.PushBack(rapidjson::Value(*value, alloc), alloc);
    for (size_t i = arr.Size() - 1; i > idx; --i) {
      arr[static_cast<rapidjson::SizeType>(i)].Swap(
          arr[static_cast<rapidjson::SizeType>(i - 1)]);
    }
    return absl::OkStatus();
  }
  if (idx >= arr.Size())
    return absl::InvalidArgumentError("index out of range");
  rapidjson::Value& elem = arr[static_cast<rapidjson::SizeType>(idx)];
  if (kind == "replace") {
    elem.CopyFrom(*value, alloc);
    return absl::OkStatus();
  }
  if (kind == "remove") {
    arr.Erase(arr.Begin() + idx);
    return absl::OkStatus();
  }
  if (kind == "test") {
    if (elem == *value) return absl::OkStatus();
    return absl::InvalidArgumentError("test failed");
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported op: ", kind));
}

absl::Status JsonPatchOp(rapidjson::Document& doc, const rapidjson::Value& op) {
  if (!op.IsObject() || !op.HasMember("op") || !op["op"].IsString() ||
      !op.HasMember("path") || !op["path"].IsString()) {
    return absl::InvalidArgumentError("json patch op needs op and path");
  }
  std::string kind = op["op"].GetString();
  absl::StatusOr<std::vector<std::string>> toks =
      PointerTokens(op["path"].GetString());
  if (!toks.ok()) return toks.status();
  auto& alloc = doc.GetAllocator();
  if (toks->empty()) {
    if (kind == "replace" || kind == "add") {
      if (!op.HasMember("value")) return absl::InvalidArgumentError("no value");
      doc.CopyFrom(op["value"], alloc);
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError("unsupported op on the root");
  }
  absl::StatusOr<rapidjson::Value*> parent = Parent(doc, *toks);
  if (!parent.ok()) return parent.status();
  rapidjson::Value& p = **parent;
  const std::string& last = toks->back();
  const rapidjson::Value* value =
      op.HasMember("value") ? &op["value"] : nullptr;
  if ((kind == "add" || kind == "replace" || kind == "test") &&
      value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " needs a value"));
  }
  if (p.IsObject()) {
    return PatchObjectMember(p, kind, last, value, op["path"].GetString(),
                             alloc);
  }
  if (p.IsArray()) return PatchArrayElement(p, kind, last, value, alloc);
  return absl::InvalidArgumentError(absl::StrCat("unsupported op: ", kind));
}

}  // namespace

absl::StatusOr<PatchType> PatchTypeFromContentType(
    absl::string_view content_type) {
  absl::string_view base = absl::StripAsciiWhitespace(
      content_type.substr(0, content_type.find(';')));
  if (base == "application/merge-patch+json") return PatchType::kMerge;
  if (base == "application/strategic-merge-patch+json") {
    return PatchType::kStrategicMerge;
  }
  if (base == "application/json-patch+json") return PatchType::kJsonPatch;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported patch content type: ", content_type));
}

absl::Status ApplyPatch(PatchType type, absl::string_view patch,
                        rapidjson::Document& target) {
  rapidjson::Document p;
  p.Parse(patch.data(), patch.size());
  if (p.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed patch at offset ", p.GetErrorOffset(), ": ",
                     rapidjson::GetParseError_En(p.GetParseError())));
  }
  if (type == PatchType::kJsonPatch) {
    if (!p.IsArray()) {
      return absl::InvalidArgumentError("a JSON patch must be an array");
    }
    for (const auto& op : p.GetArray()) {
      absl::Status s = JsonPatchOp(target, op);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!p.IsObject()) {
    return absl::InvalidArgumentError("a merge patch must be a JSON object");
  }
  MergeInto(target, p, target.GetAllocator(),
            type == PatchType::kStrategicMerge);
  return absl::OkStatus();
}

}  // namespace emulator

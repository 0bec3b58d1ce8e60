#include "server/kubeapi/object_writer.h"

#include <event2/buffer.h>

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "server/kubeapi/api_status.h"
#include "simdjson.h"

namespace server {
namespace kubeapi {
namespace {

void ReleaseObject(const void* /*data*/, size_t /*len*/, void* arg) {
  delete static_cast<informer::ObjectPtr*>(arg);
}

// Appends a view into `obj`'s JSON without copying it; the buffer keeps
// the object alive until the bytes are written.
void AddReference(const informer::ObjectPtr& obj, absl::string_view part,
                  evbuffer* out) {
  if (part.empty()) return;
  evbuffer_add_reference(out, part.data(), part.size(), &ReleaseObject,
                         new informer::ObjectPtr(obj));
}

void AddString(absl::string_view s, evbuffer* out) {
  evbuffer_add(out, s.data(), s.size());
}

}  // namespace

std::string ReplaceResourceVersion(absl::string_view json, int64_t rv) {
  static constexpr absl::string_view kKey = "\"resourceVersion\":\"";
  size_t at = json.find(kKey);
  if (at == absl::string_view::npos) return std::string(json);
  size_t start = at + kKey.size();
  size_t end = json.find('"', start);
  if (end == absl::string_view::npos) return std::string(json);
  return absl::StrCat(json.substr(0, start), rv, json.substr(end));
}

std::string ExtractMetadata(absl::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
    return "{}";
  }
  simdjson::dom::element metadata;
  if (doc["metadata"].get(metadata) != simdjson::SUCCESS) return "{}";
  return simdjson::minify(metadata);
}

void AppendObject(const ObjectForm& form, const informer::ObjectPtr& obj,
                  bool type_meta, int64_t rv_override, evbuffer* out) {
  const informer::JsonText text = obj->json();
  absl::string_view json = text.view();
  std::string owned;
  if (rv_override > 0) {
    owned = ReplaceResourceVersion(json, rv_override);
    json = owned;
  }
  // The object's own bytes are referenced (the reference keeps it alive);
  // a rewritten or decompressed copy dies with this call, so it is copied.
  const bool by_reference = owned.empty() && text.borrowed();
  if (form.metadata_only) {
    AddString(
        R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",)",
        out);
    if (form.cache_metadata_only) {
      absl::string_view body = BodyAfterTypeMeta(json);
      if (by_reference) {
        AddReference(obj, body, out);
      } else {
        AddString(body, out);
      }
    } else {
      AddString(absl::StrCat(R"("metadata":)", ExtractMetadata(json), "}"),
                out);
    }
    return;
  }
  absl::string_view body = BodyAfterTypeMeta(json);
  if (type_meta) {
    AddString(absl::StrCat(R"({"kind":)", JsonQuote(form.kind),
                           R"(,"apiVersion":)", JsonQuote(form.api_version),
                           !body.empty() && body[0] == '}' ? "" : ","),
              out);
  } else {
    AddString("{", out);
  }
  if (by_reference) {
    AddReference(obj, body, out);
  } else {
    AddString(body, out);
  }
}

}  // namespace kubeapi
}  // namespace server

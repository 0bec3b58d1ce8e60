#include "informer/object/wire.h"

#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "informer/object/json_decode.h"
#include "simdjson.h"

namespace informer {
namespace {

using json_internal::GetOptionalString;
using json_internal::ParsedJson;
using json_internal::TypeName;

absl::Status Prefixed(absl::string_view prefix, const absl::Status& st) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, st.message()));
}

// Reads an optional integer member: absent or null leaves *out unchanged.
absl::Status GetOptionalInt(simdjson::dom::object obj, const char* key,
                            absl::string_view where, int64_t* out) {
  simdjson::dom::element e;
  if (obj.at_key(key).get(e) || e.is_null()) return absl::OkStatus();
  if (e.get_int64().get(*out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, key, ": got ", TypeName(e.type()), ", want integer"));
  }
  return absl::OkStatus();
}

// The optional "metadata" object of an envelope; absent/null -> false.
absl::StatusOr<bool> GetMetadata(simdjson::dom::object obj,
                                 absl::string_view where,
                                 simdjson::dom::object* meta) {
  simdjson::dom::element e;
  if (obj.at_key("metadata").get(e) || e.is_null()) return false;
  if (e.get_object().get(*meta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "metadata: got ", TypeName(e.type()), ", want object"));
  }
  return true;
}

absl::StatusOr<ApiStatus> StatusFromElement(simdjson::dom::element e,
                                            absl::string_view where) {
  simdjson::dom::object obj;
  if (e.get_object().get(obj)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "Status is ", TypeName(e.type()), ", want an object"));
  }
  ApiStatus status;
  int64_t code = 0;
  absl::Status st = GetOptionalInt(obj, "code", where, &code);
  if (!st.ok()) return st;
  status.code = static_cast<int>(code);
  absl::string_view s;
  if (!(st = GetOptionalString(obj, "reason", where, &s)).ok()) return st;
  status.reason = std::string(s);
  if (!(st = GetOptionalString(obj, "message", where, &s)).ok()) return st;
  status.message = std::string(s);
  simdjson::dom::object meta;
  absl::StatusOr<bool> has_meta = GetMetadata(obj, where, &meta);
  if (!has_meta.ok()) return has_meta.status();
  if (*has_meta) {
    const std::string meta_where = absl::StrCat(where, "metadata.");
    if (!(st = GetOptionalString(meta, "continue", meta_where, &s)).ok()) {
      return st;
    }
    status.continue_token = std::string(s);
  }
  return status;
}

absl::StatusOr<WatchEventType> ParseEventType(absl::string_view type) {
  if (type == "ADDED") return WatchEventType::kAdded;
  if (type == "MODIFIED") return WatchEventType::kModified;
  if (type == "DELETED") return WatchEventType::kDeleted;
  if (type == "BOOKMARK") return WatchEventType::kBookmark;
  if (type == "ERROR") return WatchEventType::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("watch event: unknown type \"", type, "\""));
}

}  // namespace

absl::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

namespace {

// Reads the list envelope's metadata into `list`.
absl::Status ReadListMetadata(simdjson::dom::object top, ObjectList* list) {
  simdjson::dom::object meta;
  absl::StatusOr<bool> has_meta = GetMetadata(top, "list: ", &meta);
  if (!has_meta.ok()) return has_meta.status();
  if (!*has_meta) return absl::OkStatus();
  absl::string_view s;
  absl::Status st =
      GetOptionalString(meta, "resourceVersion", "list: metadata.", &s);
  if (!st.ok()) return st;
  list->resource_version = std::string(s);
  st = GetOptionalString(meta, "continue", "list: metadata.", &s);
  if (!st.ok()) return st;
  list->continue_token = std::string(s);
  return GetOptionalInt(meta, "remainingItemCount", "list: metadata.",
                        &list->remaining_item_count);
}

absl::StatusOr<simdjson::dom::object> ListTop(const ParsedJson& parsed) {
  simdjson::dom::object top;
  if (parsed.root().get_object().get(top)) {
    return absl::InvalidArgumentError(
        absl::StrCat("list: top-level JSON value is ",
                     TypeName(parsed.root().type()), ", want an object"));
  }
  return top;
}

// The general path: one DOM of the whole body. Used when SplitList cannot
// split the body (no items array, or malformed input, for which it gives the
// precise error).
absl::StatusOr<ObjectList> DecodeWholeList(absl::string_view json,
                                           const json_internal::DropNode& drops,
                                           JsonCompressor* compressor) {
  return json_internal::WithParsedJson(
      json, [&](ParsedJson& parsed) -> absl::StatusOr<ObjectList> {
        absl::Status st = parsed.Parse(json);
        if (!st.ok()) return Prefixed("list: ", st);
        absl::StatusOr<simdjson::dom::object> top = ListTop(parsed);
        if (!top.ok()) return top.status();
        ObjectList list;
        if (!(st = ReadListMetadata(*top, &list)).ok()) return st;
        simdjson::dom::element items_element;
        if (top->at_key("items").get(items_element) ||
            items_element.is_null()) {
          return list;
        }
        simdjson::dom::array items;
        if (items_element.get_array().get(items)) {
          return absl::InvalidArgumentError(
              absl::StrCat("list: items: got ", TypeName(items_element.type()),
                           ", want array"));
        }
        // The items' own text, sliced out of the compact list body.
        const absl::string_view compact = parsed.compact();
        const absl::string_view items_text = json_internal::FindMemberValue(
            compact.data(), compact.data() + compact.size(), "items");
        const std::vector<absl::string_view> texts =
            json_internal::ArrayElements(items_text.data(),
                                         items_text.data() + items_text.size());
        if (texts.size() != items.size()) {
          return absl::InternalError(absl::StrCat("list: found ", texts.size(),
                                                  " item texts for ",
                                                  items.size(), " items"));
        }
        list.items.reserve(texts.size());
        size_t i = 0;
        for (simdjson::dom::element item : items) {
          absl::StatusOr<ObjectPtr> obj =
              json_internal::BuildObject(item, texts[i], drops, "", compressor);
          if (!obj.ok()) {
            return Prefixed(absl::StrCat("list: items[", i, "]: "),
                            obj.status());
          }
          list.items.push_back(*std::move(obj));
          ++i;
        }
        return list;
      });
}

}  // namespace

absl::StatusOr<ObjectList> DecodeList(absl::string_view json,
                                      const TransformOptions& transform) {
  const std::shared_ptr<const json_internal::DropNode> drops =
      json_internal::BuildDropTree(transform);
  json_internal::ListSplit split;
  if (!json_internal::SplitList(json, &split)) {
    return DecodeWholeList(json, *drops, transform.compressor.get());
  }
  // Validate the envelope with an empty items array, then each item on its
  // own: valid envelope + valid items + the separators SplitList checked =
  // a valid body. Each item is parsed by a small per-thread parser whose
  // buffers stay hot in cache.
  std::string envelope;
  envelope.reserve(split.items_begin + 2 + json.size() - split.items_end);
  envelope.append(json.data(), split.items_begin);
  envelope.append("[]");
  envelope.append(json.data() + split.items_end, json.size() - split.items_end);
  ObjectList list;
  absl::Status st = json_internal::WithParsedJson(
      envelope, [&](ParsedJson& parsed) -> absl::Status {
        absl::Status parse_status = parsed.Parse(envelope);
        if (!parse_status.ok()) return Prefixed("list: ", parse_status);
        absl::StatusOr<simdjson::dom::object> top = ListTop(parsed);
        if (!top.ok()) return top.status();
        // SplitList found the first "items" member; so must the DOM.
        simdjson::dom::array items;
        if ((*top)["items"].get_array().get(items) || items.size() != 0) {
          return absl::InternalError("list: items array not where expected");
        }
        return ReadListMetadata(*top, &list);
      });
  if (!st.ok()) return st;
  list.items.reserve(split.items.size());
  for (size_t i = 0; i < split.items.size(); ++i) {
    const absl::string_view text = split.items[i];
    absl::StatusOr<ObjectPtr> obj = json_internal::WithParsedJson(
        text, [&](ParsedJson& parsed) -> absl::StatusOr<ObjectPtr> {
          absl::Status parse_status = parsed.Parse(text);
          if (!parse_status.ok()) return parse_status;
          return json_internal::BuildObject(parsed.root(), parsed.compact(),
                                            *drops, "",
                                            transform.compressor.get());
        });
    if (!obj.ok()) {
      return Prefixed(absl::StrCat("list: items[", i, "]: "), obj.status());
    }
    list.items.push_back(*std::move(obj));
  }
  return list;
}

namespace {

// The text of a watch event's "object" member, in the event's compact
// form. The API server writes {"type":"ADDED","object":{...}}: when the
// event is exactly that (two members, those keys in that order, a type
// without escapes), the object runs from after "object": to the last byte
// but one, found without scanning the object's bytes. Any other event is
// searched member by member.
absl::string_view EventObjectText(absl::string_view compact,
                                  simdjson::dom::object top) {
  constexpr absl::string_view kHead = R"({"type":")";
  constexpr absl::string_view kObject = R"(,"object":)";
  if (top.size() == 2 && absl::StartsWith(compact, kHead) &&
      absl::EndsWith(compact, "}")) {
    const size_t close = compact.find('"', kHead.size());
    if (close != absl::string_view::npos &&
        compact.substr(kHead.size(), close - kHead.size()).find('\\') ==
            absl::string_view::npos) {
      absl::string_view rest = compact.substr(close + 1);
      if (absl::StartsWith(rest, kObject) && rest.size() > kObject.size() + 1) {
        rest.remove_prefix(kObject.size());
        rest.remove_suffix(1);
        return rest;
      }
    }
  }
  return json_internal::FindMemberValue(
      compact.data(), compact.data() + compact.size(), "object");
}

}  // namespace

absl::StatusOr<WatchEvent> DecodeWatchEvent(absl::string_view line,
                                            const TransformOptions& transform) {
  return json_internal::WithParsedJson(
      line, [&](ParsedJson& parsed) -> absl::StatusOr<WatchEvent> {
        absl::Status st = parsed.Parse(line);
        if (!st.ok()) return Prefixed("watch event: ", st);
        simdjson::dom::object top;
        if (parsed.root().get_object().get(top)) {
          return absl::InvalidArgumentError(
              absl::StrCat("watch event: top-level JSON value is ",
                           TypeName(parsed.root().type()), ", want an object"));
        }
        absl::string_view type_name;
        if (!(st = GetOptionalString(top, "type", "watch event: ", &type_name))
                 .ok()) {
          return st;
        }
        absl::StatusOr<WatchEventType> type = ParseEventType(type_name);
        if (!type.ok()) return type.status();
        WatchEvent event;
        event.type = *type;
        simdjson::dom::element object;
        if (top.at_key("object").get(object) || object.is_null()) {
          return absl::InvalidArgumentError(
              absl::StrCat("watch event ", type_name, ": missing object"));
        }
        const std::string where =
            absl::StrCat("watch event ", type_name, ": object: ");
        switch (event.type) {
          case WatchEventType::kAdded:
          case WatchEventType::kModified:
          case WatchEventType::kDeleted: {
            const absl::string_view text =
                EventObjectText(parsed.compact(), top);
            absl::StatusOr<ObjectPtr> obj = json_internal::BuildObject(
                object, text, *json_internal::BuildDropTree(transform), "",
                transform.compressor.get());
            if (!obj.ok()) return Prefixed(where, obj.status());
            event.object = *std::move(obj);
            event.resource_version =
                std::string(event.object->resource_version());
            return event;
          }
          case WatchEventType::kBookmark: {
            simdjson::dom::object obj;
            if (object.get_object().get(obj)) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where, "got ", TypeName(object.type()), ", want object"));
            }
            simdjson::dom::object meta;
            absl::StatusOr<bool> has_meta = GetMetadata(obj, where, &meta);
            if (!has_meta.ok()) return has_meta.status();
            if (!*has_meta) {
              return absl::InvalidArgumentError(
                  absl::StrCat(where, "bookmark without metadata"));
            }
            const std::string meta_where = absl::StrCat(where, "metadata.");
            absl::string_view rv;
            if (!(st = GetOptionalString(meta, "resourceVersion", meta_where,
                                         &rv))
                     .ok()) {
              return st;
            }
            event.resource_version = std::string(rv);
            simdjson::dom::element annotations;
            simdjson::dom::object annotations_obj;
            if (!meta.at_key("annotations").get(annotations) &&
                !annotations.get_object().get(annotations_obj)) {
              absl::string_view end;
              if (!(st = GetOptionalString(
                        annotations_obj, "k8s.io/initial-events-end",
                        absl::StrCat(meta_where, "annotations."), &end))
                       .ok()) {
                return st;
              }
              event.initial_events_end = end == "true";
            }
            return event;
          }
          case WatchEventType::kError: {
            absl::StatusOr<ApiStatus> status = StatusFromElement(object, where);
            if (!status.ok()) return status.status();
            event.status = *std::move(status);
            return event;
          }
        }
        return absl::InternalError("unreachable");
      });
}

absl::StatusOr<ApiStatus> DecodeStatus(absl::string_view json) {
  return json_internal::WithParsedJson(
      json, [&](ParsedJson& parsed) -> absl::StatusOr<ApiStatus> {
        absl::Status st = parsed.Parse(json);
        if (!st.ok()) return Prefixed("Status: ", st);
        return StatusFromElement(parsed.root(), "Status: ");
      });
}

}  // namespace informer

#ifndef EMULATOR_OBJECT_JSON_H_
#define EMULATOR_OBJECT_JSON_H_

// Editing an object's JSON document (rapidjson) on its way into the store:
// member access by string_view, the checks shared by create and update, and
// Materialize, which turns a complete document into a StoredObject.
// Stateless functions; thread-compatible like the documents they edit.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "emulator/resource_registry.h"
#include "emulator/stored_object.h"
#include "rapidjson/document.h"

namespace emulator {

absl::string_view View(const rapidjson::Value& v);
// A string value copied into `doc`'s allocator.
rapidjson::Value Str(absl::string_view s, rapidjson::Document& doc);
// String member of an object, "" when absent or not a string.
absl::string_view StringMember(const rapidjson::Value& obj,
                               absl::string_view key);
void SetMember(rapidjson::Value& obj, absl::string_view key,
               rapidjson::Value value, rapidjson::Document& doc);
void RemoveMember(rapidjson::Value& obj, absl::string_view key);
// The value at a dotted path ("spec.nodeName"), null when absent.
const rapidjson::Value* FindPath(const rapidjson::Value& root,
                                 absl::string_view path);

// Parses a JSON object and makes sure it has a metadata object.
// InvalidArgument otherwise.
absl::Status ParseObject(absl::string_view json, rapidjson::Document& doc);
// Kind and namespace checks shared by create and update; fills in the
// request's namespace when the body has none.
absl::Status CheckKindAndNamespace(const ResourceInfo& r, absl::string_view ns,
                                   rapidjson::Document& doc);

// Serializes `doc` (metadata complete) into a StoredObject: metadata first
// in canonical order, kind/apiVersion dropped, other members in order.
StoredObjectPtr Materialize(const ResourceInfo& r,
                            const rapidjson::Document& doc);
// A copy of `object` whose metadata.resourceVersion is `rv`.
StoredObjectPtr WithResourceVersion(const ResourceInfo& r,
                                    const StoredObject& object, int64_t rv);

}  // namespace emulator

#endif  // EMULATOR_OBJECT_JSON_H_

#include "informer/cache/index.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace informer {

IndexValues MetaNamespaceIndexFunc(const Object& obj) {
  return IndexValues{std::string(obj.namespace_())};
}

IndexFunc LabelIndexFunc(absl::string_view key) {
  return [key = std::string(key)](const Object& obj) {
    IndexValues values;
    if (const std::string* value = obj.Label(key); value != nullptr) {
      values.push_back(*value);
    }
    return values;
  };
}

IndexFunc FieldIndexFunc(absl::string_view path) {
  return [path = std::string(path)](const Object& obj) {
    std::vector<std::string> found = obj.FieldValues(path);
    return IndexValues(std::make_move_iterator(found.begin()),
                       std::make_move_iterator(found.end()));
  };
}

IndexValues OwnerUidIndexFunc(const Object& obj) {
  IndexValues values;
  for (const OwnerReference& ref : obj.owner_references()) {
    if (!ref.uid.empty()) values.push_back(ref.uid);
  }
  return values;
}

std::string LabelIndexName(absl::string_view key) {
  return absl::StrCat("label:", key);
}

std::string FieldIndexName(absl::string_view path) {
  return absl::StrCat("field:", path);
}

}  // namespace informer

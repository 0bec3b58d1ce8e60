#include "informer/cache/indexer.h"

#include <string>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace informer {

Indexer::Indexer(const Indexers& indexers) : store_(indexers) {}

void Indexer::Add(ObjectPtr obj) {
  CHECK(obj != nullptr) << "Indexer::Add of a null object";
  const absl::string_view key = obj->Key();
  store_.Add(key, std::move(obj));
}

void Indexer::Update(ObjectPtr obj) {
  CHECK(obj != nullptr) << "Indexer::Update of a null object";
  const absl::string_view key = obj->Key();
  store_.Update(key, std::move(obj));
}

void Indexer::Delete(const Object& obj) { store_.Delete(obj.Key()); }

void Indexer::DeleteByKey(absl::string_view key) { store_.Delete(key); }

std::vector<ObjectPtr> Indexer::List() const { return store_.List(); }

std::vector<std::string> Indexer::ListKeys() const { return store_.ListKeys(); }

void Indexer::Reserve(size_t n) { store_.Reserve(n); }

ObjectPtr Indexer::Get(const Object& obj) const {
  return store_.Get(obj.Key());
}

ObjectPtr Indexer::GetByKey(absl::string_view key) const {
  return store_.Get(key);
}

size_t Indexer::Size() const { return store_.Size(); }

void Indexer::Replace(std::vector<ObjectPtr> objects,
                      absl::string_view resource_version) {
  ItemMap items;
  items.reserve(objects.size());
  for (ObjectPtr& obj : objects) {
    CHECK(obj != nullptr) << "Indexer::Replace with a null object";
    auto it = items.find(obj->Key());
    if (it == items.end()) {
      // The key views the object's own Key(): no copy.
      StoreKey key(*obj);
      items.emplace(std::move(key), std::move(obj));
    } else {
      // A later object with the same key wins; the key is re-pointed at
      // it while the earlier one is still alive.
      ObjectPtr earlier = std::exchange(it->second, std::move(obj));
      it->first.Bind(*it->second);
    }
  }
  store_.Replace(std::move(items), resource_version);
}

absl::StatusOr<std::vector<ObjectPtr>> Indexer::Index(
    absl::string_view index_name, const Object& obj) const {
  return store_.Index(index_name, obj);
}

absl::StatusOr<std::vector<ObjectPtr>> Indexer::ByIndex(
    absl::string_view index_name, absl::string_view value) const {
  return store_.ByIndex(index_name, value);
}

absl::StatusOr<std::vector<std::string>> Indexer::IndexKeys(
    absl::string_view index_name, absl::string_view value) const {
  return store_.IndexKeys(index_name, value);
}

absl::StatusOr<std::vector<std::string>> Indexer::ListIndexFuncValues(
    absl::string_view index_name) const {
  return store_.ListIndexFuncValues(index_name);
}

Indexers Indexer::GetIndexers() const { return store_.GetIndexers(); }

absl::Status Indexer::AddIndexers(const Indexers& new_indexers) {
  return store_.AddIndexers(new_indexers);
}

}  // namespace informer

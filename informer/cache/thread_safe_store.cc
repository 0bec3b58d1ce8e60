#include "informer/cache/thread_safe_store.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace informer {
namespace {

bool Contains(const IndexValues& values, absl::string_view value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

void StoreKey::Bind(const Object& obj) const {
  if (obj.Key() == view()) {
    const uintptr_t old = bits_;
    bits_ = SharedBits(&obj.Key());
    if ((old & 1) != 0) {
      delete reinterpret_cast<const std::string*>(old & ~uintptr_t{1});
    }
  } else if (!owned()) {
    // The view still refers to the previous object's key, alive until the
    // caller releases it.
    bits_ = OwnedBits(new std::string(view()));
  }
}

ThreadSafeStore::ThreadSafeStore(const Indexers& indexers) {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, func] : indexers) {
    // A null function is a programming error that would otherwise crash on
    // the first write, far from its cause.
    CHECK(func != nullptr) << "null index function for index " << name;
    indices_[name].func = func;
  }
}

void ThreadSafeStore::UpdateIndex(NamedIndex& named, const Entry* entry,
                                  const Object* old_obj,
                                  const Object* new_obj) {
  IndexValues old_values;
  IndexValues new_values;
  if (old_obj != nullptr) old_values = named.func(*old_obj);
  if (new_obj != nullptr) new_values = named.func(*new_obj);
  // The common update leaves a single-valued index untouched (a pod's status
  // changes, its namespace and node do not): no bucket to visit at all.
  if (old_values.size() == 1 && new_values.size() == 1 &&
      old_values[0] == new_values[0]) {
    return;
  }
  // Value lists are tiny, so linear membership tests beat building sets.
  for (const std::string& value : old_values) {
    if (Contains(new_values, value)) continue;
    auto it = named.index.find(value);
    if (it == named.index.end()) continue;  // A duplicate already handled.
    it->second.erase(entry);
    // Values come and go (pod IPs, node names): an empty bucket left behind
    // would be a leak proportional to the history, not the contents.
    if (it->second.empty()) named.index.erase(it);
  }
  for (std::string& value : new_values) {
    if (Contains(old_values, value)) continue;
    named.index[std::move(value)].insert(entry);
  }
}

void ThreadSafeStore::UpdateIndicesLocked(const Entry* entry,
                                          const Object* old_obj,
                                          const Object* new_obj) {
  for (auto& [name, named] : indices_) {
    UpdateIndex(named, entry, old_obj, new_obj);
  }
}

void ThreadSafeStore::IndexAll(const ItemMap& items, IndexMap& indices) {
  for (auto& [name, named] : indices) {
    for (const Entry& entry : items) {
      UpdateIndex(named, &entry, nullptr, entry.second.get());
    }
  }
}

absl::StatusOr<const ThreadSafeStore::NamedIndex*>
ThreadSafeStore::FindIndexLocked(absl::string_view index_name) const {
  auto it = indices_.find(index_name);
  if (it == indices_.end()) {
    return absl::NotFoundError(
        absl::StrCat("index with name \"", index_name, "\" does not exist"));
  }
  return &it->second;
}

void ThreadSafeStore::Add(absl::string_view key, ObjectPtr obj) {
  Update(key, std::move(obj));
}

void ThreadSafeStore::Update(absl::string_view key, ObjectPtr obj) {
  DCHECK(obj != nullptr) << "null object stored under a key";
  // Declared before the lock so that the last reference to a replaced object
  // (and its JSON) is released after unlocking.
  ObjectPtr old;
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) {
    // Usually the object's own key: shared, not copied (see StoreKey).
    StoreKey stored = obj->Key() == key ? StoreKey(*obj) : StoreKey(key);
    it = items_.emplace(std::move(stored), std::move(obj)).first;
    UpdateIndicesLocked(&*it, nullptr, it->second.get());
    return;
  }
  old = std::exchange(it->second, std::move(obj));
  it->first.Bind(*it->second);  // `old` is alive: the key may view its text
  UpdateIndicesLocked(&*it, old.get(), it->second.get());
}

void ThreadSafeStore::Delete(absl::string_view key) {
  ObjectPtr old;  // Released after unlocking, as in Update.
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return;
  UpdateIndicesLocked(&*it, it->second.get(), nullptr);
  old = std::move(it->second);
  items_.erase(it);
}

ObjectPtr ThreadSafeStore::Get(absl::string_view key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> ThreadSafeStore::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const Entry& entry : items_) out.push_back(entry.second);
  return out;
}

std::vector<std::string> ThreadSafeStore::ListKeys() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const Entry& entry : items_) out.emplace_back(entry.first.view());
  return out;
}

void ThreadSafeStore::Reserve(size_t n) {
  absl::MutexLock lock(&mu_);
  items_.reserve(n);
}

size_t ThreadSafeStore::Size() const {
  absl::ReaderMutexLock lock(&mu_);
  return items_.size();
}

void ThreadSafeStore::Replace(ItemMap items,
                              absl::string_view /*resource_version*/) {
  // A relist replaces the whole cache; indexing 100k objects under the writer
  // lock would stall every reader for the duration. So index the new items
  // outside the lock against a snapshot of the index functions, and only swap
  // under the lock. Entry pointers survive the swap: node_hash_map nodes do
  // not move.
  for (const Entry& entry : items) {
    DCHECK(entry.second != nullptr) << "null object stored under a key";
    entry.first.Bind(*entry.second);
  }
  IndexMap fresh;
  uint64_t generation;
  {
    absl::ReaderMutexLock lock(&mu_);
    generation = indexers_generation_;
    for (const auto& [name, named] : indices_) fresh[name].func = named.func;
  }
  IndexAll(items, fresh);
  {
    absl::MutexLock lock(&mu_);
    if (generation != indexers_generation_) {
      // AddIndexers ran meanwhile; rebuild against the current functions.
      fresh.clear();
      for (const auto& [name, named] : indices_) fresh[name].func = named.func;
      IndexAll(items, fresh);
    }
    items_.swap(items);
    indices_.swap(fresh);
  }
  // The previous contents and indexes are destroyed here, outside the lock.
}

bool ThreadSafeStore::AdoptIfEmpty(ThreadSafeStore* staged) {
  CHECK(staged != this) << "ThreadSafeStore::AdoptIfEmpty from itself";
  IndexMap old_indices;
  {
    absl::MutexLock lock(&mu_);
    if (!items_.empty()) return false;
    absl::MutexLock staged_lock(&staged->mu_);
    items_.swap(staged->items_);
    IndexMap adopted;
    for (auto& [name, named] : indices_) {
      NamedIndex& mine = adopted[name];
      mine.func = named.func;
      auto it = staged->indices_.find(name);
      if (it != staged->indices_.end()) {
        mine.index.swap(it->second.index);
      } else {
        for (const Entry& entry : items_) {
          UpdateIndex(mine, &entry, nullptr, entry.second.get());
        }
      }
    }
    indices_.swap(adopted);
    old_indices.swap(adopted);
    // `staged` keeps its index functions, now over no items.
    for (auto& [name, named] : staged->indices_) named.index.clear();
  }
  return true;
}

absl::StatusOr<std::vector<ObjectPtr>> ThreadSafeStore::Index(
    absl::string_view index_name, const Object& obj) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const NamedIndex*> named = FindIndexLocked(index_name);
  if (!named.ok()) return named.status();
  const ValueIndex& index = (*named)->index;
  IndexValues values = (*named)->func(obj);
  std::vector<ObjectPtr> out;
  if (values.size() == 1) {
    // One bucket: its entries are distinct already, no de-duplication.
    auto it = index.find(values[0]);
    if (it == index.end()) return out;
    out.reserve(it->second.size());
    for (const Entry* entry : it->second) out.push_back(entry->second);
    return out;
  }
  KeySet seen;
  for (const std::string& value : values) {
    auto it = index.find(value);
    if (it == index.end()) continue;
    for (const Entry* entry : it->second) {
      if (seen.insert(entry).second) out.push_back(entry->second);
    }
  }
  return out;
}

absl::StatusOr<std::vector<ObjectPtr>> ThreadSafeStore::ByIndex(
    absl::string_view index_name, absl::string_view value) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const NamedIndex*> named = FindIndexLocked(index_name);
  if (!named.ok()) return named.status();
  std::vector<ObjectPtr> out;
  auto it = (*named)->index.find(value);
  if (it == (*named)->index.end()) return out;
  out.reserve(it->second.size());
  for (const Entry* entry : it->second) out.push_back(entry->second);
  return out;
}

absl::StatusOr<std::vector<std::string>> ThreadSafeStore::IndexKeys(
    absl::string_view index_name, absl::string_view value) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const NamedIndex*> named = FindIndexLocked(index_name);
  if (!named.ok()) return named.status();
  std::vector<std::string> out;
  auto it = (*named)->index.find(value);
  if (it == (*named)->index.end()) return out;
  out.reserve(it->second.size());
  for (const Entry* entry : it->second) {
    out.emplace_back(entry->first.view());
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ThreadSafeStore::ListIndexFuncValues(
    absl::string_view index_name) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const NamedIndex*> named = FindIndexLocked(index_name);
  if (!named.ok()) return named.status();
  std::vector<std::string> out;
  out.reserve((*named)->index.size());
  for (const auto& [value, keys] : (*named)->index) out.push_back(value);
  return out;
}

Indexers ThreadSafeStore::GetIndexers() const {
  absl::ReaderMutexLock lock(&mu_);
  Indexers out;
  out.reserve(indices_.size());
  for (const auto& [name, named] : indices_) out.emplace(name, named.func);
  return out;
}

absl::Status ThreadSafeStore::AddIndexers(const Indexers& new_indexers) {
  for (const auto& [name, func] : new_indexers) {
    if (func == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("null index function for index \"", name, "\""));
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [name, func] : new_indexers) {
    if (indices_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat("indexer conflict: index \"",
                                                   name, "\" already exists"));
    }
  }
  for (const auto& [name, func] : new_indexers) {
    NamedIndex& named = indices_[name];
    named.func = func;
    for (const Entry& entry : items_) {
      UpdateIndex(named, &entry, nullptr, entry.second.get());
    }
  }
  ++indexers_generation_;
  return absl::OkStatus();
}

}  // namespace informer

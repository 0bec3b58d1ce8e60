#include "server/kubeapi/resource_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace server {
namespace kubeapi {

using informer::ObjectPtr;
using informer::WatchEventType;

int64_t ParseResourceVersion(absl::string_view rv) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(rv, &v) || v < 0) return 0;
  return v;
}

ResourceCache::ResourceCache(size_t history_limit,
                             std::function<void()> on_change)
    : history_limit_(std::max<size_t>(history_limit, 1)),
      on_change_(std::move(on_change)) {}

void ResourceCache::OnAdd(const ObjectPtr& obj, bool is_in_initial_list) {
  {
    absl::MutexLock lock(&mu_);
    if (is_in_initial_list) {
      // The initial state: no history, and the floor follows the state (a
      // watch from any RV of the initial state would need changes we never
      // saw).
      objects_[obj->Key()] = obj;
      rv_ = std::max(rv_, ParseResourceVersion(obj->resource_version()));
      if (history_.empty()) floor_ = rv_;
      return;
    }
    auto it = objects_.find(obj->Key());
    ObjectPtr old = it == objects_.end() ? nullptr : it->second;
    RecordLocked(old ? WatchEventType::kModified : WatchEventType::kAdded, obj,
                 old);
  }
  if (on_change_) on_change_();
}

void ResourceCache::OnUpdate(const ObjectPtr& old_obj,
                             const ObjectPtr& new_obj) {
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(new_obj->Key());
    ObjectPtr old = it == objects_.end() ? old_obj : it->second;
    // A resync or a relist that found the object unchanged.
    if (it != objects_.end() &&
        (old == new_obj ||
         old->resource_version() == new_obj->resource_version())) {
      return;
    }
    RecordLocked(it == objects_.end() ? WatchEventType::kAdded
                                      : WatchEventType::kModified,
                 new_obj, it == objects_.end() ? nullptr : old);
  }
  if (on_change_) on_change_();
}

void ResourceCache::OnDelete(const ObjectPtr& obj, bool final_state_unknown) {
  (void)final_state_unknown;
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(obj->Key());
    if (it == objects_.end()) return;
    RecordLocked(WatchEventType::kDeleted, obj, it->second);
  }
  if (on_change_) on_change_();
}

void ResourceCache::RecordLocked(WatchEventType type, ObjectPtr obj,
                                 ObjectPtr old) {
  rv_ = std::max(rv_, ParseResourceVersion(obj->resource_version()));
  if (type == WatchEventType::kDeleted) {
    objects_.erase(obj->Key());
  } else {
    objects_[obj->Key()] = obj;
  }
  Change c;
  c.seq = next_seq_++;
  c.rv = rv_;
  c.type = type;
  c.object = std::move(obj);
  c.old = std::move(old);
  history_.push_back(std::move(c));
  while (history_.size() > history_limit_) {
    floor_ = history_.front().rv;
    history_.pop_front();
  }
}

int64_t ResourceCache::resource_version() const {
  absl::MutexLock lock(&mu_);
  return rv_;
}

bool ResourceCache::AdvanceTo(int64_t rv) {
  absl::MutexLock lock(&mu_);
  const bool first = !advanced_;
  advanced_ = true;
  if (rv <= rv_) return false;
  rv_ = rv;
  if (first && history_.empty()) floor_ = rv;
  return true;
}

ResourceCache::Progress ResourceCache::GetProgress() const {
  absl::MutexLock lock(&mu_);
  return Progress{rv_, next_seq_};
}

int64_t ResourceCache::floor() const {
  absl::MutexLock lock(&mu_);
  return floor_;
}

int64_t ResourceCache::next_seq() const {
  absl::MutexLock lock(&mu_);
  return next_seq_;
}

size_t ResourceCache::size() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

ObjectPtr ResourceCache::Get(absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

namespace {

using ObjectMap = std::map<std::string, ObjectPtr, std::less<>>;

ObjectMap::const_iterator Start(const ObjectMap& m, absl::string_view prefix,
                                absl::string_view start_after) {
  return start_after.empty() ? m.lower_bound(prefix)
                             : m.upper_bound(start_after);
}

}  // namespace

absl::StatusOr<ResourceCache::Page> ResourceCache::List(
    int64_t rv, absl::string_view prefix, absl::string_view start_after,
    int64_t limit, const std::function<bool(const informer::Object&)>& match,
    bool count_remaining) const {
  absl::MutexLock lock(&mu_);
  if (rv == 0) rv = rv_;
  if (rv < floor_) {
    return absl::OutOfRangeError(absl::StrCat(
        "resourceVersion ", rv, " is older than the history (", floor_, ")"));
  }
  if (rv > rv_) {
    return absl::FailedPreconditionError(
        absl::StrCat("resourceVersion ", rv, " is newer than ", rv_));
  }
  // The state at `rv`: the current map with the changes after `rv` undone
  // (the earliest change after `rv` of a key holds its state at `rv`).
  ObjectMap undo;
  for (auto it = history_.rbegin(); it != history_.rend() && it->rv > rv;
       ++it) {
    undo[it->object->Key()] = it->old;
  }
  Page page;
  page.rv = rv;
  page.next_seq = next_seq_;
  auto a = Start(objects_, prefix, start_after);
  auto b = Start(undo, prefix, start_after);
  bool full = false;
  while (a != objects_.end() || b != undo.end()) {
    const std::string* key;
    ObjectPtr obj;
    if (b == undo.end() || (a != objects_.end() && a->first < b->first)) {
      key = &a->first;
      obj = a->second;
      ++a;
    } else {
      if (a != objects_.end() && a->first == b->first) ++a;
      key = &b->first;
      obj = b->second;
      ++b;
    }
    if (!absl::StartsWith(*key, prefix)) break;
    if (obj == nullptr) continue;  // absent at `rv`
    if (full) {
      page.more = true;
      if (!count_remaining) break;
      ++page.remaining;
      continue;
    }
    if (match && !match(*obj)) continue;
    page.objects.push_back(std::move(obj));
    full = limit > 0 && static_cast<int64_t>(page.objects.size()) >= limit;
  }
  return page;
}

absl::StatusOr<int64_t> ResourceCache::SeqAfter(int64_t rv) const {
  absl::MutexLock lock(&mu_);
  if (rv < floor_) {
    return absl::OutOfRangeError(
        absl::StrCat("too old resource version: ", rv, " (", floor_, ")"));
  }
  auto it =
      std::upper_bound(history_.begin(), history_.end(), rv,
                       [](int64_t v, const Change& c) { return v < c.rv; });
  return it == history_.end() ? next_seq_ : it->seq;
}

absl::Status ResourceCache::ChangesSince(int64_t from_seq, size_t max,
                                         std::vector<Change>* out) const {
  absl::MutexLock lock(&mu_);
  int64_t first = history_.empty() ? next_seq_ : history_.front().seq;
  if (from_seq < first) {
    return absl::OutOfRangeError(absl::StrCat(
        "changes from ", from_seq, " left the history (oldest ", first, ")"));
  }
  for (size_t i = static_cast<size_t>(from_seq - first);
       i < history_.size() && max > 0; ++i, --max) {
    out->push_back(history_[i]);
  }
  return absl::OkStatus();
}

}  // namespace kubeapi
}  // namespace server

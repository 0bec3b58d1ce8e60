#include "emulator/object_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "emulator/api_status.h"
#include "emulator/object_json.h"
#include "emulator/object_name.h"
#include "glog/logging.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {
namespace {

// Bound on ObjectStore::remaining_after_ (about one entry per paged list
// in flight).
constexpr size_t kRemainingMemoEntries = 4096;

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string NewUid(absl::BitGen& gen) {
  auto r = [&gen] { return absl::Uniform<uint32_t>(gen); };
  uint32_t a = r(), b = r(), c = r(), d = r();
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%04x%08x", a, b >> 16, b & 0xfff,
                         (c & 0x3fff) | 0x8000, c >> 16, d);
}

// The API server's 400 for a resourceVersion that is not a number.
std::string InvalidRvMessage(absl::string_view rv) {
  return absl::StrCat(
      "invalid resource version: resourceVersion: Invalid value: \"", rv,
      "\": strconv.ParseUint: parsing \"", rv, "\": invalid syntax");
}

// The version of a key a snapshot at `rv` sees (null: none; a null object:
// deleted at that point).
const StoredObjectPtr* VersionAt(
    const std::vector<ObjectStore::Version>& versions, int64_t rv) {
  for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
    if (v->rv <= rv) return &v->object;
  }
  return nullptr;
}

bool WatchMatches(const WatchRequest& req, const StoredObject& o) {
  return (req.ns.empty() || o.ns == req.ns) && req.labels.Matches(o.labels) &&
         req.fields.Matches(o.fields);
}

// The event a watcher sees for one write, honouring its filter: an object
// entering the selector is ADDED, one leaving it is DELETED (previous content
// at the new RV), as the API server's watch cache does.
absl::optional<StoreEvent> FilterEvent(const ResourceInfo& r,
                                       const WatchRequest& req, EventType type,
                                       const StoredObjectPtr& object,
                                       const StoredObjectPtr& prev) {
  switch (type) {
    case EventType::kAdded:
    case EventType::kDeleted:
      if (!WatchMatches(req, *object)) return absl::nullopt;
      return StoreEvent{type, object, object->rv, false};
    case EventType::kModified: {
      bool now = WatchMatches(req, *object);
      bool before = prev != nullptr && WatchMatches(req, *prev);
      if (now && before) return StoreEvent{type, object, object->rv, false};
      if (now) return StoreEvent{EventType::kAdded, object, object->rv, false};
      if (before) {
        return StoreEvent{EventType::kDeleted,
                          WithResourceVersion(r, *prev, object->rv), object->rv,
                          false};
      }
      return absl::nullopt;
    }
    case EventType::kBookmark:
      break;
  }
  return absl::nullopt;
}

}  // namespace

// ---- ObjectStore ----

ObjectStore::ObjectStore(Options options) : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  next_compaction_ = options_.clock->Now() + options_.compaction_interval;
  next_progress_ = options_.clock->Now() + options_.progress_notify_interval;
}

ObjectStore::~ObjectStore() { CloseAllWatchers(); }

ObjectStore::ResourceState& ObjectStore::StateLocked(const ResourceInfo& r) {
  auto& slot = states_[&r];
  if (slot == nullptr) {
    slot = std::make_unique<ResourceState>();
    slot->history_floor = history_reset_rv_;
    // The watch cache's first list is at the current revision.
    slot->cache_rv = rv_;
  }
  return *slot;
}

int64_t ObjectStore::CacheRvLocked(const ResourceState& st) const {
  if (!options_.per_resource_cache_rv) return rv_;
  // A notification due now carries the current revision.
  const int64_t progressed =
      options_.clock->Now() >= next_progress_ ? rv_ : progress_rv_;
  return std::max(st.cache_rv, progressed);
}

void ObjectStore::NoteProgressLocked(int64_t write_rv) {
  const absl::Time now = options_.clock->Now();
  if (now < next_progress_) return;
  progress_rv_ = write_rv - 1;
  next_progress_ = now + options_.progress_notify_interval;
}

void ObjectStore::AwaitCacheLocked(ResourceState& st, int64_t rv,
                                   bool consistent) {
  if (!options_.per_resource_cache_rv) return;
  if (consistent && !options_.consistent_reads_from_cache) return;
  // Past the store's RV there is nothing to catch up with ("too large").
  if (rv > CacheRvLocked(st) && rv <= rv_) st.cache_rv = rv_;
}

const ObjectStore::ResourceState* ObjectStore::FindStateLocked(
    const ResourceInfo& r) const {
  auto it = states_.find(&r);
  return it == states_.end() ? nullptr : it->second.get();
}

StoredObjectPtr ObjectStore::CurrentLocked(const ResourceState& st,
                                           const std::string& key) const {
  auto it = st.entries.find(key);
  if (it == st.entries.end() || it->second.empty()) return nullptr;
  return it->second.back().object;
}

void ObjectStore::CommitLocked(const ResourceInfo& r, ResourceState& st,
                               const std::string& key, EventType type,
                               StoredObjectPtr object, StoredObjectPtr prev) {
  auto& versions = st.entries[key];
  versions.push_back(
      {object->rv, type == EventType::kDeleted ? nullptr : object});
  if (type == EventType::kAdded) ++st.live;
  if (type == EventType::kDeleted) --st.live;
  st.history.push_back({type, object, prev});
  NoteProgressLocked(object->rv);
  st.cache_rv = object->rv;
  while (st.history.size() > options_.history_length) {
    st.history_floor = st.history.front().object->rv;
    st.history.pop_front();
  }
  for (const auto& w : st.watchers) {
    if (object->rv <= w->request().after_rv) continue;
    absl::optional<StoreEvent> ev =
        FilterEvent(r, w->request(), type, object, prev);
    if (ev.has_value()) w->Push(std::move(*ev));
  }
  MaybeCompactLocked();
}

absl::StatusOr<StoredObjectPtr> ObjectStore::Create(const ResourceInfo& r,
                                                    absl::string_view ns,
                                                    absl::string_view json) {
  rapidjson::Document doc;
  absl::Status s = ParseObject(json, doc);
  if (!s.ok()) return s;
  s = CheckKindAndNamespace(r, ns, doc);
  if (!s.ok()) return s;
  rapidjson::Value& md = doc["metadata"];
  absl::MutexLock lock(&mu_);
  const std::string prefix(StringMember(md, "generateName"));
  if (StringMember(md, "name").empty() && !prefix.empty()) {
    static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    std::string name(prefix);
    for (int i = 0; i < 5; ++i) {
      name.push_back(
          kAlphabet[absl::Uniform<size_t>(bitgen_, 0, sizeof(kAlphabet) - 1)]);
    }
    SetMember(md, "name", Str(name, doc), doc);
  }
  std::vector<FieldError> invalid =
      ValidateObjectName(r, StringMember(md, "name"), prefix);
  if (!invalid.empty()) {
    return InvalidObjectError(StringMember(md, "name"), invalid);
  }
  std::string key = r.namespaced ? absl::StrCat(StringMember(md, "namespace"),
                                                "/", StringMember(md, "name"))
                                 : std::string(StringMember(md, "name"));
  ResourceState& st = StateLocked(r);
  if (CurrentLocked(st, key) != nullptr) {
    return absl::AlreadyExistsError(key);
  }
  int64_t rv = ++rv_;
  SetMember(md, "uid", Str(NewUid(bitgen_), doc), doc);
  SetMember(md, "resourceVersion", Str(absl::StrCat(rv), doc), doc);
  SetMember(md, "creationTimestamp",
            Str(FormatTimestamp(options_.clock->Now()), doc), doc);
  if (r.has_generation) {
    SetMember(md, "generation", rapidjson::Value(int64_t{1}), doc);
  }
  RemoveMember(md, "deletionTimestamp");
  StoredObjectPtr obj = Materialize(r, doc);
  CommitLocked(r, st, key, EventType::kAdded, obj, nullptr);
  return obj;
}

absl::StatusOr<StoredObjectPtr> ObjectStore::UpdateLocked(
    const ResourceInfo& r, absl::string_view ns, absl::string_view name,
    rapidjson::Document& doc) {
  absl::Status s = CheckKindAndNamespace(r, ns, doc);
  if (!s.ok()) return s;
  rapidjson::Value& md = doc["metadata"];
  absl::string_view body_name = StringMember(md, "name");
  if (body_name.empty()) {
    SetMember(md, "name", Str(name, doc), doc);
  } else if (body_name != name) {
    return absl::InvalidArgumentError(
        absl::StrCat("the name of the object (", body_name,
                     ") does not match the name on the URL (", name, ")"));
  }
  std::string key =
      r.namespaced ? absl::StrCat(ns, "/", name) : std::string(name);
  ResourceState& st = StateLocked(r);
  StoredObjectPtr cur = CurrentLocked(st, key);
  if (cur == nullptr) return absl::NotFoundError(key);
  absl::string_view given_rv = StringMember(md, "resourceVersion");
  if (!given_rv.empty() && given_rv != absl::StrCat(cur->rv)) {
    return absl::AbortedError(key);
  }
  SetMember(md, "uid", Str(cur->uid, doc), doc);
  SetMember(md, "creationTimestamp", Str(cur->creation_timestamp, doc), doc);
  if (r.has_generation) {
    int64_t gen = std::max<int64_t>(cur->generation, 1);
    rapidjson::Document old;
    old.Parse(cur->body.data(), cur->body.size());
    const rapidjson::Value* old_spec = FindPath(old, "spec");
    const rapidjson::Value* new_spec = FindPath(doc, "spec");
    bool changed = (old_spec == nullptr) != (new_spec == nullptr) ||
                   (old_spec != nullptr && !(*old_spec == *new_spec));
    SetMember(md, "generation", rapidjson::Value(changed ? gen + 1 : gen), doc);
  }
  // An update that changes nothing keeps its RV and sends no event, as in
  // the API server.
  SetMember(md, "resourceVersion", Str(absl::StrCat(cur->rv), doc), doc);
  StoredObjectPtr same = Materialize(r, doc);
  if (same->body == cur->body) return cur;
  int64_t rv = ++rv_;
  SetMember(md, "resourceVersion", Str(absl::StrCat(rv), doc), doc);
  StoredObjectPtr obj = Materialize(r, doc);
  CommitLocked(r, st, key, EventType::kModified, obj, cur);
  return obj;
}

absl::StatusOr<StoredObjectPtr> ObjectStore::Update(const ResourceInfo& r,
                                                    absl::string_view ns,
                                                    absl::string_view name,
                                                    absl::string_view json) {
  rapidjson::Document doc;
  absl::Status s = ParseObject(json, doc);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return UpdateLocked(r, ns, name, doc);
}

absl::StatusOr<StoredObjectPtr> ObjectStore::Patch(const ResourceInfo& r,
                                                   absl::string_view ns,
                                                   absl::string_view name,
                                                   PatchType type,
                                                   absl::string_view patch) {
  absl::MutexLock lock(&mu_);
  std::string key =
      r.namespaced ? absl::StrCat(ns, "/", name) : std::string(name);
  StoredObjectPtr cur = CurrentLocked(StateLocked(r), key);
  if (cur == nullptr) return absl::NotFoundError(key);
  rapidjson::Document doc;
  doc.Parse(cur->body.data(), cur->body.size());
  absl::Status s = ApplyPatch(type, patch, doc);
  if (!s.ok()) return s;
  if (!doc.IsObject() || !doc.HasMember("metadata") ||
      !doc["metadata"].IsObject()) {
    return absl::InvalidArgumentError(
        "the patch removed the object's metadata");
  }
  return UpdateLocked(r, ns, name, doc);
}

absl::StatusOr<StoredObjectPtr> ObjectStore::Delete(const ResourceInfo& r,
                                                    absl::string_view ns,
                                                    absl::string_view name) {
  absl::MutexLock lock(&mu_);
  std::string key =
      r.namespaced ? absl::StrCat(ns, "/", name) : std::string(name);
  ResourceState& st = StateLocked(r);
  StoredObjectPtr cur = CurrentLocked(st, key);
  if (cur == nullptr) return absl::NotFoundError(key);
  int64_t rv = ++rv_;
  StoredObjectPtr deleted = WithResourceVersion(r, *cur, rv);
  CommitLocked(r, st, key, EventType::kDeleted, deleted, cur);
  return deleted;
}

absl::StatusOr<StoredObjectPtr> ObjectStore::Get(const ResourceInfo& r,
                                                 absl::string_view ns,
                                                 absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  std::string key =
      r.namespaced ? absl::StrCat(ns, "/", name) : std::string(name);
  const ResourceState* st = FindStateLocked(r);
  StoredObjectPtr cur = st == nullptr ? nullptr : CurrentLocked(*st, key);
  if (cur == nullptr) return absl::NotFoundError(key);
  return cur;
}

absl::StatusOr<int64_t> ObjectStore::SnapshotRvLocked(
    const ResourceState& st, const ListRequest& req,
    const ListPosition& pos) const {
  if (pos.has_token) {
    if (pos.token_rv >= 0 && pos.token_rv < compacted_rv_) {
      absl::Status expired = absl::OutOfRangeError("continue token expired");
      expired.SetPayload(kContinuePayload,
                         absl::Cord(EncodeContinueToken(-1, pos.start)));
      return expired;
    }
    return pos.token_rv >= 0 ? pos.token_rv : rv_;
  }
  // resourceVersion=0: whatever the watch cache has; "": the latest (etcd's,
  // or the cache's once it caught up with etcd).
  if (req.resource_version == "0") return CacheRvLocked(st);
  if (req.resource_version.empty()) return rv_;
  int64_t requested_rv = 0;
  if (!absl::SimpleAtoi(req.resource_version, &requested_rv)) {
    return absl::InvalidArgumentError(InvalidRvMessage(req.resource_version));
  }
  if (requested_rv > rv_) {
    return absl::DeadlineExceededError(absl::StrCat(
        "Too large resource version: ", requested_rv, ", current: ", rv_));
  }
  // Which store answers, as kube-apiserver v1.24 decides (the cacher's
  // shouldDelegateList): a list with a resourceVersion and a limit but no
  // resourceVersionMatch, or with match=Exact, goes to etcd as an exact
  // read at that revision; without a limit, or with NotOlderThan, it is
  // served at the current state, not older than the RV.
  const bool exact = req.resource_version_match == "Exact" ||
                     (req.resource_version_match.empty() && req.limit > 0);
  if (!exact) return CacheRvLocked(st);
  if (requested_rv < compacted_rv_) {
    // etcd answered ErrCompacted (the etcd3 store's wording).
    return absl::OutOfRangeError(
        "The resourceVersion for the provided list is too old.");
  }
  return requested_rv;
}

std::string ObjectStore::RemainingMemoKey(const ResourceInfo& r,
                                          absl::string_view prefix, int64_t rv,
                                          absl::string_view start_key) {
  return absl::StrCat(reinterpret_cast<uintptr_t>(&r), "|", prefix, "|", rv,
                      "|", start_key);
}

void ObjectStore::ScanLocked(const ResourceInfo& r, const ResourceState& st,
                             const ListRequest& req, const ListPosition& pos,
                             int64_t limit, ListResult* result) const {
  const int64_t snapshot = result->resource_version;
  const bool selective = !req.labels.empty() || !req.fields.empty();
  std::string prefix =
      r.namespaced && !req.ns.empty() ? absl::StrCat(req.ns, "/") : "";
  auto it = st.entries.lower_bound(prefix + pos.start);
  auto end = prefix.empty() ? st.entries.end()
                            : st.entries.lower_bound(absl::StrCat(req.ns, "0"));
  bool more = false;
  int64_t remaining = 0;
  // The count after this page's start, when an earlier page computed it:
  // then the scan stops at the end of this page.
  absl::optional<int64_t> remaining_at_start;
  if (pos.has_token && !selective && limit > 0) {
    absl::MutexLock memo_lock(&remaining_mu_);
    auto found =
        remaining_after_.find(RemainingMemoKey(r, prefix, snapshot, pos.start));
    if (found != remaining_after_.end()) remaining_at_start = found->second;
  }
  for (; it != end; ++it) {
    const StoredObjectPtr* at = VersionAt(it->second, snapshot);
    if (at == nullptr || *at == nullptr) continue;
    const StoredObject& o = **at;
    if (selective &&
        (!req.labels.Matches(o.labels) || !req.fields.Matches(o.fields))) {
      continue;
    }
    if (limit > 0 && static_cast<int64_t>(result->items.size()) >= limit) {
      more = true;
      if (selective) break;
      if (remaining_at_start.has_value()) {
        remaining =
            *remaining_at_start - static_cast<int64_t>(result->items.size());
        break;
      }
      ++remaining;
      continue;
    }
    result->items.push_back(*at);
  }
  if (!more) return;
  const std::string last_key = result->items.back()->Key();
  std::string relative = last_key.substr(prefix.size());
  relative.push_back('\0');
  result->continue_token = EncodeContinueToken(
      snapshot,
      options_.continue_key_slash ? absl::StrCat("/", relative) : relative);
  if (selective) return;
  result->remaining_item_count = remaining;
  absl::MutexLock memo_lock(&remaining_mu_);
  if (remaining_after_.size() >= kRemainingMemoEntries) {
    remaining_after_.clear();
  }
  remaining_after_[RemainingMemoKey(r, prefix, snapshot, relative)] = remaining;
}

absl::StatusOr<ListResult> ObjectStore::List(const ResourceInfo& r,
                                             const ListRequest& req) {
  ListPosition pos;
  pos.has_token = !req.continue_token.empty();
  if (pos.has_token) {
    auto decoded = DecodeContinueToken(req.continue_token);
    if (!decoded.ok()) return decoded.status();
    pos.token_rv = decoded->first;
    pos.start = std::move(decoded->second);
  }
  int64_t limit = req.limit;
  if (options_.rv0_list_ignores_limit && !pos.has_token &&
      req.resource_version == "0" && req.resource_version_match != "Exact") {
    limit = 0;
  }
  int64_t requested_rv = 0;
  if (!pos.has_token && absl::SimpleAtoi(req.resource_version, &requested_rv) &&
      options_.too_large_rv_wait > absl::ZeroDuration()) {
    AwaitRv(requested_rv, options_.too_large_rv_wait);
  }
  {
    // Catching the watch cache up is a write; the scan needs only a reader.
    absl::MutexLock lock(&mu_);
    ResourceState& st = StateLocked(r);
    if (pos.has_token) {
      // A continue token's page is read at the token's RV.
    } else if (req.resource_version.empty()) {
      AwaitCacheLocked(st, rv_, /*consistent=*/true);
    } else if (requested_rv > 0) {
      // An exact read is etcd's unless consistent reads are the cache's
      // (v1.37 serves it from a snapshot of the cache, once fresh).
      const bool exact = req.resource_version_match == "Exact" ||
                         (req.resource_version_match.empty() && limit > 0);
      AwaitCacheLocked(st, requested_rv, exact);
    }
  }
  absl::ReaderMutexLock lock(&mu_);
  const ResourceState& st = *FindStateLocked(r);  // created above
  absl::StatusOr<int64_t> snapshot = SnapshotRvLocked(st, req, pos);
  if (!snapshot.ok()) return snapshot.status();
  ListResult result;
  result.resource_version = *snapshot;
  ScanLocked(r, st, req, pos, limit, &result);
  return result;
}

absl::StatusOr<std::shared_ptr<Watcher>> ObjectStore::Watch(
    const ResourceInfo& r, WatchRequest request) {
  bool initial = request.send_initial_events ||
                 request.resource_version.empty() ||
                 request.resource_version == "0";
  int64_t from = 0;
  if (!initial && !absl::SimpleAtoi(request.resource_version, &from)) {
    return absl::InvalidArgumentError(
        InvalidRvMessage(request.resource_version));
  }
  bool end_bookmark = request.send_initial_events;
  absl::MutexLock lock(&mu_);
  ResourceState& st = StateLocked(r);
  if (!initial) {
    if (from < st.history_floor) {
      return absl::OutOfRangeError(absl::StrCat(
          "too old resource version: ", from, " (", st.history_floor, ")"));
    }
    if (from > rv_ && !options_.watch_from_future_rv) {
      return absl::DeadlineExceededError(absl::StrCat(
          "Too large resource version: ", from, ", current: ", rv_));
    }
    if (from > rv_) request.after_rv = from;
  }
  if (request.send_initial_events) {
    // A WatchList waits for the cache to be fresh: at the latest RV for
    // "" (consistent), not older than the request's otherwise.
    int64_t not_older_than = 0;
    if (request.resource_version.empty()) {
      AwaitCacheLocked(st, rv_, /*consistent=*/true);
    } else if (absl::SimpleAtoi(request.resource_version, &not_older_than)) {
      AwaitCacheLocked(st, not_older_than, /*consistent=*/false);
    }
  }
  // Initial events are the cache's state at its RV; a replay starts at the
  // request's RV.
  request.start_rv = initial ? CacheRvLocked(st) : from;
  auto w = std::make_shared<Watcher>(&r, std::move(request),
                                     options_.watcher_queue_limit);
  if (initial) {
    for (const auto& [key, versions] : st.entries) {
      const StoredObjectPtr& cur = versions.back().object;
      if (cur != nullptr && WatchMatches(w->request(), *cur)) {
        w->Push({EventType::kAdded, cur, cur->rv, false});
      }
    }
    if (end_bookmark) {
      w->Push({EventType::kBookmark, nullptr, CacheRvLocked(st), true});
    }
  } else {
    for (const HistoryEntry& e : st.history) {
      if (e.object->rv <= from) continue;
      absl::optional<StoreEvent> ev =
          FilterEvent(r, w->request(), e.type, e.object, e.prev);
      if (ev.has_value()) w->Push(std::move(*ev));
    }
  }
  st.watchers.push_back(w);
  ++num_watchers_;
  return w;
}

void ObjectStore::StopWatch(const std::shared_ptr<Watcher>& watcher) {
  watcher->Close(Watcher::CloseKind::kGraceful);
  absl::MutexLock lock(&mu_);
  ResourceState& st = StateLocked(watcher->resource());
  auto it = std::find(st.watchers.begin(), st.watchers.end(), watcher);
  if (it != st.watchers.end()) {
    st.watchers.erase(it);
    --num_watchers_;
  }
}

absl::optional<int64_t> ObjectStore::BookmarkRv(const Watcher& watcher) const {
  absl::ReaderMutexLock lock(&mu_);
  if (watcher.QueueSize() != 0) return absl::nullopt;
  // The cacher's bookmarks carry the last RV its watch cache processed.
  const ResourceState* st = FindStateLocked(watcher.resource());
  const int64_t rv = st != nullptr ? CacheRvLocked(*st) : rv_;
  // A watch from a future RV hears nothing until the store gets there.
  if (rv <= watcher.request().after_rv) return absl::nullopt;
  return rv;
}

bool ObjectStore::AwaitRv(int64_t rv, absl::Duration timeout) const {
  absl::ReaderMutexLock lock(&mu_);
  auto reached = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return rv_ >= rv; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

void ObjectStore::ForEachWatcher(
    const ResourceInfo* r, const std::function<void(Watcher&)>& fn) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [info, st] : states_) {
    if (r != nullptr && info != r) continue;
    for (const auto& w : st->watchers) fn(*w);
  }
}

int ObjectStore::NumWatchers(const ResourceInfo* r) const {
  absl::ReaderMutexLock lock(&mu_);
  if (r == nullptr) return num_watchers_;
  const ResourceState* st = FindStateLocked(*r);
  return st == nullptr ? 0 : static_cast<int>(st->watchers.size());
}

bool ObjectStore::AwaitWatchers(const ResourceInfo* r, int n,
                                absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (r == nullptr) return num_watchers_ >= n;
    const ResourceState* st = FindStateLocked(*r);
    return st != nullptr && static_cast<int>(st->watchers.size()) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void ObjectStore::MaybeCompactLocked() {
  absl::Time now = options_.clock->Now();
  if (now < next_compaction_) return;
  CompactToLocked(rv_at_last_tick_);
  rv_at_last_tick_ = rv_;
  next_compaction_ = now + options_.compaction_interval;
}

void ObjectStore::CompactToLocked(int64_t rv) {
  compacted_rv_ = std::max(compacted_rv_, rv);
  for (auto& [info, st] : states_) {
    for (auto it = st->entries.begin(); it != st->entries.end();) {
      auto& versions = it->second;
      // Keep the newest version at or before the compaction point (the
      // state a snapshot at compacted_rv_ sees) and everything after it.
      size_t keep_from = 0;
      for (size_t i = 0; i < versions.size(); ++i) {
        if (versions[i].rv <= compacted_rv_) keep_from = i;
      }
      versions.erase(versions.begin(), versions.begin() + keep_from);
      if (versions.size() == 1 && versions[0].object == nullptr &&
          versions[0].rv <= compacted_rv_) {
        it = st->entries.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void ObjectStore::Compact() {
  absl::MutexLock lock(&mu_);
  CompactToLocked(rv_);
}

void ObjectStore::Restart() {
  {
    absl::MutexLock lock(&mu_);
    // A restarted API server's watch cache starts empty at the current
    // revision: it serves watches from there on, and an older RV gets
    // "too old resource version: RV (restart RV)". etcd, and with it
    // exact lists and continue tokens, keeps its history until compacted.
    history_reset_rv_ = rv_;
    for (auto& [info, st] : states_) {
      st->history.clear();
      st->history_floor = rv_;
      st->cache_rv = rv_;  // the new cache's first list
    }
  }
  ForEachWatcher(nullptr,
                 [](Watcher& w) { w.Close(Watcher::CloseKind::kAbrupt); });
}

void ObjectStore::CloseAllWatchers() {
  ForEachWatcher(nullptr,
                 [](Watcher& w) { w.Close(Watcher::CloseKind::kGraceful); });
}

int64_t ObjectStore::CurrentRv() const {
  absl::ReaderMutexLock lock(&mu_);
  return rv_;
}

int64_t ObjectStore::CompactedRv() const {
  absl::ReaderMutexLock lock(&mu_);
  return compacted_rv_;
}

std::vector<std::pair<std::string, int64_t>> ObjectStore::Snapshot(
    const ResourceInfo& r) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  const ResourceState* st = FindStateLocked(r);
  if (st == nullptr) return out;
  for (const auto& [key, versions] : st->entries) {
    const StoredObjectPtr& cur = versions.back().object;
    if (cur != nullptr) out.emplace_back(key, cur->rv);
  }
  return out;
}

size_t ObjectStore::Count(const ResourceInfo& r) const {
  absl::ReaderMutexLock lock(&mu_);
  const ResourceState* st = FindStateLocked(r);
  return st == nullptr ? 0 : st->live;
}

}  // namespace emulator

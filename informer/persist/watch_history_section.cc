#include "informer/persist/watch_history_section.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "informer/persist/snapshot_format.h"

namespace informer {
namespace {

namespace sf = snapshot_format;

// Event record flags.
constexpr uint64_t kDeleted = 1;
constexpr uint64_t kTombstone = 2;
// The state before is in the record.
constexpr uint64_t kPrevInRecord = 4;
// The state before is the key's previous event's state.
constexpr uint64_t kPrevIsLast = 8;
constexpr uint64_t kKnownFlags = 15;

absl::Status Garbled(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("watch history section: ", what, " is garbled"));
}

void AppendJson(const ObjectPtr& obj, std::string* out) {
  const JsonText json = obj->json();
  sf::AppendString(json.view(), out);
}

std::string EncodeHeader(const PersistedWatchHistory& h) {
  std::string out;
  sf::AppendString(h.identity, &out);
  sf::AppendString(h.resource_version, &out);
  sf::AppendVarint(h.last_seq, &out);
  sf::AppendVarint(h.aliases.size(), &out);
  for (const WatchTokenAlias& a : h.aliases) {
    sf::AppendString(a.run_id, &out);
    sf::AppendVarint(a.epoch, &out);
    sf::AppendVarint(a.last_seq, &out);
  }
  sf::AppendVarint(h.events.size(), &out);
  return out;
}

absl::Status DecodeHeader(absl::string_view record, PersistedWatchHistory* h,
                          uint64_t* events) {
  sf::PayloadCursor c(record);
  absl::string_view identity, rv;
  uint64_t aliases = 0;
  if (!c.ReadString(&identity) || !c.ReadString(&rv) ||
      !c.ReadVarint(&h->last_seq) || !c.ReadVarint(&aliases) ||
      aliases > record.size()) {
    return Garbled("the header");
  }
  h->identity = std::string(identity);
  h->resource_version = std::string(rv);
  for (uint64_t i = 0; i < aliases; ++i) {
    WatchTokenAlias a;
    absl::string_view run;
    if (!c.ReadString(&run) || !c.ReadVarint(&a.epoch) ||
        !c.ReadVarint(&a.last_seq)) {
      return Garbled("the header's token aliases");
    }
    a.run_id = std::string(run);
    h->aliases.push_back(std::move(a));
  }
  if (!c.ReadVarint(events) || !c.done()) return Garbled("the header");
  return absl::OkStatus();
}

absl::StatusOr<ObjectPtr> ParseState(absl::string_view json,
                                     const TransformOptions& transform,
                                     uint64_t seq) {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json, transform);
  if (!obj.ok()) {
    return absl::DataLossError(
        absl::StrCat("watch history section: the object of the event at "
                     "position ",
                     seq, " does not parse: ", obj.status().message()));
  }
  return obj;
}

bool SameState(const ObjectPtr& a, const ObjectPtr& b) {
  return a->uid() == b->uid() && a->resource_version() == b->resource_version();
}

// Decodes one event record; `last` is each key's latest state so far
// (null after a deletion).
absl::StatusOr<PersistedWatchEvent> DecodeEvent(
    absl::string_view record, const TransformOptions& transform,
    const absl::flat_hash_map<std::string, ObjectPtr>& last) {
  sf::PayloadCursor c(record);
  PersistedWatchEvent ev;
  uint64_t flags = 0;
  absl::string_view json, prev_json;
  if (!c.ReadVarint(&ev.seq) || !c.ReadVarint(&flags) ||
      (flags & ~kKnownFlags) != 0 || !c.ReadString(&json) ||
      ((flags & kPrevInRecord) != 0 && !c.ReadString(&prev_json)) ||
      !c.done() ||
      (flags & (kPrevInRecord | kPrevIsLast)) ==
          (kPrevInRecord | kPrevIsLast)) {
    return Garbled("an event record");
  }
  ev.deleted = (flags & kDeleted) != 0;
  ev.tombstone = (flags & kTombstone) != 0;
  absl::StatusOr<ObjectPtr> obj = ParseState(json, transform, ev.seq);
  if (!obj.ok()) return obj.status();
  ev.obj = *std::move(obj);
  if ((flags & kPrevInRecord) != 0) {
    absl::StatusOr<ObjectPtr> prev = ParseState(prev_json, transform, ev.seq);
    if (!prev.ok()) return prev.status();
    ev.prev = *std::move(prev);
  } else if ((flags & kPrevIsLast) != 0) {
    auto it = last.find(ev.obj->Key());
    if (it == last.end() || it->second == nullptr) {
      return Garbled(absl::StrCat("the event at position ", ev.seq,
                                  " (its state before)"));
    }
    ev.prev = it->second;
  }
  return ev;
}

// The history must end at the snapshot's objects: each key's last state is
// the snapshot's (or absent after a deletion). That, not a comparison of
// resourceVersions, is the test: a snapshot's objects may reflect a few
// events past its resourceVersion (see SharedIndexInformer::CopyState), and
// its history ends where its objects are.
absl::Status CheckEndsAtSnapshot(
    const absl::flat_hash_map<std::string, ObjectPtr>& last,
    const absl::flat_hash_map<absl::string_view, ObjectPtr>& snapshot) {
  for (const auto& [key, state] : last) {
    auto it = snapshot.find(key);
    const bool in_snapshot = it != snapshot.end();
    if (state == nullptr ? in_snapshot
                         : !in_snapshot || !SameState(state, it->second)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "watch history section does not end at the snapshot's objects: "
          "object ",
          key, " differs"));
    }
  }
  return absl::OkStatus();
}

// Decodes the event records after the header into `h`.
absl::Status DecodeEvents(
    const SnapshotSection& section, const TransformOptions& transform,
    const absl::flat_hash_map<absl::string_view, ObjectPtr>& snapshot,
    PersistedWatchHistory* h,
    absl::flat_hash_map<std::string, ObjectPtr>* last) {
  for (size_t i = 1; i < section.records.size(); ++i) {
    absl::StatusOr<PersistedWatchEvent> ev =
        DecodeEvent(section.records[i], transform, *last);
    if (!ev.ok()) return ev.status();
    const uint64_t want = h->last_seq + i - (section.records.size() - 1);
    if (ev->seq != want) {
      return absl::DataLossError(absl::StrCat(
          "watch history section: event ", i, " is at position ", ev->seq,
          ", expected ", want, " (positions must be consecutive, ending at ",
          h->last_seq, ")"));
    }
    // A state the snapshot holds shares its object (no second copy).
    auto it = snapshot.find(ev->obj->Key());
    if (it != snapshot.end() && SameState(it->second, ev->obj)) {
      ev->obj = it->second;
    }
    (*last)[ev->obj->Key()] = ev->deleted ? nullptr : ev->obj;
    h->events.push_back(*std::move(ev));
  }
  return absl::OkStatus();
}

}  // namespace

std::string WatchHistoryIdentity(const SnapshotIdentity& id) {
  std::string out;
  for (const std::string* s :
       {&id.cluster, &id.group, &id.version, &id.resource, &id.namespace_,
        &id.label_selector, &id.field_selector, &id.transform}) {
    sf::AppendString(*s, &out);
  }
  out.push_back(id.metadata_only ? '1' : '0');
  return out;
}

SnapshotSection EncodeWatchHistorySection(
    const PersistedWatchHistory& history) {
  SnapshotSection section;
  section.name = kWatchHistorySection;
  section.version = kWatchHistorySectionVersion;
  section.required = false;
  section.records.reserve(history.events.size() + 1);
  section.records.push_back(EncodeHeader(history));
  // Each key's latest state among the events written so far.
  absl::flat_hash_map<absl::string_view, const Object*> last;
  for (const PersistedWatchEvent& ev : history.events) {
    std::string r;
    sf::AppendVarint(ev.seq, &r);
    auto it = last.find(ev.obj->Key());
    const bool prev_is_last =
        ev.prev != nullptr && it != last.end() && it->second == ev.prev.get();
    uint64_t flags = (ev.deleted ? kDeleted : 0) |
                     (ev.tombstone ? kTombstone : 0) |
                     (prev_is_last ? kPrevIsLast : 0) |
                     (ev.prev != nullptr && !prev_is_last ? kPrevInRecord : 0);
    sf::AppendVarint(flags, &r);
    AppendJson(ev.obj, &r);
    if ((flags & kPrevInRecord) != 0) AppendJson(ev.prev, &r);
    last[ev.obj->Key()] = ev.deleted ? nullptr : ev.obj.get();
    section.records.push_back(std::move(r));
  }
  return section;
}

absl::StatusOr<PersistedWatchHistory> DecodeWatchHistorySection(
    const SnapshotSection& section, const SnapshotIdentity& expected,
    absl::string_view snapshot_rv,
    const std::vector<ObjectPtr>& snapshot_objects,
    const TransformOptions& transform) {
  if (section.name != kWatchHistorySection) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a watch history section: \"", section.name, "\""));
  }
  if (section.version != kWatchHistorySectionVersion) {
    return absl::UnimplementedError(
        absl::StrCat("watch history section version ", section.version,
                     " is not supported (this build reads version ",
                     kWatchHistorySectionVersion, ")"));
  }
  if (section.records.empty()) return Garbled("the header (missing)");
  PersistedWatchHistory h;
  uint64_t events = 0;
  if (absl::Status s = DecodeHeader(section.records[0], &h, &events); !s.ok()) {
    return s;
  }
  if (events != section.records.size() - 1 || events > h.last_seq) {
    return Garbled("the event count");
  }
  if (h.identity != WatchHistoryIdentity(expected)) {
    return absl::FailedPreconditionError(
        "watch history section is of another informer (identity differs "
        "from the snapshot's)");
  }
  if (h.resource_version != snapshot_rv) {
    return absl::FailedPreconditionError(
        absl::StrCat("watch history section was written at resourceVersion ",
                     h.resource_version, ", the snapshot at ", snapshot_rv));
  }
  for (const WatchTokenAlias& a : h.aliases) {
    if (a.last_seq > h.last_seq) return Garbled("a token alias");
  }
  absl::flat_hash_map<absl::string_view, ObjectPtr> snapshot;
  snapshot.reserve(snapshot_objects.size());
  for (const ObjectPtr& o : snapshot_objects) snapshot.emplace(o->Key(), o);
  absl::flat_hash_map<std::string, ObjectPtr> last;
  if (absl::Status s = DecodeEvents(section, transform, snapshot, &h, &last);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckEndsAtSnapshot(last, snapshot); !s.ok()) {
    return s;
  }
  return h;
}

}  // namespace informer

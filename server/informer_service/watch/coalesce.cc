#include "server/informer_service/watch/coalesce.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace server {

namespace v1 = ::informer::v1;

PendingEvent PendingEvent::Make(v1::EventType type, SharedPtr obj,
                                SharedPtr old, uint64_t seq) {
  PendingEvent p;
  p.type = type;
  p.obj = std::move(obj);
  p.old = std::move(old);
  p.seq = seq;
  return p;
}

PendingEvent PendingEvent::Marker(v1::EventType type, uint64_t seq,
                                  const std::string& rv) {
  PendingEvent p;
  p.type = type;
  p.rv = rv;
  p.seq = seq;
  return p;
}

PendingEvent PendingEvent::AsIs(EventPtr ev) {
  PendingEvent p;
  p.seq = ev->seq();
  p.ev = std::move(ev);
  return p;
}

SharedPtr PendingEvent::HeldBefore() const {
  if (ev != nullptr) return ev->prev();
  switch (type) {
    case v1::EVENT_TYPE_ADDED:
      return nullptr;
    case v1::EVENT_TYPE_SYNC:
      return obj;
    default:
      return old;
  }
}

SharedPtr PendingEvent::HeldAfter() const {
  if (ev != nullptr) return ev->deleted() ? nullptr : ev->obj();
  return type == v1::EVENT_TYPE_DELETED ? nullptr : obj;
}

namespace {

// One key's run of events, summarised.
struct KeyRun {
  SharedPtr keeper;   // owns the key's bytes
  SharedPtr from;     // held before the run
  SharedPtr to;       // held after it
  SharedPtr deleted;  // the last DELETED's object
  bool tombstone = false;
};

void NoteDeleted(const PendingEvent& p, KeyRun* k) {
  if (p.ev != nullptr) {
    if (p.ev->deleted()) {
      k->deleted = p.ev->obj();
      k->tombstone = p.ev->tombstone();
    } else if (p.ev->replaced()) {
      k->deleted = p.ev->prev();
      k->tombstone = false;
    }
  } else if (p.type == v1::EVENT_TYPE_DELETED) {
    k->deleted = p.obj;
    k->tombstone = p.tombstone;
  }
}

std::vector<KeyRun> Summarise(absl::Span<const PendingEvent> events) {
  std::vector<KeyRun> keys;
  absl::flat_hash_map<absl::string_view, size_t> index;
  index.reserve(events.size());
  for (const PendingEvent& p : events) {
    if (p.IsMarker()) continue;  // bookmark
    const SharedPtr& owner = p.ev != nullptr ? p.ev->obj() : p.obj;
    auto [it, inserted] = index.try_emplace(owner->key(), keys.size());
    if (inserted) {
      keys.emplace_back();
      keys.back().keeper = owner;
      keys.back().from = p.HeldBefore();
    }
    KeyRun& k = keys[it->second];
    k.to = p.HeldAfter();
    NoteDeleted(p, &k);
  }
  return keys;
}

void EmitDifference(const KeyRun& k, std::vector<PendingEvent>* out) {
  const SharedPtr& from = k.from;
  const SharedPtr& to = k.to;
  if (Same(from, to)) return;
  auto deleted = [&] {
    PendingEvent p =
        PendingEvent::Make(v1::EVENT_TYPE_DELETED,
                           k.deleted != nullptr ? k.deleted : from, from, 0);
    p.tombstone = k.tombstone;
    return p;
  };
  if (to == nullptr) {
    out->push_back(deleted());
  } else if (from == nullptr) {
    out->push_back(PendingEvent::Make(v1::EVENT_TYPE_ADDED, to, nullptr, 0));
  } else if (!SameUid(from, to)) {
    out->push_back(deleted());
    out->push_back(PendingEvent::Make(v1::EVENT_TYPE_ADDED, to, nullptr, 0));
  } else {
    out->push_back(PendingEvent::Make(v1::EVENT_TYPE_MODIFIED, to, from, 0));
  }
}

}  // namespace

CoalesceResult Coalesce(absl::Span<const PendingEvent> events,
                        uint64_t base_seq, uint64_t last_seq) {
  const std::vector<KeyRun> keys = Summarise(events);
  CoalesceResult result;
  result.distinct_keys = keys.size();
  for (const KeyRun& k : keys) EmitDifference(k, &result.events);
  for (size_t i = 0; i < result.events.size(); ++i) {
    result.events[i].seq = i + 1 == result.events.size() ? last_seq : base_seq;
  }
  return result;
}

}  // namespace server

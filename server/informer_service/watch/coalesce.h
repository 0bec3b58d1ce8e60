#ifndef SERVER_INFORMER_SERVICE_WATCH_COALESCE_H_
#define SERVER_INFORMER_SERVICE_WATCH_COALESCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "proto/informer/v1/informer.pb.h"
#include "server/informer_service/watch/watch_event.h"

namespace server {

// An event queued for one Watch stream: a fan-out event as is (`ev`), or
// one the stream made (initial state, enter/leave, SYNC, coalesced), or a
// marker (no object: BOOKMARK, RESET, INITIAL_STATE_DONE, FRESH). Value
// type.
struct PendingEvent {
  // User-provided, so that value-initialising one (emplace_back() on every
  // stream for every event) runs the member initialisers only, without
  // zeroing the whole struct first.
  PendingEvent() {}

  EventPtr ev;
  informer::v1::EventType type = informer::v1::EVENT_TYPE_UNSPECIFIED;
  SharedPtr obj;
  // What the client held before this event (MODIFIED, DELETED).
  SharedPtr old;
  std::string rv;  // markers only
  bool initial = false;
  bool tombstone = false;
  // INITIAL_STATE_DONE of a stale initial state (markers only).
  bool stale = false;
  // The position the event's resume token names.
  uint64_t seq = 0;

  static PendingEvent Make(informer::v1::EventType type, SharedPtr obj,
                           SharedPtr old, uint64_t seq);
  static PendingEvent Marker(informer::v1::EventType type, uint64_t seq,
                             const std::string& rv);
  static PendingEvent AsIs(EventPtr ev);

  bool IsMarker() const { return ev == nullptr && obj == nullptr; }
  // The object key (not for markers).
  const std::string& Key() const {
    return ev != nullptr ? ev->key() : obj->key();
  }
  // The client's state of the key before / after the event (null: absent).
  SharedPtr HeldBefore() const;
  SharedPtr HeldAfter() const;
};

struct CoalesceResult {
  std::vector<PendingEvent> events;
  // Distinct object keys among the input events.
  size_t distinct_keys = 0;
};

// What a slow stream's pending live events coalesce to: per object key, in
// order of first appearance, the difference between the state the client
// holds before the key's first event and the state after its last:
// nothing, ADDED, MODIFIED (old = the state before), DELETED (carrying the
// last DELETED's object, with its tombstone flag), or DELETED + ADDED when
// the UID changed. BOOKMARKs (markers) and SYNCs of unchanged objects
// disappear.
//
// Resume tokens: every output event names `base_seq` (the position before
// the run) except the last, which names `last_seq` (the position after
// it), so resuming from the middle of the output repeats some of its
// differences and never skips one.
//
// Pure function: no state, thread-safe. Cost linear in `events`, keys held
// as views into the events' objects (no copies).
CoalesceResult Coalesce(absl::Span<const PendingEvent> events,
                        uint64_t base_seq, uint64_t last_seq);

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_COALESCE_H_

#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "server/informer_service/watch/watch_event.h"

namespace server {

// The heap bytes of the serialized copies `state` has made for the wire
// so far (one per encoding a stream was sent it in; lazily made), their
// slice headers included.
size_t WireBytes(const SharedObject& state);

// The approximate heap bytes one object state holds while something keeps
// it: the parsed object (its JSON as stored, compressed or not, and its
// fields), its wire copies made so far (WireBytes: uncompressed JSON) and
// the bookkeeping around them. 0 for null.
size_t StateBytes(const SharedPtr& state);

// The recent events of one fan-out, kept so that a stream can resume after
// its last token: at most `max_events` events AND at most `max_bytes` bytes
// of what they alone keep alive, whichever binds first; the oldest go
// first.
//
// Bytes: what freeing the history would free. Each object state the kept
// events hold is charged once (StateBytes, when it is charged), plus a
// fixed cost per event and per distinct key, EXCEPT a key's current state
// (the new state of its newest kept event, unless that event is a
// deletion): the fan-out's state (and the informer's cache) holds it
// whether or not the history does, so it is charged when a newer event
// supersedes it, with the wire copies streams made of it by then. A
// deletion's final state is charged when pushed (FinalStateBytes). What
// the charges leave out (a wire copy made after the charge, a filtered
// stream's lazily built "leave" object, the per-encoding event headers
// beyond the first) is small against an object state.
//
// An event alone larger than `max_bytes` empties the history (every older
// token then gets RESET). Either bound at 0 keeps no history at all.
//
// Events must be pushed with consecutive sequence numbers, each event's
// state before being its key's previous event's new state (null after a
// deletion), as the fan-out dispatches them.
//
// Not thread-safe: the fan-out's lock guards it.
class WatchHistory {
 public:
  WatchHistory(size_t max_events, size_t max_bytes);
  WatchHistory(const WatchHistory&) = delete;
  WatchHistory& operator=(const WatchHistory&) = delete;

  // Appends `ev` (seq one above the last pushed), then drops the oldest
  // events while either bound is exceeded.
  void Push(EventPtr ev);

  // True if every event after `seq` up to `last_seq` (the fan-out's
  // latest) is kept, so a stream at `seq` can be brought to now.
  bool Covers(uint64_t seq, uint64_t last_seq) const;

  // Calls `fn(const EventPtr&)` for every kept event after `seq`, oldest
  // first.
  template <typename Fn>
  void ForEachAfter(uint64_t seq, Fn fn) const {
    if (entries_.empty()) return;
    const uint64_t first = entries_.front().ev->seq();
    const size_t skip = seq < first ? 0 : static_cast<size_t>(seq - first + 1);
    for (size_t i = skip; i < entries_.size(); ++i) fn(entries_[i].ev);
  }

  size_t events() const { return entries_.size(); }
  // The bytes charged for what the kept events alone hold (see above).
  size_t bytes() const { return bytes_; }
  // Events dropped so far to stay within the byte bound (metrics).
  uint64_t dropped_for_bytes() const { return dropped_for_bytes_; }

  // Charged per kept event (the event, its token, its encoded header if
  // streams are sent it).
  static size_t EventOverhead(const FanoutEvent& ev);
  // Charged per distinct key among the kept events (the key index).
  static size_t KeyOverhead(const std::string& key);
  // A deletion's final state: its wrapper, its parsed object unless it is
  // its state before's (a tombstone: a relist found the object gone), and
  // its wire copies, or if none yet, as many as its state before has
  // (the streams sent the key's states will be sent its end).
  static size_t FinalStateBytes(const FanoutEvent& ev);

 private:
  struct Entry {
    EventPtr ev;
    // A deletion's FinalStateBytes (0 for any other event).
    size_t state_bytes = 0;
    // StateBytes(ev->prev()) when it was charged to this event: it was
    // the key's oldest kept event, or it superseded the key's current
    // state (0 after a deletion).
    size_t prev_bytes = 0;
    size_t overhead = 0;  // EventOverhead(*ev)
  };
  // Per distinct key among the kept events.
  struct KeyState {
    uint32_t events = 0;
    // The newest is a deletion: the key has no current state.
    bool newest_deleted = false;
  };
  void PopOldest();

  const size_t max_events_;
  const size_t max_bytes_;
  std::deque<Entry> entries_;
  // Kept events per key: tells whether an event's state before is already
  // charged (the key's previous event's new state, superseded by it),
  // whether the newest new state is the key's current one (not charged),
  // and whether dropping the oldest event of a key hands the charge of its
  // new state to the next one.
  absl::flat_hash_map<std::string, KeyState> per_key_;
  size_t bytes_ = 0;
  uint64_t dropped_for_bytes_ = 0;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_

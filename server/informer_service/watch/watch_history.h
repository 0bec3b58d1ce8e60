#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "server/informer_service/watch/watch_event.h"

namespace server {

// The approximate heap bytes one object state holds while something keeps
// it: the parsed object (its JSON and fields), one serialized copy for the
// wire (the JSON encoding, which every stream shares) and the bookkeeping
// around them. 0 for null.
size_t StateBytes(const SharedPtr& state);

// The recent events of one fan-out, kept so that a stream can resume after
// its last token: at most `max_events` events AND at most `max_bytes` bytes
// of what they keep alive, whichever binds first; the oldest go first.
//
// Bytes: each object state the history keeps is charged once (StateBytes),
// plus a fixed cost per event and per distinct key. An event keeps its new
// state and the state before it; the state before is the previous event's
// new state when that event on the same key is still in the history (not
// charged twice), else it is charged to the oldest event of its key. The
// current state of a key is charged too while an event of that key is
// kept (the informer's cache holds the same parsed object; its wire copy
// is the history's doing). What the charges leave out (a filtered stream's
// lazily built "leave" object, the per-encoding event headers beyond the
// first) is small against an object state.
//
// An event alone larger than `max_bytes` empties the history (every older
// token then gets RESET). Either bound at 0 keeps no history at all.
//
// Events must be pushed with consecutive sequence numbers.
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
  // The bytes charged for what the kept events hold (see above).
  size_t bytes() const { return bytes_; }
  // Events dropped so far to stay within the byte bound (metrics).
  uint64_t dropped_for_bytes() const { return dropped_for_bytes_; }

  // Charged per kept event (the event, its token, its encoded headers).
  static size_t EventOverhead(const FanoutEvent& ev);
  // Charged per distinct key among the kept events (the key index).
  static size_t KeyOverhead(const std::string& key);

 private:
  struct Entry {
    EventPtr ev;
    size_t state_bytes = 0;  // StateBytes(ev->obj())
    size_t prev_bytes = 0;   // StateBytes(ev->prev())
    size_t overhead = 0;     // EventOverhead(*ev)
  };
  void PopOldest();

  const size_t max_events_;
  const size_t max_bytes_;
  std::deque<Entry> entries_;
  // Kept events per key: tells whether an event's state before is already
  // charged (to the key's previous event) and whether dropping the oldest
  // event of a key hands the charge of its new state to the next one.
  absl::flat_hash_map<std::string, uint32_t> per_key_;
  size_t bytes_ = 0;
  uint64_t dropped_for_bytes_ = 0;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_HISTORY_H_

#include "server/informer_service/watch/watch_history.h"

#include <utility>

namespace server {

namespace {

// A shared_ptr's control block with the object in it (make_shared), and
// the allocator's rounding: about two words per allocation.
constexpr size_t kAllocation = 16;
constexpr size_t kControlBlock = 16 + kAllocation;
// A refcounted grpc_slice's header.
constexpr size_t kSliceHeader = 32 + kAllocation;
// The informer.v1.Object fields around the JSON in its wire form
// (resourceVersion, uid, key and their tags).
constexpr size_t kWireFields = 128;

}  // namespace

size_t StateBytes(const SharedPtr& state) {
  if (state == nullptr) return 0;
  const informer::Object& obj = state->object();
  return sizeof(SharedObject) + kControlBlock + obj.MemoryUsage() +
         kAllocation + obj.json_size() + kWireFields + kSliceHeader;
}

size_t WatchHistory::EventOverhead(const FanoutEvent& ev) {
  // The event, its token, and its encoded header (type, resourceVersion,
  // token: the object bytes are shared slices) in one encoding.
  return sizeof(FanoutEvent) + kControlBlock + ev.token().capacity() +
         kAllocation + 2 * ev.token().size() + 64 + kSliceHeader;
}

size_t WatchHistory::KeyOverhead(const std::string& key) {
  // A flat_hash_map slot (string + count) and its control byte, and the
  // key's own allocation when it does not fit inline.
  return sizeof(std::string) + sizeof(uint32_t) + 1 +
         (key.size() > 15 ? key.size() + 1 + kAllocation : 0);
}

WatchHistory::WatchHistory(size_t max_events, size_t max_bytes)
    : max_events_(max_events), max_bytes_(max_bytes) {}

void WatchHistory::Push(EventPtr ev) {
  if (max_events_ == 0 || max_bytes_ == 0) return;
  Entry e;
  e.state_bytes = StateBytes(ev->obj());
  e.prev_bytes = StateBytes(ev->prev());
  e.overhead = EventOverhead(*ev);
  const std::string& key = ev->key();
  auto it = per_key_.find(key);
  if (it == per_key_.end()) {
    per_key_.emplace(key, 1);
    // The key's oldest kept event: its state before is charged to it.
    bytes_ += e.prev_bytes + KeyOverhead(key);
  } else {
    // The state before is the previous kept event's new state (or none
    // after a delete): already charged.
    ++it->second;
  }
  bytes_ += e.state_bytes + e.overhead;
  e.ev = std::move(ev);
  entries_.push_back(std::move(e));
  while (entries_.size() > max_events_ || bytes_ > max_bytes_) {
    if (entries_.size() <= max_events_) ++dropped_for_bytes_;
    PopOldest();
  }
}

void WatchHistory::PopOldest() {
  Entry& e = entries_.front();
  const std::string& key = e.ev->key();
  // The oldest event of its key: charged its state before.
  bytes_ -= e.state_bytes + e.overhead + e.prev_bytes;
  auto it = per_key_.find(key);
  if (--it->second == 0) {
    bytes_ -= KeyOverhead(key);
    per_key_.erase(it);
  } else if (!e.ev->deleted()) {
    // The key's next kept event becomes its oldest; its state before is
    // this event's new state, which it keeps alive.
    bytes_ += e.state_bytes;
  }
  entries_.pop_front();
}

bool WatchHistory::Covers(uint64_t seq, uint64_t last_seq) const {
  if (seq > last_seq) return false;
  if (seq == last_seq) return true;
  return !entries_.empty() && entries_.front().ev->seq() <= seq + 1 &&
         entries_.back().ev->seq() == last_seq;
}

}  // namespace server

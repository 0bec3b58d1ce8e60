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

constexpr informer::v1::Encoding kEncodings[] = {informer::v1::ENCODING_JSON,
                                                 informer::v1::ENCODING_STRUCT};

}  // namespace

size_t WireBytes(const SharedObject& state) {
  size_t bytes = 0;
  for (informer::v1::Encoding encoding : kEncodings) {
    // Only an encoding made already: Encoded would make it.
    if (!state.HasEncoded(encoding)) continue;
    absl::StatusOr<const grpc::Slice*> slice = state.Encoded(encoding);
    if (slice.ok()) bytes += (*slice)->size() + kSliceHeader;
  }
  return bytes;
}

size_t StateBytes(const SharedPtr& state) {
  if (state == nullptr) return 0;
  return sizeof(SharedObject) + kControlBlock + state->object().MemoryUsage() +
         WireBytes(*state);
}

size_t WatchHistory::EventOverhead(const FanoutEvent& ev) {
  // The event and its token.
  const size_t token =
      ev.token().size() > 15 ? ev.token().capacity() + 1 + kAllocation : 0;
  size_t bytes = sizeof(FanoutEvent) + kControlBlock + token;
  // Its encoded header in one encoding (type, resourceVersion, token: the
  // object bytes are its state's wire copy), made when a stream is first
  // sent it, which is after it is pushed: expected if the streams were
  // sent the state before (or have sent this one already).
  const bool streamed = WireBytes(*ev.obj()) != 0 ||
                        (ev.prev() != nullptr && WireBytes(*ev.prev()) != 0);
  if (streamed) bytes += 2 * ev.token().size() + 64 + kSliceHeader;
  return bytes;
}

size_t WatchHistory::KeyOverhead(const std::string& key) {
  // A flat_hash_map slot (string + KeyState) and its control byte, and the
  // key's own allocation when it does not fit inline.
  return sizeof(std::string) + sizeof(KeyState) + 1 +
         (key.size() > 15 ? key.size() + 1 + kAllocation : 0);
}

WatchHistory::WatchHistory(size_t max_events, size_t max_bytes)
    : max_events_(max_events), max_bytes_(max_bytes) {}

size_t WatchHistory::FinalStateBytes(const FanoutEvent& ev) {
  const SharedPtr& obj = ev.obj();
  const SharedPtr& prev = ev.prev();
  size_t bytes = sizeof(SharedObject) + kControlBlock;
  // A tombstone (a relist found the object gone) carries the parsed
  // object of the state before it in a wrapper of its own.
  if (prev == nullptr || prev->ptr() != obj->ptr()) {
    bytes += obj->object().MemoryUsage();
  }
  // The streams that were sent the key's states will be sent its end,
  // which they have not encoded yet when it is pushed.
  const size_t wire = WireBytes(*obj);
  return bytes + (wire != 0 || prev == nullptr ? wire : WireBytes(*prev));
}

void WatchHistory::Push(EventPtr ev) {
  if (max_events_ == 0 || max_bytes_ == 0) return;
  Entry e;
  e.overhead = EventOverhead(*ev);
  const std::string& key = ev->key();
  auto [it, inserted] = per_key_.try_emplace(key);
  KeyState& k = it->second;
  // The key's oldest kept event keeps its state before; a later one's
  // state before is the key's current state until now (uncharged), which
  // it supersedes. After a deletion there is none: its final state is
  // charged already.
  if (inserted || !k.newest_deleted) e.prev_bytes = StateBytes(ev->prev());
  bytes_ += e.prev_bytes + (inserted ? KeyOverhead(key) : 0);
  // A deletion's final state is gone from the fan-out's state; any other
  // new state is the key's current one.
  if (ev->deleted()) e.state_bytes = FinalStateBytes(*ev);
  bytes_ += e.state_bytes + e.overhead;
  ++k.events;
  k.newest_deleted = ev->deleted();
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
  // The oldest event of its key: charged its state before, and its final
  // state if it is a deletion (the key's next event, a re-creation, does
  // not keep it).
  bytes_ -= e.overhead + e.prev_bytes + e.state_bytes;
  auto it = per_key_.find(key);
  if (--it->second.events == 0) {
    bytes_ -= KeyOverhead(key);
    per_key_.erase(it);
  }
  // Otherwise its new state, superseded, stays charged: the key's next
  // kept event, now its oldest, keeps it as its state before (and was
  // charged it when pushed). The newest event's is the current state.
  entries_.pop_front();
}

bool WatchHistory::Covers(uint64_t seq, uint64_t last_seq) const {
  if (seq > last_seq) return false;
  if (seq == last_seq) return true;
  return !entries_.empty() && entries_.front().ev->seq() <= seq + 1 &&
         entries_.back().ev->seq() == last_seq;
}

}  // namespace server

#include "server/informer_service/watch/watch_stream_reactor.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/informer_service/watch/watch_history.h"
#include "server/rpc/grpc_conversions.h"

namespace server {

namespace v1 = ::informer::v1;

namespace {

// Queue capacity a stream keeps between writes (see MaybeWriteLocked).
constexpr size_t kKeepPending = 256;

}  // namespace

WatchStreamReactor::WatchStreamReactor(
    WatchStreamHost* host, std::shared_ptr<WatchStreamOwner> owner,
    std::string resource, std::shared_ptr<const WatchFilter> filter,
    v1::Encoding encoding, bool send_old, absl::Duration resync_period,
    WatchStart start)
    : host_(host),
      options_(host->options()),
      owner_(std::move(owner)),
      resource_(std::move(resource)),
      filter_(std::move(filter)),
      unfiltered_(filter_->Empty()),
      encoding_(encoding),
      send_old_(send_old),
      resync_period_(resync_period),
      start_(start) {
  absl::MutexLock lock(&mu_);
  compact_at_ = options_.max_queue;
  last_write_ = host_->clock()->Now();
}

void WatchStreamReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete this;  // may destroy a retired fan-out: no lock is held here
  }
}

void WatchStreamReactor::StartLocked(const ResumeTokenEncoder* tokens,
                                     const std::vector<SharedPtr>& objs,
                                     bool reset, uint64_t seq,
                                     const std::string& rv, bool stale) {
  absl::MutexLock lock(&mu_);
  tokens_ = tokens;
  told_stale_ = stale;
  applied_seq_ = written_seq_ = seq;
  ScheduleResyncLocked();
  if (reset) PushLocked(PendingEvent::Marker(v1::EVENT_TYPE_RESET, seq, rv));
  for (const SharedPtr& obj : objs) {
    PendingEvent p =
        PendingEvent::Make(v1::EVENT_TYPE_ADDED, obj, nullptr, seq);
    p.initial = true;
    PushLocked(std::move(p));
  }
  PendingEvent done =
      PendingEvent::Marker(v1::EVENT_TYPE_INITIAL_STATE_DONE, seq, rv);
  done.stale = stale;
  PushLocked(std::move(done));
  host_->NotePending(objs.size() + (reset ? 2 : 1), pending_.size());
  // Markers and initial events never coalesce, whatever their number.
  marker_end_ = pending_.size();
  compact_at_ = std::max(compact_at_, pending_.size() * 2);
  MaybeWriteLocked(/*force=*/false);
}

void WatchStreamReactor::ResumeLocked(const ResumeTokenEncoder* tokens,
                                      uint64_t seq, bool stale) {
  absl::MutexLock lock(&mu_);
  tokens_ = tokens;
  told_stale_ = stale;
  applied_seq_ = written_seq_ = seq;
  ScheduleResyncLocked();
}

size_t WatchStreamReactor::Apply(const EventPtr& ev, FilterVerdicts* verdicts) {
  absl::MutexLock lock(&mu_);
  if (ended_) return 0;
  applied_seq_ = ev->seq();
  bool held_before, held_after;
  if (verdicts != nullptr && !unfiltered_) {
    const FilterVerdicts::Verdict v = verdicts->For(*filter_);
    held_before = v.before;
    held_after = v.after;
  } else {
    held_before = Holds(ev->prev());
    held_after = !ev->deleted() && Holds(ev->obj());
  }
  if (!held_before && !held_after) return 0;
  // Built in place: this runs for every stream and every event.
  PendingEvent& p = EmplaceLocked();
  p.seq = ev->seq();
  if (held_before == (ev->prev() != nullptr) && held_after == !ev->deleted()) {
    p.ev = ev;  // as is: shared bytes
  } else if (held_after) {
    // Entered the filter.
    p.type = v1::EVENT_TYPE_ADDED;
    p.obj = ev->obj();
  } else {
    // Left the filter (changed, not deleted): DELETED with the last state
    // that matched stamped with the event's resourceVersion, as the API
    // server's filtered watch does; with the state held as is if another
    // object took the name (the held one was deleted).
    p.type = v1::EVENT_TYPE_DELETED;
    p.old = ev->prev();
    p.obj = SameUid(ev->prev(), ev->obj()) ? ev->LeaveObject() : ev->prev();
  }
  const size_t queued = pending_.size();
  if (pending_.size() >= compact_at_) CompactLocked();
  MaybeWriteLocked(/*force=*/false);
  return queued;
}

void WatchStreamReactor::PushFresh(uint64_t seq, const std::string& rv,
                                   bool always) {
  absl::MutexLock lock(&mu_);
  if (ended_ || !(told_stale_ || always)) return;
  told_stale_ = false;
  PushLocked(PendingEvent::Marker(v1::EVENT_TYPE_FRESH, seq, rv));
  host_->NotePending(1, pending_.size());
  // Never coalesced away (coalescing drops markers): what precedes it
  // stays as queued, once.
  marker_end_ = pending_.size();
  MaybeWriteLocked(/*force=*/false);
}

bool WatchStreamReactor::ResyncDue(absl::Time now) {
  absl::MutexLock lock(&mu_);
  return !ended_ && resync_period_ > absl::ZeroDuration() &&
         now >= next_resync_;
}

void WatchStreamReactor::PushSyncs(absl::Time now,
                                   const std::vector<SharedPtr>& objs,
                                   uint64_t seq) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  for (const SharedPtr& obj : objs) {
    PushLocked(PendingEvent::Make(v1::EVENT_TYPE_SYNC, obj, nullptr, seq));
  }
  if (!objs.empty()) host_->NotePending(objs.size(), pending_.size());
  // Missed periods are skipped, not made up in a burst.
  while (next_resync_ <= now) next_resync_ += resync_period_;
  if (pending_.size() >= compact_at_) CompactLocked();
  MaybeWriteLocked(/*force=*/false);
}

absl::Time WatchStreamReactor::Tick(absl::Time now, uint64_t seq,
                                    const std::string& rv) {
  absl::MutexLock lock(&mu_);
  if (ended_) return absl::InfiniteFuture();
  if (!writing_ && pending_.empty() &&
      now - last_write_ >= options_.bookmark_interval) {
    PushLocked(PendingEvent::Marker(v1::EVENT_TYPE_BOOKMARK, seq, rv));
    host_->NotePending(1, pending_.size());
  }
  MaybeWriteLocked(/*force=*/false);
  return resync_period_ > absl::ZeroDuration() ? next_resync_
                                               : absl::InfiniteFuture();
}

void WatchStreamReactor::Kick() {
  absl::MutexLock lock(&mu_);
  MaybeWriteLocked(/*force=*/false);
}

void WatchStreamReactor::Flush() {
  absl::MutexLock lock(&mu_);
  deferred_ = false;
  MaybeWriteLocked(/*force=*/true);
}

size_t WatchStreamReactor::pending_size() {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

WatchStreamReactor::MemoryStats WatchStreamReactor::Memory() {
  absl::MutexLock lock(&mu_);
  MemoryStats m;
  m.pending_events = pending_.size();
  absl::flat_hash_set<const SharedObject*> seen;
  auto count = [&](const SharedPtr& state) {
    if (state != nullptr && seen.insert(state.get()).second) {
      m.pending_bytes += StateBytes(state);
    }
  };
  for (const PendingEvent& p : pending_) {
    if (p.ev != nullptr) {
      count(p.ev->obj());
      count(p.ev->prev());
    } else {
      count(p.obj);
      count(p.old);
    }
  }
  if (writing_) m.inflight_bytes = response_.Length();
  return m;
}

void WatchStreamReactor::End(absl::Status status) {
  absl::MutexLock lock(&mu_);
  EndLocked(std::move(status));
}

void WatchStreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    // The client went away; OnCancel/OnDone follow.
    EndLocked(absl::CancelledError("write failed"));
  }
  if (ended_) {
    FinishIfIdleLocked();
    return;
  }
  MaybeWriteLocked(/*force=*/false);
}

void WatchStreamReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  EndLocked(absl::CancelledError("cancelled by the client"));
}

void WatchStreamReactor::OnDone() {
  if (on_done_) {
    grpc::Status ended(grpc::StatusCode::CANCELLED, "");
    {
      absl::MutexLock lock(&mu_);
      if (finished_) ended = end_status_;
    }
    on_done_(ended);
  }
  host_->Undefer(this);
  owner_->Detach(this);
  Unref();
}

void WatchStreamReactor::ScheduleResyncLocked() {
  if (resync_period_ > absl::ZeroDuration()) {
    next_resync_ = host_->clock()->Now() + resync_period_;
  }
}

void WatchStreamReactor::PushLocked(PendingEvent p) {
  pending_.push_back(std::move(p));
  tail_coalesced_ = false;
}

PendingEvent& WatchStreamReactor::EmplaceLocked() {
  tail_coalesced_ = false;
  return pending_.emplace_back();
}

void WatchStreamReactor::CompactLocked() {
  const uint64_t base_seq =
      marker_end_ > 0 ? pending_[marker_end_ - 1].seq : written_seq_;
  CoalesceResult coalesced =
      Coalesce(absl::MakeConstSpan(pending_).subspan(marker_end_), base_seq,
               applied_seq_);
  const size_t before = pending_.size();
  overflowed_ = true;
  pending_.resize(marker_end_);
  for (PendingEvent& p : coalesced.events) pending_.push_back(std::move(p));
  tail_coalesced_ = true;
  VLOG(1) << "watch stream on " << resource_ << ": coalesced " << before
          << " pending events to " << pending_.size();
  host_->NoteCoalesced(before > pending_.size() ? before - pending_.size() : 0);
  if (coalesced.distinct_keys > options_.max_pending_keys) {
    host_->NoteExhausted();
    EndLocked(absl::ResourceExhaustedError(absl::StrCat(
        "this stream fell too far behind (", coalesced.distinct_keys,
        " objects pending, the cap is ", options_.max_pending_keys,
        "); reconnect with the resume_token of the last event processed")));
    return;
  }
  // Amortised: the next compaction waits until the queue has doubled.
  compact_at_ = std::max(options_.max_queue, pending_.size() * 2);
}

bool WatchStreamReactor::DeferLocked() {
  const absl::Duration window = options_.batch_window;
  if (window <= absl::ZeroDuration()) return false;
  // Already in the flush set: the flusher writes it soon. Checked first, as
  // a busy stream gets here for every event it queues, and the clock and
  // the rate estimate are not free. (Writing such a stream from the event
  // that finds its window over, as soon as it is, was measured: the
  // dispatching thread then writes, and the events behind it wait; the
  // median latency rose: see docs/benchmarks.md, section 'Fan-out'.)
  if (deferred_) return true;
  const absl::Time now = host_->clock()->Now();
  if (now >= last_write_ + window || !host_->Batching(now)) return false;
  deferred_ = true;
  host_->Defer(this, last_write_ + window);
  return true;
}

void WatchStreamReactor::MaybeWriteLocked(bool force) {
  if (ended_ || writing_ || pending_.empty() || host_->writes_paused()) {
    return;
  }
  if (!force && DeferLocked()) return;
  // A stream that overflowed since its last write sends its queue fully
  // coalesced: the amortised compaction in Apply may have left an
  // uncoalesced tail. A queue coalesced since its last event needs no
  // second pass (a backlog split over several writes).
  if ((overflowed_ || pending_.size() >= options_.max_queue) &&
      !tail_coalesced_) {
    CompactLocked();
    if (ended_) return;
    if (pending_.empty()) {
      overflowed_ = false;
      return;
    }
  }
  overflowed_ = false;
  EventTypeCounts by_type{};
  const size_t n = EncodeLocked(&by_type);
  if (n == 0) return;  // ended
  written_seq_ = pending_[n - 1].seq;
  host_->NoteWritten(by_type);
  response_ = builder_.Finish();
  if (n == pending_.size()) {
    pending_.clear();
    // An initial state or a burst may have grown the queue far beyond what
    // steady traffic needs (a few dozen events per write): give that
    // memory back, so thousands of idle streams do not each keep a large
    // buffer.
    if (pending_.capacity() > kKeepPending) {
      std::vector<PendingEvent>().swap(pending_);
    }
    tail_coalesced_ = false;
  } else {
    // The rest goes in the next write(s).
    pending_.erase(pending_.begin(), pending_.begin() + n);
  }
  marker_end_ = marker_end_ > n ? marker_end_ - n : 0;
  compact_at_ = std::max(options_.max_queue, pending_.size() * 2);
  writing_ = true;
  last_write_ = host_->clock()->Now();
  StartWrite(&response_);
}

size_t WatchStreamReactor::EncodeLocked(EventTypeCounts* by_type) {
  const size_t cap = options_.max_message_bytes;
  // Events this stream made share their position's token (a run of
  // coalesced events names one position): encoded once per position.
  std::string token;
  uint64_t token_seq = 0;
  bool have_token = false;
  size_t n = 0;
  for (; n < pending_.size(); ++n) {
    const PendingEvent& p = pending_[n];
    if (p.ev != nullptr) {
      absl::StatusOr<const EncodedEvents*> enc =
          p.ev->Encoded(encoding_, send_old_);
      if (!enc.ok()) {
        builder_.Finish();
        EndLocked(enc.status());
        return 0;
      }
      // Never above the cap, except an event alone.
      if (n > 0 && builder_.bytes() + (*enc)->bytes > cap) break;
      builder_.AddEncoded((*enc)->slices, (*enc)->events);
      p.ev->CountTypes(by_type);
      continue;
    }
    if (p.initial || p.type == v1::EVENT_TYPE_RESET) {
      // Inside an initial state: after this key (after none for RESET).
      token = tokens_->EncodeSnapshot(p.seq, p.initial ? p.Key() : "");
      have_token = false;
    } else if (!have_token || token_seq != p.seq) {
      token = tokens_->Encode(p.seq);
      token_seq = p.seq;
      have_token = true;
    }
    absl::Status st = AddOwnLocked(p, token, n > 0 ? cap : SIZE_MAX);
    if (absl::IsOutOfRange(st)) break;  // the next message's
    if (!st.ok()) {
      builder_.Finish();
      EndLocked(st);
      return 0;
    }
    const size_t t = static_cast<size_t>(p.type);
    if (t < by_type->size()) ++(*by_type)[t];
  }
  return n;
}

absl::Status WatchStreamReactor::AddOwnLocked(const PendingEvent& p,
                                              const std::string& token,
                                              size_t cap) {
  WatchResponseBuilder::Event e;
  e.type = p.type;
  e.resume_token = token;
  e.initial = p.initial;
  e.tombstone = p.tombstone;
  e.stale = p.stale;
  if (p.obj == nullptr) {
    e.resource_version = p.rv;
  } else {
    e.resource_version = p.obj->object().resource_version();
    absl::StatusOr<const grpc::Slice*> obj = p.obj->Encoded(encoding_);
    if (!obj.ok()) return obj.status();
    e.object = *obj;
    if (send_old_ && p.old != nullptr && p.type == v1::EVENT_TYPE_MODIFIED) {
      absl::StatusOr<const grpc::Slice*> old = p.old->Encoded(encoding_);
      if (!old.ok()) return old.status();
      e.old_object = *old;
    }
  }
  if (builder_.bytes() + WatchResponseBuilder::EncodedSize(e) > cap) {
    return absl::OutOfRangeError("over the message cap");
  }
  builder_.Add(e);
  return absl::OkStatus();
}

void WatchStreamReactor::EndLocked(absl::Status status) {
  if (ended_) return;
  ended_ = true;
  pending_.clear();
  end_status_ = ToGrpcStatus(status);
  FinishIfIdleLocked();
}

void WatchStreamReactor::FinishIfIdleLocked() {
  if (writing_ || finished_) return;
  finished_ = true;
  Finish(end_status_);
}

}  // namespace server

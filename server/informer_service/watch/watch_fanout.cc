#include "server/informer_service/watch/watch_fanout.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/informer_service/watch/watch_filter.h"

namespace server {
namespace {

// What one dispatch queued to its streams, reported to the host once.
struct QueuedTally {
  size_t events = 0;
  size_t longest = 0;

  // `queue_length`: a stream's Apply (0: it did not get the event).
  void Add(size_t queue_length) {
    if (queue_length == 0) return;
    ++events;
    longest = std::max(longest, queue_length);
  }
  void ReportTo(WatchStreamHost* host) const {
    if (events > 0) host->NotePending(events, longest);
  }
};

}  // namespace

WatchFanout::WatchFanout(WatchStreamHost* host,
                         std::shared_ptr<InformerEntry> entry, uint64_t epoch)
    : host_(host),
      entry_holder_(std::move(entry)),
      entry_(entry_holder_.get()),
      tokens_(host->run_id(), epoch),
      epoch_(epoch),
      history_(host->options().history_size, host->options().history_bytes) {}

WatchFanout::~WatchFanout() {
  if (in_store_) {
    // At shutdown the hub goes before the last snapshot is written: that
    // snapshot stores this.
    host_->options().resume_store->Detach(entry_->config.resource, this,
                                          CaptureForSnapshot());
  }
  if (waiter_.joinable()) waiter_.join();
  absl::MutexLock lock(&register_mu_);
  if (registration_ != nullptr) {
    absl::Status st = entry_->informer->RemoveEventHandler(registration_);
    if (!st.ok()) LOG(WARNING) << "removing the watch fan-out: " << st;
  }
}

absl::Status WatchFanout::EnsureRegistered() {
  absl::MutexLock lock(&register_mu_);
  if (registration_ != nullptr) return absl::OkStatus();
  informer::HandlerOptions options;
  options.non_blocking = true;
  absl::StatusOr<informer::HandlerRegistration*> reg =
      entry_->informer->AddEventHandler(this, options);
  if (!reg.ok()) return reg.status();
  registration_ = *reg;
  return absl::OkStatus();
}

void WatchFanout::AdoptPersisted() {
  WatchResumeStore* store = host_->options().resume_store;
  if (store == nullptr) return;
  std::optional<WatchResumeStore::Seed> seed =
      store->TakeSeed(entry_->config.resource);
  if (seed.has_value()) {
    {
      absl::MutexLock lock(&mu_);
      SeedLocked(*std::move(seed));
    }
    // Now, before the informer starts: the events it applies while it
    // catches up continue the history. Its initial adds are the seeded
    // state, so they are not news.
    if (absl::Status st = EnsureRegistered(); !st.ok()) {
      LOG(WARNING) << entry_->config.resource
                   << ": Watch history not continued: " << st;
      absl::MutexLock lock(&mu_);
      aliases_.clear();
    }
  }
  in_store_ = store->Attach(entry_->config.resource, this);
}

void WatchFanout::SeedLocked(WatchResumeStore::Seed seed) {
  // One SharedObject per object, shared by the state and the events.
  absl::flat_hash_map<const informer::Object*, SharedPtr> shared;
  auto share = [&shared](const informer::ObjectPtr& o) -> SharedPtr {
    if (o == nullptr) return nullptr;
    auto [it, fresh] = shared.try_emplace(o.get());
    if (fresh) it->second = std::make_shared<const SharedObject>(o);
    return it->second;
  };
  state_.clear();
  state_.reserve(seed.objects.size());
  for (const informer::ObjectPtr& o : seed.objects) {
    state_[o->Key()] = share(o);
  }
  informer::PersistedWatchHistory& h = seed.history;
  for (const informer::PersistedWatchEvent& ev : h.events) {
    // Replayed with this run's tokens: a resumed client goes on with them.
    history_.Push(std::make_shared<const FanoutEvent>(
        ev.seq, share(ev.obj), share(ev.prev), ev.deleted, ev.tombstone,
        tokens_.Encode(ev.seq)));
  }
  seq_ = h.last_seq;
  sequencing_ = true;
  aliases_ = std::move(h.aliases);
}

bool WatchFanout::AcceptsToken(const ResumeToken& token) {
  if (token.run_id == host_->run_id() && token.epoch == epoch_) return true;
  absl::MutexLock lock(&mu_);
  for (const informer::WatchTokenAlias& a : aliases_) {
    // Past its last persisted position an earlier run's token names an
    // event this run never saw (issued after that snapshot).
    if (a.run_id == token.run_id && a.epoch == token.epoch) {
      return token.seq <= a.last_seq;
    }
  }
  return false;
}

std::optional<WatchResumeStore::Capture> WatchFanout::CaptureForSnapshot() {
  // Earlier runs' tokens kept at most (the oldest go first).
  constexpr size_t kMaxAliases = 8;
  absl::MutexLock lock(&mu_);
  if (!sequencing_) return std::nullopt;
  WatchResumeStore::Capture c;
  // Read under mu_ (the FIFO's lock for it is a leaf): every event it
  // counts was handed to this handler before, so the state below reflects
  // at least it (and maybe a few events more, as CopyState's).
  c.resource_version = entry_->informer->LastAppliedResourceVersion();
  if (c.resource_version.empty()) return std::nullopt;
  c.objects.reserve(state_.size());
  for (const auto& [key, obj] : state_) c.objects.push_back(obj->ptr());
  std::vector<informer::PersistedWatchEvent>& events = c.history.events;
  events.reserve(history_.events());
  history_.ForEachAfter(0, [&events](const EventPtr& ev) {
    informer::PersistedWatchEvent p;
    p.seq = ev->seq();
    p.deleted = ev->deleted();
    p.tombstone = ev->tombstone();
    p.obj = ev->obj()->ptr();
    if (ev->prev() != nullptr) p.prev = ev->prev()->ptr();
    events.push_back(std::move(p));
  });
  c.history.last_seq = seq_;
  // A token resumes only while its position is in the history.
  const uint64_t oldest = events.empty() ? seq_ : events.front().seq - 1;
  c.history.aliases.push_back({host_->run_id(), epoch_, seq_});
  for (const informer::WatchTokenAlias& a : aliases_) {
    if (c.history.aliases.size() == kMaxAliases) break;
    if (a.last_seq >= oldest) c.history.aliases.push_back(a);
  }
  c.change_tag = absl::StrCat(host_->run_id(), "/", epoch_, "/", seq_);
  return c;
}

void WatchFanout::OnAdd(const informer::ObjectPtr& obj, bool) {
  Dispatch(obj, false, false);
}

void WatchFanout::OnUpdate(const informer::ObjectPtr&,
                           const informer::ObjectPtr& obj) {
  Dispatch(obj, false, false);
}

void WatchFanout::OnDelete(const informer::ObjectPtr& obj,
                           bool final_state_unknown) {
  Dispatch(obj, true, final_state_unknown);
}

void WatchFanout::Open(WatchStreamReactor* stream) {
  // The first stream registers the handler: the informer then delivers its
  // cache inline, under its own lock, so the state built here is the
  // indexer's exactly and the live events follow it.
  if (absl::Status st = EnsureRegistered(); !st.ok()) {
    stream->End(absl::InternalError(
        absl::StrCat("Watch is not available for \"", entry_->config.resource,
                     "\": ", st.message())));
    return;
  }
  // Read before taking mu_: the informer holds its own lock while it
  // calls Dispatch, so asking it anything under mu_ could deadlock. The
  // markers' resourceVersion is thus a lower bound of the snapshot's.
  const std::string rv = entry_->informer->LastAppliedResourceVersion();
  const bool synced = entry_->informer->HasSynced();
  // A stream that waits is told of the informer's sync failures from
  // now on only (see WaitForSyncThenAttach).
  const int64_t errors =
      synced ? 0 : entry_->informer->GetReflectorCounters().errors;
  // Serving a snapshot the API server has not confirmed: sent at once,
  // marked stale, instead of waiting for the sync.
  const bool stale = !synced && ObserveStale(*entry_).stale;
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    stream->End(absl::UnavailableError(kShuttingDownMessage));
    return;
  }
  // Counted from now on (waiting or attached): a lazy informer with
  // streams is never retired.
  entry_->streams.fetch_add(1);
  // waiter_done_: the sync happened after `synced` was read.
  if (synced || waiter_done_) {
    AttachLocked(stream, rv, /*stale=*/false);
    return;
  }
  if (stale) {
    AttachLocked(stream, rv, /*stale=*/true);
  } else {
    waiting_.emplace(stream, errors);
    host_->NoteWaiting(1);
  }
  // The waiter attaches the waiting streams at the sync, and tells the
  // stale ones FRESH.
  if (!waiter_started_) {
    waiter_started_ = true;
    waiter_ = std::thread([this] { WaitForSyncThenAttach(); });
  }
}

void WatchFanout::Detach(WatchStreamReactor* stream) {
  absl::MutexLock lock(&mu_);
  if (streams_.erase(stream) > 0) {
    entry_->streams.fetch_sub(1);
    host_->NoteStreams(-1);
  }
  if (waiting_.erase(stream) > 0) {
    entry_->streams.fetch_sub(1);
    host_->NoteWaiting(-1);
  }
}

absl::Time WatchFanout::Tick(absl::Time now) {
  const std::string rv = entry_->informer->LastAppliedResourceVersion();
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (WatchStreamReactor* s : streams_) {
    if (s->ResyncDue(now)) s->PushSyncs(now, HeldLocked(*s), seq_);
    next = std::min(next, s->Tick(now, seq_, rv));
  }
  return next;
}

void WatchFanout::KickAll() {
  absl::MutexLock lock(&mu_);
  for (WatchStreamReactor* s : streams_) s->Kick();
}

size_t WatchFanout::MaxPending() {
  absl::MutexLock lock(&mu_);
  size_t max = 0;
  for (WatchStreamReactor* s : streams_) {
    max = std::max(max, s->pending_size());
  }
  return max;
}

WatchMemoryStats WatchFanout::Memory() {
  absl::MutexLock lock(&mu_);
  WatchMemoryStats m;
  m.resource = entry_->config.resource;
  m.history_events = history_.events();
  m.history_bytes = history_.bytes();
  m.history_dropped_for_bytes = history_.dropped_for_bytes();
  for (WatchStreamReactor* s : streams_) {
    const WatchStreamReactor::MemoryStats sm = s->Memory();
    m.pending_events += sm.pending_events;
    m.pending_bytes += sm.pending_bytes;
    m.inflight_bytes += sm.inflight_bytes;
  }
  return m;
}

void WatchFanout::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (WatchStreamReactor* s : streams_) {
    s->End(absl::UnavailableError(kShuttingDownMessage));
  }
  for (const auto& [s, errors] : waiting_) {
    s->End(absl::UnavailableError(kShuttingDownMessage));
  }
}

void WatchFanout::Dispatch(const informer::ObjectPtr& obj, bool deleted,
                           bool tombstone) {
  auto shared = std::make_shared<const SharedObject>(obj);
  {
    absl::MutexLock lock(&mu_);
    auto it = state_.find(shared->key());
    SharedPtr prev = it == state_.end() ? nullptr : it->second;
    // Unchanged (the informer's resync, a relist that found the object
    // as it was): not news for any stream.
    const bool unchanged = !deleted && Same(prev, shared);
    if (!unchanged && !sequencing_) {
      // No stream has started yet, so no token exists to resume from:
      // keep the state for the first initial state, and no history.
      if (deleted) {
        if (it != state_.end()) state_.erase(it);
      } else if (it != state_.end()) {
        it->second = std::move(shared);
      } else {
        state_.emplace(shared->key(), shared);
      }
    } else if (!unchanged) {
      const uint64_t seq = ++seq_;
      if (deleted) {
        if (it != state_.end()) state_.erase(it);
      } else if (it != state_.end()) {
        it->second = shared;
      } else {
        state_.emplace(shared->key(), shared);
      }
      auto ev = std::make_shared<const FanoutEvent>(
          seq, std::move(shared), std::move(prev), deleted, tombstone,
          tokens_.Encode(seq));
      // Judged once per distinct filter, not once per stream.
      FilterVerdicts verdicts(
          ev->prev() != nullptr ? &ev->prev()->object() : nullptr,
          !ev->deleted() && ev->obj() != nullptr ? &ev->obj()->object()
                                                 : nullptr);
      QueuedTally queued;
      for (WatchStreamReactor* s : streams_) {
        queued.Add(s->Apply(ev, &verdicts));
      }
      queued.ReportTo(host_);
      history_.Push(std::move(ev));
    }
  }
  host_->NoteEvent();
}

std::vector<SharedPtr> WatchFanout::HeldLocked(
    const WatchStreamReactor& stream) const {
  std::vector<SharedPtr> objs;
  for (const auto& [key, obj] : state_) {
    if (stream.Holds(obj)) objs.push_back(obj);
  }
  std::sort(objs.begin(), objs.end(),
            [](const SharedPtr& a, const SharedPtr& b) {
              return a->key() < b->key();
            });
  return objs;
}

void WatchFanout::AttachLocked(WatchStreamReactor* stream,
                               const std::string& rv, bool stale) {
  sequencing_ = true;
  if (stale) told_stale_ = true;
  streams_.insert(stream);
  host_->NoteStreams(1);
  const WatchStart& start = stream->start();
  bool reset = start.reset;
  if (start.resume) {
    if (history_.Covers(start.seq, seq_)) {
      // The client holds its view at `seq` (inside an initial state: the
      // snapshot's objects up to a key, so it gets the rest first); the
      // events after it, replayed through the stream's filter, bring it to
      // now (with the exact enter/leave events, as the stream decides
      // those from each event's before and after states).
      if (start.in_snapshot) {
        stream->StartLocked(
            &tokens_, SnapshotRestLocked(*stream, start.seq, start.after_key),
            /*reset=*/false, start.seq, rv, stale);
      } else {
        stream->ResumeLocked(&tokens_, start.seq, stale);
      }
      QueuedTally queued;
      history_.ForEachAfter(start.seq, [stream, &queued](const EventPtr& ev) {
        queued.Add(stream->Apply(ev));
      });
      queued.ReportTo(host_);
      // The resumed client may have been told stale and missed FRESH.
      if (fresh_sent_) stream->PushFresh(seq_, rv, /*always=*/true);
      return;
    }
    VLOG(1) << "watch on " << entry_->config.resource << ": token at "
            << start.seq << " is outside the history (now " << seq_
            << "): RESET";
    reset = true;
  }
  stream->StartLocked(&tokens_, HeldLocked(*stream), reset, seq_, rv, stale);
}

std::vector<SharedPtr> WatchFanout::SnapshotRestLocked(
    const WatchStreamReactor& stream, uint64_t seq,
    absl::string_view after_key) const {
  // The state at `seq`: today's, with every key an event after `seq`
  // touched rolled back to its state before the first such event.
  absl::flat_hash_map<absl::string_view, SharedPtr> rolled_back;
  history_.ForEachAfter(seq, [&rolled_back](const EventPtr& ev) {
    rolled_back.try_emplace(ev->key(), ev->prev());
  });
  std::vector<SharedPtr> objs;
  for (const auto& [key, obj] : state_) {
    if (key > after_key && !rolled_back.contains(key) && stream.Holds(obj)) {
      objs.push_back(obj);
    }
  }
  for (const auto& [key, obj] : rolled_back) {
    if (key > after_key && stream.Holds(obj)) objs.push_back(obj);
  }
  std::sort(objs.begin(), objs.end(),
            [](const SharedPtr& a, const SharedPtr& b) {
              return a->key() < b->key();
            });
  return objs;
}

void WatchFanout::EndRefusedWaiters(const absl::Status& refused) {
  const int64_t errors = entry_->informer->GetReflectorCounters().errors;
  absl::MutexLock lock(&mu_);
  for (const auto& [s, errors_at_open] : waiting_) {
    if (errors <= errors_at_open) continue;
    s->End(absl::UnavailableError(
        absl::StrCat("the informer of \"", entry_->config.resource,
                     "\" cannot sync: ", refused.message(),
                     "; the sidecar keeps retrying, retry the Watch later")));
  }
}

void WatchFanout::AttachWaitersStale() {
  const std::string rv = entry_->informer->LastAppliedResourceVersion();
  absl::MutexLock lock(&mu_);
  for (const auto& [s, errors] : waiting_) {
    host_->NoteWaiting(-1);
    AttachLocked(s, rv, /*stale=*/true);
  }
  waiting_.clear();
}

void WatchFanout::WaitForSyncThenAttach() {
  // The bounded waits (on the informer's clock) let this thread notice
  // the hub stopping and the API server refusing the informer.
  while (!entry_->informer->WaitForSync(absl::Seconds(1))) {
    if (host_->Stopping()) return;
    // Never a silently hung Watch: when the API server refuses the
    // informer for good (RBAC, credentials, a resource gone), the streams
    // that saw it fail since they began waiting end with the reason; they
    // may come back later, while the informer keeps retrying. A stream
    // that began waiting after the failure waits for the next attempt,
    // which may succeed (someone fixed RBAC) or tell it a fresh reason.
    const absl::Status refused = PersistentSyncError(*entry_);
    if (!refused.ok()) EndRefusedWaiters(refused);
    // The informer failed to reach the API server with a snapshot loaded:
    // the waiting streams get it now, marked stale.
    if (ObserveStale(*entry_).stale) AttachWaitersStale();
    // A stopped informer never syncs, and WaitForSync returns at once:
    // pace the loop until the hub stops too.
    if (entry_->informer->IsStopped() &&
        host_->SleepUnlessStopping(absl::Milliseconds(100))) {
      return;
    }
  }
  const std::string rv = entry_->informer->LastAppliedResourceVersion();
  // Clears the stale state (metrics, queries) as the streams hear FRESH.
  ObserveStale(*entry_);
  absl::MutexLock lock(&mu_);
  for (const auto& [s, errors] : waiting_) {
    host_->NoteWaiting(-1);
    AttachLocked(s, rv, /*stale=*/false);
  }
  waiting_.clear();
  waiter_done_ = true;
  if (told_stale_) {
    // After every event the informer applied while catching up (they
    // went to the streams as ordinary events, vanished objects as
    // DELETED): from here the streams are fresh.
    for (WatchStreamReactor* s : streams_) {
      s->PushFresh(seq_, rv, /*always=*/false);
    }
    fresh_sent_ = true;
  }
  host_->WakeTicker();
}

}  // namespace server

#include "server/watch_stream.h"

#include <glog/logging.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "informer/event_handler.h"
#include "informer/index.h"
#include "informer/object.h"
#include "informer/shared_informer.h"
#include "server/grpc_conversions.h"
#include "server/label_selector.h"

namespace server {

namespace v1 = ::informer::v1;

namespace {

std::string EncodeResumeToken(absl::string_view run_id, uint64_t seq) {
  return absl::WebSafeBase64Escape(absl::StrCat("w1/", run_id, "/", seq));
}

// Valid tokens only: the run id is returned (a malformed token is an error).
absl::StatusOr<std::string> DecodeResumeRunId(absl::string_view token) {
  std::string raw;
  const absl::Status bad = absl::InvalidArgumentError("malformed resume_token");
  if (!absl::WebSafeBase64Unescape(token, &raw)) return bad;
  std::vector<absl::string_view> parts = absl::StrSplit(raw, '/');
  uint64_t seq = 0;
  if (parts.size() != 3 || parts[0] != "w1" ||
      !absl::SimpleAtoi(parts[2], &seq)) {
    return bad;
  }
  return std::string(parts[1]);
}

// One state of an object, shared by every stream it goes to: converted to
// a Struct at most once, whatever the number of streams (JSON is the
// Object's own text).
class SharedObject {
 public:
  explicit SharedObject(informer::ObjectPtr obj) : obj_(std::move(obj)) {}
  const informer::Object& object() const { return *obj_; }
  const informer::ObjectPtr& ptr() const { return obj_; }

  absl::Status EncodeTo(v1::Encoding encoding, v1::Object* out) const {
    if (encoding != v1::ENCODING_STRUCT) {
      out->set_json(std::string(obj_->json()));
      return absl::OkStatus();
    }
    absl::call_once(struct_once_, [this] {
      struct_status_ = EncodeObject(*obj_, v1::ENCODING_STRUCT, &struct_);
    });
    if (!struct_status_.ok()) return struct_status_;
    *out = struct_;
    return absl::OkStatus();
  }

 private:
  const informer::ObjectPtr obj_;
  mutable absl::once_flag struct_once_;
  // Written once under struct_once_, read-only after.
  mutable v1::Object struct_;
  mutable absl::Status struct_status_;
};
using SharedPtr = std::shared_ptr<const SharedObject>;

// Both null, or both the same object state.
bool Same(const SharedPtr& a, const SharedPtr& b) {
  if (a == nullptr || b == nullptr) return a == b;
  return a->ptr() == b->ptr();
}

// Ends a call at once with an error.
class ErrorReactor final : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  explicit ErrorReactor(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

// One stream: a callback reactor with a bounded, coalescing queue.
//
// Lock order: WatchFanout::mu_ -> WatchStreamReactor::mu_ -> WatchHub::mu_.
// The fan-out calls Apply/Tick with its lock held; the reactor removes
// itself from the fan-out in OnDone (holding no lock of its own), so the
// fan-out never touches a deleted stream.
class WatchStreamReactor final
    : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  struct Filter {
    std::string namespace_;
    LabelSelector selector;
    std::string index_name;
    std::string index_value;
    informer::IndexFunc index_fn;  // null: no index filter

    bool Matches(const informer::Object& obj) const {
      if (!namespace_.empty() && obj.namespace_() != namespace_) return false;
      if (!selector.Matches(obj)) return false;
      if (index_fn) {
        const informer::IndexValues values = index_fn(obj);
        return std::find(values.begin(), values.end(), index_value) !=
               values.end();
      }
      return true;
    }
  };

  WatchStreamReactor(WatchHub* hub, WatchFanout* fanout, InformerEntry* entry,
                     Filter filter, v1::Encoding encoding, bool send_old)
      : hub_(hub),
        fanout_(fanout),
        entry_(entry),
        filter_(std::move(filter)),
        encoding_(encoding),
        send_old_(send_old) {
    absl::MutexLock lock(&mu_);
    compact_at_ = hub_->options_.max_queue;
    last_write_ = hub_->clock_->Now();
  }

  // Queues the initial state (with the fan-out's lock held, so no event is
  // missed or duplicated: see WatchFanout::Attach).
  void StartLocked(const std::vector<informer::ObjectPtr>& candidates,
                   bool reset, uint64_t seq, const std::string& rv) {
    absl::MutexLock lock(&mu_);
    if (reset) PushLocked(MakeMarker(v1::EVENT_TYPE_RESET, seq, rv));
    for (const informer::ObjectPtr& raw : candidates) {
      if (!filter_.Matches(*raw)) continue;
      std::string key = raw->Key();
      auto obj = std::make_shared<const SharedObject>(raw);
      view_[key] = obj;
      Pending p;
      p.type = v1::EVENT_TYPE_ADDED;
      p.key = std::move(key);
      p.obj = obj;
      p.initial = true;
      p.seq = seq;
      PushLocked(std::move(p));
    }
    PushLocked(MakeMarker(v1::EVENT_TYPE_INITIAL_STATE_DONE, seq, rv));
    // Markers and initial events never coalesce, whatever their number.
    marker_end_ = pending_.size();
    compact_at_ = std::max(compact_at_, pending_.size() * 2);
    MaybeWriteLocked();
  }

  // One informer event: `obj` is the new state, or the final one when
  // `deleted`.
  void Apply(const std::string& key, const SharedPtr& obj, bool deleted,
             bool tombstone, uint64_t seq) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    const bool match = !deleted && filter_.Matches(obj->object());
    auto it = view_.find(key);
    if (match) {
      if (it == view_.end()) {
        view_[key] = obj;
        PushLocked(MakeEvent(v1::EVENT_TYPE_ADDED, key, obj, nullptr, seq));
      } else if (!Same(it->second, obj)) {
        SharedPtr old = std::move(it->second);
        it->second = obj;
        if (old->object().uid() != obj->object().uid()) {
          // Replaced by a new object of the same name.
          PushLocked(MakeEvent(v1::EVENT_TYPE_DELETED, key, old, nullptr, seq));
          PushLocked(MakeEvent(v1::EVENT_TYPE_ADDED, key, obj, nullptr, seq));
        } else {
          PushLocked(MakeEvent(v1::EVENT_TYPE_MODIFIED, key, obj, old, seq));
        }
      }
      // Same object as already sent (a resync, or an event the initial
      // state already covered): nothing to say.
    } else if (it != view_.end()) {
      view_.erase(it);
      Pending p = MakeEvent(v1::EVENT_TYPE_DELETED, key, obj, nullptr, seq);
      p.tombstone = deleted && tombstone;
      PushLocked(std::move(p));
    }
    if (pending_.size() >= compact_at_) CompactLocked();
    MaybeWriteLocked();
  }

  // Sends a BOOKMARK when the stream has been quiet for the interval.
  void Tick(absl::Time now, uint64_t seq, const std::string& rv) {
    absl::MutexLock lock(&mu_);
    if (ended_ || writing_ || !pending_.empty()) return;
    if (now - last_write_ < hub_->options_.bookmark_interval) return;
    PushLocked(MakeMarker(v1::EVENT_TYPE_BOOKMARK, seq, rv));
    MaybeWriteLocked();
  }

  void Kick() {
    absl::MutexLock lock(&mu_);
    MaybeWriteLocked();
  }

  void OnWriteDone(bool ok) override {
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
    MaybeWriteLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    EndLocked(absl::CancelledError("cancelled by the client"));
  }

  void OnDone() override;

 private:
  struct Pending {
    v1::EventType type = v1::EVENT_TYPE_UNSPECIFIED;
    std::string key;  // empty for markers
    SharedPtr obj;
    SharedPtr old;
    std::string rv;  // markers only
    bool initial = false;
    bool tombstone = false;
    uint64_t seq = 0;
  };

  static Pending MakeEvent(v1::EventType type, const std::string& key,
                           SharedPtr obj, SharedPtr old, uint64_t seq) {
    Pending p;
    p.type = type;
    p.key = key;
    p.obj = std::move(obj);
    p.old = std::move(old);
    p.seq = seq;
    return p;
  }
  static Pending MakeMarker(v1::EventType type, uint64_t seq,
                            const std::string& rv) {
    Pending p;
    p.type = type;
    p.rv = rv;
    p.seq = seq;
    return p;
  }

  void PushLocked(Pending p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pending_.push_back(std::move(p));
    hub_->NotePending(pending_.size());
  }

  // Replaces the coalescible part of the queue (after the initial state's
  // markers) by, per object key in order of first appearance, the
  // difference between the state the client will have before it (`base`)
  // and the current state (`view_`): nothing, ADDED, MODIFIED (old = base),
  // DELETED, or DELETED + ADDED when the UID changed. BOOKMARKs are dropped.
  void CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::flat_hash_map<std::string, SharedPtr> prefix_state;
    absl::flat_hash_set<std::string> in_prefix;
    for (size_t i = 0; i < marker_end_; ++i) {
      const Pending& p = pending_[i];
      if (p.key.empty()) continue;
      in_prefix.insert(p.key);
      prefix_state[p.key] = p.type == v1::EVENT_TYPE_DELETED ? nullptr : p.obj;
    }
    struct KeyInfo {
      uint64_t seq = 0;
      SharedPtr deleted;  // the last DELETED's object
      bool tombstone = false;
    };
    std::vector<std::string> order;
    absl::flat_hash_map<std::string, KeyInfo> info;
    for (size_t i = marker_end_; i < pending_.size(); ++i) {
      const Pending& p = pending_[i];
      if (p.key.empty()) continue;  // bookmark
      auto [it, inserted] = info.try_emplace(p.key);
      if (inserted) order.push_back(p.key);
      it->second.seq = std::max(it->second.seq, p.seq);
      if (p.type == v1::EVENT_TYPE_DELETED) {
        it->second.deleted = p.obj;
        it->second.tombstone = p.tombstone;
      }
    }
    const size_t before = pending_.size();
    overflowed_ = true;
    pending_.resize(marker_end_);
    for (const std::string& key : order) {
      const KeyInfo& k = info[key];
      SharedPtr from;
      if (in_prefix.contains(key)) {
        from = prefix_state[key];
      } else if (auto s = sent_.find(key); s != sent_.end()) {
        from = s->second;
      }
      SharedPtr to;
      if (auto v = view_.find(key); v != view_.end()) to = v->second;
      if (Same(from, to)) continue;
      if (to == nullptr) {
        Pending p =
            MakeEvent(v1::EVENT_TYPE_DELETED, key,
                      k.deleted != nullptr ? k.deleted : from, nullptr, k.seq);
        p.tombstone = k.tombstone;
        pending_.push_back(std::move(p));
      } else if (from == nullptr) {
        pending_.push_back(
            MakeEvent(v1::EVENT_TYPE_ADDED, key, to, nullptr, k.seq));
      } else if (from->object().uid() != to->object().uid()) {
        Pending del =
            MakeEvent(v1::EVENT_TYPE_DELETED, key,
                      k.deleted != nullptr ? k.deleted : from, nullptr, k.seq);
        del.tombstone = k.tombstone;
        pending_.push_back(std::move(del));
        pending_.push_back(
            MakeEvent(v1::EVENT_TYPE_ADDED, key, to, nullptr, k.seq));
      } else {
        pending_.push_back(
            MakeEvent(v1::EVENT_TYPE_MODIFIED, key, to, from, k.seq));
      }
    }
    VLOG(1) << "watch stream on " << entry_->config.resource << ": coalesced "
            << before << " pending events to " << pending_.size();
    if (order.size() > hub_->options_.max_pending_keys) {
      EndLocked(absl::ResourceExhaustedError(absl::StrCat(
          "this stream fell too far behind (", order.size(),
          " objects pending, the cap is ", hub_->options_.max_pending_keys,
          "); reconnect with the resume_token of the last event processed")));
      return;
    }
    // Amortised: the next compaction waits until the queue has doubled.
    compact_at_ = std::max(hub_->options_.max_queue, pending_.size() * 2);
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || writing_ || pending_.empty() || hub_->paused_.load()) {
      return;
    }
    // A stream that overflowed since its last write sends its queue fully
    // coalesced: the amortised compaction in Apply may have left an
    // uncoalesced tail.
    if (overflowed_ || pending_.size() >= hub_->options_.max_queue) {
      CompactLocked();
      if (ended_) return;
    }
    overflowed_ = false;
    response_.Clear();
    response_.mutable_events()->Reserve(static_cast<int>(pending_.size()));
    for (Pending& p : pending_) {
      v1::Event* e = response_.add_events();
      e->set_type(p.type);
      e->set_resume_token(EncodeResumeToken(hub_->run_id_, p.seq));
      e->set_initial(p.initial);
      e->set_tombstone(p.tombstone);
      if (p.obj == nullptr) {
        e->set_resource_version(p.rv);
        continue;
      }
      e->set_resource_version(std::string(p.obj->object().resource_version()));
      absl::Status st = p.obj->EncodeTo(encoding_, e->mutable_object());
      if (st.ok() && send_old_ && p.old != nullptr) {
        st = p.old->EncodeTo(encoding_, e->mutable_old_object());
      }
      if (!st.ok()) {
        EndLocked(st);
        return;
      }
      if (p.type == v1::EVENT_TYPE_DELETED) {
        sent_.erase(p.key);
      } else {
        sent_[p.key] = p.obj;
      }
    }
    pending_.clear();
    marker_end_ = 0;
    compact_at_ = hub_->options_.max_queue;
    writing_ = true;
    last_write_ = hub_->clock_->Now();
    StartWrite(&response_);
  }

  void EndLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_) return;
    ended_ = true;
    pending_.clear();
    view_.clear();
    sent_.clear();
    end_status_ = ToGrpcStatus(status);
    FinishIfIdleLocked();
  }

  // Finish may not overlap a write in flight: OnWriteDone finishes then.
  void FinishIfIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    finished_ = true;
    Finish(end_status_);
  }

  WatchHub* const hub_;
  WatchFanout* const fanout_;
  InformerEntry* const entry_;
  const Filter filter_;
  const v1::Encoding encoding_;
  const bool send_old_;

  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  // pending_[0, marker_end_) is the initial state (with its markers).
  size_t marker_end_ ABSL_GUARDED_BY(mu_) = 0;
  size_t compact_at_ ABSL_GUARDED_BY(mu_) = 0;
  // What the client will have once everything queued is written.
  absl::flat_hash_map<std::string, SharedPtr> view_ ABSL_GUARDED_BY(mu_);
  // What the client has been written.
  absl::flat_hash_map<std::string, SharedPtr> sent_ ABSL_GUARDED_BY(mu_);
  v1::WatchResponse response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The queue was coalesced since the last write.
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
};

// The one non-blocking handler of an informer: hands each event to every
// open stream of the resource. Runs inline on the informer's distribution
// thread; takes only short locks.
class WatchFanout final : public informer::ResourceEventHandler {
 public:
  WatchFanout(WatchHub* hub, InformerEntry* entry) : hub_(hub), entry_(entry) {}

  ~WatchFanout() override {
    if (registration_ != nullptr) {
      absl::Status st = entry_->informer->RemoveEventHandler(registration_);
      if (!st.ok()) LOG(WARNING) << "removing the watch fan-out: " << st;
    }
  }

  absl::Status Register() {
    informer::HandlerOptions options;
    options.non_blocking = true;
    absl::StatusOr<informer::HandlerRegistration*> reg =
        entry_->informer->AddEventHandler(this, options);
    if (!reg.ok()) return reg.status();
    registration_ = *reg;
    return absl::OkStatus();
  }

  InformerEntry* entry() const { return entry_; }

  void OnAdd(const informer::ObjectPtr& obj, bool) override {
    Dispatch(obj, false, false);
  }
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr& obj) override {
    Dispatch(obj, false, false);
  }
  void OnDelete(const informer::ObjectPtr& obj,
                bool final_state_unknown) override {
    Dispatch(obj, true, final_state_unknown);
  }

  // Queues the initial state on `stream` and adds it to the fan-out. With
  // the fan-out's lock held, an event is either in the indexer snapshot and
  // dispatched later (the stream drops it: its view already holds that very
  // object) or not yet applied to the indexer, because the informer calls
  // this handler inline right after updating the indexer.
  void Attach(WatchStreamReactor* stream, bool reset,
              const std::string& namespace_filter,
              const std::string& index_name, const std::string& index_value) {
    // Read before taking mu_: the informer holds its own lock while it calls
    // Dispatch, so asking it anything under mu_ could deadlock. The marker's
    // resourceVersion is thus a lower bound of the snapshot's.
    const std::string rv = entry_->informer->LastSyncResourceVersion();
    absl::MutexLock lock(&mu_);
    const informer::Indexer& indexer = entry_->informer->GetIndexer();
    std::vector<informer::ObjectPtr> candidates;
    if (!index_name.empty()) {
      candidates = indexer.ByIndex(index_name, index_value)
                       .value_or(std::vector<informer::ObjectPtr>{});
    } else if (!namespace_filter.empty()) {
      candidates = indexer.ByIndex(informer::kNamespaceIndex, namespace_filter)
                       .value_or(std::vector<informer::ObjectPtr>{});
    } else {
      candidates = indexer.List();
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const informer::ObjectPtr& a, const informer::ObjectPtr& b) {
                return a->Key() < b->Key();
              });
    streams_.insert(stream);
    entry_->streams.fetch_add(1);
    hub_->NoteStreams(1);
    stream->StartLocked(candidates, reset, seq_, rv);
  }

  void Detach(WatchStreamReactor* stream) {
    absl::MutexLock lock(&mu_);
    if (streams_.erase(stream) > 0) {
      entry_->streams.fetch_sub(1);
      hub_->NoteStreams(-1);
    }
  }

  void Tick(absl::Time now) {
    const std::string rv = entry_->informer->LastSyncResourceVersion();
    absl::MutexLock lock(&mu_);
    if (streams_.empty()) return;
    for (WatchStreamReactor* s : streams_) s->Tick(now, seq_, rv);
  }

  void KickAll() {
    absl::MutexLock lock(&mu_);
    for (WatchStreamReactor* s : streams_) s->Kick();
  }

 private:
  void Dispatch(const informer::ObjectPtr& obj, bool deleted, bool tombstone) {
    const std::string key = obj->Key();
    // One shared state for every stream: encoded once per encoding.
    const auto shared = std::make_shared<const SharedObject>(obj);
    {
      absl::MutexLock lock(&mu_);
      const uint64_t seq = ++seq_;
      for (WatchStreamReactor* s : streams_) {
        s->Apply(key, shared, deleted, tombstone, seq);
      }
    }
    hub_->NoteEvent();
  }

  WatchHub* const hub_;
  InformerEntry* const entry_;
  informer::HandlerRegistration* registration_ = nullptr;

  absl::Mutex mu_;
  // Events handled so far; the resume tokens' sequence number.
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<WatchStreamReactor*> streams_ ABSL_GUARDED_BY(mu_);
};

void WatchStreamReactor::OnDone() {
  fanout_->Detach(this);
  delete this;
}

WatchHub::WatchHub(InformerRegistry* registry, WatchOptions options,
                   informer::Clock* clock, std::string run_id)
    : registry_(registry),
      options_(options),
      clock_(clock),
      run_id_(std::move(run_id)) {
  for (const auto& entry : registry_->entries()) {
    auto fanout = std::make_unique<WatchFanout>(this, entry.get());
    if (absl::Status st = fanout->Register(); !st.ok()) {
      // Watch on this resource then answers with this error.
      LOG(ERROR) << "cannot serve Watch on " << entry->config.resource << ": "
                 << st;
      fanout.reset();
    }
    fanouts_.push_back(std::move(fanout));
  }
}

WatchHub::~WatchHub() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  fanouts_.clear();
}

grpc::ServerWriteReactor<v1::WatchResponse>* WatchHub::Open(
    grpc::CallbackServerContext*, const v1::WatchRequest* request) {
  if (request->resource().empty()) {
    return new ErrorReactor(absl::InvalidArgumentError("resource is required"));
  }
  absl::StatusOr<InformerEntry*> entry = registry_->Find(request->resource());
  if (!entry.ok()) return new ErrorReactor(entry.status());
  WatchFanout* fanout = nullptr;
  for (const auto& f : fanouts_) {
    if (f != nullptr && f->entry() == *entry) fanout = f.get();
  }
  if (fanout == nullptr) {
    return new ErrorReactor(absl::InternalError(
        absl::StrCat("Watch is not available for \"", request->resource(),
                     "\"; see the sidecar's log")));
  }
  if (!(*entry)->informer->HasSynced()) {
    return new ErrorReactor(absl::UnavailableError(
        absl::StrCat("the informer of \"", request->resource(),
                     "\" has not synced yet; retry shortly")));
  }
  WatchStreamReactor::Filter filter;
  filter.namespace_ = request->namespace_();
  absl::StatusOr<LabelSelector> selector =
      LabelSelector::Parse(request->label_selector());
  if (!selector.ok()) return new ErrorReactor(selector.status());
  filter.selector = *std::move(selector);
  if (!request->index_name().empty()) {
    informer::Indexers indexers =
        (*entry)->informer->GetIndexer().GetIndexers();
    auto it = indexers.find(request->index_name());
    if (it == indexers.end()) {
      return new ErrorReactor(absl::InvalidArgumentError(
          absl::StrCat("resource \"", request->resource(), "\" has no index \"",
                       request->index_name(), "\"")));
    }
    filter.index_name = request->index_name();
    filter.index_value = request->index_value();
    filter.index_fn = it->second;
  }
  bool reset = false;
  if (!request->resume_token().empty()) {
    absl::StatusOr<std::string> run =
        DecodeResumeRunId(request->resume_token());
    if (!run.ok()) return new ErrorReactor(run.status());
    // No history is kept yet: every token, of this run or another, is
    // answered with RESET and a fresh initial state.
    reset = true;
  }
  const std::string namespace_filter = filter.namespace_;
  auto* stream =
      new WatchStreamReactor(this, fanout, *entry, std::move(filter),
                             request->encoding(), request->send_old_object());
  EnsureTicker();
  fanout->Attach(stream, reset, namespace_filter, request->index_name(),
                 request->index_value());
  return stream;
}

void WatchHub::EnsureTicker() {
  absl::MutexLock lock(&mu_);
  if (ticker_started_ || stopping_) return;
  ticker_started_ = true;
  ticker_ = std::thread([this] { TickLoop(); });
}

void WatchHub::TickLoop() {
  // Ticks at half the interval, so a quiet stream gets its bookmark between
  // one and one and a half intervals after its last write.
  const absl::Duration period = options_.bookmark_interval / 2;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = clock_->Now() + period;
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping_), deadline);
      if (stopping_) return;
    }
    const absl::Time now = clock_->Now();
    for (const auto& f : fanouts_) {
      if (f != nullptr) f->Tick(now);
    }
  }
}

void WatchHub::SetWritesPaused(bool paused) {
  paused_.store(paused);
  if (paused) return;
  for (const auto& f : fanouts_) {
    if (f != nullptr) f->KickAll();
  }
}

void WatchHub::NoteEvent() {
  absl::MutexLock lock(&mu_);
  ++events_;
}

void WatchHub::NotePending(size_t n) {
  absl::MutexLock lock(&mu_);
  peak_pending_ = std::max(peak_pending_, n);
}

void WatchHub::WaitForEvents(uint64_t n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return events_ >= n;
  };
  mu_.Await(absl::Condition(&reached));
}

void WatchHub::NoteStreams(int delta) {
  absl::MutexLock lock(&mu_);
  open_streams_ += delta;
}

void WatchHub::WaitForOpenStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return open_streams_ == n;
  };
  mu_.Await(absl::Condition(&reached));
}

uint64_t WatchHub::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

size_t WatchHub::peak_pending() const {
  absl::MutexLock lock(&mu_);
  return peak_pending_;
}

}  // namespace server

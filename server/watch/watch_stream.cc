#include "server/watch/watch_stream.h"

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
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"
#include "informer/object/object.h"
#include "informer/cache/shared_informer.h"
#include "server/rpc/grpc_conversions.h"
#include "informer/labels/label_selector.h"

namespace server {

namespace v1 = ::informer::v1;

// ---- Wire encoding ----

namespace {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Tag of a field: (number << 3) | wire type.
constexpr char kVarint = 0;
constexpr char kLengthDelimited = 2;
char Tag(int field, char wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

// Bytes of a length-delimited field with a `len`-byte payload.
size_t FieldSize(size_t len) { return 1 + VarintSize(len) + len; }

void PutString(int field, absl::string_view s, std::string* out) {
  if (s.empty()) return;  // proto3: defaults are not written
  out->push_back(Tag(field, kLengthDelimited));
  PutVarint(s.size(), out);
  out->append(s.data(), s.size());
}

}  // namespace

grpc::Slice SerializeToSlice(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return slice;
}

void WatchResponseBuilder::Add(const Event& e) {
  // Event field sizes (Event: type=1, object=2, old_object=3,
  // resource_version=4, resume_token=5, initial=6, tombstone=7).
  size_t size = 0;
  if (e.type != v1::EVENT_TYPE_UNSPECIFIED) size += 1 + VarintSize(e.type);
  if (e.object != nullptr) size += FieldSize(e.object->size());
  if (e.old_object != nullptr) size += FieldSize(e.old_object->size());
  if (!e.resource_version.empty()) size += FieldSize(e.resource_version.size());
  if (!e.resume_token.empty()) size += FieldSize(e.resume_token.size());
  if (e.initial) size += 2;
  if (e.tombstone) size += 2;
  // WatchResponse.events = 1.
  small_.push_back(Tag(1, kLengthDelimited));
  PutVarint(size, &small_);
  if (e.type != v1::EVENT_TYPE_UNSPECIFIED) {
    small_.push_back(Tag(1, kVarint));
    PutVarint(e.type, &small_);
  }
  if (e.object != nullptr) {
    small_.push_back(Tag(2, kLengthDelimited));
    PutVarint(e.object->size(), &small_);
    FlushSmall();
    slices_.push_back(*e.object);  // a reference, not a copy
  }
  if (e.old_object != nullptr) {
    small_.push_back(Tag(3, kLengthDelimited));
    PutVarint(e.old_object->size(), &small_);
    FlushSmall();
    slices_.push_back(*e.old_object);
  }
  PutString(4, e.resource_version, &small_);
  PutString(5, e.resume_token, &small_);
  if (e.initial) {
    small_.push_back(Tag(6, kVarint));
    small_.push_back(1);
  }
  if (e.tombstone) {
    small_.push_back(Tag(7, kVarint));
    small_.push_back(1);
  }
  ++events_;
}

void WatchResponseBuilder::FlushSmall() {
  if (small_.empty()) return;
  slices_.emplace_back(small_.data(), small_.size());
  small_.clear();
}

grpc::ByteBuffer WatchResponseBuilder::Finish() {
  FlushSmall();
  grpc::ByteBuffer out(slices_.data(), slices_.size());
  slices_.clear();
  // Kept for reuse unless a large response (an initial state) grew them.
  if (slices_.capacity() > 1024) std::vector<grpc::Slice>().swap(slices_);
  if (small_.capacity() > 4096) std::string().swap(small_);
  events_ = 0;
  return out;
}

void WatchResponseBuilder::AddEncoded(const std::vector<grpc::Slice>& parts,
                                      int events) {
  FlushSmall();
  slices_.insert(slices_.end(), parts.begin(), parts.end());
  events_ += events;
}

std::vector<grpc::Slice> WatchResponseBuilder::TakeSlices() {
  FlushSmall();
  std::vector<grpc::Slice> out;
  out.swap(slices_);
  events_ = 0;
  return out;
}

namespace {

// ---- Resume tokens ----

struct ResumeToken {
  std::string run_id;
  uint64_t epoch = 0;
  uint64_t seq = 0;
};

std::string TokenPrefix(absl::string_view run_id, uint64_t epoch) {
  return absl::StrCat("w2/", run_id, "/", epoch, "/");
}

absl::StatusOr<ResumeToken> DecodeResumeToken(absl::string_view token) {
  std::string raw;
  const absl::Status bad = absl::InvalidArgumentError("malformed resume_token");
  if (!absl::WebSafeBase64Unescape(token, &raw)) return bad;
  std::vector<absl::string_view> parts = absl::StrSplit(raw, '/');
  ResumeToken out;
  if (parts.size() != 4 || parts[0] != "w2" ||
      !absl::SimpleAtoi(parts[2], &out.epoch) ||
      !absl::SimpleAtoi(parts[3], &out.seq)) {
    return bad;
  }
  out.run_id = std::string(parts[1]);
  return out;
}

// One state of an object, shared by every stream it goes to: its key
// computed once, serialized at most once per encoding, whatever the number
// of streams.
class SharedObject {
 public:
  explicit SharedObject(informer::ObjectPtr obj) : obj_(std::move(obj)) {}
  const informer::Object& object() const { return *obj_; }
  const std::string& key() const { return obj_->Key(); }

  // The serialized informer.v1.Object in `encoding`.
  absl::StatusOr<const grpc::Slice*> Encoded(v1::Encoding encoding) const {
    const int i = encoding == v1::ENCODING_STRUCT ? 1 : 0;
    absl::call_once(once_[i], [this, i, encoding] {
      v1::Object msg;
      status_[i] = EncodeObject(*obj_, encoding, &msg);
      if (status_[i].ok()) slice_[i] = SerializeToSlice(msg);
    });
    if (!status_[i].ok()) return status_[i];
    return &slice_[i];
  }

 private:
  const informer::ObjectPtr obj_;
  // [0] JSON, [1] Struct; each written once under its once_flag.
  mutable absl::once_flag once_[2];
  mutable grpc::Slice slice_[2];
  mutable absl::Status status_[2];
};
using SharedPtr = std::shared_ptr<const SharedObject>;

// Both null, or the same object (UID) at the same resourceVersion.
bool Same(const SharedPtr& a, const SharedPtr& b) {
  if (a == nullptr || b == nullptr) return a == b;
  if (a == b) return true;
  return a->object().uid() == b->object().uid() &&
         a->object().resource_version() == b->object().resource_version();
}

bool SameUid(const SharedPtr& a, const SharedPtr& b) {
  return a->object().uid() == b->object().uid();
}

// A fan-out's pre-encoded `WatchResponse.events` fields of one event.
struct EncodedEvents {
  std::vector<grpc::Slice> slices;
  int events = 0;
};

// One informer event as the fan-out dispatched it: the object's new (or
// final) state, its state before, and the event's resume token. Shared by
// every stream that gets it and by the history.
//
// "As is" (natural) the event reads: DELETED (`deleted`), ADDED (no `prev`),
// MODIFIED (same UID), or DELETED `prev` + ADDED when a new object took the
// name. Every stream that sees it so (all unfiltered streams, and filtered
// ones the object neither enters nor leaves) writes the same bytes: they
// are encoded once per encoding, lazily, on whichever thread first needs
// them; a stream then only adds slice references.
//
// Immutable after construction except the encoding caches (call_once).
class FanoutEvent {
 public:
  FanoutEvent(uint64_t seq, SharedPtr obj, SharedPtr prev, bool deleted,
              bool tombstone, std::string token)
      : seq_(seq),
        obj_(std::move(obj)),
        prev_(std::move(prev)),
        deleted_(deleted),
        tombstone_(tombstone),
        token_(std::move(token)) {}

  uint64_t seq() const { return seq_; }
  const SharedPtr& obj() const { return obj_; }
  const SharedPtr& prev() const { return prev_; }
  bool deleted() const { return deleted_; }
  bool tombstone() const { return tombstone_; }
  const std::string& key() const { return obj_->key(); }
  // Same name, another object: DELETED prev + ADDED obj.
  bool replaced() const {
    return !deleted_ && prev_ != nullptr && !SameUid(prev_, obj_);
  }
  bool modified() const {
    return !deleted_ && prev_ != nullptr && SameUid(prev_, obj_);
  }

  // The event as is, encoded; `with_old` adds old_object to a MODIFIED.
  absl::StatusOr<const EncodedEvents*> Encoded(v1::Encoding encoding,
                                               bool with_old) const {
    with_old = with_old && modified();
    const int i =
        (encoding == v1::ENCODING_STRUCT ? 2 : 0) + (with_old ? 1 : 0);
    absl::call_once(once_[i], [this, i, encoding, with_old] {
      status_[i] = Encode(encoding, with_old, &encoded_[i]);
    });
    if (!status_[i].ok()) return status_[i];
    return &encoded_[i];
  }

  // Counts the event's types as is into `by_type`.
  void CountTypes(std::array<uint64_t, 8>* by_type) const {
    if (deleted_) {
      ++(*by_type)[v1::EVENT_TYPE_DELETED];
    } else if (prev_ == nullptr) {
      ++(*by_type)[v1::EVENT_TYPE_ADDED];
    } else if (SameUid(prev_, obj_)) {
      ++(*by_type)[v1::EVENT_TYPE_MODIFIED];
    } else {
      ++(*by_type)[v1::EVENT_TYPE_DELETED];
      ++(*by_type)[v1::EVENT_TYPE_ADDED];
    }
  }

 private:
  absl::Status Encode(v1::Encoding encoding, bool with_old,
                      EncodedEvents* out) const {
    WatchResponseBuilder builder;
    auto add = [&](v1::EventType type, const SharedPtr& o, const SharedPtr& old,
                   bool tombstone) -> absl::Status {
      WatchResponseBuilder::Event e;
      e.type = type;
      absl::StatusOr<const grpc::Slice*> bytes = o->Encoded(encoding);
      if (!bytes.ok()) return bytes.status();
      e.object = *bytes;
      if (old != nullptr) {
        absl::StatusOr<const grpc::Slice*> old_bytes = old->Encoded(encoding);
        if (!old_bytes.ok()) return old_bytes.status();
        e.old_object = *old_bytes;
      }
      e.resource_version = o->object().resource_version();
      e.resume_token = token_;
      e.tombstone = tombstone;
      builder.Add(e);
      return absl::OkStatus();
    };
    absl::Status st;
    if (deleted_) {
      st = add(v1::EVENT_TYPE_DELETED, obj_, nullptr, tombstone_);
    } else if (prev_ == nullptr) {
      st = add(v1::EVENT_TYPE_ADDED, obj_, nullptr, false);
    } else if (SameUid(prev_, obj_)) {
      st =
          add(v1::EVENT_TYPE_MODIFIED, obj_, with_old ? prev_ : nullptr, false);
    } else {
      st = add(v1::EVENT_TYPE_DELETED, prev_, nullptr, false);
      if (st.ok()) st = add(v1::EVENT_TYPE_ADDED, obj_, nullptr, false);
    }
    if (!st.ok()) return st;
    out->events = builder.events();
    out->slices = builder.TakeSlices();
    return absl::OkStatus();
  }

  const uint64_t seq_;
  const SharedPtr obj_;
  const SharedPtr prev_;
  const bool deleted_;
  const bool tombstone_;
  const std::string token_;
  // [encoding: 0 JSON, 2 Struct] + [1: MODIFIED with old_object].
  mutable absl::once_flag once_[4];
  mutable EncodedEvents encoded_[4];
  mutable absl::Status status_[4];
};
using EventPtr = std::shared_ptr<const FanoutEvent>;

// Queue capacity a stream keeps between writes (see MaybeWriteLocked).
constexpr size_t kKeepPending = 256;

// Ends a call at once with an error.
class ErrorReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit ErrorReactor(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

absl::StatusOr<absl::Duration> ResyncPeriod(const v1::WatchRequest& request) {
  if (!request.has_resync_period()) return absl::ZeroDuration();
  const auto& d = request.resync_period();
  if (d.seconds() < 0 || d.nanos() < 0 || d.nanos() >= 1000000000) {
    return absl::InvalidArgumentError(
        "resync_period must be a non-negative duration");
  }
  const absl::Duration period =
      absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  if (period > absl::ZeroDuration() && period < kMinStreamResyncPeriod) {
    return absl::InvalidArgumentError(
        absl::StrCat("resync_period must be 0 (none) or at least ",
                     absl::FormatDuration(kMinStreamResyncPeriod), "; got ",
                     absl::FormatDuration(period)));
  }
  return period;
}

}  // namespace

// One stream: a callback reactor with a bounded, coalescing queue.
//
// A stream keeps no copy of what its client holds: a filter is a pure
// function of an object, so the client holds an object exactly when its
// state at the stream's position matches the filter. Each event therefore
// tells the stream, from the object's state before (`prev`) and after,
// whether the object was held, is held now, or both (enter, leave, change),
// which costs no per-stream map whatever the cache's size.
//
// Lifetime: gRPC holds one reference until OnDone; the hub's flusher holds
// one while it flushes the stream; the last one deletes it.
//
// Lock order: WatchFanout::mu_ -> WatchStreamReactor::mu_ -> WatchHub::mu_
// and WatchHub::flush_mu_. The fan-out calls Start/Resume/Apply/Tick/End
// with its lock held; the reactor removes itself from the fan-out in OnDone
// (holding no lock of its own), so the fan-out never touches a deleted
// stream.
class WatchStreamReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  struct Filter {
    std::string namespace_;
    LabelSelector selector;
    std::string index_name;
    std::string index_value;
    informer::IndexFunc index_fn;  // null: no index filter

    bool Empty() const {
      return namespace_.empty() && selector.Empty() && !index_fn;
    }
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

  // What the stream was asked to start from.
  struct Start {
    bool reset = false;   // send RESET before the initial state
    bool resume = false;  // try to continue after `seq`
    uint64_t seq = 0;
  };

  WatchStreamReactor(WatchHub* hub, std::shared_ptr<WatchFanout> fanout,
                     InformerEntry* entry, Filter filter, v1::Encoding encoding,
                     bool send_old, absl::Duration resync_period, Start start)
      : hub_(hub),
        fanout_(std::move(fanout)),
        entry_(entry),
        filter_(std::move(filter)),
        unfiltered_(filter_.Empty()),
        encoding_(encoding),
        send_old_(send_old),
        resync_period_(resync_period),
        start_(start) {
    absl::MutexLock lock(&mu_);
    compact_at_ = hub_->options_.max_queue;
    last_write_ = hub_->clock_->Now();
  }

  const Filter& filter() const { return filter_; }
  bool Holds(const SharedPtr& obj) const {
    return obj != nullptr && (unfiltered_ || filter_.Matches(obj->object()));
  }
  const Start& start() const { return start_; }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;  // may destroy a retired fan-out: no lock is held here
    }
  }

  // Queues the initial state (with the fan-out's lock held, so no event is
  // missed or duplicated: see WatchFanout::AttachLocked).
  void StartLocked(const std::string& token_prefix,
                   const std::vector<SharedPtr>& objs, bool reset, uint64_t seq,
                   const std::string& rv) {
    absl::MutexLock lock(&mu_);
    token_prefix_ = token_prefix;
    applied_seq_ = written_seq_ = seq;
    ScheduleResyncLocked();
    if (reset) PushLocked(MakeMarker(v1::EVENT_TYPE_RESET, seq, rv));
    for (const SharedPtr& obj : objs) {
      Pending p = MakeEvent(v1::EVENT_TYPE_ADDED, obj, nullptr, seq);
      p.initial = true;
      PushLocked(std::move(p));
    }
    PushLocked(MakeMarker(v1::EVENT_TYPE_INITIAL_STATE_DONE, seq, rv));
    // Markers and initial events never coalesce, whatever their number.
    marker_end_ = pending_.size();
    compact_at_ = std::max(compact_at_, pending_.size() * 2);
    MaybeWriteLocked(/*force=*/false);
  }

  // Resumes after `seq`: the client holds its view at `seq`; the fan-out
  // then replays the events after `seq` through Apply.
  void ResumeLocked(const std::string& token_prefix, uint64_t seq) {
    absl::MutexLock lock(&mu_);
    token_prefix_ = token_prefix;
    applied_seq_ = written_seq_ = seq;
    ScheduleResyncLocked();
  }

  // One informer event.
  void Apply(const EventPtr& ev) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    applied_seq_ = ev->seq();
    const bool held_before = Holds(ev->prev());
    const bool held_after = !ev->deleted() && Holds(ev->obj());
    if (!held_before && !held_after) return;
    Pending p;
    p.seq = ev->seq();
    if (held_before == (ev->prev() != nullptr) &&
        held_after == !ev->deleted()) {
      p.ev = ev;  // as is: shared bytes
    } else if (held_after) {
      // Entered the filter.
      p.type = v1::EVENT_TYPE_ADDED;
      p.obj = ev->obj();
    } else {
      // Left the filter (changed, not deleted): DELETED with the new state
      // as the API server's filtered watch does, or with the state held if
      // another object took the name.
      p.type = v1::EVENT_TYPE_DELETED;
      p.old = ev->prev();
      p.obj = SameUid(ev->prev(), ev->obj()) ? ev->obj() : ev->prev();
    }
    PushLocked(std::move(p));
    if (pending_.size() >= compact_at_) CompactLocked();
    MaybeWriteLocked(/*force=*/false);
  }

  // True when this stream's resync is due at `now`.
  bool ResyncDue(absl::Time now) {
    absl::MutexLock lock(&mu_);
    return !ended_ && resync_period_ > absl::ZeroDuration() &&
           now >= next_resync_;
  }

  // Queues a SYNC for every object the stream holds (`objs`: the fan-out's
  // state through this stream's filter, in key order).
  void PushSyncs(absl::Time now, const std::vector<SharedPtr>& objs,
                 uint64_t seq) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    for (const SharedPtr& obj : objs) {
      PushLocked(MakeEvent(v1::EVENT_TYPE_SYNC, obj, nullptr, seq));
    }
    // Missed periods are skipped, not made up in a burst.
    while (next_resync_ <= now) next_resync_ += resync_period_;
    if (pending_.size() >= compact_at_) CompactLocked();
    MaybeWriteLocked(/*force=*/false);
  }

  // Sends a BOOKMARK when the stream has been quiet for the interval.
  // Returns when the next resync is due.
  absl::Time Tick(absl::Time now, uint64_t seq, const std::string& rv) {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::InfiniteFuture();
    if (!writing_ && pending_.empty() &&
        now - last_write_ >= hub_->options_.bookmark_interval) {
      PushLocked(MakeMarker(v1::EVENT_TYPE_BOOKMARK, seq, rv));
    }
    MaybeWriteLocked(/*force=*/false);
    return resync_period_ > absl::ZeroDuration() ? next_resync_
                                                 : absl::InfiniteFuture();
  }

  void Kick() {
    absl::MutexLock lock(&mu_);
    MaybeWriteLocked(/*force=*/false);
  }

  // The hub's flusher: the batching window this stream waited for ended.
  void Flush() {
    absl::MutexLock lock(&mu_);
    deferred_ = false;
    MaybeWriteLocked(/*force=*/true);
  }

  // Events queued and not yet written (metrics).
  size_t pending_size() {
    absl::MutexLock lock(&mu_);
    return pending_.size();
  }

  // Ends the stream with `status` (after the write in flight, if any).
  void End(absl::Status status) {
    absl::MutexLock lock(&mu_);
    EndLocked(std::move(status));
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
    MaybeWriteLocked(/*force=*/false);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    EndLocked(absl::CancelledError("cancelled by the client"));
  }

  void OnDone() override;

 private:
  ~WatchStreamReactor() override = default;

  // A queued event: a fan-out event as is (`ev`), or one this stream made
  // (initial state, enter/leave, SYNC, coalesced), or a marker (no object).
  struct Pending {
    EventPtr ev;
    v1::EventType type = v1::EVENT_TYPE_UNSPECIFIED;
    SharedPtr obj;
    // What the client held before this event (MODIFIED, DELETED).
    SharedPtr old;
    std::string rv;  // markers only
    bool initial = false;
    bool tombstone = false;
    uint64_t seq = 0;
  };

  static Pending MakeEvent(v1::EventType type, SharedPtr obj, SharedPtr old,
                           uint64_t seq) {
    Pending p;
    p.type = type;
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
  static bool IsMarker(const Pending& p) {
    return p.ev == nullptr && p.obj == nullptr;
  }
  static const std::string& KeyOf(const Pending& p) {
    return p.ev != nullptr ? p.ev->key() : p.obj->key();
  }
  // The client's state of the key before / after the event.
  static SharedPtr HeldBefore(const Pending& p) {
    if (p.ev != nullptr) return p.ev->prev();
    switch (p.type) {
      case v1::EVENT_TYPE_ADDED:
        return nullptr;
      case v1::EVENT_TYPE_SYNC:
        return p.obj;
      default:
        return p.old;
    }
  }
  static SharedPtr HeldAfter(const Pending& p) {
    if (p.ev != nullptr) return p.ev->deleted() ? nullptr : p.ev->obj();
    return p.type == v1::EVENT_TYPE_DELETED ? nullptr : p.obj;
  }

  void ScheduleResyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (resync_period_ > absl::ZeroDuration()) {
      next_resync_ = hub_->clock_->Now() + resync_period_;
    }
  }

  void PushLocked(Pending p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pending_.push_back(std::move(p));
    hub_->NotePending(pending_.size());
  }

  // Replaces the coalescible part of the queue (after the initial state's
  // markers) by, per object key in order of first appearance, the
  // difference between the state the client holds before the key's first
  // queued event and the state after its last: nothing, ADDED, MODIFIED
  // (old = the state before), DELETED, or DELETED + ADDED when the UID
  // changed. BOOKMARKs and SYNCs of unchanged objects are dropped. Resume
  // tokens: every event of the coalesced run names the position before the
  // run but the last, which names the position after it (see WatchHub).
  void CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t base_seq =
        marker_end_ > 0 ? pending_[marker_end_ - 1].seq : written_seq_;
    // Per key in order of first appearance. This runs when a stream is
    // behind, so it must stay cheap: keys are views into the objects' own
    // key strings (`keeper` holds one alive), never copies.
    struct KeyInfo {
      SharedPtr keeper;   // owns the key's bytes
      SharedPtr from;     // held before the run
      SharedPtr to;       // held after it
      SharedPtr deleted;  // the last DELETED's object
      bool tombstone = false;
    };
    std::vector<KeyInfo> keys;
    absl::flat_hash_map<absl::string_view, size_t> index;
    index.reserve(std::min(pending_.size(), hub_->options_.max_pending_keys));
    for (size_t i = marker_end_; i < pending_.size(); ++i) {
      const Pending& p = pending_[i];
      if (IsMarker(p)) continue;  // bookmark
      const SharedPtr& owner = p.ev != nullptr ? p.ev->obj() : p.obj;
      auto [it, inserted] = index.try_emplace(owner->key(), keys.size());
      if (inserted) {
        keys.emplace_back();
        keys.back().keeper = owner;
        keys.back().from = HeldBefore(p);
      }
      KeyInfo& k = keys[it->second];
      k.to = HeldAfter(p);
      if (p.ev != nullptr) {
        if (p.ev->deleted()) {
          k.deleted = p.ev->obj();
          k.tombstone = p.ev->tombstone();
        } else if (p.ev->replaced()) {
          k.deleted = p.ev->prev();
          k.tombstone = false;
        }
      } else if (p.type == v1::EVENT_TYPE_DELETED) {
        k.deleted = p.obj;
        k.tombstone = p.tombstone;
      }
    }
    index.clear();  // its views point into keepers, released below
    const size_t before = pending_.size();
    const size_t distinct = keys.size();
    overflowed_ = true;
    pending_.resize(marker_end_);
    for (const KeyInfo& k : keys) {
      const SharedPtr& from = k.from;
      const SharedPtr& to = k.to;
      if (Same(from, to)) continue;
      if (to == nullptr) {
        Pending p = MakeEvent(v1::EVENT_TYPE_DELETED,
                              k.deleted != nullptr ? k.deleted : from, from, 0);
        p.tombstone = k.tombstone;
        pending_.push_back(std::move(p));
      } else if (from == nullptr) {
        pending_.push_back(MakeEvent(v1::EVENT_TYPE_ADDED, to, nullptr, 0));
      } else if (!SameUid(from, to)) {
        Pending del =
            MakeEvent(v1::EVENT_TYPE_DELETED,
                      k.deleted != nullptr ? k.deleted : from, from, 0);
        del.tombstone = k.tombstone;
        pending_.push_back(std::move(del));
        pending_.push_back(MakeEvent(v1::EVENT_TYPE_ADDED, to, nullptr, 0));
      } else {
        pending_.push_back(MakeEvent(v1::EVENT_TYPE_MODIFIED, to, from, 0));
      }
    }
    for (size_t i = marker_end_; i < pending_.size(); ++i) {
      pending_[i].seq = i + 1 == pending_.size() ? applied_seq_ : base_seq;
    }
    VLOG(1) << "watch stream on " << entry_->config.resource << ": coalesced "
            << before << " pending events to " << pending_.size();
    hub_->NoteCoalesced(before > pending_.size() ? before - pending_.size()
                                                 : 0);
    if (distinct > hub_->options_.max_pending_keys) {
      hub_->NoteExhausted();
      EndLocked(absl::ResourceExhaustedError(absl::StrCat(
          "this stream fell too far behind (", distinct,
          " objects pending, the cap is ", hub_->options_.max_pending_keys,
          "); reconnect with the resume_token of the last event processed")));
      return;
    }
    // Amortised: the next compaction waits until the queue has doubled.
    compact_at_ = std::max(hub_->options_.max_queue, pending_.size() * 2);
  }

  // Writes everything queued if no write is in flight. With a batching
  // window, a stream that wrote less than a window ago waits for the hub's
  // flusher (`force` is the flusher's call) instead, gathering events.
  void MaybeWriteLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || writing_ || pending_.empty() || hub_->paused_.load()) {
      return;
    }
    const absl::Duration window = hub_->options_.batch_window;
    if (!force && window > absl::ZeroDuration()) {
      const absl::Time now = hub_->clock_->Now();
      if (now < last_write_ + window && hub_->Batching(now)) {
        if (!deferred_) {
          deferred_ = true;
          hub_->Defer(this, last_write_ + window);
        }
        return;
      }
    }
    // A stream that overflowed since its last write sends its queue fully
    // coalesced: the amortised compaction in Apply may have left an
    // uncoalesced tail.
    if (overflowed_ || pending_.size() >= hub_->options_.max_queue) {
      CompactLocked();
      if (ended_) return;
      if (pending_.empty()) {
        overflowed_ = false;
        return;
      }
    }
    overflowed_ = false;
    WatchResponseBuilder& builder = builder_;
    std::array<uint64_t, 8> by_type{};
    // Events this stream made share their position's token (an initial
    // state's events all name one position): encoded once per position.
    std::string token;
    uint64_t token_seq = 0;
    bool have_token = false;
    for (const Pending& p : pending_) {
      if (p.ev != nullptr) {
        absl::StatusOr<const EncodedEvents*> enc =
            p.ev->Encoded(encoding_, send_old_);
        if (!enc.ok()) {
          EndLocked(enc.status());
          return;
        }
        builder.AddEncoded((*enc)->slices, (*enc)->events);
        p.ev->CountTypes(&by_type);
        continue;
      }
      if (!have_token || token_seq != p.seq) {
        token = absl::WebSafeBase64Escape(absl::StrCat(token_prefix_, p.seq));
        token_seq = p.seq;
        have_token = true;
      }
      const size_t t = static_cast<size_t>(p.type);
      if (t < by_type.size()) ++by_type[t];
      WatchResponseBuilder::Event e;
      e.type = p.type;
      e.resume_token = token;
      e.initial = p.initial;
      e.tombstone = p.tombstone;
      if (p.obj == nullptr) {
        e.resource_version = p.rv;
        builder.Add(e);
        continue;
      }
      e.resource_version = p.obj->object().resource_version();
      absl::StatusOr<const grpc::Slice*> obj = p.obj->Encoded(encoding_);
      if (!obj.ok()) {
        EndLocked(obj.status());
        return;
      }
      e.object = *obj;
      if (send_old_ && p.old != nullptr && p.type == v1::EVENT_TYPE_MODIFIED) {
        absl::StatusOr<const grpc::Slice*> old = p.old->Encoded(encoding_);
        if (!old.ok()) {
          EndLocked(old.status());
          return;
        }
        e.old_object = *old;
      }
      builder.Add(e);
    }
    written_seq_ = pending_.back().seq;
    hub_->NoteWritten(by_type);
    response_ = builder.Finish();
    pending_.clear();
    // An initial state or a burst may have grown the queue far beyond what
    // steady traffic needs (a few dozen events per write): give that memory
    // back, so thousands of idle streams do not each keep a large buffer.
    if (pending_.capacity() > kKeepPending) {
      std::vector<Pending>().swap(pending_);
    }
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
  // Shared: the fan-out (and through it the entry) outlives the stream.
  const std::shared_ptr<WatchFanout> fanout_;
  InformerEntry* const entry_;
  const Filter filter_;
  const bool unfiltered_;
  const v1::Encoding encoding_;
  const bool send_old_;
  const absl::Duration resync_period_;
  const Start start_;
  std::atomic<int> refs_{1};

  absl::Mutex mu_;
  std::string token_prefix_ ABSL_GUARDED_BY(mu_);
  // Appended to and cleared as a whole, so a vector: its capacity is
  // reused from write to write (no allocation per queued event).
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Reused by every write for the same reason.
  WatchResponseBuilder builder_ ABSL_GUARDED_BY(mu_);
  // pending_[0, marker_end_) is the initial state (with its markers).
  size_t marker_end_ ABSL_GUARDED_BY(mu_) = 0;
  size_t compact_at_ ABSL_GUARDED_BY(mu_) = 0;
  // The sequence number of the last event applied / written.
  uint64_t applied_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_seq_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The queue was coalesced since the last write.
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  // Waiting in the hub's flush set (batching window).
  bool deferred_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

// The one non-blocking handler of an informer: keeps the state it last
// dispatched per key and the recent history, and hands each event to every
// open stream of the resource. Runs inline on the informer's distribution
// thread; takes only short locks.
class WatchFanout final : public informer::ResourceEventHandler {
 public:
  WatchFanout(WatchHub* hub, std::shared_ptr<InformerEntry> entry,
              uint64_t epoch)
      : hub_(hub),
        entry_holder_(std::move(entry)),
        entry_(entry_holder_.get()),
        token_prefix_(TokenPrefix(hub->run_id_, epoch)),
        epoch_(epoch) {}

  ~WatchFanout() override {
    if (waiter_.joinable()) waiter_.join();
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
  uint64_t epoch() const { return epoch_; }

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

  // Attaches `stream` now if the informer has synced, else once it has.
  void Open(WatchStreamReactor* stream) {
    // Read before taking mu_: the informer holds its own lock while it
    // calls Dispatch, so asking it anything under mu_ could deadlock. The
    // markers' resourceVersion is thus a lower bound of the snapshot's.
    const std::string rv = entry_->informer->LastSyncResourceVersion();
    const bool synced = entry_->informer->HasSynced();
    // A stream that waits is told of the informer's sync failures from
    // now on only (see WaitForSyncThenAttach).
    const int64_t errors =
        synced ? 0 : entry_->informer->GetReflectorCounters().errors;
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
      AttachLocked(stream, rv);
      return;
    }
    waiting_.emplace(stream, errors);
    hub_->NoteWaiting(1);
    if (!waiter_started_) {
      waiter_started_ = true;
      waiter_ = std::thread([this] { WaitForSyncThenAttach(); });
    }
  }

  void Detach(WatchStreamReactor* stream) {
    absl::MutexLock lock(&mu_);
    if (streams_.erase(stream) > 0) {
      entry_->streams.fetch_sub(1);
      hub_->NoteStreams(-1);
    }
    if (waiting_.erase(stream) > 0) {
      entry_->streams.fetch_sub(1);
      hub_->NoteWaiting(-1);
    }
  }

  // Bookmarks and resyncs; returns the earliest resync due.
  absl::Time Tick(absl::Time now) {
    const std::string rv = entry_->informer->LastSyncResourceVersion();
    absl::MutexLock lock(&mu_);
    absl::Time next = absl::InfiniteFuture();
    for (WatchStreamReactor* s : streams_) {
      if (s->ResyncDue(now)) s->PushSyncs(now, HeldLocked(*s), seq_);
      next = std::min(next, s->Tick(now, seq_, rv));
    }
    return next;
  }

  void KickAll() {
    absl::MutexLock lock(&mu_);
    for (WatchStreamReactor* s : streams_) s->Kick();
  }

  // The longest queue of this resource's streams right now (metrics).
  size_t MaxPending() {
    absl::MutexLock lock(&mu_);
    size_t max = 0;
    for (WatchStreamReactor* s : streams_) {
      max = std::max(max, s->pending_size());
    }
    return max;
  }

  void Shutdown() {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (WatchStreamReactor* s : streams_) {
      s->End(absl::UnavailableError(kShuttingDownMessage));
    }
    for (const auto& [s, errors] : waiting_) {
      s->End(absl::UnavailableError(kShuttingDownMessage));
    }
  }

 private:
  void Dispatch(const informer::ObjectPtr& obj, bool deleted, bool tombstone) {
    auto shared = std::make_shared<const SharedObject>(obj);
    {
      absl::MutexLock lock(&mu_);
      auto it = state_.find(shared->key());
      SharedPtr prev = it == state_.end() ? nullptr : it->second;
      // Unchanged (the informer's resync, a relist that found the object
      // as it was): not news for any stream.
      const bool unchanged = !deleted && Same(prev, shared);
      if (!unchanged) {
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
            absl::WebSafeBase64Escape(absl::StrCat(token_prefix_, seq)));
        for (WatchStreamReactor* s : streams_) s->Apply(ev);
        if (hub_->options_.history_size > 0) {
          history_.push_back(std::move(ev));
          while (history_.size() > hub_->options_.history_size) {
            history_.pop_front();
          }
        }
      }
    }
    hub_->NoteEvent();
  }

  // The objects `stream` holds now (the state through its filter), in key
  // order.
  std::vector<SharedPtr> HeldLocked(const WatchStreamReactor& stream) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  // True if every event after `seq` is still in the history.
  bool CoversLocked(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (seq > seq_) return false;
    if (seq == seq_) return true;
    return !history_.empty() && history_.front()->seq() <= seq + 1;
  }

  // Queues the stream's start (a resume, or RESET? + initial state) and
  // adds it to the fan-out. Under mu_ no event can slip between the state
  // read here and the live events the stream gets afterwards.
  void AttachLocked(WatchStreamReactor* stream, const std::string& rv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    streams_.insert(stream);
    hub_->NoteStreams(1);
    const WatchStreamReactor::Start& start = stream->start();
    bool reset = start.reset;
    if (start.resume) {
      if (CoversLocked(start.seq)) {
        // The client holds its view at `seq`; the events after it,
        // replayed through the stream's filter, bring it to now (with the
        // exact enter/leave events, as the stream decides those from each
        // event's before and after states).
        stream->ResumeLocked(token_prefix_, start.seq);
        for (const EventPtr& ev : history_) {
          if (ev->seq() > start.seq) stream->Apply(ev);
        }
        return;
      }
      VLOG(1) << "watch on " << entry_->config.resource << ": token at "
              << start.seq << " is outside the history (now " << seq_
              << "): RESET";
      reset = true;
    }
    stream->StartLocked(token_prefix_, HeldLocked(*stream), reset, seq_, rv);
  }

  void WaitForSyncThenAttach() {
    // The bounded waits (on the informer's clock) let this thread notice
    // the hub stopping and the API server refusing the informer.
    while (!entry_->informer->WaitForSync(absl::Seconds(1))) {
      if (hub_->Stopping()) return;
      // Never a silently hung Watch: when the API server refuses the
      // informer for good (RBAC, credentials, a resource gone), the streams
      // that saw it fail since they began waiting end with the reason; they
      // may come back later, while the informer keeps retrying. A stream
      // that began waiting after the failure waits for the next attempt,
      // which may succeed (someone fixed RBAC) or tell it a fresh reason.
      const absl::Status refused = PersistentSyncError(*entry_);
      if (!refused.ok()) {
        const int64_t errors = entry_->informer->GetReflectorCounters().errors;
        absl::MutexLock lock(&mu_);
        for (const auto& [s, errors_at_open] : waiting_) {
          if (errors <= errors_at_open) continue;
          s->End(absl::UnavailableError(absl::StrCat(
              "the informer of \"", entry_->config.resource,
              "\" cannot sync: ", refused.message(),
              "; the sidecar keeps retrying, retry the Watch later")));
        }
      }
      // A stopped informer never syncs, and WaitForSync returns at once:
      // pace the loop until the hub stops too.
      if (entry_->informer->IsStopped() &&
          hub_->SleepUnlessStopping(absl::Milliseconds(100))) {
        return;
      }
    }
    const std::string rv = entry_->informer->LastSyncResourceVersion();
    absl::MutexLock lock(&mu_);
    for (const auto& [s, errors] : waiting_) {
      hub_->NoteWaiting(-1);
      AttachLocked(s, rv);
    }
    waiting_.clear();
    waiter_done_ = true;
    hub_->WakeTicker();
  }

  WatchHub* const hub_;
  // Keeps the entry's memory (not its informer running) while the fan-out
  // exists.
  const std::shared_ptr<InformerEntry> entry_holder_;
  InformerEntry* const entry_;
  const std::string token_prefix_;
  const uint64_t epoch_;
  informer::HandlerRegistration* registration_ = nullptr;
  std::thread waiter_;

  absl::Mutex mu_;
  // Events that changed something so far; the tokens' sequence number.
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The state as dispatched, per key (consistent with seq_, unlike the
  // indexer, which may be one event ahead).
  absl::flat_hash_map<std::string, SharedPtr> state_ ABSL_GUARDED_BY(mu_);
  // The last history_size events (each with the state before it).
  std::deque<EventPtr> history_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<WatchStreamReactor*> streams_ ABSL_GUARDED_BY(mu_);
  // Streams opened before the informer synced, waiting for the sync, with
  // the informer's error count when each began waiting.
  absl::flat_hash_map<WatchStreamReactor*, int64_t> waiting_
      ABSL_GUARDED_BY(mu_);
  bool waiter_started_ ABSL_GUARDED_BY(mu_) = false;
  // The waiter saw the sync and attached the streams waiting then.
  bool waiter_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

void WatchStreamReactor::OnDone() {
  hub_->Undefer(this);
  fanout_->Detach(this);
  Unref();
}

WatchHub::WatchHub(InformerRegistry* registry, WatchOptions options,
                   informer::Clock* clock, std::string run_id)
    : registry_(registry),
      options_(options),
      clock_(clock),
      run_id_(std::move(run_id)) {
  if (options_.batch_window > absl::ZeroDuration()) {
    flusher_ = std::thread([this] { FlushLoop(); });
  }
  // Fan-outs for the informers that exist now, so their history starts
  // with the informers; later ones are added on first use.
  for (const auto& entry : registry_->entries()) {
    absl::StatusOr<std::shared_ptr<WatchFanout>> fanout =
        FanoutFor(entry.get());
    if (!fanout.ok()) {
      LOG(ERROR) << "cannot serve Watch on " << entry->config.resource << ": "
                 << fanout.status();
    }
  }
  InformerRegistry::Observer observer;
  observer.on_retired = [this](InformerEntry* entry) { Retire(entry); };
  observer_id_ = registry_->AddObserver(std::move(observer));
}

WatchHub::~WatchHub() {
  registry_->RemoveObserver(observer_id_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  {
    absl::MutexLock lock(&flush_mu_);
    flush_stop_ = true;
  }
  if (flusher_.joinable()) flusher_.join();
  std::vector<std::shared_ptr<WatchFanout>> fanouts;
  {
    absl::MutexLock lock(&fanouts_mu_);
    fanouts.swap(fanouts_);
  }
  fanouts.clear();
}

absl::StatusOr<std::shared_ptr<WatchFanout>> WatchHub::FanoutFor(
    InformerEntry* entry) {
  absl::MutexLock lock(&fanouts_mu_);
  for (const auto& f : fanouts_) {
    if (f->entry() == entry) return f;
  }
  // The registry's own handle on the entry keeps its memory while the
  // fan-out lives (an InformerRef would keep a lazy informer busy forever).
  std::shared_ptr<InformerEntry> holder;
  for (auto& e : registry_->entries()) {
    if (e.get() == entry) holder = std::move(e);
  }
  if (holder == nullptr) {
    return absl::UnavailableError(absl::StrCat("the informer of \"",
                                               entry->config.resource,
                                               "\" is being stopped; retry"));
  }
  auto fanout =
      std::make_shared<WatchFanout>(this, std::move(holder), next_epoch_++);
  // Registering delivers the existing objects inline (a non-blocking
  // handler added late is caught up under the informer's lock); the
  // fan-out takes no hub lock while handling them.
  if (absl::Status st = fanout->Register(); !st.ok()) {
    return absl::InternalError(absl::StrCat("Watch is not available for \"",
                                            entry->config.resource,
                                            "\": ", st.message()));
  }
  fanouts_.push_back(fanout);
  return fanout;
}

std::vector<std::shared_ptr<WatchFanout>> WatchHub::Fanouts() const {
  absl::MutexLock lock(&fanouts_mu_);
  return fanouts_;
}

void WatchHub::Retire(InformerEntry* entry) {
  std::shared_ptr<WatchFanout> retired;
  {
    absl::MutexLock lock(&fanouts_mu_);
    for (auto it = fanouts_.begin(); it != fanouts_.end(); ++it) {
      if ((*it)->entry() == entry) {
        retired = std::move(*it);
        fanouts_.erase(it);
        break;
      }
    }
  }
  // Destroyed (its handler removed) here unless the ticker holds it for a
  // moment; its tokens now get RESET (a new fan-out has a new epoch).
  retired.reset();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Open(
    grpc::CallbackServerContext*, const v1::WatchRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return new ErrorReactor(absl::UnavailableError(kShuttingDownMessage));
    }
  }
  if (request.resource().empty()) {
    return new ErrorReactor(absl::InvalidArgumentError("resource is required"));
  }
  // The lease is held until the stream is counted on the entry (which
  // keeps a lazy informer running).
  absl::StatusOr<InformerRef> entry = registry_->Find(request.resource());
  if (!entry.ok()) return new ErrorReactor(entry.status());
  WatchStreamReactor::Filter filter;
  filter.namespace_ = request.namespace_();
  absl::StatusOr<LabelSelector> selector =
      LabelSelector::Parse(request.label_selector());
  if (!selector.ok()) {
    return new ErrorReactor(absl::InvalidArgumentError(
        absl::StrCat("label_selector: ", selector.status().message())));
  }
  filter.selector = *std::move(selector);
  if (!request.index_name().empty()) {
    informer::Indexers indexers =
        (*entry)->informer->GetIndexer().GetIndexers();
    auto it = indexers.find(request.index_name());
    if (it == indexers.end()) {
      std::vector<std::string> names;
      for (const auto& [name, fn] : indexers) names.push_back(name);
      std::sort(names.begin(), names.end());
      return new ErrorReactor(absl::InvalidArgumentError(
          absl::StrCat("index_name: resource \"", request.resource(),
                       "\" has no index \"", request.index_name(),
                       "\"; available: ", absl::StrJoin(names, ", "))));
    }
    filter.index_name = request.index_name();
    filter.index_value = request.index_value();
    filter.index_fn = it->second;
  }
  absl::StatusOr<absl::Duration> resync = ResyncPeriod(request);
  if (!resync.ok()) return new ErrorReactor(resync.status());
  if (absl::Status st = ValidateEncoding(request.encoding()); !st.ok()) {
    return new ErrorReactor(st);
  }
  absl::StatusOr<std::shared_ptr<WatchFanout>> fanout = FanoutFor(*entry);
  if (!fanout.ok()) return new ErrorReactor(fanout.status());

  WatchStreamReactor::Start start;
  if (!request.resume_token().empty()) {
    absl::StatusOr<ResumeToken> token =
        DecodeResumeToken(request.resume_token());
    if (!token.ok()) {
      VLOG(1) << "watch: malformed resume_token: RESET";
      start.reset = true;
    } else if (token->run_id != run_id_ || token->epoch != (*fanout)->epoch()) {
      VLOG(1) << "watch: resume_token of another run or resource: RESET";
      start.reset = true;
    } else {
      start.resume = true;
      start.seq = token->seq;
    }
  }
  auto* stream = new WatchStreamReactor(
      this, *fanout, entry->get(), std::move(filter), request.encoding(),
      request.send_old_object(), *resync, start);
  EnsureTicker();
  (*fanout)->Open(stream);
  if (*resync > absl::ZeroDuration()) WakeTicker();
  return stream;
}

void WatchHub::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  for (const auto& f : Fanouts()) f->Shutdown();
}

void WatchHub::EnsureTicker() {
  absl::MutexLock lock(&mu_);
  if (ticker_started_ || stopping_) return;
  ticker_started_ = true;
  ticker_ = std::thread([this] { TickLoop(); });
}

void WatchHub::Defer(WatchStreamReactor* stream, absl::Time due) {
  absl::MutexLock lock(&flush_mu_);
  deferred_.insert(stream);
  flush_due_ = std::min(flush_due_, due);
}

void WatchHub::Undefer(WatchStreamReactor* stream) {
  absl::MutexLock lock(&flush_mu_);
  deferred_.erase(stream);
}

void WatchHub::FlushLoop() {
  std::vector<WatchStreamReactor*> due_streams;
  while (true) {
    {
      absl::MutexLock lock(&flush_mu_);
      while (true) {
        if (flush_stop_) return;
        const absl::Time due = flush_due_;
        if (due != absl::InfiniteFuture() && clock_->Now() >= due) break;
        // Wakes for an earlier request, at the due time, or to stop.
        auto changed = [this, due]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_) {
          return flush_stop_ || flush_due_ < due;
        };
        clock_->AwaitWithDeadline(&flush_mu_, absl::Condition(&changed), due);
      }
      flush_due_ = absl::InfiniteFuture();
      // Every waiting stream goes now, also those whose window ends a
      // little later: busy streams then share one cadence, so the flusher
      // wakes once per window rather than once per stream.
      due_streams.assign(deferred_.begin(), deferred_.end());
      deferred_.clear();
      // OnDone takes a stream out of deferred_ under flush_mu_ before
      // dropping gRPC's reference, so these are alive here.
      for (WatchStreamReactor* s : due_streams) s->Ref();
    }
    for (WatchStreamReactor* s : due_streams) {
      s->Flush();
      s->Unref();
    }
    due_streams.clear();
  }
}

void WatchHub::WakeTicker() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void WatchHub::TickLoop() {
  // Ticks at half the bookmark interval, so a quiet stream gets its
  // bookmark between one and one and a half intervals after its last write,
  // and at every stream's resync deadline.
  const absl::Duration period = options_.bookmark_interval / 2;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline =
          std::min(clock_->Now() + period, next_resync_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || wake_;
      };
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&woken), deadline);
      if (stopping_) return;
      wake_ = false;
    }
    const absl::Time now = clock_->Now();
    absl::Time next = absl::InfiniteFuture();
    for (const auto& f : Fanouts()) next = std::min(next, f->Tick(now));
    absl::MutexLock lock(&mu_);
    next_resync_ = next;
  }
}

bool WatchHub::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool WatchHub::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  clock_->AwaitWithTimeout(&mu_, absl::Condition(&stopping_), d);
  return stopping_;
}

void WatchHub::SetWritesPaused(bool paused) {
  paused_.store(paused);
  if (paused) return;
  for (const auto& f : Fanouts()) f->KickAll();
}

void WatchHub::NoteEvent() {
  absl::MutexLock lock(&mu_);
  ++events_;
}

void WatchHub::NoteWritten(const std::array<uint64_t, 8>& by_type) {
  for (size_t i = 0; i < by_type.size(); ++i) {
    if (by_type[i] != 0) {
      events_out_[i].fetch_add(by_type[i], std::memory_order_relaxed);
    }
  }
}

void WatchHub::NoteCoalesced(uint64_t n) {
  coalesced_.fetch_add(n, std::memory_order_relaxed);
}

void WatchHub::NoteExhausted() {
  exhausted_.fetch_add(1, std::memory_order_relaxed);
}

WatchHub::Counters WatchHub::GetCounters() const {
  Counters c;
  for (size_t i = 0; i < c.events_out.size(); ++i) {
    c.events_out[i] = events_out_[i].load(std::memory_order_relaxed);
  }
  c.coalesced = coalesced_.load(std::memory_order_relaxed);
  c.streams_exhausted = exhausted_.load(std::memory_order_relaxed);
  return c;
}

bool WatchHub::Batching(absl::Time now) {
  if (options_.batch_window <= absl::ZeroDuration()) return false;
  if (options_.batch_min_rate <= 0) return true;
  // One caller per 100 ms period (the one that wins the exchange) turns
  // the count of queued events into a rate; the others read the verdict.
  constexpr int64_t kPeriodNs = 100 * 1000 * 1000;
  const int64_t t = absl::ToUnixNanos(now);
  int64_t since = rate_since_ns_.load(std::memory_order_relaxed);
  if (t - since >= kPeriodNs && rate_since_ns_.compare_exchange_strong(
                                    since, t, std::memory_order_relaxed)) {
    const uint64_t count = queued_.load(std::memory_order_relaxed);
    const uint64_t base = rate_base_.exchange(count, std::memory_order_relaxed);
    const double rate = static_cast<double>(count - base) * 1e9 /
                        static_cast<double>(t - since);
    busy_.store(rate >= options_.batch_min_rate, std::memory_order_relaxed);
  }
  return busy_.load(std::memory_order_relaxed);
}

void WatchHub::NotePending(size_t n) {
  queued_.fetch_add(1, std::memory_order_relaxed);
  // Called for every queued event: a relaxed read first, so the common
  // case (no new peak) writes nothing shared.
  size_t peak = peak_pending_.load(std::memory_order_relaxed);
  while (n > peak && !peak_pending_.compare_exchange_weak(
                         peak, n, std::memory_order_relaxed)) {
  }
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

void WatchHub::NoteWaiting(int delta) {
  absl::MutexLock lock(&mu_);
  waiting_streams_ += delta;
}

void WatchHub::WaitForOpenStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return open_streams_ == n;
  };
  mu_.Await(absl::Condition(&reached));
}

void WatchHub::WaitForWaitingStreams(int n) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting_streams_ == n;
  };
  mu_.Await(absl::Condition(&reached));
}

uint64_t WatchHub::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

size_t WatchHub::MaxPendingNow() const {
  size_t max = 0;
  for (const auto& f : Fanouts()) max = std::max(max, f->MaxPending());
  return max;
}

size_t WatchHub::peak_pending() const {
  return peak_pending_.load(std::memory_order_relaxed);
}

}  // namespace server

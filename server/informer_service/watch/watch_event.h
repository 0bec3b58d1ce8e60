#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_EVENT_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_EVENT_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.pb.h"

namespace server {

// Counts by event type, indexed by informer::v1::EventType value: a slot
// for every value, so a type added to the proto is counted too.
using EventTypeCounts = std::array<uint64_t, informer::v1::EventType_ARRAYSIZE>;

// One state of an object, shared by every Watch stream it goes to: its key
// computed once, serialized at most once per encoding, whatever the number
// of streams.
//
// Immutable except the encoding caches (call_once): thread-safe.
class SharedObject {
 public:
  explicit SharedObject(informer::ObjectPtr obj) : obj_(std::move(obj)) {}
  const informer::Object& object() const { return *obj_; }
  const informer::ObjectPtr& ptr() const { return obj_; }
  const std::string& key() const { return obj_->Key(); }

  // The serialized informer.v1.Object in `encoding`.
  absl::StatusOr<const grpc::Slice*> Encoded(
      informer::v1::Encoding encoding) const;
  // True once Encoded(encoding) has bytes (or an error) cached.
  bool HasEncoded(informer::v1::Encoding encoding) const {
    return done_[Index(encoding)].load(std::memory_order_acquire);
  }
  // Makes `bytes` (the serialized informer.v1.Object in `encoding`, e.g. a
  // part of an event's encoding that holds it) this object's encoding,
  // unless it has one already; returns whether it did.
  bool Adopt(informer::v1::Encoding encoding, grpc::Slice bytes) const;

 private:
  static int Index(informer::v1::Encoding encoding) {
    return encoding == informer::v1::ENCODING_STRUCT ? 1 : 0;
  }

  const informer::ObjectPtr obj_;
  // [0] JSON, [1] Struct; each written once under its once_flag.
  mutable absl::once_flag once_[2];
  mutable grpc::Slice slice_[2];
  mutable absl::Status status_[2];
  mutable std::atomic<bool> done_[2] = {false, false};
};
using SharedPtr = std::shared_ptr<const SharedObject>;

// `obj` with its metadata.resourceVersion replaced by `rv` (JSON text and
// parsed fields alike); `obj` itself if it has no metadata.resourceVersion
// or its JSON cannot be re-read.
informer::ObjectPtr WithResourceVersion(const informer::ObjectPtr& obj,
                                        absl::string_view rv);

// Both null, or the same object (UID) at the same resourceVersion.
bool Same(const SharedPtr& a, const SharedPtr& b);
// The same object (UID); both non-null.
bool SameUid(const SharedPtr& a, const SharedPtr& b);

// A fan-out's pre-encoded `WatchResponse.events` fields of one event.
struct EncodedEvents {
  std::vector<grpc::Slice> slices;
  int events = 0;
  size_t bytes = 0;
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
// An event that reads as one event as is (ADDED, MODIFIED without
// old_object, DELETED) is encoded into ONE slice, the object's bytes
// serialized in place, and the object adopts that part of it as its own
// encoding when it has none yet: each stream's message then references one
// slice per event, and the bytes exist once.
//
// Immutable after construction except the encoding caches (call_once):
// thread-safe.
class FanoutEvent {
 public:
  FanoutEvent(uint64_t seq, SharedPtr obj, SharedPtr prev, bool deleted,
              bool tombstone, std::string token)
      : seq_(seq),
        obj_(std::move(obj)),
        prev_(std::move(prev)),
        deleted_(deleted),
        tombstone_(tombstone),
        token_(std::move(token)),
        kind_(KindOf(obj_, prev_, deleted_)) {}

  uint64_t seq() const { return seq_; }
  const SharedPtr& obj() const { return obj_; }
  const SharedPtr& prev() const { return prev_; }
  bool deleted() const { return deleted_; }
  bool tombstone() const { return tombstone_; }
  const std::string& token() const { return token_; }
  const std::string& key() const { return obj_->key(); }
  // Same name, another object: DELETED prev + ADDED obj.
  bool replaced() const { return kind_ == Kind::kReplaced; }
  bool modified() const { return kind_ == Kind::kModified; }

  // The event as is, encoded; `with_old` adds old_object to a MODIFIED.
  absl::StatusOr<const EncodedEvents*> Encoded(informer::v1::Encoding encoding,
                                               bool with_old) const;

  // What a stream whose filter the object leaves with this event (held
  // before, not after, same UID) sends as DELETED: the previous state (the
  // last one that matched) stamped with this event's resourceVersion, as
  // the API server's filtered watch (cacheWatcher) does. Built once, on
  // first use.
  const SharedPtr& LeaveObject() const;

  // Counts the event's types as is into `by_type`.
  void CountTypes(EventTypeCounts* by_type) const;

 private:
  // What the event reads as, as is (decided once: streams ask per write).
  enum class Kind { kAdded, kModified, kDeleted, kReplaced };
  static Kind KindOf(const SharedPtr& obj, const SharedPtr& prev, bool deleted);

  absl::Status Encode(informer::v1::Encoding encoding, bool with_old,
                      EncodedEvents* out) const;
  // The one-event kinds as one contiguous slice; false (nothing done) if
  // the object already has its bytes (they are referenced instead) or
  // cannot be encoded (Encode's general path reports the error).
  bool EncodeContiguous(informer::v1::Encoding encoding,
                        EncodedEvents* out) const;

  const uint64_t seq_;
  const SharedPtr obj_;
  const SharedPtr prev_;
  const bool deleted_;
  const bool tombstone_;
  const std::string token_;
  const Kind kind_;
  // [encoding: 0 JSON, 2 Struct] + [1: MODIFIED with old_object].
  mutable absl::once_flag once_[4];
  mutable EncodedEvents encoded_[4];
  mutable absl::Status status_[4];
  mutable absl::once_flag leave_once_;
  mutable SharedPtr leave_;
};
using EventPtr = std::shared_ptr<const FanoutEvent>;

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_EVENT_H_

#include "server/watch/watch_event.h"

#include <utility>

#include "server/rpc/grpc_conversions.h"
#include "server/watch/watch_response_builder.h"

namespace server {

namespace v1 = ::informer::v1;

absl::StatusOr<const grpc::Slice*> SharedObject::Encoded(
    v1::Encoding encoding) const {
  const int i = encoding == v1::ENCODING_STRUCT ? 1 : 0;
  absl::call_once(once_[i], [this, i, encoding] {
    v1::Object msg;
    status_[i] = EncodeObject(*obj_, encoding, &msg);
    if (status_[i].ok()) slice_[i] = SerializeToSlice(msg);
  });
  if (!status_[i].ok()) return status_[i];
  return &slice_[i];
}

bool Same(const SharedPtr& a, const SharedPtr& b) {
  if (a == nullptr || b == nullptr) return a == b;
  if (a == b) return true;
  return a->object().uid() == b->object().uid() &&
         a->object().resource_version() == b->object().resource_version();
}

bool SameUid(const SharedPtr& a, const SharedPtr& b) {
  return a->object().uid() == b->object().uid();
}

absl::StatusOr<const EncodedEvents*> FanoutEvent::Encoded(
    v1::Encoding encoding, bool with_old) const {
  with_old = with_old && modified();
  const int i = (encoding == v1::ENCODING_STRUCT ? 2 : 0) + (with_old ? 1 : 0);
  absl::call_once(once_[i], [this, i, encoding, with_old] {
    status_[i] = Encode(encoding, with_old, &encoded_[i]);
  });
  if (!status_[i].ok()) return status_[i];
  return &encoded_[i];
}

void FanoutEvent::CountTypes(std::array<uint64_t, 8>* by_type) const {
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

absl::Status FanoutEvent::Encode(v1::Encoding encoding, bool with_old,
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
    st = add(v1::EVENT_TYPE_MODIFIED, obj_, with_old ? prev_ : nullptr, false);
  } else {
    st = add(v1::EVENT_TYPE_DELETED, prev_, nullptr, false);
    if (st.ok()) st = add(v1::EVENT_TYPE_ADDED, obj_, nullptr, false);
  }
  if (!st.ok()) return st;
  out->events = builder.events();
  out->bytes = builder.bytes();
  out->slices = builder.TakeSlices();
  return absl::OkStatus();
}

}  // namespace server

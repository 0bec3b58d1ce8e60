#include "server/informer_service/watch/watch_event.h"

#include <utility>

#include "server/informer_service/watch/watch_response_builder.h"
#include "server/rpc/grpc_conversions.h"

namespace server {

namespace v1 = ::informer::v1;

absl::StatusOr<const grpc::Slice*> SharedObject::Encoded(
    v1::Encoding encoding) const {
  const int i = Index(encoding);
  absl::call_once(once_[i], [this, i, encoding] {
    v1::Object msg;
    status_[i] = EncodeObject(*obj_, encoding, &msg);
    if (status_[i].ok()) slice_[i] = SerializeToSlice(msg);
    done_[i].store(true, std::memory_order_release);
  });
  if (!status_[i].ok()) return status_[i];
  return &slice_[i];
}

bool SharedObject::Adopt(v1::Encoding encoding, grpc::Slice bytes) const {
  const int i = Index(encoding);
  bool adopted = false;
  absl::call_once(once_[i], [this, i, &bytes, &adopted] {
    slice_[i] = std::move(bytes);
    done_[i].store(true, std::memory_order_release);
    adopted = true;
  });
  return adopted;
}

namespace {

// A scanner over valid JSON (the cache holds objects the decoder
// accepted): just enough to find one member's value.
const char* SkipSpace(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  return p;
}

const char* SkipString(const char* p, const char* end) {
  for (++p; p < end; ++p) {
    if (*p == '\\') {
      ++p;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return end;
}

const char* SkipJsonValue(const char* p, const char* end) {
  if (p >= end) return end;
  if (*p == '"') return SkipString(p, end);
  if (*p != '{' && *p != '[') {
    while (p < end && *p != ',' && *p != '}' && *p != ']') ++p;
    return p;
  }
  int depth = 0;
  while (p < end) {
    if (*p == '"') {
      p = SkipString(p, end);
      continue;
    }
    if (*p == '{' || *p == '[') {
      ++depth;
    } else if (*p == '}' || *p == ']') {
      if (--depth == 0) return p + 1;
    }
    ++p;
  }
  return end;
}

// The value of member `key` of the JSON object `obj`; empty if absent.
absl::string_view MemberValue(absl::string_view obj, absl::string_view key) {
  const char* end = obj.data() + obj.size();
  const char* p = SkipSpace(obj.data(), end);
  if (p >= end || *p != '{') return {};
  ++p;
  while (true) {
    p = SkipSpace(p, end);
    if (p >= end || *p != '"') return {};
    const char* name_end = SkipString(p, end);
    const absl::string_view name(p + 1, name_end - p - 2);
    p = SkipSpace(name_end, end);
    if (p >= end || *p != ':') return {};
    const char* value = SkipSpace(p + 1, end);
    p = SkipJsonValue(value, end);
    if (name == key) return absl::string_view(value, p - value);
    p = SkipSpace(p, end);
    if (p >= end || *p != ',') return {};
    ++p;
  }
}

}  // namespace

informer::ObjectPtr WithResourceVersion(const informer::ObjectPtr& obj,
                                        absl::string_view rv) {
  const informer::JsonText text = obj->json();
  const absl::string_view json = text.view();
  const absl::string_view metadata = MemberValue(json, "metadata");
  const absl::string_view old_rv = MemberValue(metadata, "resourceVersion");
  if (old_rv.size() < 2 || old_rv.front() != '"') return obj;
  std::string stamped;
  stamped.reserve(json.size() + rv.size());
  stamped.append(json.data(), old_rv.data() + 1 - json.data());
  stamped.append(rv.data(), rv.size());
  stamped.append(
      old_rv.data() + old_rv.size() - 1,
      json.data() + json.size() - (old_rv.data() + old_rv.size() - 1));
  // The JSON is already transformed: re-read it as is.
  informer::TransformOptions as_is;
  as_is.drop_managed_fields = false;
  absl::StatusOr<informer::ObjectPtr> parsed =
      informer::Object::Parse(stamped, as_is);
  return parsed.ok() ? *std::move(parsed) : obj;
}

const SharedPtr& FanoutEvent::LeaveObject() const {
  absl::call_once(leave_once_, [this] {
    leave_ = std::make_shared<const SharedObject>(
        WithResourceVersion(prev_->ptr(), obj_->object().resource_version()));
  });
  return leave_;
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

absl::StatusOr<const EncodedEvents*> FanoutEvent::Encoded(v1::Encoding encoding,
                                                          bool with_old) const {
  with_old = with_old && modified();
  const int i = (encoding == v1::ENCODING_STRUCT ? 2 : 0) + (with_old ? 1 : 0);
  absl::call_once(once_[i], [this, i, encoding, with_old] {
    status_[i] = Encode(encoding, with_old, &encoded_[i]);
  });
  if (!status_[i].ok()) return status_[i];
  return &encoded_[i];
}

FanoutEvent::Kind FanoutEvent::KindOf(const SharedPtr& obj,
                                      const SharedPtr& prev, bool deleted) {
  if (deleted) return Kind::kDeleted;
  if (prev == nullptr) return Kind::kAdded;
  return SameUid(prev, obj) ? Kind::kModified : Kind::kReplaced;
}

void FanoutEvent::CountTypes(EventTypeCounts* by_type) const {
  switch (kind_) {
    case Kind::kDeleted:
      ++(*by_type)[v1::EVENT_TYPE_DELETED];
      break;
    case Kind::kAdded:
      ++(*by_type)[v1::EVENT_TYPE_ADDED];
      break;
    case Kind::kModified:
      ++(*by_type)[v1::EVENT_TYPE_MODIFIED];
      break;
    case Kind::kReplaced:
      ++(*by_type)[v1::EVENT_TYPE_DELETED];
      ++(*by_type)[v1::EVENT_TYPE_ADDED];
      break;
  }
}

bool FanoutEvent::EncodeContiguous(v1::Encoding encoding,
                                   EncodedEvents* out) const {
  // An object encoded already (a stream's initial state, an enter event)
  // keeps its bytes; the event references them rather than copy them.
  if (obj_->HasEncoded(encoding)) return false;
  v1::Object msg;
  if (!EncodeObject(obj_->object(), encoding, &msg).ok()) return false;
  WatchResponseBuilder::Event e;
  e.type = kind_ == Kind::kDeleted ? v1::EVENT_TYPE_DELETED
           : kind_ == Kind::kAdded ? v1::EVENT_TYPE_ADDED
                                   : v1::EVENT_TYPE_MODIFIED;
  e.resource_version = obj_->object().resource_version();
  e.resume_token = token_;
  e.tombstone = kind_ == Kind::kDeleted && tombstone_;
  size_t begin = 0;
  grpc::Slice whole = WatchResponseBuilder::EncodeWithObject(e, msg, &begin);
  // If another thread encoded the object meanwhile, its bytes exist twice
  // (here and there) for as long as both live: correct, and rare.
  obj_->Adopt(encoding, whole.sub(begin, begin + msg.GetCachedSize()));
  out->events = 1;
  out->bytes = whole.size();
  out->slices.clear();
  out->slices.push_back(std::move(whole));
  return true;
}

absl::Status FanoutEvent::Encode(v1::Encoding encoding, bool with_old,
                                 EncodedEvents* out) const {
  if (kind_ != Kind::kReplaced && !with_old &&
      EncodeContiguous(encoding, out)) {
    return absl::OkStatus();
  }
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

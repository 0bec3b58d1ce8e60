#include "server/informer_service/watch/watch_response_builder.h"

#include <cstring>
#include <type_traits>
#include <utility>

namespace server {

namespace v1 = ::informer::v1;

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

// The payload size of one Event message (Event: type=1, object=2,
// old_object=3, resource_version=4, resume_token=5, initial=6,
// tombstone=7, stale=8); `object_size` stands for e.object when that is null.
size_t EventPayloadSize(const WatchResponseBuilder::Event& e,
                        const size_t* object_size = nullptr) {
  size_t size = 0;
  if (e.type != v1::EVENT_TYPE_UNSPECIFIED) size += 1 + VarintSize(e.type);
  if (e.object != nullptr) size += FieldSize(e.object->size());
  if (object_size != nullptr) size += FieldSize(*object_size);
  if (e.old_object != nullptr) size += FieldSize(e.old_object->size());
  if (!e.resource_version.empty()) size += FieldSize(e.resource_version.size());
  if (!e.resume_token.empty()) size += FieldSize(e.resume_token.size());
  if (e.initial) size += 2;
  if (e.tombstone) size += 2;
  if (e.stale) size += 2;
  return size;
}

}  // namespace

grpc::Slice SerializeToSlice(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return slice;
}

size_t WatchResponseBuilder::EncodedSize(const Event& event) {
  return FieldSize(EventPayloadSize(event));  // WatchResponse.events = 1
}

void WatchResponseBuilder::Add(const Event& e) {
  const size_t size = EventPayloadSize(e);
  bytes_ += FieldSize(size);
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
    Borrow(*e.object);
  }
  if (e.old_object != nullptr) {
    small_.push_back(Tag(3, kLengthDelimited));
    PutVarint(e.old_object->size(), &small_);
    FlushSmall();
    Borrow(*e.old_object);
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
  if (e.stale) {
    small_.push_back(Tag(8, kVarint));
    small_.push_back(1);
  }
  ++events_;
}

void WatchResponseBuilder::Borrow(const grpc::Slice& slice) {
  // gRPC's ByteBuffer relies on the same equivalence (it static_asserts it)
  // to pass grpc::Slice arrays to the C core.
  static_assert(sizeof(grpc::Slice) == sizeof(grpc_slice),
                "grpc::Slice must be a grpc_slice");
  static_assert(std::is_trivially_copyable<grpc_slice>::value,
                "grpc_slice must be plain data");
  grpc_slice raw;
  std::memcpy(&raw, static_cast<const void*>(&slice), sizeof(raw));
  parts_.push_back(raw);
}

void WatchResponseBuilder::FlushSmall() {
  if (small_.empty()) return;
  owned_.emplace_back(small_.data(), small_.size());
  Borrow(owned_.back());
  small_.clear();
}

grpc::ByteBuffer WatchResponseBuilder::Finish() {
  FlushSmall();
  // The buffer takes its own reference to each part.
  grpc::ByteBuffer out(reinterpret_cast<const grpc::Slice*>(parts_.data()),
                       parts_.size());
  parts_.clear();
  owned_.clear();
  // Kept for reuse unless a large response (an initial state) grew them.
  if (parts_.capacity() > 1024) std::vector<grpc_slice>().swap(parts_);
  if (owned_.capacity() > 1024) std::vector<grpc::Slice>().swap(owned_);
  if (small_.capacity() > 4096) std::string().swap(small_);
  events_ = 0;
  bytes_ = 0;
  return out;
}

void WatchResponseBuilder::AddEncoded(const std::vector<grpc::Slice>& parts,
                                      int events) {
  FlushSmall();
  for (const grpc::Slice& s : parts) {
    Borrow(s);
    bytes_ += s.size();
  }
  events_ += events;
}

std::vector<grpc::Slice> WatchResponseBuilder::TakeSlices() {
  FlushSmall();
  std::vector<grpc::Slice> out;
  out.reserve(parts_.size());
  for (const grpc_slice& raw : parts_) {
    out.emplace_back(raw, grpc::Slice::ADD_REF);
  }
  parts_.clear();
  owned_.clear();
  events_ = 0;
  bytes_ = 0;
  return out;
}

grpc::Slice WatchResponseBuilder::EncodeWithObject(
    const Event& e, const google::protobuf::MessageLite& object,
    size_t* object_begin) {
  const size_t object_size = object.ByteSizeLong();
  const size_t payload = EventPayloadSize(e, &object_size);
  std::string head;
  head.push_back(Tag(1, kLengthDelimited));
  PutVarint(payload, &head);
  if (e.type != v1::EVENT_TYPE_UNSPECIFIED) {
    head.push_back(Tag(1, kVarint));
    PutVarint(e.type, &head);
  }
  head.push_back(Tag(2, kLengthDelimited));
  PutVarint(object_size, &head);
  std::string tail;
  PutString(4, e.resource_version, &tail);
  PutString(5, e.resume_token, &tail);
  if (e.initial) {
    tail.push_back(Tag(6, kVarint));
    tail.push_back(1);
  }
  if (e.tombstone) {
    tail.push_back(Tag(7, kVarint));
    tail.push_back(1);
  }
  grpc::Slice slice(head.size() + object_size + tail.size());
  uint8_t* p = const_cast<uint8_t*>(slice.begin());
  std::memcpy(p, head.data(), head.size());
  object.SerializeWithCachedSizesToArray(p + head.size());
  std::memcpy(p + head.size() + object_size, tail.data(), tail.size());
  *object_begin = head.size();
  return slice;
}

}  // namespace server

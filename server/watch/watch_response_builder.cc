#include "server/watch/watch_response_builder.h"

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
// tombstone=7).
size_t EventPayloadSize(const WatchResponseBuilder::Event& e) {
  size_t size = 0;
  if (e.type != v1::EVENT_TYPE_UNSPECIFIED) size += 1 + VarintSize(e.type);
  if (e.object != nullptr) size += FieldSize(e.object->size());
  if (e.old_object != nullptr) size += FieldSize(e.old_object->size());
  if (!e.resource_version.empty()) size += FieldSize(e.resource_version.size());
  if (!e.resume_token.empty()) size += FieldSize(e.resume_token.size());
  if (e.initial) size += 2;
  if (e.tombstone) size += 2;
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
  bytes_ = 0;
  return out;
}

void WatchResponseBuilder::AddEncoded(const std::vector<grpc::Slice>& parts,
                                      int events) {
  FlushSmall();
  slices_.insert(slices_.end(), parts.begin(), parts.end());
  for (const grpc::Slice& s : parts) bytes_ += s.size();
  events_ += events;
}

std::vector<grpc::Slice> WatchResponseBuilder::TakeSlices() {
  FlushSmall();
  std::vector<grpc::Slice> out;
  out.swap(slices_);
  events_ = 0;
  bytes_ = 0;
  return out;
}

}  // namespace server

#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_RESPONSE_BUILDER_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_RESPONSE_BUILDER_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "proto/informer/v1/informer.pb.h"

namespace server {

// Builds a serialized informer.v1.WatchResponse from events whose objects
// were serialized beforehand (as informer.v1.Object messages in refcounted
// grpc::Slices): the object bytes are shared, not copied, by every
// response that carries them; only the few per-stream fields (type,
// resourceVersion, token, flags, length prefixes) are encoded per stream.
// Fields are written in field-number order, so the bytes equal those of
// the equivalent WatchResponse's SerializeToString.
//
// Borrowing: Add and AddEncoded keep the caller's slices without taking a
// reference (the response takes one per slice in Finish, so a shared slice
// costs one reference count per stream, not three); they must stay alive
// and unchanged until Finish or TakeSlices.
//
// Not thread-safe; reusable after Finish.
class WatchResponseBuilder {
 public:
  struct Event {
    informer::v1::EventType type = informer::v1::EVENT_TYPE_UNSPECIFIED;
    // Serialized informer.v1.Object, or null.
    const grpc::Slice* object = nullptr;
    const grpc::Slice* old_object = nullptr;
    absl::string_view resource_version;
    absl::string_view resume_token;
    bool initial = false;
    bool tombstone = false;
    // Markers only (INITIAL_STATE_DONE); EncodeWithObject ignores it.
    bool stale = false;
  };

  // The bytes `event` adds to a response (its WatchResponse.events field,
  // tag and length prefix included).
  static size_t EncodedSize(const Event& event);

  // `event` (whose `object` and `old_object` must be null) with `object`
  // serialized in place
  // as its object, as ONE contiguous WatchResponse.events field: one slice
  // that any number of responses can share (AddEncoded). `*object_begin`
  // is the offset of the object's bytes in it, so that they can be shared
  // too (grpc::Slice::sub) instead of serialized again.
  static grpc::Slice EncodeWithObject(
      const Event& event, const google::protobuf::MessageLite& object,
      size_t* object_begin);

  void Add(const Event& event);
  // Appends events encoded beforehand (`parts`, from TakeSlices or
  // EncodeWithObject: `events` whole WatchResponse.events fields), borrowed.
  void AddEncoded(const std::vector<grpc::Slice>& parts, int events);
  int events() const { return events_; }
  // The serialized size of the response so far.
  size_t bytes() const { return bytes_; }
  // The response so far; the builder is empty again afterwards.
  grpc::ByteBuffer Finish();
  // The response so far as slices (for AddEncoded), each with its own
  // reference; empty again afterwards.
  std::vector<grpc::Slice> TakeSlices();

 private:
  void FlushSmall();
  // Appends `slice` without a reference.
  void Borrow(const grpc::Slice& slice);

  // The response's slices in order, borrowed (bitwise copies of
  // grpc::Slice, which is a grpc_slice and nothing else).
  std::vector<grpc_slice> parts_;
  // The per-stream slices the builder made (parts_ borrows them too).
  std::vector<grpc::Slice> owned_;
  std::string small_;  // per-stream bytes not yet turned into a slice
  int events_ = 0;
  size_t bytes_ = 0;
};

// Serializes `message` once into a refcounted slice (for
// WatchResponseBuilder::Event::object).
grpc::Slice SerializeToSlice(const google::protobuf::MessageLite& message);

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_RESPONSE_BUILDER_H_

#ifndef SERVER_WATCH_WATCH_RESPONSE_BUILDER_H_
#define SERVER_WATCH_WATCH_RESPONSE_BUILDER_H_

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
  };

  // The bytes `event` adds to a response (its WatchResponse.events field,
  // tag and length prefix included).
  static size_t EncodedSize(const Event& event);

  void Add(const Event& event);
  // Appends events encoded beforehand (`parts`, from TakeSlices: `events`
  // whole WatchResponse.events fields), by reference.
  void AddEncoded(const std::vector<grpc::Slice>& parts, int events);
  int events() const { return events_; }
  // The serialized size of the response so far.
  size_t bytes() const { return bytes_; }
  // The response so far; the builder is empty again afterwards.
  grpc::ByteBuffer Finish();
  // The response so far as slices (for AddEncoded); empty again afterwards.
  std::vector<grpc::Slice> TakeSlices();

 private:
  void FlushSmall();

  std::vector<grpc::Slice> slices_;
  std::string small_;  // per-stream bytes not yet turned into a slice
  int events_ = 0;
  size_t bytes_ = 0;
};

// Serializes `message` once into a refcounted slice (for
// WatchResponseBuilder::Event::object).
grpc::Slice SerializeToSlice(const google::protobuf::MessageLite& message);

}  // namespace server

#endif  // SERVER_WATCH_WATCH_RESPONSE_BUILDER_H_

// Test helpers for clients of informer.v1.Informer: one Watch call read up
// to a marker event, its events described as one-line strings that tests
// compare with gMock matchers.
#ifndef SERVER_INFORMER_SERVICE_TESTING_WATCH_CALL_H_
#define SERVER_INFORMER_SERVICE_TESTING_WATCH_CALL_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace server {

// "TYPE ns/name" of an event with an object ("TYPE" for a marker such as
// INITIAL_STATE_DONE or FRESH), TYPE without its EVENT_TYPE_ prefix, then
// " initial" and " stale" when those flags are set. An object whose JSON
// does not parse is left out of the text.
std::string DescribeEvent(const informer::v1::Event& event);

// The events of a Watch up to a marker, bookmarks left out.
struct WatchEvents {
  std::vector<std::string> events;         // DescribeEvent of each, in order
  std::vector<std::string> resume_tokens;  // of each, in the same order
};

// One Informer.Watch call on `stub` with a deadline. The destructor cancels
// the call and drains the stream, so a test may end with it open. Not
// thread-safe: one test thread reads it. The stub must outlive it.
class WatchCall {
 public:
  WatchCall(informer::v1::Informer::StubInterface* stub,
            const informer::v1::WatchRequest& request,
            absl::Duration deadline = absl::Seconds(60));
  ~WatchCall();
  WatchCall(const WatchCall&) = delete;
  WatchCall& operator=(const WatchCall&) = delete;

  // Reads until an event of type `last` (included) arrives; the events
  // read, bookmarks left out. Events that came after it in the same
  // response are kept for the next call. An error when the stream ends
  // first (the events read so far are in the message).
  absl::StatusOr<WatchEvents> ReadUntil(informer::v1::EventType last);

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderInterface<informer::v1::WatchResponse>>
      reader_;
  std::deque<informer::v1::Event> pending_;  // read, not yet returned
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_TESTING_WATCH_CALL_H_

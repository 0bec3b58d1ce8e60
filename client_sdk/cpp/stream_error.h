#ifndef CLIENT_SDK_CPP_STREAM_ERROR_H_
#define CLIENT_SDK_CPP_STREAM_ERROR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace client_sdk {

// Why a stream of a RemoteInformer (Watch) or of a WorkQueueWorker
// (Lease, RunWithReconnect) failed (see StreamErrorHandler).
struct StreamError {
  // The gRPC status the stream ended with, as an absl::Status of the same
  // code number and message: e.g. NOT_FOUND for an unknown resource,
  // UNAVAILABLE while the sidecar is away, RESOURCE_EXHAUSTED for a reader
  // too slow for the sidecar's queue. OK when the sidecar ended the stream
  // without an error (reconnected all the same).
  absl::Status status;
  // Consecutive failed streams, this one included (1 for the first failure
  // after a working stream).
  int64_t failures = 0;
  // How long until the next attempt (zero when final).
  absl::Duration retry_in;
  // True when the stream is given up for good: for RemoteInformer, a Watch
  // refused with NOT_FOUND (unknown resource), PERMISSION_DENIED or
  // INVALID_ARGUMENT (a bad selector or index), which another attempt would get
  // again (IsFinalWatchCode). No stream follows; the mirror keeps its content.
  bool final = false;
};

// Told when a RemoteInformer's or a WorkQueueWorker's stream fails and when
// it works again. Called on the informer's reader thread, in order with the
// event handlers (for a worker: on the thread running RunWithReconnect,
// between `process` calls); must not block for long. RemoteInformer::Stop
// may not be called from it (it joins that thread); WorkQueueWorker::Stop
// may.
class StreamErrorHandler {
 public:
  virtual ~StreamErrorHandler() = default;
  // Every failed stream, before the back-off wait.
  virtual void OnError(const StreamError& error) = 0;
  // Once, when a stream delivers data after `failures` failed ones.
  virtual void OnRecovered(int64_t failures) { (void)failures; }
};

}  // namespace client_sdk

#endif  // CLIENT_SDK_CPP_STREAM_ERROR_H_

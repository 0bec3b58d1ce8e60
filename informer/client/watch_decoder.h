#ifndef INFORMER_CLIENT_WATCH_DECODER_H_
#define INFORMER_CLIENT_WATCH_DECODER_H_

// WatchDecoder: the informer::WatchStream of a watch request's HTTP
// response body (the client side of a watch): bytes from an HttpStream are
// split into lines (LineSplitter) and each line decoded with
// DecodeWatchEvent as soon as it is complete. (Not to be confused with the
// sidecar's gRPC Watch streams in server/informer_service/watch.)
//
// Next() is called from one thread; Stop() from any thread, any number of
// times, and makes a blocked Next() return Cancelled promptly.
// Results of Next():
//   OK          *event holds the next event (ERROR events included: the
//               caller turns them into a status with StatusFromApiStatus).
//   OutOfRange  the server ended the stream cleanly (timeoutSeconds).
//   Cancelled   Stop() was called.
//   DataLoss    the stream ended inside an event (partial last line).
//   DeadlineExceeded  no byte for the idle timeout: a hung watch.
//   other       the connection broke or a line did not decode.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "informer/client/http_transport.h"
#include "informer/client/line_splitter.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/object/object.h"
#include "informer/object/wire.h"

namespace informer {
namespace client {

class WatchDecoder final : public WatchStream {
 public:
  // `bytes_received`, when set, is advanced by every body byte read (shared
  // so that it may outlive whichever of its owners goes first).
  WatchDecoder(std::unique_ptr<HttpStream> body, TransformOptions transform,
               std::string path,
               std::shared_ptr<std::atomic<uint64_t>> bytes_received = nullptr);

  absl::Status Next(WatchEvent* event) override;
  void Stop() override;

 private:
  const std::unique_ptr<HttpStream> body_;
  const TransformOptions transform_;
  const std::string path_;  // for error messages
  const std::shared_ptr<std::atomic<uint64_t>> bytes_received_;
  std::atomic<bool> stopped_{false};
  LineSplitter splitter_;
  absl::Status final_;  // sticky once the stream failed or ended
  std::string chunk_;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_WATCH_DECODER_H_

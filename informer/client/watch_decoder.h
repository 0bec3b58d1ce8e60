#ifndef INFORMER_CLIENT_WATCH_DECODER_H_
#define INFORMER_CLIENT_WATCH_DECODER_H_

// WatchDecoder: the informer::WatchStream of a watch request's HTTP
// response body (the client side of a watch): bytes from an HttpStream are
// split into lines (LineSplitter) and each line decoded with
// DecodeWatchEvent. (Not to be confused with the sidecar's gRPC Watch
// streams in server/informer_service/watch.)
//
// Live events are decoded as soon as their line is complete, on the
// calling thread. A WatchList's initial events (a watch with
// sendInitialEvents=true, Options::initial_event_threads > 0) are decoded
// on worker threads instead, in batches (OrderedBatchDecoder), as a LIST's
// items are: during the initial phase, each line that starts as a plain
// ADDED event is batched; any other line (a bookmark, the
// initial-events-end bookmark, a MODIFIED/DELETED/ERROR event, a line of
// another shape) waits until every event before it has been decoded and
// delivered, and is then decoded on the calling thread. After the
// initial-events-end bookmark every line is decoded inline again (latency
// matters for live events). Why: decoding and compressing an object is
// most of an initial sync's client CPU; on one thread a WatchList took
// 1.5-1.9x the download time while a LIST, decoded on workers, kept up.
// Events come out in stream order either way, and every outcome below is
// the same as with inline decoding: events before a bad line, the end of
// the stream or a broken connection are delivered first, then the status.
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
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "informer/client/http_transport.h"
#include "informer/client/line_splitter.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/object/object.h"
#include "informer/object/ordered_batch_decoder.h"
#include "informer/object/wire.h"

namespace informer {
namespace client {

// How a WatchDecoder decodes (see the file comment).
struct WatchDecoderOptions {
  // Threads decoding the initial events besides the calling one; 0
  // decodes every event inline. Set only for a watch that asked for
  // initial events (sendInitialEvents=true).
  int initial_event_threads = 0;
  // Bytes of event lines per batch handed to the workers.
  size_t batch_bytes = 64 << 10;
};

class WatchDecoder final : public WatchStream {
 public:
  using Options = WatchDecoderOptions;

  // `bytes_received`, when set, is advanced by every body byte read (shared
  // so that it may outlive whichever of its owners goes first).
  WatchDecoder(std::unique_ptr<HttpStream> body, TransformOptions transform,
               std::string path,
               std::shared_ptr<std::atomic<uint64_t>> bytes_received = nullptr,
               Options options = Options());
  ~WatchDecoder() override;

  absl::Status Next(WatchEvent* event) override;
  void Stop() override;

 private:
  using Pool = OrderedBatchDecoder<WatchEvent>;

  // The initial phase (initial_ set): true when it produced Next's result
  // (*result, and *event when OK); false once it is over and the rest is
  // inline (final_ may then hold the stream's end).
  bool NextInitial(WatchEvent* event, absl::Status* result);
  // Batches `line` or holds it back (see the file comment).
  void TakeInitialLine(absl::string_view line);
  // Hands out the next event of batch_; false when none is left.
  bool FromBatch(WatchEvent* event, absl::Status* result);
  // Decodes `line` here; a bad line makes final_ its error.
  absl::Status DecodeHere(absl::string_view line, WatchEvent* event);
  absl::Status Undecodable(const absl::Status& decode_error) const;
  // Reads the next bytes into the splitter; on failure (or the end of the
  // stream) sets final_.
  void ReadMore();

  const std::unique_ptr<HttpStream> body_;
  const TransformOptions transform_;
  const std::string path_;  // for error messages
  const std::shared_ptr<std::atomic<uint64_t>> bytes_received_;
  const Options options_;
  std::atomic<bool> stopped_{false};
  LineSplitter splitter_;
  absl::Status final_;  // sticky once the stream failed or ended
  std::string chunk_;
  // Initial phase: a line not batched, decoded once every event before it
  // is delivered.
  std::string held_line_;
  bool held_ = false;
  // Initial phase: the decoded batch being handed out.
  std::unique_ptr<Pool::Batch> batch_;
  size_t batch_pos_ = 0;
  // Set during the initial phase; last, so that its workers stop before
  // what they use (transform_) goes.
  std::unique_ptr<Pool> initial_;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_WATCH_DECODER_H_

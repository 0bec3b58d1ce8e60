// The response of one libcurl transfer as its header and write callbacks
// collect it (HttpTransport's unary requests and streams): the status line,
// the headers, and the body, grown into huge-page-advised memory when
// large, paused when a stream's reader falls behind, or handed to a sink.
#ifndef INFORMER_CLIENT_CURL_RESPONSE_H_
#define INFORMER_CLIENT_CURL_RESPONSE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace informer {
namespace client {

// What OnCurlHeader and OnCurlWrite collect for one transfer. Not
// thread-safe: libcurl calls them on the thread performing the transfer.
struct ResponseState {
  int status = 0;
  bool headers_done = false;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  // Body bytes received by this transfer (after content decoding).
  uint64_t bytes = 0;
  // The transport's running total, shared by all transfers.
  std::atomic<uint64_t>* total_bytes = nullptr;
  // Unary requests reserve the body from Content-Length when it is known
  // (streams never: their bodies are drained as they arrive).
  bool reserve_from_length = false;
  // Bytes to reserve at the first body byte when no Content-Length came
  // (chunked list pages): the previous large GET's size, since pages of
  // one list are alike. Saves the copies of geometric growth.
  size_t size_hint = 0;
  // Streams: callbacks record activity here (the reader thread only).
  Clock* clock = nullptr;
  absl::Time last_byte;
  // Streams: once the body holds this many bytes not yet read, the
  // transfer pauses (libcurl keeps the chunk and delivers it again when
  // the reader resumes it) instead of growing the body: libcurl reads up to
  // ~100 receive buffers per perform, so a burst of watch events would
  // otherwise grow the body, and the reader's buffers after it, to tens of
  // MiB that stay allocated for the watch's lifetime. TCP flow control
  // then holds the rest at the server. 0: never pause.
  size_t pause_above = 0;
  bool paused = false;
  // HttpRequest::body_sink (unary requests), and its first error.
  const std::function<absl::Status(absl::string_view)>* sink = nullptr;
  absl::Status sink_status;

  // True when body bytes go to the sink: a 2xx answer with a sink.
  bool Sinking() const {
    return sink != nullptr && *sink && status >= 200 && status < 300;
  }
  // The value of header `name` (lower case), "" when absent.
  std::string Header(const std::string& name) const;
};

// CURLOPT_HEADERFUNCTION with a ResponseState as `user`: a status line
// starts the response over (after 100 Continue or a redirect).
size_t OnCurlHeader(char* data, size_t size, size_t n, void* user);

// CURLOPT_WRITEFUNCTION with a ResponseState as `user`: appends to the
// body (or the sink), or returns CURL_WRITEFUNC_PAUSE past pause_above;
// a short count (a sink's error) makes libcurl abort the transfer.
size_t OnCurlWrite(char* data, size_t size, size_t n, void* user);

// Bodies at least this large are grown into memory advised for transparent
// huge pages. Why: a large list's GET spends most of its CPU in first
// touches of freshly mmapped body memory (one page fault per 4 KiB, very
// expensive on virtualised hosts), and 2 MiB pages remove most of them
// (docs/perf-log/2026-12-01-initial-sync.md has the profiles and figures).
// Smaller bodies come from malloc's heap and gain nothing.
inline constexpr size_t kHugePageBodyBytes = 2 << 20;

// Makes room for `needed` bytes in *body, growing geometrically. Buffers
// of kHugePageBodyBytes and more are advised for transparent huge pages before
// anything is written to them, so that the copy of the old contents already
// lands on huge pages.
void ReserveBody(std::string* body, size_t needed);

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_CURL_RESPONSE_H_

#ifndef INFORMER_CLIENT_LINE_SPLITTER_H_
#define INFORMER_CLIENT_LINE_SPLITTER_H_

// Splits a watch response body (one JSON event per line) into complete
// lines while bytes arrive in arbitrary pieces: a chunk may end anywhere,
// including inside an event or between "\r" and "\n", and one event may span
// many chunks.
//
// Pure (no I/O); not thread-safe: one owner feeds it and takes lines.
//
// Usage:
//   LineSplitter s;
//   s.Append(bytes);
//   std::string line;
//   while (s.NextLine(&line)) Handle(line);
//   ...
//   if (!s.Finish().ok()) { /* stream ended inside an event */ }

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace informer {
namespace client {

class LineSplitter {
 public:
  // A line longer than `max_line_bytes` makes Append fail (a runaway body
  // must not exhaust memory). The default fits any Kubernetes object (etcd
  // caps objects at 1.5 MiB by default) with room to spare.
  explicit LineSplitter(size_t max_line_bytes = 64 << 20);

  // Adds bytes. ResourceExhausted when the current unterminated line would
  // exceed the limit; the splitter is then unusable.
  absl::Status Append(absl::string_view bytes);

  // Moves the next complete line (without its "\n" or "\r\n") into *line and
  // returns true; false when no complete line is buffered. Empty lines (as
  // some servers send as keep-alives) are skipped.
  bool NextLine(std::string* line);
  // The same without a copy: *line views the buffer and stays valid until
  // the next call of Append, NextLine or NextLineView.
  bool NextLineView(absl::string_view* line);

  // Called at end of stream: OK when no partial line remains buffered,
  // DataLoss naming the number of stray bytes otherwise. Whitespace-only
  // leftovers are not an event and are accepted.
  absl::Status Finish() const;

  // Bytes buffered but not yet returned as lines.
  size_t buffered_bytes() const { return buffer_.size() - consumed_; }

 private:
  const size_t max_line_bytes_;
  std::string buffer_;
  // Bytes of buffer_ already returned; compacted lazily so that handing out
  // many small lines from one big chunk is linear, not quadratic.
  size_t consumed_ = 0;
  // Where to resume searching for '\n' (bytes before it hold none).
  size_t scan_from_ = 0;
  // Index just past the last '\n' in buffer_ (start of the partial line).
  size_t tail_start_ = 0;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_LINE_SPLITTER_H_

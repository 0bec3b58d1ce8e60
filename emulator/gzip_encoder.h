#ifndef EMULATOR_GZIP_ENCODER_H_
#define EMULATOR_GZIP_ENCODER_H_

// gzip (RFC 1952) compression of a body produced piece by piece, so that a
// streamed response stays streamed when the client asked for gzip. Why not
// cpp-httplib's own compression: it collects a chunked body's output until
// the end, which would turn the emulator's streamed lists into buffered
// ones (and hold watch events forever).
//
// Also the API server's rule for when to compress (AcceptsGzip,
// kGzipThresholdBytes).
//
// Thread-compatible: one GzipEncoder per response, used by one thread at a
// time (httplib calls a response's content provider sequentially).

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emulator {

// The API server (v1.24) gzips a non-watch response only when its first
// write is larger than this; JSON bodies are written in one piece there, so
// in effect: bodies over 128 KiB.
inline constexpr size_t kGzipThresholdBytes = 128 * 1024;

// Whether an Accept-Encoding value asks for gzip the way the API server
// reads it: one of its comma-separated tokens, trimmed, is exactly "gzip"
// (parameters such as ";q=0.5" make the token not match, as there).
bool AcceptsGzip(absl::string_view accept_encoding);

class GzipEncoder {
 public:
  GzipEncoder();
  ~GzipEncoder();
  GzipEncoder(const GzipEncoder&) = delete;
  GzipEncoder& operator=(const GzipEncoder&) = delete;

  // Compresses `in` and appends whatever output is ready to *out (possibly
  // nothing: deflate emits whole blocks, as the API server's gzip writer
  // does).
  void Write(absl::string_view in, std::string* out);
  // Ends the stream (trailer with CRC-32 and size) into *out. No Write after.
  void Finish(std::string* out);

 private:
  void Run(absl::string_view in, int mode, std::string* out);
  struct State;
  std::unique_ptr<State> state_;
};

// The whole of `body` gzipped (for bodies built in memory).
std::string GzipAll(absl::string_view body);

// Test helper and check: decodes a complete gzip stream; InvalidArgument for
// anything else (corrupt, truncated, trailing garbage).
absl::StatusOr<std::string> Gunzip(absl::string_view gz);

}  // namespace emulator

#endif  // EMULATOR_GZIP_ENCODER_H_

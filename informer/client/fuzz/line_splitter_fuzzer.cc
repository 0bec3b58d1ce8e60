// libFuzzer target: the watch line splitter must hand out the same lines
// however the byte stream is cut into chunks, and never crash or hang.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "informer/client/line_splitter.h"

namespace {

std::vector<std::string> Split(absl::string_view body,
                               const std::vector<size_t>& cuts,
                               bool* finished_ok) {
  informer::client::LineSplitter s(/*max_line_bytes=*/1 << 16);
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  for (size_t cut : cuts) {
    if (cut < start || cut > body.size()) continue;
    if (!s.Append(body.substr(start, cut - start)).ok()) {
      *finished_ok = false;
      return lines;
    }
    start = cut;
    while (s.NextLine(&line)) lines.push_back(line);
  }
  if (!s.Append(body.substr(start)).ok()) {
    *finished_ok = false;
    return lines;
  }
  while (s.NextLine(&line)) lines.push_back(line);
  *finished_ok = s.Finish().ok();
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte chooses the chunk size; the rest is the stream.
  const size_t step = 1 + data[0] % 64;
  absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<size_t> cuts;
  for (size_t i = step; i < body.size(); i += step) cuts.push_back(i);
  bool whole_ok = false;
  bool chunked_ok = false;
  std::vector<std::string> whole = Split(body, {}, &whole_ok);
  std::vector<std::string> chunked = Split(body, cuts, &chunked_ok);
  // Oversized lines may be detected at different points; compare only
  // streams that stayed within the limit.
  if (whole_ok != chunked_ok && body.size() < (1 << 16)) __builtin_trap();
  if (whole_ok && chunked_ok && whole != chunked) __builtin_trap();
  for (const std::string& l : whole) {
    if (l.find('\n') != std::string::npos) __builtin_trap();
  }
  return 0;
}

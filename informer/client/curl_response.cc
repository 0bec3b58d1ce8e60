#include "informer/client/curl_response.h"

#include <curl/curl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace informer {
namespace client {
namespace {

// Asks the kernel for transparent huge pages over the page-aligned part of
// [data, data + size). Only a hint: failures (THP disabled) are ignored.
void AdviseHugePages(char* data, size_t size) {
#ifdef MADV_HUGEPAGE
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(page - 1);
  if (end > begin) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#endif
}

}  // namespace

std::string ResponseState::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

void ReserveBody(std::string* body, size_t needed) {
  if (body->capacity() >= needed) return;
  const size_t capacity = std::max(needed, body->capacity() * 2);
  if (capacity < kHugePageBodyBytes) {
    body->reserve(capacity);
    return;
  }
  std::string grown;
  grown.reserve(capacity);
  AdviseHugePages(grown.data(), grown.capacity());
  grown.append(*body);
  body->swap(grown);
}

size_t OnCurlHeader(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<ResponseState*>(user);
  absl::string_view line(data, size * n);
  if (st->clock != nullptr) st->last_byte = st->clock->Now();
  if (absl::StartsWith(line, "HTTP/")) {
    // A new response (after 100 Continue or a redirect): start over.
    st->headers.clear();
    st->headers_done = false;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::MaxSplits(' ', 2));
    int code = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &code)) {
      st->status = code;
    }
    return size * n;
  }
  absl::string_view stripped = absl::StripAsciiWhitespace(line);
  if (stripped.empty()) {
    if (st->status >= 200) st->headers_done = true;
    return size * n;
  }
  size_t colon = stripped.find(':');
  if (colon != absl::string_view::npos) {
    std::string name = absl::AsciiStrToLower(stripped.substr(0, colon));
    absl::string_view value =
        absl::StripAsciiWhitespace(stripped.substr(colon + 1));
    uint64_t length = 0;
    // A bound keeps a hostile Content-Length from reserving gigabytes.
    if (st->reserve_from_length && !st->Sinking() && name == "content-length" &&
        absl::SimpleAtoi(value, &length) && length <= (uint64_t{1} << 31)) {
      ReserveBody(&st->body, static_cast<size_t>(length));
      st->size_hint = 0;  // the exact size beats a guess
    }
    st->headers[std::move(name)] = std::string(value);
  }
  return size * n;
}

size_t OnCurlWrite(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<ResponseState*>(user);
  const size_t len = size * n;
  if (st->Sinking()) {
    st->sink_status = (*st->sink)(absl::string_view(data, len));
    // A short count makes libcurl abort the transfer (CURLE_WRITE_ERROR).
    if (!st->sink_status.ok()) return 0;
  } else {
    if (st->pause_above > 0 && st->body.size() >= st->pause_above) {
      st->paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
    if (st->size_hint > 0 && st->body.capacity() < st->size_hint) {
      ReserveBody(&st->body, st->size_hint);
      st->size_hint = 0;
    }
    ReserveBody(&st->body, st->body.size() + len);
    st->body.append(data, len);
  }
  st->bytes += len;
  if (st->total_bytes != nullptr) {
    st->total_bytes->fetch_add(len, std::memory_order_relaxed);
  }
  if (st->clock != nullptr) st->last_byte = st->clock->Now();
  return size * n;
}

}  // namespace client
}  // namespace informer

#include "informer/client/watch_decoder.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace informer {
namespace client {

WatchDecoder::WatchDecoder(
    std::unique_ptr<HttpStream> body, TransformOptions transform,
    std::string path, std::shared_ptr<std::atomic<uint64_t>> bytes_received)
    : body_(std::move(body)),
      transform_(std::move(transform)),
      path_(std::move(path)),
      bytes_received_(std::move(bytes_received)) {}

absl::Status WatchDecoder::Next(WatchEvent* event) {
  std::string line;
  while (true) {
    if (stopped_.load()) return absl::CancelledError("watch stopped");
    if (!final_.ok()) return final_;
    if (splitter_.NextLine(&line)) {
      absl::StatusOr<WatchEvent> decoded = DecodeWatchEvent(line, transform_);
      if (!decoded.ok()) {
        // A complete line that does not decode: the same event would come
        // back on a re-watch from the same resourceVersion.
        final_ = UndecodableEventError(
            absl::StrCat("watch ", path_,
                         ": undecodable event: ", decoded.status().message()));
        return final_;
      }
      *event = *std::move(decoded);
      return absl::OkStatus();
    }
    chunk_.clear();
    absl::Status s = body_->Read(&chunk_);
    if (s.ok()) {
      if (bytes_received_ != nullptr) {
        bytes_received_->fetch_add(chunk_.size(), std::memory_order_relaxed);
      }
      absl::Status appended = splitter_.Append(chunk_);
      if (!appended.ok()) final_ = appended;
      continue;
    }
    if (absl::IsOutOfRange(s)) {
      absl::Status tail = splitter_.Finish();
      if (!tail.ok()) {
        final_ = absl::Status(
            tail.code(), absl::StrCat("watch ", path_, ": ", tail.message()));
        return final_;
      }
    }
    final_ = s;
  }
}

void WatchDecoder::Stop() {
  stopped_.store(true);
  body_->Stop();
}

}  // namespace client
}  // namespace informer

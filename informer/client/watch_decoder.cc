#include "informer/client/watch_decoder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace client {
namespace {

// How the API server (and the emulator) writes an ADDED event. A line of
// any other shape is decoded inline, in order: the check only decides
// where a line is decoded, never how.
constexpr char kAddedPrefix[] = R"({"type":"ADDED",)";

}  // namespace

WatchDecoder::WatchDecoder(
    std::unique_ptr<HttpStream> body, TransformOptions transform,
    std::string path, std::shared_ptr<std::atomic<uint64_t>> bytes_received,
    Options options)
    : body_(std::move(body)),
      transform_(std::move(transform)),
      path_(std::move(path)),
      bytes_received_(std::move(bytes_received)),
      options_(options) {
  if (options_.initial_event_threads > 0) {
    Pool::Options pool;
    pool.threads = options_.initial_event_threads;
    pool.batch_bytes = options_.batch_bytes;
    initial_ =
        std::make_unique<Pool>(pool, [this](absl::string_view line, size_t) {
          return DecodeWatchEvent(line, transform_);
        });
  }
}

WatchDecoder::~WatchDecoder() = default;

absl::Status WatchDecoder::Undecodable(const absl::Status& error) const {
  // A complete line that does not decode: the same event would come back
  // on a re-watch from the same resourceVersion.
  return UndecodableEventError(
      absl::StrCat("watch ", path_, ": undecodable event: ", error.message()));
}

absl::Status WatchDecoder::DecodeHere(absl::string_view line,
                                      WatchEvent* event) {
  absl::StatusOr<WatchEvent> decoded = DecodeWatchEvent(line, transform_);
  if (!decoded.ok()) {
    final_ = Undecodable(decoded.status());
    return final_;
  }
  *event = *std::move(decoded);
  return absl::OkStatus();
}

void WatchDecoder::ReadMore() {
  chunk_.clear();
  absl::Status s = body_->Read(&chunk_);
  if (s.ok()) {
    if (bytes_received_ != nullptr) {
      bytes_received_->fetch_add(chunk_.size(), std::memory_order_relaxed);
    }
    final_ = splitter_.Append(chunk_);
    return;
  }
  if (absl::IsOutOfRange(s)) {
    absl::Status tail = splitter_.Finish();
    if (!tail.ok()) {
      final_ = absl::Status(
          tail.code(), absl::StrCat("watch ", path_, ": ", tail.message()));
      return;
    }
  }
  final_ = s;
}

absl::Status WatchDecoder::Next(WatchEvent* event) {
  if (initial_ != nullptr) {
    absl::Status result;
    if (NextInitial(event, &result)) return result;
  }
  while (true) {
    if (stopped_.load()) return absl::CancelledError("watch stopped");
    if (!final_.ok()) return final_;
    absl::string_view line;
    if (splitter_.NextLineView(&line)) return DecodeHere(line, event);
    ReadMore();
  }
}

bool WatchDecoder::FromBatch(WatchEvent* event, absl::Status* result) {
  if (batch_ == nullptr) return false;
  if (batch_pos_ < batch_->out.size()) {
    *event = std::move(batch_->out[batch_pos_++]);
    *result = absl::OkStatus();
    return true;
  }
  const absl::Status bad = std::move(batch_->status);
  batch_.reset();
  if (bad.ok()) return false;
  // The lines after the bad one are never looked at, as inline.
  final_ = Undecodable(bad);
  *result = final_;
  return true;
}

void WatchDecoder::TakeInitialLine(absl::string_view line) {
  if (absl::StartsWith(line, kAddedPrefix)) {
    initial_->Add(line);
    return;
  }
  held_line_.assign(line.data(), line.size());
  held_ = true;
}

bool WatchDecoder::NextInitial(WatchEvent* event, absl::Status* result) {
  // Batches submitted and not yet handed out: the workers' queue, kept
  // this deep while the stream has more. Deep enough that a worker finds
  // the next batch queued while this thread hands out events or decodes a
  // batch itself (it does when the queue is full and the oldest batch is
  // not decoded yet), so that neither waits for the other.
  const size_t lookahead =
      2 * static_cast<size_t>(std::max(1, options_.initial_event_threads)) + 2;
  while (true) {
    if (stopped_.load()) {
      *result = absl::CancelledError("watch stopped");
      return true;
    }
    if (final_.ok() && !held_ && initial_->outstanding() < lookahead) {
      absl::string_view line;
      if (splitter_.NextLineView(&line)) {
        TakeInitialLine(line);
      } else {
        ReadMore();
      }
      continue;
    }
    if (FromBatch(event, result)) {
      if (!result->ok()) initial_.reset();
      return true;
    }
    // Before a held line or the stream's end, everything before it;
    // otherwise the next batch once decoded, helping when enough are
    // queued, else read on.
    const bool drain = held_ || !final_.ok();
    if (drain) initial_->Flush();
    batch_ = initial_->TakeNext(drain || initial_->outstanding() >= lookahead);
    batch_pos_ = 0;
    if (batch_ != nullptr || !drain) continue;
    if (!held_) {
      // The stream ended or broke: every event before that is delivered.
      initial_.reset();
      return false;
    }
    held_ = false;
    *result = DecodeHere(held_line_, event);
    // Live events from here on (or the stream failed): inline.
    if (!result->ok() || event->initial_events_end) initial_.reset();
    return true;
  }
}

void WatchDecoder::Stop() {
  stopped_.store(true);
  body_->Stop();
}

}  // namespace client
}  // namespace informer

#include "informer/client/line_splitter.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace client {

LineSplitter::LineSplitter(size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes) {}

absl::Status LineSplitter::Append(absl::string_view bytes) {
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    scan_from_ -= consumed_;
    tail_start_ -= consumed_;
    consumed_ = 0;
  }
  const size_t old_size = buffer_.size();
  buffer_.append(bytes.data(), bytes.size());
  // Only the unterminated tail counts against the limit; look for a newline
  // in the new bytes alone so a long line fed byte by byte stays linear.
  size_t last_newline = bytes.rfind('\n');
  if (last_newline != absl::string_view::npos) {
    tail_start_ = old_size + last_newline + 1;
  }
  if (buffer_.size() - tail_start_ > max_line_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("watch event line exceeds ", max_line_bytes_, " bytes"));
  }
  return absl::OkStatus();
}

bool LineSplitter::NextLine(std::string* line) {
  absl::string_view view;
  if (!NextLineView(&view)) return false;
  line->assign(view.data(), view.size());
  return true;
}

bool LineSplitter::NextLineView(absl::string_view* line) {
  while (true) {
    if (scan_from_ < consumed_) scan_from_ = consumed_;
    size_t newline = buffer_.find('\n', scan_from_);
    if (newline == std::string::npos) {
      scan_from_ = buffer_.size();
      return false;
    }
    size_t end = newline;
    if (end > consumed_ && buffer_[end - 1] == '\r') --end;
    absl::string_view view(buffer_.data() + consumed_, end - consumed_);
    consumed_ = newline + 1;
    scan_from_ = consumed_;
    if (absl::StripAsciiWhitespace(view).empty()) continue;
    *line = view;
    return true;
  }
}

absl::Status LineSplitter::Finish() const {
  absl::string_view rest(buffer_.data() + consumed_,
                         buffer_.size() - consumed_);
  if (absl::StripAsciiWhitespace(rest).empty()) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("watch stream ended inside an event: ", rest.size(),
                   " bytes without a terminating newline"));
}

}  // namespace client
}  // namespace informer

#include "server/informer_service/watch/resume_token.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace server {

namespace {

std::string TokenPrefix(absl::string_view run_id, uint64_t epoch) {
  return absl::StrCat("w2/", run_id, "/", epoch, "/");
}

}  // namespace

std::string EncodeResumeToken(const ResumeToken& token) {
  const ResumeTokenEncoder encoder(token.run_id, token.epoch);
  return token.in_snapshot ? encoder.EncodeSnapshot(token.seq, token.after_key)
                           : encoder.Encode(token.seq);
}

absl::StatusOr<ResumeToken> DecodeResumeToken(absl::string_view token) {
  std::string raw;
  const absl::Status bad = absl::InvalidArgumentError("malformed resume_token");
  if (!absl::WebSafeBase64Unescape(token, &raw)) return bad;
  // Keys contain '/': the fifth part is the rest.
  std::vector<absl::string_view> parts =
      absl::StrSplit(raw, absl::MaxSplits('/', 4));
  ResumeToken out;
  if (parts.size() < 4 || parts[0] != "w2" || parts[1].empty() ||
      !absl::SimpleAtoi(parts[2], &out.epoch) ||
      !absl::SimpleAtoi(parts[3], &out.seq)) {
    return bad;
  }
  out.run_id = std::string(parts[1]);
  if (parts.size() == 5) {
    out.in_snapshot = true;
    out.after_key = std::string(parts[4]);
  }
  return out;
}

ResumeTokenEncoder::ResumeTokenEncoder(absl::string_view run_id, uint64_t epoch)
    : prefix_(TokenPrefix(run_id, epoch)) {}

std::string ResumeTokenEncoder::Encode(uint64_t seq) const {
  return absl::WebSafeBase64Escape(absl::StrCat(prefix_, seq));
}

std::string ResumeTokenEncoder::EncodeSnapshot(uint64_t seq,
                                               absl::string_view key) const {
  return absl::WebSafeBase64Escape(absl::StrCat(prefix_, seq, "/", key));
}

}  // namespace server

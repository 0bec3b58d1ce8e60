#ifndef SERVER_INFORMER_SERVICE_WATCH_RESUME_TOKEN_H_
#define SERVER_INFORMER_SERVICE_WATCH_RESUME_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace server {

// A position in one resource's Watch event sequence, as carried by
// informer.v1.Event.resume_token: the sidecar's run, the resource's fan-out
// epoch (a new fan-out of the same resource starts a new sequence) and the
// sequence number of the last event the client processed.
//
// Inside an initial state (`in_snapshot`), the position is the snapshot's
// sequence number plus a position in key order: the client holds the
// snapshot's objects (through its filter) whose keys are <= `after_key`
// (none when `after_key` is empty: a RESET's token).
//
// Tokens are opaque to clients: web-safe base64 of a versioned text form.
// Value type; thread-compatible.
struct ResumeToken {
  std::string run_id;
  uint64_t epoch = 0;
  uint64_t seq = 0;
  bool in_snapshot = false;
  std::string after_key;
};

// The token's wire form.
std::string EncodeResumeToken(const ResumeToken& token);

// Parses a token; InvalidArgument "malformed resume_token" for anything
// EncodeResumeToken did not produce.
absl::StatusOr<ResumeToken> DecodeResumeToken(absl::string_view token);

// Encodes tokens of one run and epoch (a fan-out's), reusing their common
// prefix. Immutable; thread-safe.
class ResumeTokenEncoder {
 public:
  ResumeTokenEncoder(absl::string_view run_id, uint64_t epoch);
  std::string Encode(uint64_t seq) const;
  // A position inside the initial state of snapshot `seq`, after `key`.
  std::string EncodeSnapshot(uint64_t seq, absl::string_view key) const;

 private:
  std::string prefix_;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_RESUME_TOKEN_H_

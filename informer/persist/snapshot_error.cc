#include "informer/persist/snapshot_error.h"

#include <string.h>

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace {

// The payload's type URL: private to this library.
constexpr char kProblemPayload[] = "informer.persist/SnapshotProblem";

constexpr SnapshotProblem kAllProblems[] = {
    SnapshotProblem::kMissing,
    SnapshotProblem::kNotSnapshot,
    SnapshotProblem::kTruncated,
    SnapshotProblem::kChecksum,
    SnapshotProblem::kUnsupportedVersion,
    SnapshotProblem::kIdentityMismatch,
    SnapshotProblem::kMalformed,
    SnapshotProblem::kIo,
    SnapshotProblem::kLocked,
};

}  // namespace

absl::string_view SnapshotProblemName(SnapshotProblem problem) {
  switch (problem) {
    case SnapshotProblem::kNone:
      return "none";
    case SnapshotProblem::kMissing:
      return "missing";
    case SnapshotProblem::kNotSnapshot:
      return "not_snapshot";
    case SnapshotProblem::kTruncated:
      return "truncated";
    case SnapshotProblem::kChecksum:
      return "checksum";
    case SnapshotProblem::kUnsupportedVersion:
      return "unsupported_version";
    case SnapshotProblem::kIdentityMismatch:
      return "identity_mismatch";
    case SnapshotProblem::kMalformed:
      return "malformed";
    case SnapshotProblem::kIo:
      return "io";
    case SnapshotProblem::kLocked:
      return "locked";
  }
  return "none";
}

SnapshotProblem GetSnapshotProblem(const absl::Status& status) {
  if (status.ok()) return SnapshotProblem::kNone;
  absl::optional<absl::Cord> payload = status.GetPayload(kProblemPayload);
  if (!payload.has_value()) return SnapshotProblem::kNone;
  const std::string name(*payload);
  for (SnapshotProblem p : kAllProblems) {
    if (SnapshotProblemName(p) == name) return p;
  }
  return SnapshotProblem::kNone;
}

absl::Status SnapshotError(SnapshotProblem problem, absl::StatusCode code,
                           absl::string_view path, absl::string_view detail) {
  absl::Status status(code, absl::StrCat("snapshot ", path, ": ", detail));
  status.SetPayload(kProblemPayload, absl::Cord(SnapshotProblemName(problem)));
  return status;
}

absl::Status SnapshotIoError(absl::string_view path, absl::string_view what,
                             int errno_value) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf).
  const char* text = strerror_r(errno_value, buf, sizeof(buf));
  return SnapshotError(SnapshotProblem::kIo,
                       absl::ErrnoToStatusCode(errno_value), path,
                       absl::StrCat(what, " failed: ", text));
}

}  // namespace informer

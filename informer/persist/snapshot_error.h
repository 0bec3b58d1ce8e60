#ifndef INFORMER_PERSIST_SNAPSHOT_ERROR_H_
#define INFORMER_PERSIST_SNAPSHOT_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace informer {

// Why a snapshot could not be read or written. Every error of the snapshot
// library (ReadSnapshot, WriteSnapshot, DirectoryLock) carries one as a
// Status payload besides its code, so that callers can log or count the
// reason without parsing messages; the message itself always names the file
// and the reason in words.
enum class SnapshotProblem {
  kNone,  // an OK status, or a status that did not come from this library
  // NotFound: there is no snapshot file.
  kMissing,
  // InvalidArgument: the file is not a snapshot at all (its magic is wrong).
  kNotSnapshot,
  // DataLoss: the file ends early (an empty file included).
  kTruncated,
  // DataLoss: a checksum does not match (flipped bytes); names the offset.
  kChecksum,
  // Unimplemented: a format version this build cannot read.
  kUnsupportedVersion,
  // FailedPrecondition: the snapshot is of another cluster, resource,
  // namespace, selector, transform or metadata-only setting; the message
  // names the field and both values.
  kIdentityMismatch,
  // DataLoss: every checksum matches, yet the content is invalid (an
  // object's JSON does not parse, counts that do not add up, an unknown
  // required section). Only a buggy or hostile writer produces these.
  kMalformed,
  // An operating system call failed (open, read, write, fsync, rename,
  // flock); the code is derived from errno (ResourceExhausted for ENOSPC,
  // PermissionDenied for EACCES, ...) and the message names the call.
  kIo,
  // FailedPrecondition: the cache directory is locked by another holder.
  kLocked,
};

// The problem `status` carries; kNone for OK or foreign statuses.
SnapshotProblem GetSnapshotProblem(const absl::Status& status);

// A short stable name ("missing", "not_snapshot", "truncated", "checksum",
// "unsupported_version", "identity_mismatch", "malformed", "io", "locked";
// "none"), for log fields and metric labels.
absl::string_view SnapshotProblemName(SnapshotProblem problem);

// Builds an error of this library: `code`, the message
// "snapshot PATH: DETAIL", and `problem` as its payload.
absl::Status SnapshotError(SnapshotProblem problem, absl::StatusCode code,
                           absl::string_view path, absl::string_view detail);

// An kIo error for the failed call `what` (e.g. "write") with `errno_value`:
// the code follows errno (absl::ErrnoToStatusCode), and the message says
// "snapshot PATH: WHAT failed: strerror".
absl::Status SnapshotIoError(absl::string_view path, absl::string_view what,
                             int errno_value);

}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_ERROR_H_

#ifndef INFORMER_PERSIST_SNAPSHOT_READER_H_
#define INFORMER_PERSIST_SNAPSHOT_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_section.h"

namespace informer {

// One informer's cache as WriteSnapshot saved it.
struct LoadedSnapshot {
  // The file read.
  std::string path;
  // The informer's applied resourceVersion when the snapshot was written:
  // where its watch resumes.
  std::string resource_version;
  // When it was written, by the writer's clock.
  absl::Time written;
  // The objects, in the order written.
  std::vector<ObjectPtr> objects;
  // The file's size.
  uint64_t file_bytes = 0;
  // The optional sections named in SnapshotReadOptions::keep_sections that
  // the file holds, in file order (checksums verified; the content is for
  // the section's own codec to judge).
  std::vector<SnapshotSection> sections;
};

struct SnapshotReadOptions {
  // Worker threads decoding the objects of a snapshot of 2048 objects or
  // more (smaller ones always decode on the calling thread). 0, the
  // default: decode on the calling thread. On a 2-vCPU machine busy with
  // other work, two threads loaded 50k ConfigMaps no faster than one
  // (snapshot_bench); they can only help where cores are idle.
  int decode_threads = 0;
  // Optional sections (not "objects", not flagged required) to return in
  // LoadedSnapshot::sections, by name, whatever their section version;
  // the others are skipped.
  std::vector<std::string> keep_sections;
};

// Reads the snapshot dir/SnapshotFileName(expected) and returns its objects
// if, and only if, the whole file is intact and of identity `expected`.
// Objects are decoded with Object::Parse(json, transform) (the JSON is as
// cached, so the transform, part of the identity, finds nothing more to
// drop; the parse validates every object again).
//
// Never returns partial or wrong data: any problem anywhere in the file
// fails the whole read, with a distinct SnapshotProblem (see
// snapshot_error.h) and a message naming the file and the reason:
//   kMissing (NotFound)            no such file;
//   kNotSnapshot (InvalidArgument) not a snapshot file at all;
//   kTruncated (DataLoss)          the file ends early, or is empty;
//   kChecksum (DataLoss)           flipped bytes; names the frame and offset;
//   kUnsupportedVersion (Unimplemented) a future format version, or a
//                                  required section this build cannot read;
//   kIdentityMismatch (FailedPrecondition) another cluster, resource,
//                                  namespace, selector, transform or
//                                  metadata-only setting; names the field
//                                  and both values;
//   kMalformed (DataLoss)          intact checksums around invalid content;
//   kIo                            a failed read (code from errno).
//
// Memory: reads checksummed blocks (about 1 MiB each) and keeps only the
// parsed objects; at most a few blocks are held at a time, so the peak is
// the objects plus a few MiB.
//
// Threads: with options.decode_threads > 0, a snapshot of 2048 objects or
// more is decoded by that many worker threads (Object::Parse is most of a
// load's time) while the calling thread reads and verifies the next
// blocks; they are joined before this returns. With a
// transform.compressor, the first few MiB are decoded on the calling
// thread all the same, so that the compressor trains its dictionary before
// the workers run (objects compressed meanwhile would stay uncompressed).
//
// Thread-safe (no shared state); reads a file that a concurrent
// WriteSnapshot replaces either whole, old or new (the writer renames).
absl::StatusOr<LoadedSnapshot> ReadSnapshot(
    const std::string& dir, const SnapshotIdentity& expected,
    const TransformOptions& transform, const SnapshotReadOptions& options = {});

// The same for a file at an explicit `path` (tests, fuzzing, tools).
absl::StatusOr<LoadedSnapshot> ReadSnapshotFile(
    const std::string& path, const SnapshotIdentity& expected,
    const TransformOptions& transform, const SnapshotReadOptions& options = {});

// The header of dir/SnapshotFileName(expected): path, resource_version,
// written and file_bytes (no objects, no sections), read from the
// prologue and HEADER frame only, which must be intact and of identity
// `expected` (errors as ReadSnapshotFile's). The rest of the file is
// neither read nor verified: what it says is only a promise, which
// ReadSnapshot keeps or breaks. Why: where a warm restart resumes from is
// known before the objects are loaded (SharedIndexInformer::BeginResume).
absl::StatusOr<LoadedSnapshot> ReadSnapshotHeader(
    const std::string& dir, const SnapshotIdentity& expected);

// The identity recorded in the snapshot file at `path`, read from its
// prologue and HEADER frame only: the rest of the file is neither read nor
// verified (ReadSnapshotFile still checks all of it before anything of it
// is used). For a sidecar that cannot ask its API server which resources
// and which cluster its cache directory holds. Errors as ReadSnapshotFile's.
absl::StatusOr<SnapshotIdentity> ReadSnapshotFileIdentity(
    const std::string& path);

}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_READER_H_

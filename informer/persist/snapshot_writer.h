#ifndef INFORMER_PERSIST_SNAPSHOT_WRITER_H_
#define INFORMER_PERSIST_SNAPSHOT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_section.h"
#include "informer/util/clock.h"

namespace informer {

struct SnapshotWriteOptions {
  // Stamps the snapshot's write time. RealClock() when null; must outlive
  // the call.
  Clock* clock = nullptr;
  // The write buffer, and so the size of each checksummed block of
  // objects (an object larger than this gets a block of its own).
  size_t block_bytes = 1 << 20;
  // Test hook: called before each write(2) to the temp file with the file
  // offset and the size about to be written. A non-OK status is taken as
  // that write's failure, as ENOSPC would be: the write fails the same way.
  std::function<absl::Status(uint64_t offset, size_t size)> before_write;
  // More sections, written after the objects in this order (their records
  // are held in memory: for small sections such as a watch history).
  std::vector<SnapshotSection> extra_sections;
  // Objects held compressed with a zstd dictionary (ZstdJsonCompressor)
  // are written as their frames, with the dictionaries (the objects
  // section's version 2, see snapshot_format.h): a load adopts them
  // instead of compressing every object again, and the file is smaller.
  // False, or no object held compressed: every object as its JSON
  // (version 1, which builds before version 2 read too).
  bool compressed_frames = true;
};

struct SnapshotWriteStats {
  // The snapshot file written.
  std::string path;
  // Its size on disk, and the sum of the objects' JSON sizes.
  uint64_t file_bytes = 0;
  uint64_t json_bytes = 0;
  size_t objects = 0;
  // Whether objects were written as zstd frames (see compressed_frames).
  bool frames = false;
};

// Writes a snapshot of one informer's cache: `objects` as the API server's
// JSON (Object::json(): the text as cached, after the transform), the
// informer's applied `resource_version`, its identity `id`, a format
// version, checksums and the write time (see snapshot_format.h), to
// dir/SnapshotFileName(id).
//
// Atomic: the snapshot is written to a temp file in `dir`, fsync'ed,
// renamed over the previous snapshot, and the directory fsync'ed. A reader
// sees the old snapshot or the new one, never a mix, even after a crash or
// a power cut. On failure (a full disk, an unwritable directory, a hook
// error) the status names the file and the failed call (SnapshotProblem
// kIo; for a disk full: ResourceExhausted), the previous snapshot is left
// as it was and the temp file is removed. The one exception: if only the
// directory fsync after the rename fails, the new snapshot is in place (it
// may not survive a power cut) and the error says so.
//
// Memory: streams through one block_bytes buffer; never builds the
// snapshot in memory. The file holds about 1.002x the objects' JSON, or
// their frames' bytes (about 0.7x for ConfigMaps) with compressed_frames.
//
// Thread-safety: may be called from any thread, concurrently too; two
// concurrent writes of the same identity use distinct temp files and the
// last rename wins. Objects are immutable and shared: the caller copies the
// pointers (e.g. Indexer::List()) and calls this with no lock held, so
// event processing goes on during the write (objects replaced meanwhile stay
// alive until it returns). Does not take the DirectoryLock: the caller holds
// it for the process's lifetime.
absl::StatusOr<SnapshotWriteStats> WriteSnapshot(
    const std::string& dir, const SnapshotIdentity& id,
    absl::string_view resource_version, const std::vector<ObjectPtr>& objects,
    const SnapshotWriteOptions& options = {});

// Removes the temp files a writer killed mid-write left in `dir` (their
// names end in ".snapshot.tmp-PID-N"); returns how many. Call it only while
// holding the directory's DirectoryLock and before writing, so that no live
// writer owns one.
absl::StatusOr<int> RemoveStaleSnapshotTempFiles(const std::string& dir);

}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_WRITER_H_

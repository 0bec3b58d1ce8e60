#ifndef INFORMER_PERSIST_DIRECTORY_LOCK_H_
#define INFORMER_PERSIST_DIRECTORY_LOCK_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace informer {

// Exclusive use of a cache directory by one process: an flock(2) on
// DIR/.informer-sidecar.lock, which holds the holder's pid for the error
// message of whoever comes second.
//
// The lock lasts while the object lives; the kernel releases it when the
// process dies, however it dies (kill -9 included), so a crashed holder
// never blocks the next one and there is no stale-lock cleanup. The lock
// file itself stays (removing it would race with a new holder). The
// descriptor is close-on-exec: a child the process execs (a credential
// plugin) never keeps the lock alive after its parent.
//
// flock locks belong to open file descriptions, so a second Acquire of the
// same directory fails in the same process as it does in another one.
// Not for network filesystems whose flock is local to a node.
//
// Thread-safety: Acquire may be called from any thread; the object is
// immutable.
class DirectoryLock {
 public:
  // Locks `dir`, creating it (and missing parents, mode 0700) first.
  // FailedPrecondition (SnapshotProblem kLocked) when another holder has
  // it: "cache directory DIR is in use by another process (pid N; lock file
  // DIR/.informer-sidecar.lock)". kIo errors (code from errno) when the
  // directory or the lock file cannot be created or opened.
  static absl::StatusOr<std::unique_ptr<DirectoryLock>> Acquire(
      const std::string& dir);

  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  // Releases the lock.
  ~DirectoryLock();

  const std::string& dir() const { return dir_; }
  // DIR/.informer-sidecar.lock
  const std::string& lock_file() const { return lock_file_; }

 private:
  DirectoryLock(std::string dir, std::string lock_file, int fd)
      : dir_(std::move(dir)), lock_file_(std::move(lock_file)), fd_(fd) {}

  const std::string dir_;
  const std::string lock_file_;
  const int fd_;
};

}  // namespace informer

#endif  // INFORMER_PERSIST_DIRECTORY_LOCK_H_

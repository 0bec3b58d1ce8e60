#include "informer/persist/directory_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "informer/persist/snapshot_error.h"

namespace informer {
namespace {

constexpr char kLockFileName[] = ".informer-sidecar.lock";

// mkdir -p; an existing directory is fine.
absl::Status MakeDirectories(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return SnapshotIoError(prefix, "creating the cache directory", errno);
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return SnapshotIoError(dir, "stat of the cache directory", errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return SnapshotIoError(dir, "using it as the cache directory", ENOTDIR);
  }
  return absl::OkStatus();
}

// The pid the holder wrote, or "unknown" (it may be between its flock and
// its write, or the file may hold garbage).
std::string HolderPid(int fd) {
  char buf[32];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "unknown";
  const absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(buf, n));
  for (char c : text) {
    if (c < '0' || c > '9') return "unknown";
  }
  return text.empty() ? "unknown" : std::string(text);
}

absl::Status WritePid(int fd, const std::string& path) {
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0) {
    return SnapshotIoError(path, "truncating the lock file", errno);
  }
  if (pwrite(fd, pid.data(), pid.size(), 0) !=
      static_cast<ssize_t>(pid.size())) {
    return SnapshotIoError(path, "writing the lock file", errno);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(
    const std::string& dir) {
  absl::Status s = MakeDirectories(dir);
  if (!s.ok()) return s;
  const std::string lock_file = absl::StrCat(
      dir, (!dir.empty() && dir.back() == '/') ? "" : "/", kLockFileName);
  const int fd = open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return SnapshotIoError(lock_file, "opening the lock file", errno);
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      close(fd);
      return SnapshotIoError(lock_file, "flock", err);
    }
    const std::string pid = HolderPid(fd);
    close(fd);
    return SnapshotError(
        SnapshotProblem::kLocked, absl::StatusCode::kFailedPrecondition,
        lock_file,
        absl::StrCat("cache directory ", dir,
                     " is in use by another process (pid ", pid,
                     "); two sidecars cannot share a cache directory"));
  }
  s = WritePid(fd, lock_file);
  if (!s.ok()) {
    close(fd);
    return s;
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(dir, lock_file, fd));
}

DirectoryLock::~DirectoryLock() {
  // Closing the last descriptor of the open file description releases the
  // flock. The pid stays in the file: the next holder overwrites it.
  close(fd_);
}

}  // namespace informer

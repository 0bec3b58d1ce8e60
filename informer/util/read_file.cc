#include "informer/util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace {

absl::Status OpenError(absl::string_view path, int err) {
  const std::string message =
      absl::StrCat("cannot read \"", path, "\": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::FailedPreconditionError(message);
  }
}

// Closes the descriptor on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Whether open(2) of `path` gave a readable file; a directory is refused
// (open(2) allows it). Call right after the open, while errno is its own.
absl::Status CheckOpened(absl::string_view path, const Fd& fd) {
  if (fd.get() < 0) return OpenError(path, errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return OpenError(path, errno);
  if (S_ISDIR(st.st_mode)) return OpenError(path, EISDIR);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadFile(absl::string_view path, size_t max_bytes) {
  const std::string p(path);
  Fd fd(open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (absl::Status st = CheckOpened(path, fd); !st.ok()) return st;
  std::string out;
  char buf[16384];
  while (true) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(
          absl::StrCat("error reading \"", path, "\": ", std::strerror(errno)));
    }
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", path, "\" is larger than ", max_bytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::Status CheckReadable(absl::string_view path) {
  const std::string p(path);
  Fd fd(open(p.c_str(), O_RDONLY | O_CLOEXEC));
  return CheckOpened(path, fd);
}

}  // namespace informer

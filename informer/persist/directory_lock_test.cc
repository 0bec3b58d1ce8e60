#include "informer/persist/directory_lock.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/persist/snapshot_error.h"

extern char** environ;

namespace informer {
namespace {

std::string TempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/lock-XXXXXX");
  if (mkdtemp(&tmpl[0]) == nullptr) abort();
  return tmpl;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectLockedBy(const absl::Status& s, const std::string& dir,
                    pid_t holder) {
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(GetSnapshotProblem(s), SnapshotProblem::kLocked) << s;
  EXPECT_TRUE(absl::StrContains(
      s.message(),
      absl::StrCat("cache directory ", dir,
                   " is in use by another process (pid ", holder, ")")))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), dir + "/.informer-sidecar.lock"))
      << s;
}

TEST(DirectoryLockTest, CreatesTheDirectoryAndRecordsThePid) {
  const std::string dir = TempDir() + "/a/b/cache";
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
      DirectoryLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ((*lock)->dir(), dir);
  EXPECT_EQ((*lock)->lock_file(), dir + "/.informer-sidecar.lock");
  EXPECT_EQ(Slurp((*lock)->lock_file()), absl::StrCat(getpid(), "\n"));
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(DirectoryLockTest, ASecondHolderInTheSameProcessIsRefused) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<DirectoryLock>> first =
      DirectoryLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  ExpectLockedBy(DirectoryLock::Acquire(dir).status(), dir, getpid());
  first->reset();  // released
  EXPECT_TRUE(DirectoryLock::Acquire(dir).ok());
}

// Forks a child that takes the lock, tells the parent through a pipe, and
// waits (until killed). Returns its pid, once it holds the lock; -1 if it
// failed to take it.
pid_t ChildHoldingTheLock(const std::string& dir) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
        DirectoryLock::Acquire(dir);
    const char byte = lock.ok() ? 'y' : 'n';
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    for (;;) pause();
  }
  close(ready[1]);
  char byte = 0;
  const bool ok = read(ready[0], &byte, 1) == 1 && byte == 'y';
  close(ready[0]);
  if (!ok) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

TEST(DirectoryLockTest, AnotherProcessHoldsItUntilItDies) {
  const std::string dir = TempDir();
  const pid_t child = ChildHoldingTheLock(dir);
  ASSERT_GT(child, 0);
  ExpectLockedBy(DirectoryLock::Acquire(dir).status(), dir, child);
  // kill -9: no destructor runs; the kernel drops the lock with the process.
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
      DirectoryLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(Slurp((*lock)->lock_file()), absl::StrCat(getpid(), "\n"));
}

TEST(DirectoryLockTest, AProcessThatHoldsItKeepsOthersOut) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
      DirectoryLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  // A child of ours that did not inherit anything still sees it locked.
  const pid_t child = ChildHoldingTheLock(dir);
  EXPECT_EQ(child, -1);
}

TEST(DirectoryLockTest, ExecedChildrenDoNotInheritTheLock) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
      DirectoryLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  // A long-lived child exec'd while we hold the lock (as a credential
  // plugin would be).
  pid_t sleeper = 0;
  char arg0[] = "sleep", arg1[] = "600";
  char* argv[] = {arg0, arg1, nullptr};
  ASSERT_EQ(posix_spawnp(&sleeper, "sleep", nullptr, nullptr, argv, environ),
            0);
  lock->reset();
  absl::StatusOr<std::unique_ptr<DirectoryLock>> again =
      DirectoryLock::Acquire(dir);
  EXPECT_TRUE(again.ok()) << again.status();
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST(DirectoryLockTest, AFileInTheWayIsAClearError) {
  const std::string file = TempDir() + "/plain";
  std::ofstream(file) << "x";
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
      DirectoryLock::Acquire(file);
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(GetSnapshotProblem(lock.status()), SnapshotProblem::kIo);
  EXPECT_TRUE(absl::StrContains(lock.status().message(), file))
      << lock.status();
  EXPECT_TRUE(absl::StrContains(lock.status().message(), "Not a directory"))
      << lock.status();
}

}  // namespace
}  // namespace informer

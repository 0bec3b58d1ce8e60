#include "informer/persist/snapshot_writer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

using snapshot_testing::ConfigMaps;
using snapshot_testing::ConfigMapsIdentity;
using snapshot_testing::JsonsOf;
using snapshot_testing::ListDir;
using snapshot_testing::MakeTempDir;

// Runs `fn` in a forked child and returns its exit code (-1: it died of a
// signal). The child reports failures on stderr (the test log).
int RunInChild(const std::function<int()>& fn) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool WriteProcFile(const char* path, const std::string& text) {
  FILE* f = fopen(path, "w");
  if (f == nullptr) return false;
  const bool ok = fputs(text.c_str(), f) >= 0;
  return fclose(f) == 0 && ok;
}

// In a child: a mount namespace of its own, so that its mounts vanish with
// it and never touch the host's. A non-root user gets a user namespace too,
// in which it may mount a tmpfs (where unprivileged user namespaces are
// enabled, as on Debian).
bool PrivateMounts() {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (uid != 0) {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      perror("unshare(CLONE_NEWUSER | CLONE_NEWNS)");
      return false;
    }
    if (!WriteProcFile("/proc/self/setgroups", "deny") ||
        !WriteProcFile("/proc/self/uid_map", absl::StrCat("0 ", uid, " 1")) ||
        !WriteProcFile("/proc/self/gid_map", absl::StrCat("0 ", gid, " 1"))) {
      perror("writing the user namespace's id maps");
      return false;
    }
  } else if (unshare(CLONE_NEWNS) != 0) {
    perror("unshare(CLONE_NEWNS)");
    return false;
  }
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    perror("mount --make-rprivate /");
    return false;
  }
  return true;
}

// In a child: a tmpfs of `options` on `dir`, in a private mount namespace.
bool MountTmpfs(const std::string& dir, const char* options) {
  if (!PrivateMounts()) return false;
  if (mount("tmpfs", dir.c_str(), "tmpfs", 0, options) != 0) {
    perror(absl::StrCat("mount -t tmpfs -o ", options).c_str());
    return false;
  }
  return true;
}

TEST(SnapshotWriterTest, WritesWhatTheReaderReadsBack) {
  const std::string dir = MakeTempDir();
  const std::vector<ObjectPtr> objects = ConfigMaps(300, 1024);
  FakeClock clock(absl::FromUnixSeconds(1764770000));
  SnapshotWriteOptions options;
  options.clock = &clock;
  absl::StatusOr<SnapshotWriteStats> stats =
      WriteSnapshot(dir, ConfigMapsIdentity(), "4242", objects, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->path, dir + "/configmaps.snapshot");
  EXPECT_EQ(stats->objects, 300u);
  struct stat st;
  ASSERT_EQ(stat(stats->path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), stats->file_bytes);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // a cache may hold Secrets
  uint64_t json_bytes = 0;
  for (const std::string& j : JsonsOf(objects)) json_bytes += j.size();
  EXPECT_EQ(stats->json_bytes, json_bytes);
  EXPECT_LE(stats->file_bytes, json_bytes * 1.01);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"configmaps.snapshot"});

  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->resource_version, "4242");
  EXPECT_EQ(loaded->written, absl::FromUnixSeconds(1764770000));
  EXPECT_EQ(loaded->file_bytes, stats->file_bytes);
  EXPECT_EQ(JsonsOf(loaded->objects), JsonsOf(objects));
  EXPECT_EQ(loaded->objects[7]->Key(), "default/cm-000007");
}

TEST(SnapshotWriterTest, SmallBlocksAndObjectsLargerThanABlock) {
  const std::string dir = MakeTempDir();
  std::vector<ObjectPtr> objects = ConfigMaps(50, 100);
  objects.push_back(*Object::Parse(snapshot_testing::ConfigMapJson(99, 5000)));
  SnapshotWriteOptions options;
  options.block_bytes = 512;  // a few objects a block; the big one alone
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", objects, options).ok());
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(JsonsOf(loaded->objects), JsonsOf(objects));
}

TEST(SnapshotWriterTest, AnEmptyCacheIsASnapshotToo) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteSnapshot(dir, ConfigMapsIdentity(), "9", {}).ok());
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->objects.empty());
  EXPECT_EQ(loaded->resource_version, "9");
}

TEST(SnapshotWriterTest, ANewSnapshotReplacesThePreviousOne) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(10)).ok());
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "2", ConfigMaps(3)).ok());
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->resource_version, "2");
  EXPECT_EQ(loaded->objects.size(), 3u);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"configmaps.snapshot"});
}

// The previous snapshot (RV "1", 10 objects) is what `dir` must still hold
// after a failed write.
void ExpectPreviousSnapshotIntact(const std::string& dir) {
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->resource_version, "1");
  EXPECT_EQ(loaded->objects.size(), 10u);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"configmaps.snapshot"});
}

TEST(SnapshotWriterTest, DiskFullMidWriteKeepsThePreviousSnapshot) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(10)).ok());
  for (uint64_t fail_at : {uint64_t{0}, uint64_t{16}, uint64_t{70000}}) {
    SnapshotWriteOptions options;
    options.block_bytes = 8192;
    int calls = 0;
    options.before_write = [&](uint64_t offset, size_t size) {
      ++calls;
      if (offset + size > fail_at) {
        return absl::ResourceExhaustedError("No space left on device");
      }
      return absl::OkStatus();
    };
    absl::StatusOr<SnapshotWriteStats> stats = WriteSnapshot(
        dir, ConfigMapsIdentity(), "2", ConfigMaps(100, 1024), options);
    ASSERT_FALSE(stats.ok());
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(GetSnapshotProblem(stats.status()), SnapshotProblem::kIo);
    EXPECT_TRUE(absl::StrContains(stats.status().message(),
                                  dir + "/configmaps.snapshot.tmp-"))
        << stats.status();
    EXPECT_TRUE(
        absl::StrContains(stats.status().message(), "No space left on device"))
        << stats.status();
    EXPECT_GE(calls, 1);
    ExpectPreviousSnapshotIntact(dir);
  }
}

TEST(SnapshotWriterTest, AFileSizeLimitFailsTheWriteCleanly) {
  // A real kernel write failure that needs no privileges: RLIMIT_FSIZE
  // makes write(2) fail with EFBIG past the limit (SIGXFSZ ignored).
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(10)).ok());
  const std::vector<ObjectPtr> big = ConfigMaps(200, 1024);
  const int code = RunInChild([&] {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {100000, 100000};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    absl::StatusOr<SnapshotWriteStats> s =
        WriteSnapshot(dir, ConfigMapsIdentity(), "2", big);
    if (s.ok() || GetSnapshotProblem(s.status()) != SnapshotProblem::kIo ||
        !absl::StrContains(s.status().message(), "File too large")) {
      fprintf(stderr, "unexpected: %s\n", s.status().ToString().c_str());
      return 11;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
  ExpectPreviousSnapshotIntact(dir);
}

TEST(SnapshotWriterTest, AFullTmpfsFailsTheWriteCleanly) {
  // A size-limited tmpfs, as a full disk really behaves (ENOSPC from the
  // kernel).
  const std::string dir = MakeTempDir();
  const std::vector<ObjectPtr> small = ConfigMaps(10);
  const std::vector<ObjectPtr> big = ConfigMaps(2000, 1024);  // ~2.5 MB
  const int code = RunInChild([&] {
    if (!MountTmpfs(dir, "size=1m")) return 10;
    if (!WriteSnapshot(dir, ConfigMapsIdentity(), "1", small).ok()) return 12;
    absl::StatusOr<SnapshotWriteStats> s =
        WriteSnapshot(dir, ConfigMapsIdentity(), "2", big);
    if (s.ok() || s.status().code() != absl::StatusCode::kResourceExhausted ||
        !absl::StrContains(s.status().message(), "No space left on device")) {
      fprintf(stderr, "unexpected: %s\n", s.status().ToString().c_str());
      return 13;
    }
    fprintf(stderr, "full tmpfs: %s\n", s.status().ToString().c_str());
    absl::StatusOr<LoadedSnapshot> loaded =
        ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
    if (!loaded.ok() || loaded->resource_version != "1") return 14;
    if (ListDir(dir) != std::vector<std::string>{"configmaps.snapshot"}) {
      return 15;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(SnapshotWriterTest, AMissingDirectoryIsAClearError) {
  const std::string dir = MakeTempDir() + "/does/not/exist";
  absl::StatusOr<SnapshotWriteStats> s =
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(3));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(GetSnapshotProblem(s.status()), SnapshotProblem::kIo);
  EXPECT_TRUE(absl::StrContains(s.status().message(), dir)) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "creating the file"))
      << s.status();
}

TEST(SnapshotWriterTest, AnUnwritableDirectoryKeepsThePreviousSnapshot) {
  const std::string dir = MakeTempDir();
  const int code = RunInChild([&] {
    // Mode bits do not stop root: a read-only remount does.
    if (!MountTmpfs(dir, "size=4m")) return 10;
    if (!WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(10)).ok()) {
      return 11;
    }
    if (mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) !=
        0) {
      perror("mount -o remount,ro");
      return 12;
    }
    absl::StatusOr<SnapshotWriteStats> s =
        WriteSnapshot(dir, ConfigMapsIdentity(), "2", ConfigMaps(5));
    const char* want = "Read-only file system";
    if (s.ok() || GetSnapshotProblem(s.status()) != SnapshotProblem::kIo ||
        !absl::StrContains(s.status().message(), want) ||
        !absl::StrContains(s.status().message(), dir)) {
      fprintf(stderr, "unexpected: %s\n", s.status().ToString().c_str());
      return 13;
    }
    fprintf(stderr, "unwritable: %s\n", s.status().ToString().c_str());
    absl::StatusOr<LoadedSnapshot> loaded =
        ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
    if (!loaded.ok() || loaded->resource_version != "1") return 14;
    if (ListDir(dir) != std::vector<std::string>{"configmaps.snapshot"}) {
      return 15;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(SnapshotWriterTest, ConcurrentWritesLeaveOneWholeSnapshot) {
  const std::string dir = MakeTempDir();
  const std::vector<ObjectPtr> a = ConfigMaps(200), b = ConfigMaps(150);
  std::thread t1([&] {
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(WriteSnapshot(dir, ConfigMapsIdentity(), "a", a).ok());
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(WriteSnapshot(dir, ConfigMapsIdentity(), "b", b).ok());
    }
  });
  t1.join();
  t2.join();
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, ConfigMapsIdentity(), TransformOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->objects.size(),
            loaded->resource_version == "a" ? 200u : 150u);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"configmaps.snapshot"});
}

TEST(SnapshotWriterTest, StaleTempFilesAreRemoved) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(
      WriteSnapshot(dir, ConfigMapsIdentity(), "1", ConfigMaps(2)).ok());
  snapshot_testing::WriteAll(dir + "/pods.snapshot.tmp-123-0", "partial");
  snapshot_testing::WriteAll(dir + "/configmaps.snapshot.tmp-9-4", "x");
  snapshot_testing::WriteAll(dir + "/notes.txt", "keep");
  absl::StatusOr<int> removed = RemoveStaleSnapshotTempFiles(dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(ListDir(dir),
            (std::vector<std::string>{"configmaps.snapshot", "notes.txt"}));
  EXPECT_FALSE(RemoveStaleSnapshotTempFiles(dir + "/missing").ok());
}

}  // namespace
}  // namespace informer

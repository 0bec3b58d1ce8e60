// What a cache snapshot costs: writes and reads a snapshot of N ConfigMaps
// shaped like the emulator's seed (1 KiB of data, labels, managedFields
// dropped as the informer caches them: ~1.4 KB of JSON each).
//
//   bazel run -c opt //informer/persist:snapshot_bench --
//       [--objects=50000 --data_bytes=1024 --runs=5 --dir=/var/tmp/x]
//
// Per run: WriteSnapshot (temp file, fsync, rename, directory fsync);
// ReadSnapshot with the file in the page cache ("warm"); ReadSnapshot after
// posix_fadvise(DONTNEED) evicted the file ("cold": read from the disk,
// where the kernel honours it); ReadSnapshot warm with two decode threads;
// and, for scale, Object::Parse of the same
// JSON from memory (the decode a read cannot avoid), and the CRC-32 of all
// the JSON (the checksum a read computes); the warm read through a fresh
// ZstdJsonCompressor (compressing every object, as the sidecar holds
// them), on 1 and 2 threads; and the same objects held compressed written
// as zstd frames with their dictionary (the objects section's version 2)
// and read back through a fresh compressor, which adopts the dictionary
// and the frames. Prints wall and CPU time of each
// step per run and their medians, the bytes on disk over the objects' JSON
// bytes, and the process's peak RSS.

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "informer/persist/snapshot_format.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

ABSL_FLAG(int, objects, 50000, "ConfigMaps in the snapshot.");
ABSL_FLAG(int, data_bytes, 1024, "Bytes of data per ConfigMap.");
ABSL_FLAG(int, runs, 5, "Runs (medians are reported).");
ABSL_FLAG(std::string, dir, "",
          "Directory for the snapshot (default: a new one in /var/tmp).");
ABSL_FLAG(bool, read_only, false,
          "Internal: only read the snapshot in --dir and print the peak RSS "
          "(the benchmark runs itself so, in a fresh process).");

namespace informer {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// This process's CPU time (all threads), in ms: on a loaded machine it
// says more about the code than the wall clock does.
double CpuMs() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Wall and CPU time of one step.
struct Timing {
  double wall = 0, cpu = 0;
};

template <typename Fn>
Timing Time(Fn fn) {
  const absl::Time start = absl::Now();
  const double cpu = CpuMs();
  fn();
  return {Ms(absl::Now() - start), CpuMs() - cpu};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

// One ReadSnapshot; aborts on an error (a benchmark of a failing read
// would be meaningless).
// With `zstd`, the objects are compressed as the sidecar stores them: a
// fresh ZstdJsonCompressor (its dictionary trained on the first objects).
void Read(const std::string& dir, const SnapshotIdentity& id, size_t want,
          int threads = 0, bool zstd = false) {
  SnapshotReadOptions options;
  options.decode_threads = threads;
  TransformOptions transform;
  if (zstd) transform.compressor = std::make_shared<ZstdJsonCompressor>();
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(dir, id, transform, options);
  if (!loaded.ok() || loaded->objects.size() != want) {
    fprintf(stderr, "read failed: %s\n", loaded.status().ToString().c_str());
    abort();
  }
}

void Parse(const std::vector<std::string>& jsons) {
  std::vector<ObjectPtr> parsed;
  parsed.reserve(jsons.size());
  for (const std::string& j : jsons) parsed.push_back(*Object::Parse(j));
}

// Peak RSS of this process, in MB.
double PeakRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// In a fresh process: the peak RSS of reading the snapshot, against the
// heap the loaded objects hold, which a reader cannot avoid.
int ReadOnly() {
  const double before = PeakRssMb();
  absl::StatusOr<LoadedSnapshot> loaded =
      ReadSnapshot(absl::GetFlag(FLAGS_dir),
                   snapshot_testing::ConfigMapsIdentity(), TransformOptions());
  if (!loaded.ok()) return 1;
  double objects = 0;
  for (const ObjectPtr& o : loaded->objects) objects += o->MemoryUsage();
  printf(
      "read in a fresh process: peak RSS %.0f MB (%.0f MB at start); "
      "the objects hold %.0f MB of heap, the file is %.0f MB\n",
      PeakRssMb(), before, objects / (1 << 20),
      loaded->file_bytes / double{1 << 20});
  return 0;
}

// Runs this benchmark with --read_only on `dir`.
void MeasureReadMemory(const std::string& dir) {
  const std::string cmd =
      absl::StrCat("/proc/", getpid(), "/exe --read_only --dir=", dir);
  fflush(stdout);
  if (system(cmd.c_str()) != 0) fprintf(stderr, "read-only run failed\n");
}

// The steps of one run, in order.
constexpr const char* kSteps[] = {"write",
                                  "read warm",
                                  "read cold",
                                  "read warm 2 threads",
                                  "parse only",
                                  "crc32 only",
                                  "read warm zstd",
                                  "read warm zstd 2 threads",
                                  "write frames",
                                  "read frames zstd",
                                  "read frames zstd 2 threads"};
constexpr int kStepCount = 11;

// The objects held as the sidecar holds them: compressed by one
// ZstdJsonCompressor (the first 511 sampled to train it kept as JSON).
std::vector<ObjectPtr> Compressed(const std::vector<std::string>& jsons) {
  TransformOptions t;
  t.compressor = std::make_shared<ZstdJsonCompressor>();
  std::vector<ObjectPtr> out;
  out.reserve(jsons.size());
  for (const std::string& j : jsons) out.push_back(*Object::Parse(j, t));
  return out;
}

int Run() {
  const int n = absl::GetFlag(FLAGS_objects);
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    char tmpl[] = "/var/tmp/snapshot-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
  }
  const std::vector<ObjectPtr> objects =
      snapshot_testing::ConfigMaps(n, absl::GetFlag(FLAGS_data_bytes));
  const std::vector<std::string> jsons = snapshot_testing::JsonsOf(objects);
  std::string all;
  for (const std::string& j : jsons) all += j;
  const SnapshotIdentity id = snapshot_testing::ConfigMapsIdentity();
  const std::vector<ObjectPtr> compressed = Compressed(jsons);
  const std::string frames_dir = dir + "/frames";
  mkdir(frames_dir.c_str(), 0700);
  std::vector<double> wall[kStepCount], cpu[kStepCount];
  SnapshotWriteStats stats, frames_stats;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    Timing t[kStepCount];
    t[0] = Time([&] {
      absl::StatusOr<SnapshotWriteStats> w =
          WriteSnapshot(dir, id, "123456", objects);
      if (!w.ok()) {
        fprintf(stderr, "write failed: %s\n", w.status().ToString().c_str());
        abort();
      }
      stats = *w;
    });
    t[1] = Time([&] { Read(dir, id, objects.size()); });
    Evict(stats.path);
    t[2] = Time([&] { Read(dir, id, objects.size()); });
    t[3] = Time([&] { Read(dir, id, objects.size(), /*threads=*/2); });
    t[4] = Time([&] { Parse(jsons); });
    t[5] = Time([&] {
      if (snapshot_format::Crc32(all) == 42) printf("(crc 42)\n");
    });
    t[6] = Time([&] { Read(dir, id, objects.size(), 0, /*zstd=*/true); });
    t[7] = Time([&] { Read(dir, id, objects.size(), 2, /*zstd=*/true); });
    t[8] = Time([&] {
      absl::StatusOr<SnapshotWriteStats> w =
          WriteSnapshot(frames_dir, id, "123456", compressed);
      if (!w.ok() || !w->frames) abort();
      frames_stats = *w;
    });
    t[9] = Time([&] { Read(frames_dir, id, n, 0, /*zstd=*/true); });
    t[10] = Time([&] { Read(frames_dir, id, n, 2, /*zstd=*/true); });
    printf("run %d:", run + 1);
    for (int i = 0; i < kStepCount; ++i) {
      wall[i].push_back(t[i].wall);
      cpu[i].push_back(t[i].cpu);
      printf(" %s %.1f ms (cpu %.1f);", kSteps[i], t[i].wall, t[i].cpu);
    }
    printf("\n");
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "objects %zu, JSON %.1f MB (%.0f B each), file %.1f MB, "
      "file/JSON %.4f, peak RSS %.0f MB\n",
      stats.objects, stats.json_bytes / 1e6,
      static_cast<double>(stats.json_bytes) / stats.objects,
      stats.file_bytes / 1e6,
      static_cast<double>(stats.file_bytes) / stats.json_bytes,
      ru.ru_maxrss / 1024.0);
  printf(
      "as zstd frames: file %.1f MB, file/JSON %.4f\n",
      frames_stats.file_bytes / 1e6,
      static_cast<double>(frames_stats.file_bytes) / frames_stats.json_bytes);
  printf("median of %zu runs:", wall[0].size());
  for (int i = 0; i < kStepCount; ++i) {
    printf(" %s %.1f ms (cpu %.1f);", kSteps[i], Median(wall[i]),
           Median(cpu[i]));
  }
  printf("\n");
  MeasureReadMemory(dir);
  unlink(stats.path.c_str());
  unlink(frames_stats.path.c_str());
  rmdir(frames_dir.c_str());
  if (absl::GetFlag(FLAGS_dir).empty()) rmdir(dir.c_str());
  return 0;
}

}  // namespace
}  // namespace informer

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_read_only)) return informer::ReadOnly();
  return informer::Run();
}

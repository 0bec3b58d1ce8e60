// libFuzzer target: ReadSnapshotFile on arbitrary bytes. It must never crash,
// leak or hang; every error must carry a SnapshotProblem; and whatever it
// accepts must survive a write and a second read unchanged (never wrong
// data). The input is served from a memfd, so no disk is touched.
//
// Each input is read twice: as is, and with every checksum recomputed
// (where the frame sizes allow), so that mutations reach the checks behind
// the checksums (headers, sections, counts, objects) instead of stopping at
// a checksum mismatch nearly every time.

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_format.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace {

struct Files {
  int fd = -1;
  std::string path;  // the memfd, reopened by the reader through /proc
  std::string dir;   // for the re-written snapshot
};

Files& GetFiles() {
  static Files* files = [] {
    auto* f = new Files;
    f->fd = memfd_create("snapshot-fuzz", MFD_CLOEXEC);
    if (f->fd < 0) abort();
    f->path = absl::StrCat("/proc/self/fd/", f->fd);
    char tmpl[] = "/tmp/snapshot-fuzz-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) abort();
    f->dir = tmpl;
    return f;
  }();
  return *files;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "property violated: %s\n", what);
    abort();
  }
}

// What was read is written back and read again: the same objects.
void CheckRoundTrip(const informer::LoadedSnapshot& loaded) {
  using informer::snapshot_testing::ConfigMapsIdentity;
  using informer::snapshot_testing::JsonsOf;
  const Files& files = GetFiles();
  absl::StatusOr<informer::SnapshotWriteStats> written =
      informer::WriteSnapshot(files.dir, ConfigMapsIdentity(),
                              loaded.resource_version, loaded.objects);
  Check(written.ok(), "an accepted snapshot can be written back");
  absl::StatusOr<informer::LoadedSnapshot> again = informer::ReadSnapshot(
      files.dir, ConfigMapsIdentity(), informer::TransformOptions());
  Check(again.ok(), "a written snapshot reads back");
  Check(again->resource_version == loaded.resource_version,
        "the resource version survives");
  Check(JsonsOf(again->objects) == JsonsOf(loaded.objects),
        "the objects survive");
}

// `in` with the prologue's and every frame's checksums made right, as far
// as the frame sizes fit in it.
std::string FixChecksums(std::string in) {
  namespace sf = informer::snapshot_format;
  if (in.size() < sf::kPrologueBytes) return in;
  sf::PutFixed32(sf::Crc32(absl::string_view(in).substr(0, 12)), &in[12]);
  size_t at = sf::kPrologueBytes;
  while (in.size() - at >= sf::kFrameHeaderBytes) {
    char* h = &in[at];
    const uint32_t size = sf::GetFixed32(h + 4);
    sf::EncodeFrameHeader(sf::GetFixed32(h), size, h);
    at += sf::kFrameHeaderBytes;
    if (in.size() - at < uint64_t{size} + sf::kFrameTrailerBytes) break;
    sf::PutFixed32(sf::Crc32(absl::string_view(in).substr(at, size)),
                   &in[at + size]);
    at += size + sf::kFrameTrailerBytes;
  }
  return in;
}

void ReadOne(const std::string& bytes) {
  const Files& files = GetFiles();
  if (ftruncate(files.fd, 0) != 0) abort();
  const size_t size = bytes.size();
  if (pwrite(files.fd, bytes.data(), size, 0) != static_cast<ssize_t>(size)) {
    abort();
  }
  absl::StatusOr<informer::LoadedSnapshot> loaded = informer::ReadSnapshotFile(
      files.path, informer::snapshot_testing::ConfigMapsIdentity(),
      informer::TransformOptions());
  if (!loaded.ok()) {
    Check(informer::GetSnapshotProblem(loaded.status()) !=
              informer::SnapshotProblem::kNone,
          "every error names its problem");
    return;
  }
  Check(loaded->file_bytes == size, "the whole input was read");
  CheckRoundTrip(*loaded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  ReadOne(input);
  const std::string fixed = FixChecksums(input);
  if (fixed != input) ReadOne(fixed);
  return 0;
}

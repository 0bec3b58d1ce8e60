// Writes the seed corpus of snapshot_reader_fuzzer into argv[1]: valid
// snapshots (empty, a few objects, many small blocks) of the identity the
// fuzzer expects, so that mutations reach every check behind the prologue.

#include <stdio.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  using informer::snapshot_testing::ConfigMaps;
  const informer::SnapshotIdentity id =
      informer::snapshot_testing::ConfigMapsIdentity();
  struct Seed {
    int objects;
    int data_bytes;
    size_t block_bytes;
  };
  const Seed seeds[] = {{0, 0, 1 << 20}, {1, 16, 1 << 20}, {3, 40, 300}};
  int n = 0;
  for (const Seed& s : seeds) {
    const std::string dir = absl::StrCat(argv[1], "/seed-", n++);
    if (mkdir(dir.c_str(), 0700) != 0) return 1;
    informer::SnapshotWriteOptions options;
    options.block_bytes = s.block_bytes;
    absl::StatusOr<informer::SnapshotWriteStats> w = informer::WriteSnapshot(
        dir, id, "42", ConfigMaps(s.objects, s.data_bytes), options);
    if (!w.ok()) {
      fprintf(stderr, "%s\n", w.status().ToString().c_str());
      return 1;
    }
  }
  return 0;
}

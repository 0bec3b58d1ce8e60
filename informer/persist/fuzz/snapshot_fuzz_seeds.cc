// Writes the seed corpus of snapshot_reader_fuzzer into argv[1]: valid
// snapshots (empty, a few objects, many small blocks, objects held as zstd
// frames with their dictionary) of the identity the fuzzer expects, so
// that mutations reach every check behind the prologue.

#include <stdio.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const informer::SnapshotIdentity id =
      informer::snapshot_testing::ConfigMapsIdentity();
  struct Seed {
    int objects;
    int data_bytes;
    size_t block_bytes;
    // Objects held compressed (a dictionary trained on the first 2): the
    // objects section's version 2, JSON and frame records mixed.
    bool frames;
  };
  const Seed seeds[] = {{0, 0, 1 << 20, false},
                        {1, 16, 1 << 20, false},
                        {3, 40, 300, false},
                        {4, 100, 1 << 20, true}};
  int n = 0;
  for (const Seed& s : seeds) {
    const std::string dir = absl::StrCat(argv[1], "/seed-", n++);
    if (mkdir(dir.c_str(), 0700) != 0) return 1;
    informer::SnapshotWriteOptions options;
    options.block_bytes = s.block_bytes;
    std::vector<informer::ObjectPtr> objects;
    informer::TransformOptions transform;
    if (s.frames) {
      informer::ZstdJsonCompressor::Options z;
      z.train_objects = 2;
      transform.compressor = std::make_shared<informer::ZstdJsonCompressor>(z);
    }
    for (int i = 0; i < s.objects; ++i) {
      objects.push_back(*informer::Object::Parse(
          informer::snapshot_testing::ConfigMapJson(i, s.data_bytes),
          transform));
    }
    absl::StatusOr<informer::SnapshotWriteStats> w =
        informer::WriteSnapshot(dir, id, "42", objects, options);
    if (!w.ok()) {
      fprintf(stderr, "%s\n", w.status().ToString().c_str());
      return 1;
    }
  }
  return 0;
}

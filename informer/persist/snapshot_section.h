#ifndef INFORMER_PERSIST_SNAPSHOT_SECTION_H_
#define INFORMER_PERSIST_SNAPSHOT_SECTION_H_

#include <cstdint>
#include <string>
#include <vector>

namespace informer {

// A section of a snapshot file besides its objects (see snapshot_format.h):
// a name, a version of its own, whether a reader that does not know it
// must refuse the file (`required`) or may skip it, and its records, each
// an opaque byte string for the section's own codec. The writer writes
// them after the objects (SnapshotWriteOptions::extra_sections); the
// reader hands back the optional ones it is asked for
// (SnapshotReadOptions::keep_sections), checksums verified, their content
// not interpreted. Value type.
struct SnapshotSection {
  std::string name;
  uint64_t version = 1;
  bool required = false;
  std::vector<std::string> records;
};

}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_SECTION_H_

#ifndef INFORMER_PERSIST_SNAPSHOT_FORMAT_H_
#define INFORMER_PERSIST_SNAPSHOT_FORMAT_H_

// The snapshot file format, shared by the writer and the reader (internal to
// //informer/persist; see snapshot_writer.h for the public API).
//
// A file is a prologue followed by checksummed frames:
//
//   prologue (16 bytes): magic "\x89INFSNP\n" | u32 format version |
//                        u32 crc32 of the 12 bytes before it
//   frame:               u32 type | u32 payload size | u32 crc32 of those 8
//                        bytes | payload | u32 crc32 of the payload
//
// Integers are little-endian; "varint" below is LEB128 (7 bits a byte).
// The prologue stays as it is in every format version, so that any build
// can tell a snapshot of a future version (kUnsupportedVersion) from
// damage. The magic's first byte is not ASCII and it ends in '\n', so a
// text-mode copy or a 7-bit channel that damaged the file is caught there.
//
// Frames of format version 1, in this order:
//   HEADER (once, first): key/value pairs (varint count, then varint-sized
//     key and value strings): the identity, the resource version, the write
//     time. Unknown keys are ignored, so a writer may add some freely.
//   sections, each: SECTION_BEGIN (varint-sized name, varint section
//     version, varint flags, varint record count), any number of RECORDS
//     frames (records, each a varint size and its bytes), SECTION_END
//     (varint record count, varint record bytes). A reader skips a section
//     it does not know unless its flags say kSectionRequired.
//   END (once, last; varint section count). Nothing may follow it: a file
//     without it was cut short.
// Version 1 writes one required section, "objects", in one of two section
// versions: version 1, one record per object, its JSON as cached; or, when
// objects are held compressed, version 2 (see object_record_codec.h):
// tagged records, the zstd dictionaries first, then per object its JSON or
// the zstd frame it is held as (the dictionary and the frame give the JSON
// back). A build that knows only section version 1 rejects version 2 as
// kUnsupportedVersion (the section is required), never misreads it. More
// sections (e.g. the watch history that resume tokens need) are added
// without changing the format version: they are self-describing.
//
// Checksums: every byte of a file is covered by one (a frame's size is
// checked before it is trusted, so a flipped size byte reads as damage, not
// as a file cut short). CRC-32 (zlib's, the gzip polynomial).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/persist/snapshot_identity.h"

namespace informer {
namespace snapshot_format {

inline constexpr char kMagic[8] = {'\x89', 'I', 'N', 'F', 'S', 'N', 'P', '\n'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kPrologueBytes = 16;
inline constexpr size_t kFrameHeaderBytes = 12;
inline constexpr size_t kFrameTrailerBytes = 4;
// Larger frames are refused: no Kubernetes object comes near it, and it
// bounds what a damaged or hostile file can make the reader allocate.
inline constexpr uint32_t kMaxFramePayload = 256u << 20;

enum FrameType : uint32_t {
  kHeaderFrame = 1,
  kSectionBeginFrame = 2,
  kRecordsFrame = 3,
  kSectionEndFrame = 4,
  kEndFrame = 5,
};

// SECTION_BEGIN flags.
inline constexpr uint64_t kSectionRequired = 1;

// The objects section.
inline constexpr char kObjectsSection[] = "objects";
inline constexpr uint64_t kObjectsSectionVersion = 1;
// The objects section with tagged records: JSON, dictionaries and frames.
inline constexpr uint64_t kObjectsSectionVersionFrames = 2;

uint32_t Crc32(absl::string_view data);

void PutFixed32(uint32_t v, char* out);
uint32_t GetFixed32(const char* in);
void AppendVarint(uint64_t v, std::string* out);
void AppendString(absl::string_view s, std::string* out);  // varint size+text
// Bytes AppendVarint(v) writes.
size_t VarintSize(uint64_t v);

// Reads varints and strings from a payload; any read past its end fails
// (false) and leaves the cursor at the end.
class PayloadCursor {
 public:
  explicit PayloadCursor(absl::string_view payload) : rest_(payload) {}
  bool ReadVarint(uint64_t* v);
  bool ReadString(absl::string_view* s);
  bool done() const { return rest_.empty(); }
  size_t remaining() const { return rest_.size(); }

 private:
  absl::string_view rest_;
};

// The prologue for `version`.
std::string EncodePrologue(uint32_t version);

// The HEADER frame's content.
struct Header {
  SnapshotIdentity identity;
  std::string resource_version;
  absl::Time written;
  // Who wrote it, for people reading a file ("informer-sidecar").
  std::string writer;
};
std::string EncodeHeader(const Header& header);
// InvalidArgument naming the problem for a payload that does not decode or
// lacks a required key.
absl::StatusOr<Header> DecodeHeader(absl::string_view payload);

// A frame's first 12 bytes for `type` and `payload_size`.
void EncodeFrameHeader(uint32_t type, uint32_t payload_size, char* out);

}  // namespace snapshot_format
}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_FORMAT_H_

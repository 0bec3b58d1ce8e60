#include "informer/persist/snapshot_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_format.h"

namespace informer {
namespace {

namespace sf = snapshot_format;

absl::string_view FrameName(uint32_t type) {
  switch (type) {
    case sf::kHeaderFrame:
      return "HEADER";
    case sf::kSectionBeginFrame:
      return "SECTION_BEGIN";
    case sf::kRecordsFrame:
      return "RECORDS";
    case sf::kSectionEndFrame:
      return "SECTION_END";
    case sf::kEndFrame:
      return "END";
  }
  return "unknown";
}

struct Frame {
  uint32_t type = 0;
  uint64_t offset = 0;        // of the frame's first byte
  absl::string_view payload;  // valid until the next NextFrame
};

// Reads the file's prologue and frames in order, verifying every checksum.
// Owns the descriptor. Not thread-safe.
class FrameReader {
 public:
  FrameReader(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;
  ~FrameReader() { close(fd_); }

  // Checks the magic, the prologue's checksum and the format version.
  absl::Status ReadPrologue();
  // The next frame, its checksums verified. kTruncated at the end of the
  // file (a file ends with its END frame, after which nobody asks).
  absl::Status NextFrame(Frame* frame);
  bool at_end() const { return offset_ == size_; }
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  absl::Status Error(SnapshotProblem problem, absl::StatusCode code,
                     absl::string_view detail) const {
    return SnapshotError(problem, code, path_, detail);
  }
  absl::Status Malformed(absl::string_view detail) const {
    return Error(SnapshotProblem::kMalformed, absl::StatusCode::kDataLoss,
                 detail);
  }

 private:
  // Reads exactly `n` bytes at the current offset; the caller has checked
  // that the file holds them.
  absl::Status ReadExact(char* dst, size_t n);
  absl::Status Truncated(absl::string_view inside) const {
    return Error(SnapshotProblem::kTruncated, absl::StatusCode::kDataLoss,
                 absl::StrCat("truncated: the file (", size_,
                              " bytes) ends inside ", inside));
  }

  const std::string path_;
  const int fd_;
  const uint64_t size_;
  uint64_t offset_ = 0;
  std::string buffer_;  // the current frame's payload and checksum
};

absl::Status FrameReader::ReadExact(char* dst, size_t n) {
  while (n > 0) {
    const ssize_t got = read(fd_, dst, n);
    if (got < 0) {
      if (errno == EINTR) continue;
      return SnapshotIoError(path_, absl::StrCat("read at offset ", offset_),
                             errno);
    }
    if (got == 0) {
      return Truncated(absl::StrCat("a read at offset ", offset_,
                                    " (the file shrank while read)"));
    }
    dst += got;
    n -= static_cast<size_t>(got);
    offset_ += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status FrameReader::ReadPrologue() {
  if (size_ == 0) {
    return Error(SnapshotProblem::kTruncated, absl::StatusCode::kDataLoss,
                 "truncated: the file is empty");
  }
  char p[sf::kPrologueBytes];
  const size_t have =
      static_cast<size_t>(std::min<uint64_t>(size_, sf::kPrologueBytes));
  absl::Status s = ReadExact(p, have);
  if (!s.ok()) return s;
  const size_t magic = std::min(have, sizeof(sf::kMagic));
  if (memcmp(p, sf::kMagic, magic) != 0) {
    return Error(SnapshotProblem::kNotSnapshot,
                 absl::StatusCode::kInvalidArgument,
                 "not a snapshot file (no snapshot magic at its start)");
  }
  if (have < sf::kPrologueBytes) return Truncated("the prologue");
  if (sf::Crc32(absl::string_view(p, 12)) != sf::GetFixed32(p + 12)) {
    return Error(SnapshotProblem::kChecksum, absl::StatusCode::kDataLoss,
                 "checksum mismatch in the prologue (bytes 0-15): the file "
                 "is damaged");
  }
  const uint32_t version = sf::GetFixed32(p + 8);
  if (version != sf::kFormatVersion) {
    return Error(SnapshotProblem::kUnsupportedVersion,
                 absl::StatusCode::kUnimplemented,
                 absl::StrCat("format version ", version,
                              " is not supported (this build reads version ",
                              sf::kFormatVersion, ")"));
  }
  return absl::OkStatus();
}

absl::Status FrameReader::NextFrame(Frame* frame) {
  frame->offset = offset_;
  if (size_ - offset_ < sf::kFrameHeaderBytes) {
    if (at_end()) {
      return Error(SnapshotProblem::kTruncated, absl::StatusCode::kDataLoss,
                   absl::StrCat("truncated: the file ends at offset ", size_,
                                " without its END frame"));
    }
    return Truncated(absl::StrCat("the frame header at offset ", offset_));
  }
  char h[sf::kFrameHeaderBytes];
  absl::Status s = ReadExact(h, sizeof(h));
  if (!s.ok()) return s;
  if (sf::Crc32(absl::string_view(h, 8)) != sf::GetFixed32(h + 8)) {
    return Error(SnapshotProblem::kChecksum, absl::StatusCode::kDataLoss,
                 absl::StrCat("checksum mismatch in the frame header at "
                              "offset ",
                              frame->offset, ": the file is damaged"));
  }
  frame->type = sf::GetFixed32(h);
  const uint32_t size = sf::GetFixed32(h + 4);
  if (size > sf::kMaxFramePayload) {
    return Malformed(absl::StrCat("the frame at offset ", frame->offset,
                                  " claims ", size, " bytes"));
  }
  if (size_ - offset_ < uint64_t{size} + sf::kFrameTrailerBytes) {
    return Truncated(absl::StrCat("the ", FrameName(frame->type),
                                  " frame at offset ", frame->offset));
  }
  buffer_.resize(size + sf::kFrameTrailerBytes);
  s = ReadExact(&buffer_[0], buffer_.size());
  if (!s.ok()) return s;
  frame->payload = absl::string_view(buffer_.data(), size);
  if (sf::Crc32(frame->payload) != sf::GetFixed32(buffer_.data() + size)) {
    return Error(
        SnapshotProblem::kChecksum, absl::StatusCode::kDataLoss,
        absl::StrCat("checksum mismatch in the ", FrameName(frame->type),
                     " frame at offset ", frame->offset, " (", size,
                     " bytes): the file is damaged"));
  }
  return absl::OkStatus();
}

// The section being read.
struct Section {
  std::string name;
  uint64_t version = 0;
  uint64_t flags = 0;
  uint64_t count = 0;    // as announced by SECTION_BEGIN
  uint64_t records = 0;  // seen
  uint64_t bytes = 0;    // of the records seen
  bool objects = false;  // the objects section (else skipped)
};

absl::Status ReadHeader(FrameReader& reader, const SnapshotIdentity& expected,
                        LoadedSnapshot* out) {
  Frame frame;
  absl::Status s = reader.NextFrame(&frame);
  if (!s.ok()) return s;
  if (frame.type != sf::kHeaderFrame) {
    return reader.Malformed(absl::StrCat(
        "the first frame is ", FrameName(frame.type), ", not HEADER"));
  }
  absl::StatusOr<sf::Header> header = sf::DecodeHeader(frame.payload);
  if (!header.ok()) return reader.Malformed(header.status().message());
  const std::string mismatch =
      DescribeIdentityMismatch(header->identity, expected);
  if (!mismatch.empty()) {
    return reader.Error(
        SnapshotProblem::kIdentityMismatch,
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("another informer's snapshot: ", mismatch));
  }
  out->resource_version = std::move(header->resource_version);
  out->written = header->written;
  return absl::OkStatus();
}

absl::Status BeginSection(FrameReader& reader, const Frame& frame,
                          Section* section, LoadedSnapshot* out) {
  sf::PayloadCursor cursor(frame.payload);
  absl::string_view name;
  if (!cursor.ReadString(&name) || !cursor.ReadVarint(&section->version) ||
      !cursor.ReadVarint(&section->flags) ||
      !cursor.ReadVarint(&section->count) || !cursor.done()) {
    return reader.Malformed(absl::StrCat("the SECTION_BEGIN frame at offset ",
                                         frame.offset, " is garbled"));
  }
  section->name = std::string(name);
  section->objects = name == sf::kObjectsSection;
  const bool known =
      section->objects && section->version == sf::kObjectsSectionVersion;
  if (!known && (section->flags & sf::kSectionRequired) != 0) {
    return reader.Error(
        SnapshotProblem::kUnsupportedVersion, absl::StatusCode::kUnimplemented,
        absl::StrCat("section \"", absl::CHexEscape(name), "\" version ",
                     section->version,
                     " is required and this build cannot read it"));
  }
  if (!known) section->objects = false;
  if (section->objects) {
    if (!out->objects.empty()) {
      return reader.Malformed("two objects sections");
    }
    // Each record takes at least 2 bytes: never reserve more than the file
    // could hold, whatever the count says.
    out->objects.reserve(static_cast<size_t>(
        std::min<uint64_t>(section->count, reader.size() / 2)));
  }
  return absl::OkStatus();
}

absl::Status ReadRecords(FrameReader& reader, const Frame& frame,
                         const TransformOptions& transform, Section* section,
                         LoadedSnapshot* out) {
  sf::PayloadCursor cursor(frame.payload);
  while (!cursor.done()) {
    absl::string_view record;
    if (!cursor.ReadString(&record)) {
      return reader.Malformed(
          absl::StrCat("a record in the RECORDS frame at offset ", frame.offset,
                       " overruns it"));
    }
    ++section->records;
    section->bytes += record.size();
    if (!section->objects) continue;
    absl::StatusOr<ObjectPtr> obj = Object::Parse(record, transform);
    if (!obj.ok()) {
      return reader.Malformed(absl::StrCat(
          "object ", section->records, " (in the RECORDS frame at offset ",
          frame.offset, ") does not decode: ", obj.status().message()));
    }
    out->objects.push_back(*std::move(obj));
  }
  return absl::OkStatus();
}

absl::Status EndSection(FrameReader& reader, const Frame& frame,
                        const Section& section) {
  sf::PayloadCursor cursor(frame.payload);
  uint64_t count = 0, bytes = 0;
  if (!cursor.ReadVarint(&count) || !cursor.ReadVarint(&bytes) ||
      !cursor.done()) {
    return reader.Malformed(absl::StrCat("the SECTION_END frame at offset ",
                                         frame.offset, " is garbled"));
  }
  if (count != section.count || count != section.records ||
      bytes != section.bytes) {
    return reader.Malformed(absl::StrCat(
        "section \"", section.name, "\" announced ", section.count,
        " records, ends with ", count, " records of ", bytes, " bytes, and ",
        section.records, " records of ", section.bytes, " bytes were read"));
  }
  return absl::OkStatus();
}

absl::Status CheckEnd(FrameReader& reader, const Frame& frame,
                      uint64_t sections, bool saw_objects) {
  sf::PayloadCursor cursor(frame.payload);
  uint64_t count = 0;
  if (!cursor.ReadVarint(&count) || !cursor.done() || count != sections) {
    return reader.Malformed(absl::StrCat("the END frame at offset ",
                                         frame.offset, " does not count ",
                                         sections, " sections"));
  }
  if (!reader.at_end()) {
    return reader.Malformed(absl::StrCat(reader.size() - reader.offset(),
                                         " bytes follow the END frame"));
  }
  if (!saw_objects) return reader.Malformed("no objects section");
  return absl::OkStatus();
}

// The frames after the HEADER, up to and including END.
absl::Status ReadBody(FrameReader& reader, const TransformOptions& transform,
                      LoadedSnapshot* out) {
  Section section;
  bool in_section = false, saw_objects = false;
  uint64_t sections = 0;
  for (;;) {
    Frame frame;
    absl::Status s = reader.NextFrame(&frame);
    if (!s.ok()) return s;
    const bool want_section =
        frame.type == sf::kRecordsFrame || frame.type == sf::kSectionEndFrame;
    if (want_section != in_section) {
      return reader.Malformed(absl::StrCat("unexpected ", FrameName(frame.type),
                                           " frame (type ", frame.type,
                                           ") at offset ", frame.offset));
    }
    switch (frame.type) {
      case sf::kSectionBeginFrame:
        section = Section();
        s = BeginSection(reader, frame, &section, out);
        in_section = true;
        saw_objects = saw_objects || section.objects;
        break;
      case sf::kRecordsFrame:
        s = ReadRecords(reader, frame, transform, &section, out);
        break;
      case sf::kSectionEndFrame:
        s = EndSection(reader, frame, section);
        in_section = false;
        ++sections;
        break;
      case sf::kEndFrame:
        return CheckEnd(reader, frame, sections, saw_objects);
      default:
        return reader.Malformed(
            absl::StrCat("unexpected ", FrameName(frame.type), " frame (type ",
                         frame.type, ") at offset ", frame.offset));
    }
    if (!s.ok()) return s;
  }
}

}  // namespace

absl::StatusOr<LoadedSnapshot> ReadSnapshotFile(
    const std::string& path, const SnapshotIdentity& expected,
    const TransformOptions& transform) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return SnapshotError(SnapshotProblem::kMissing,
                           absl::StatusCode::kNotFound, path,
                           "no snapshot file");
    }
    return SnapshotIoError(path, "opening the file", errno);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return SnapshotIoError(path, "fstat", err);
  }
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  FrameReader reader(path, fd, static_cast<uint64_t>(st.st_size));
  LoadedSnapshot out;
  out.path = path;
  out.file_bytes = reader.size();
  absl::Status s = reader.ReadPrologue();
  if (s.ok()) s = ReadHeader(reader, expected, &out);
  if (s.ok()) s = ReadBody(reader, transform, &out);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<LoadedSnapshot> ReadSnapshot(const std::string& dir,
                                            const SnapshotIdentity& expected,
                                            const TransformOptions& transform) {
  return ReadSnapshotFile(SnapshotPath(dir, expected), expected, transform);
}

}  // namespace informer

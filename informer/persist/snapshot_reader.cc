#include "informer/persist/snapshot_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "informer/persist/object_block_decoder.h"
#include "informer/persist/object_record_codec.h"
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
  // Moves the last frame's payload out (the frame's view dies with it).
  std::string TakePayload(const Frame& frame) {
    buffer_.resize(frame.payload.size());
    std::string out;
    out.swap(buffer_);
    return out;
  }
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
  // Of an objects section of version 2: an object record was seen (every
  // dictionary record comes before the first).
  bool saw_object_record = false;
  // An optional section asked for: its records are kept.
  bool keep = false;
  SnapshotSection kept;
};

// Below this many objects a snapshot decodes on the reading thread: worker
// threads would cost more than they save.
constexpr uint64_t kThreadedDecodeMinObjects = 2048;

// A JsonCompressor trains its dictionary on the first objects it sees
// (ZstdJsonCompressor: 512 objects or 2 MiB of JSON), and objects that
// other threads compress while it trains stay uncompressed for good. So
// with decode threads and a compressor, the first this many bytes of
// records are decoded on the reading thread, which trains the dictionary
// before the workers start: every object is compressed as a list's are.
constexpr size_t kSequentialHeadBytes = 4 << 20;

// The objects section's decoder: the head (see kSequentialHeadBytes) on
// the reading thread, the rest by `threads` workers. Called by the reading
// thread only.
class SectionDecoder {
 public:
  // `version`: the objects section's; with 2, records are tagged (see
  // object_record_codec.h).
  SectionDecoder(const TransformOptions& transform, int threads,
                 uint64_t version)
      : transform_(transform),
        threads_(threads),
        head_limit_(threads > 0 && transform.compressor != nullptr
                        ? kSequentialHeadBytes
                        : 0),
        records_(version == sf::kObjectsSectionVersionFrames
                     ? std::make_unique<object_records::Decoder>(transform)
                     : nullptr),
        head_(transform, 0, records_.get()) {}

  // Null for a version 1 section (JSON records).
  object_records::Decoder* records() { return records_.get(); }

  // As ObjectBlockDecoder::Add.
  bool Add(std::string payload, uint64_t first_record, uint64_t offset) {
    if (tail_ == nullptr && (threads_ == 0 || head_bytes_ < head_limit_)) {
      head_bytes_ += payload.size();
      return head_.Add(std::move(payload), first_record, offset);
    }
    if (tail_ == nullptr) {
      tail_ = std::make_unique<ObjectBlockDecoder>(transform_, threads_,
                                                   records_.get());
    }
    return tail_->Add(std::move(payload), first_record, offset);
  }

  // As ObjectBlockDecoder::Finish: the head's error comes first.
  absl::StatusOr<std::vector<ObjectPtr>> Finish() {
    absl::StatusOr<std::vector<ObjectPtr>> head = head_.Finish();
    if (!head.ok() || tail_ == nullptr) return head;
    absl::StatusOr<std::vector<ObjectPtr>> tail = tail_->Finish();
    if (!tail.ok()) return tail.status();
    head->insert(head->end(), std::make_move_iterator(tail->begin()),
                 std::make_move_iterator(tail->end()));
    return head;
  }

 private:
  const TransformOptions& transform_;
  const int threads_;
  const size_t head_limit_;
  size_t head_bytes_ = 0;
  const std::unique_ptr<object_records::Decoder> records_;
  ObjectBlockDecoder head_;
  std::unique_ptr<ObjectBlockDecoder> tail_;
};

// Stops the read: a block failed to decode (ObjectBlockDecoder::Finish has
// the error to report).
absl::Status DecodeFailed() { return absl::CancelledError("decode failed"); }

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
                          const TransformOptions& transform,
                          const SnapshotReadOptions& options, Section* section,
                          std::unique_ptr<SectionDecoder>* decoder) {
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
  const bool known = section->objects &&
                     (section->version == sf::kObjectsSectionVersion ||
                      section->version == sf::kObjectsSectionVersionFrames);
  if (!known && (section->flags & sf::kSectionRequired) != 0) {
    return reader.Error(
        SnapshotProblem::kUnsupportedVersion, absl::StatusCode::kUnimplemented,
        absl::StrCat("section \"", absl::CHexEscape(name), "\" version ",
                     section->version,
                     " is required and this build cannot read it"));
  }
  if (!known) section->objects = false;
  if (!section->objects && (section->flags & sf::kSectionRequired) == 0 &&
      std::find(options.keep_sections.begin(), options.keep_sections.end(),
                name) != options.keep_sections.end()) {
    section->keep = true;
    section->kept.name = section->name;
    section->kept.version = section->version;
  }
  if (section->objects) {
    if (*decoder != nullptr) return reader.Malformed("two objects sections");
    const int threads = section->count >= kThreadedDecodeMinObjects &&
                                std::thread::hardware_concurrency() > 1
                            ? std::max(options.decode_threads, 0)
                            : 0;
    *decoder =
        std::make_unique<SectionDecoder>(transform, threads, section->version);
  }
  return absl::OkStatus();
}

// A record of an objects section of version 2, on the reading thread: a
// dictionary is added to `records` before any block using it is decoded
// (the writer puts every dictionary first); object records are decoded
// with the block.
absl::Status TakeDictionary(FrameReader& reader, const Frame& frame,
                            absl::string_view record, Section* section,
                            object_records::Decoder* records) {
  uint8_t tag = 0;
  if (!object_records::Decoder::Tag(record, &tag) ||
      tag != object_records::kDictionaryTag) {
    section->saw_object_record = true;
    return absl::OkStatus();
  }
  absl::Status s = section->saw_object_record
                       ? absl::InvalidArgumentError(
                             "a dictionary record after an object record")
                       : records->AddDictionary(record);
  if (s.ok()) return s;
  return reader.Malformed(absl::StrCat("record ", section->records,
                                       " (in the RECORDS frame at offset ",
                                       frame.offset, "): ", s.message()));
}

// Counts a RECORDS frame's records (checking that they fill it exactly) and
// hands an objects block to the decoder.
absl::Status ReadRecords(FrameReader& reader, const Frame& frame,
                         Section* section, SectionDecoder* decoder) {
  const uint64_t first_record = section->records + 1;
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
    if (section->objects && decoder->records() != nullptr) {
      absl::Status s =
          TakeDictionary(reader, frame, record, section, decoder->records());
      if (!s.ok()) return s;
    }
    if (section->keep) section->kept.records.emplace_back(record);
  }
  if (!section->objects) return absl::OkStatus();
  if (!decoder->Add(reader.TakePayload(frame), first_record, frame.offset)) {
    return DecodeFailed();
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

// The frames after the HEADER, up to and including END; the objects
// section's blocks go to `*decoder` (created at its SECTION_BEGIN).
absl::Status ReadFrames(FrameReader& reader, const TransformOptions& transform,
                        const SnapshotReadOptions& options,
                        std::unique_ptr<SectionDecoder>* decoder,
                        std::vector<SnapshotSection>* kept) {
  Section section;
  bool in_section = false;
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
        s = BeginSection(reader, frame, transform, options, &section, decoder);
        in_section = true;
        break;
      case sf::kRecordsFrame:
        s = ReadRecords(reader, frame, &section, decoder->get());
        break;
      case sf::kSectionEndFrame:
        s = EndSection(reader, frame, section);
        if (s.ok() && section.keep) kept->push_back(std::move(section.kept));
        in_section = false;
        ++sections;
        break;
      case sf::kEndFrame:
        return CheckEnd(reader, frame, sections, *decoder != nullptr);
      default:
        return reader.Malformed(
            absl::StrCat("unexpected ", FrameName(frame.type), " frame (type ",
                         frame.type, ") at offset ", frame.offset));
    }
    if (!s.ok()) return s;
  }
}

// ReadFrames, then the decoded objects. A block that failed to decode comes
// before anything ReadFrames found wrong after it, so its error wins.
absl::Status ReadBody(FrameReader& reader, const TransformOptions& transform,
                      const SnapshotReadOptions& options, LoadedSnapshot* out) {
  std::unique_ptr<SectionDecoder> decoder;
  std::vector<SnapshotSection> kept;
  const absl::Status s =
      ReadFrames(reader, transform, options, &decoder, &kept);
  if (decoder == nullptr) return s;  // no objects section reached
  absl::StatusOr<std::vector<ObjectPtr>> objects = decoder->Finish();
  if (!objects.ok()) return reader.Malformed(objects.status().message());
  if (!s.ok()) return s;
  out->objects = *std::move(objects);
  out->sections = std::move(kept);
  // Only now, with every frame of the file verified: the resource's
  // compressor takes the snapshot's dictionaries.
  if (decoder->records() != nullptr) decoder->records()->Adopt(out->objects);
  return absl::OkStatus();
}

// The file at `path`, to be read from its start (`sequential`: all of
// it, in order).
absl::StatusOr<std::unique_ptr<FrameReader>> OpenFrames(const std::string& path,
                                                        bool sequential) {
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
  if (sequential) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::make_unique<FrameReader>(path, fd,
                                       static_cast<uint64_t>(st.st_size));
}

// Opens `path` and reads its prologue and header into `out` (which must
// match `expected`); the reader is left at the body.
absl::StatusOr<std::unique_ptr<FrameReader>> OpenAtBody(
    const std::string& path, const SnapshotIdentity& expected, bool sequential,
    LoadedSnapshot* out) {
  absl::StatusOr<std::unique_ptr<FrameReader>> opened =
      OpenFrames(path, sequential);
  if (!opened.ok()) return opened.status();
  out->path = path;
  out->file_bytes = (*opened)->size();
  absl::Status s = (*opened)->ReadPrologue();
  if (s.ok()) s = ReadHeader(**opened, expected, out);
  if (!s.ok()) return s;
  return opened;
}

}  // namespace

absl::StatusOr<LoadedSnapshot> ReadSnapshotFile(
    const std::string& path, const SnapshotIdentity& expected,
    const TransformOptions& transform, const SnapshotReadOptions& options) {
  LoadedSnapshot out;
  absl::StatusOr<std::unique_ptr<FrameReader>> reader =
      OpenAtBody(path, expected, /*sequential=*/true, &out);
  if (!reader.ok()) return reader.status();
  absl::Status s = ReadBody(**reader, transform, options, &out);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<LoadedSnapshot> ReadSnapshotHeader(
    const std::string& dir, const SnapshotIdentity& expected) {
  LoadedSnapshot out;
  absl::StatusOr<std::unique_ptr<FrameReader>> reader = OpenAtBody(
      SnapshotPath(dir, expected), expected, /*sequential=*/false, &out);
  if (!reader.ok()) return reader.status();
  return out;
}

absl::StatusOr<LoadedSnapshot> ReadSnapshot(
    const std::string& dir, const SnapshotIdentity& expected,
    const TransformOptions& transform, const SnapshotReadOptions& options) {
  return ReadSnapshotFile(SnapshotPath(dir, expected), expected, transform,
                          options);
}

absl::StatusOr<SnapshotIdentity> ReadSnapshotFileIdentity(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<FrameReader>> opened =
      OpenFrames(path, /*sequential=*/false);
  if (!opened.ok()) return opened.status();
  FrameReader& reader = **opened;
  absl::Status s = reader.ReadPrologue();
  if (!s.ok()) return s;
  Frame frame;
  s = reader.NextFrame(&frame);
  if (!s.ok()) return s;
  if (frame.type != sf::kHeaderFrame) {
    return reader.Malformed(absl::StrCat(
        "the first frame is ", FrameName(frame.type), ", not HEADER"));
  }
  absl::StatusOr<sf::Header> header = sf::DecodeHeader(frame.payload);
  if (!header.ok()) return reader.Malformed(header.status().message());
  return std::move(header->identity);
}

}  // namespace informer

#include "informer/persist/snapshot_writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "informer/persist/object_record_codec.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_format.h"

namespace informer {
namespace {

namespace sf = snapshot_format;

constexpr char kTempMarker[] = ".snapshot.tmp-";

// Distinguishes the temp files of concurrent writes in one process.
std::atomic<uint64_t> temp_counter{0};

// The temp file being written: buffered, checksummed frames. Removes the
// file when destroyed before Commit(). Not thread-safe (one per write).
class FrameFile {
 public:
  FrameFile(std::string path, const SnapshotWriteOptions& options)
      : path_(std::move(path)), options_(options) {}
  FrameFile(const FrameFile&) = delete;
  FrameFile& operator=(const FrameFile&) = delete;
  ~FrameFile() {
    if (fd_ >= 0) close(fd_);
    if (created_ && !committed_) unlink(path_.c_str());
  }

  absl::Status Open() {
    // 0600: a cache may hold Secrets.
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) return SnapshotIoError(path_, "creating the file", errno);
    created_ = true;
    block_.reserve(sf::kFrameHeaderBytes + options_.block_bytes +
                   sf::kFrameTrailerBytes);
    block_.assign(sf::kFrameHeaderBytes, '\0');
    return absl::OkStatus();
  }

  absl::Status WriteRaw(absl::string_view data);
  // One whole frame of `type` around `payload`.
  absl::Status WriteFrame(uint32_t type, absl::string_view payload);
  // Appends one record to the current RECORDS block, writing the block out
  // first when the record would overflow it.
  absl::Status AddRecord(absl::string_view record);
  // Writes out the current RECORDS block, if it holds any record.
  absl::Status FlushRecords();
  absl::Status SyncAndClose();
  void Commit() { committed_ = true; }
  uint64_t offset() const { return offset_; }

 private:
  const std::string path_;
  const SnapshotWriteOptions& options_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  uint64_t offset_ = 0;
  // A RECORDS frame being filled: room for its header, then its records.
  std::string block_;
};

absl::Status FrameFile::WriteRaw(absl::string_view data) {
  while (!data.empty()) {
    if (options_.before_write) {
      absl::Status s = options_.before_write(offset_, data.size());
      if (!s.ok()) {
        return SnapshotError(SnapshotProblem::kIo, s.code(), path_,
                             absl::StrCat("write at offset ", offset_,
                                          " failed: ", s.message()));
      }
    }
    const ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return SnapshotIoError(path_, absl::StrCat("write at offset ", offset_),
                             errno);
    }
    offset_ += static_cast<uint64_t>(n);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FrameFile::WriteFrame(uint32_t type, absl::string_view payload) {
  std::string frame(sf::kFrameHeaderBytes, '\0');
  sf::EncodeFrameHeader(type, static_cast<uint32_t>(payload.size()), &frame[0]);
  frame.append(payload.data(), payload.size());
  char crc[4];
  sf::PutFixed32(sf::Crc32(payload), crc);
  frame.append(crc, 4);
  return WriteRaw(frame);
}

absl::Status FrameFile::AddRecord(absl::string_view record) {
  const size_t need = sf::VarintSize(record.size()) + record.size();
  if (need > sf::kMaxFramePayload) {
    return SnapshotError(SnapshotProblem::kMalformed,
                         absl::StatusCode::kInvalidArgument, path_,
                         absl::StrCat("a record of ", record.size(),
                                      " bytes is larger "
                                      "than a frame may be"));
  }
  const size_t used = block_.size() - sf::kFrameHeaderBytes;
  if (used > 0 && used + need > options_.block_bytes) {
    absl::Status s = FlushRecords();
    if (!s.ok()) return s;
  }
  sf::AppendVarint(record.size(), &block_);
  block_.append(record.data(), record.size());
  return absl::OkStatus();
}

absl::Status FrameFile::FlushRecords() {
  const size_t payload = block_.size() - sf::kFrameHeaderBytes;
  if (payload == 0) return absl::OkStatus();
  sf::EncodeFrameHeader(sf::kRecordsFrame, static_cast<uint32_t>(payload),
                        &block_[0]);
  char crc[4];
  sf::PutFixed32(
      sf::Crc32(absl::string_view(block_).substr(sf::kFrameHeaderBytes)), crc);
  block_.append(crc, 4);
  absl::Status s = WriteRaw(block_);
  block_.resize(sf::kFrameHeaderBytes);
  return s;
}

absl::Status FrameFile::SyncAndClose() {
  if (fsync(fd_) != 0) return SnapshotIoError(path_, "fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return SnapshotIoError(path_, "close", errno);
  return absl::OkStatus();
}

// The text of Object::json()'s result, whether it is a string_view or a
// JsonText (which owns a decompressed copy when the object is stored
// compressed, and must outlive the view).
template <typename Json>
absl::string_view JsonView(const Json& json) {
  if constexpr (std::is_convertible_v<const Json&, absl::string_view>) {
    return json;
  } else {
    return json.view();
  }
}

absl::Status BeginObjects(FrameFile& file, uint64_t version, uint64_t records) {
  std::string begin;
  sf::AppendString(sf::kObjectsSection, &begin);
  sf::AppendVarint(version, &begin);
  sf::AppendVarint(sf::kSectionRequired, &begin);
  sf::AppendVarint(records, &begin);
  return file.WriteFrame(sf::kSectionBeginFrame, begin);
}

// The objects section's version 2 records: the dictionaries, then per
// object its frame as held (or its JSON). Nothing is decompressed but the
// JSON of objects held otherwise.
absl::Status WriteObjectRecords(FrameFile& file,
                                const object_records::Encoder& encoder,
                                const std::vector<ObjectPtr>& objects,
                                uint64_t* records, uint64_t* record_bytes) {
  const std::vector<std::string> dictionaries = encoder.DictionaryRecords();
  *records = dictionaries.size() + objects.size();
  absl::Status s =
      BeginObjects(file, sf::kObjectsSectionVersionFrames, *records);
  for (const std::string& record : dictionaries) {
    if (s.ok()) s = file.AddRecord(record);
    *record_bytes += record.size();
  }
  std::string record;
  for (const ObjectPtr& obj : objects) {
    if (!s.ok()) return s;
    encoder.Encode(*obj, &record);
    *record_bytes += record.size();
    s = file.AddRecord(record);
  }
  return s;
}

// The objects section: SECTION_BEGIN, RECORDS blocks, SECTION_END; version
// 2 when `frames` and some object is held as a zstd frame, else 1.
absl::Status WriteObjects(FrameFile& file,
                          const std::vector<ObjectPtr>& objects, bool frames,
                          SnapshotWriteStats* stats) {
  uint64_t json_bytes = 0, record_bytes = 0, records = objects.size();
  for (const ObjectPtr& obj : objects) json_bytes += obj->json_size();
  absl::Status s;
  const object_records::Encoder encoder(frames ? objects
                                               : std::vector<ObjectPtr>());
  if (encoder.has_frames()) {
    s = WriteObjectRecords(file, encoder, objects, &records, &record_bytes);
  } else {
    s = BeginObjects(file, sf::kObjectsSectionVersion, records);
    for (const ObjectPtr& obj : objects) {
      if (!s.ok()) return s;
      const auto json = obj->json();
      const absl::string_view text = JsonView(json);
      record_bytes += text.size();
      s = file.AddRecord(text);
    }
  }
  if (s.ok()) s = file.FlushRecords();
  if (!s.ok()) return s;
  std::string end;
  sf::AppendVarint(records, &end);
  sf::AppendVarint(record_bytes, &end);
  stats->objects = objects.size();
  stats->json_bytes = json_bytes;
  stats->frames = encoder.has_frames();
  return file.WriteFrame(sf::kSectionEndFrame, end);
}

// One of SnapshotWriteOptions::extra_sections.
absl::Status WriteSection(FrameFile& file, const SnapshotSection& section) {
  std::string begin;
  sf::AppendString(section.name, &begin);
  sf::AppendVarint(section.version, &begin);
  sf::AppendVarint(section.required ? sf::kSectionRequired : 0, &begin);
  sf::AppendVarint(section.records.size(), &begin);
  absl::Status s = file.WriteFrame(sf::kSectionBeginFrame, begin);
  uint64_t bytes = 0;
  for (size_t i = 0; s.ok() && i < section.records.size(); ++i) {
    bytes += section.records[i].size();
    s = file.AddRecord(section.records[i]);
  }
  if (s.ok()) s = file.FlushRecords();
  if (!s.ok()) return s;
  std::string end;
  sf::AppendVarint(section.records.size(), &end);
  sf::AppendVarint(bytes, &end);
  return file.WriteFrame(sf::kSectionEndFrame, end);
}

absl::Status WriteContents(FrameFile& file, const sf::Header& header,
                           const std::vector<ObjectPtr>& objects,
                           const SnapshotWriteOptions& options,
                           SnapshotWriteStats* stats) {
  absl::Status s = file.WriteRaw(sf::EncodePrologue(sf::kFormatVersion));
  if (!s.ok()) return s;
  s = file.WriteFrame(sf::kHeaderFrame, sf::EncodeHeader(header));
  if (!s.ok()) return s;
  s = WriteObjects(file, objects, options.compressed_frames, stats);
  for (size_t i = 0; s.ok() && i < options.extra_sections.size(); ++i) {
    s = WriteSection(file, options.extra_sections[i]);
  }
  if (!s.ok()) return s;
  std::string end;
  sf::AppendVarint(1 + options.extra_sections.size(), &end);  // sections
  s = file.WriteFrame(sf::kEndFrame, end);
  stats->file_bytes = file.offset();
  return s;
}

// Makes the rename durable: fsync of the directory holding the entry.
absl::Status SyncDirectory(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SnapshotIoError(d, "opening the directory", errno);
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return SnapshotIoError(d, "fsync of the directory", err);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SnapshotWriteStats> WriteSnapshot(
    const std::string& dir, const SnapshotIdentity& id,
    absl::string_view resource_version, const std::vector<ObjectPtr>& objects,
    const SnapshotWriteOptions& options) {
  SnapshotWriteStats stats;
  stats.path = SnapshotPath(dir, id);
  const std::string temp_path =
      absl::StrCat(stats.path, ".tmp-", getpid(), "-", temp_counter++);
  sf::Header header;
  header.identity = id;
  header.resource_version = std::string(resource_version);
  header.written = (options.clock ? options.clock : RealClock())->Now();
  header.writer = "informer-sidecar";

  FrameFile file(temp_path, options);
  absl::Status s = file.Open();
  if (s.ok()) s = WriteContents(file, header, objects, options, &stats);
  if (s.ok()) s = file.SyncAndClose();
  if (!s.ok()) return s;  // ~FrameFile removes the temp file
  if (rename(temp_path.c_str(), stats.path.c_str()) != 0) {
    return SnapshotIoError(temp_path,
                           absl::StrCat("renaming it to ", stats.path), errno);
  }
  file.Commit();
  s = SyncDirectory(dir);
  if (!s.ok()) {
    return SnapshotError(SnapshotProblem::kIo, s.code(), stats.path,
                         absl::StrCat("written and renamed into place, but "
                                      "it may not survive a power cut: ",
                                      s.message()));
  }
  return stats;
}

absl::StatusOr<int> RemoveStaleSnapshotTempFiles(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  DIR* handle = opendir(d.c_str());
  if (handle == nullptr) {
    return SnapshotIoError(d, "listing the directory", errno);
  }
  int removed = 0;
  absl::Status status;
  while (struct dirent* entry = readdir(handle)) {
    const absl::string_view name(entry->d_name);
    if (!absl::StrContains(name, kTempMarker)) continue;
    const std::string path = absl::StrCat(d, "/", name);
    if (unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT && status.ok()) {
      status = SnapshotIoError(path, "removing a stale temp file", errno);
    }
  }
  closedir(handle);
  if (!status.ok()) return status;
  return removed;
}

}  // namespace informer

#include "informer/persist/snapshot_format.h"

#include <zlib.h>

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace informer {
namespace snapshot_format {
namespace {

// The HEADER's keys. Every one is required (a reader of a later version may
// find more, which it ignores), except kKind: files written before it was
// recorded lack it.
constexpr char kCluster[] = "cluster";
constexpr char kGroup[] = "group";
constexpr char kVersion[] = "version";
constexpr char kResource[] = "resource";
constexpr char kNamespace[] = "namespace";
constexpr char kLabelSelector[] = "label_selector";
constexpr char kFieldSelector[] = "field_selector";
constexpr char kTransform[] = "transform";
constexpr char kMetadataOnly[] = "metadata_only";
constexpr char kResourceVersion[] = "resource_version";
constexpr char kWrittenUnixNanos[] = "written_unix_nanos";
constexpr char kWriter[] = "writer";
constexpr char kKind[] = "kind";

using KeyValues = absl::flat_hash_map<std::string, std::string>;

absl::Status TakeString(const KeyValues& kv, const char* key,
                        std::string* out) {
  auto it = kv.find(key);
  if (it == kv.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("header lacks the key \"", key, "\""));
  }
  *out = it->second;
  return absl::OkStatus();
}

absl::StatusOr<KeyValues> DecodeKeyValues(absl::string_view payload) {
  PayloadCursor cursor(payload);
  uint64_t count = 0;
  if (!cursor.ReadVarint(&count)) {
    return absl::InvalidArgumentError("header: no key count");
  }
  KeyValues kv;
  for (uint64_t i = 0; i < count; ++i) {
    absl::string_view key, value;
    if (!cursor.ReadString(&key) || !cursor.ReadString(&value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("header: key/value ", i, " of ", count, " cut short"));
    }
    if (!kv.emplace(std::string(key), std::string(value)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("header: key \"", key, "\" appears twice"));
    }
  }
  if (!cursor.done()) {
    return absl::InvalidArgumentError("header: bytes after the last key");
  }
  return kv;
}

}  // namespace

uint32_t Crc32(absl::string_view data) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0),
              reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

void PutFixed32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 255);
}

uint32_t GetFixed32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return v;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void AppendString(absl::string_view s, std::string* out) {
  AppendVarint(s.size(), out);
  out->append(s.data(), s.size());
}

bool PayloadCursor::ReadVarint(uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (rest_.empty()) return false;
    const auto byte = static_cast<unsigned char>(rest_[0]);
    rest_.remove_prefix(1);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  rest_ = absl::string_view();  // more than 10 bytes: not a varint
  return false;
}

bool PayloadCursor::ReadString(absl::string_view* s) {
  uint64_t size = 0;
  if (!ReadVarint(&size)) return false;
  if (size > rest_.size()) {
    rest_ = absl::string_view();
    return false;
  }
  *s = rest_.substr(0, size);
  rest_.remove_prefix(size);
  return true;
}

std::string EncodePrologue(uint32_t version) {
  std::string out(kMagic, sizeof(kMagic));
  char buf[4];
  PutFixed32(version, buf);
  out.append(buf, 4);
  PutFixed32(Crc32(out), buf);
  out.append(buf, 4);
  return out;
}

void EncodeFrameHeader(uint32_t type, uint32_t payload_size, char* out) {
  PutFixed32(type, out);
  PutFixed32(payload_size, out + 4);
  PutFixed32(Crc32(absl::string_view(out, 8)), out + 8);
}

std::string EncodeHeader(const Header& header) {
  const SnapshotIdentity& id = header.identity;
  const std::pair<const char*, std::string> kv[] = {
      {kCluster, id.cluster},
      {kGroup, id.group},
      {kVersion, id.version},
      {kResource, id.resource},
      {kNamespace, id.namespace_},
      {kLabelSelector, id.label_selector},
      {kFieldSelector, id.field_selector},
      {kTransform, id.transform},
      {kMetadataOnly, id.metadata_only ? "true" : "false"},
      {kResourceVersion, header.resource_version},
      {kWrittenUnixNanos, absl::StrCat(absl::ToUnixNanos(header.written))},
      {kWriter, header.writer},
      {kKind, id.kind},
  };
  std::string out;
  AppendVarint(sizeof(kv) / sizeof(kv[0]), &out);
  for (const auto& [key, value] : kv) {
    AppendString(key, &out);
    AppendString(value, &out);
  }
  return out;
}

absl::StatusOr<Header> DecodeHeader(absl::string_view payload) {
  absl::StatusOr<KeyValues> kv = DecodeKeyValues(payload);
  if (!kv.ok()) return kv.status();
  Header h;
  SnapshotIdentity& id = h.identity;
  std::string metadata_only, written;
  for (auto [key, out] :
       std::initializer_list<std::pair<const char*, std::string*>>{
           {kCluster, &id.cluster},
           {kGroup, &id.group},
           {kVersion, &id.version},
           {kResource, &id.resource},
           {kNamespace, &id.namespace_},
           {kLabelSelector, &id.label_selector},
           {kFieldSelector, &id.field_selector},
           {kTransform, &id.transform},
           {kMetadataOnly, &metadata_only},
           {kResourceVersion, &h.resource_version},
           {kWrittenUnixNanos, &written},
           {kWriter, &h.writer}}) {
    absl::Status s = TakeString(*kv, key, out);
    if (!s.ok()) return s;
  }
  if (auto kind = kv->find(kKind); kind != kv->end()) id.kind = kind->second;
  if (metadata_only != "true" && metadata_only != "false") {
    return absl::InvalidArgumentError(
        absl::StrCat("header: metadata_only is \"", metadata_only, "\""));
  }
  id.metadata_only = metadata_only == "true";
  int64_t nanos = 0;
  if (!absl::SimpleAtoi(written, &nanos)) {
    return absl::InvalidArgumentError(
        absl::StrCat("header: written_unix_nanos is \"", written, "\""));
  }
  h.written = absl::FromUnixNanos(nanos);
  return h;
}

}  // namespace snapshot_format
}  // namespace informer

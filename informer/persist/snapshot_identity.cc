#include "informer/persist/snapshot_identity.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace informer {
namespace {

// Longest file name produced (NAME_MAX is 255; leave room for the temp
// file's suffix).
constexpr size_t kMaxFileName = 200;
constexpr char kSuffix[] = ".snapshot";

struct Field {
  const char* name;
  std::string value;
};

std::vector<Field> Fields(const SnapshotIdentity& id) {
  return {
      {"cluster", id.cluster},
      {"group", id.group},
      {"version", id.version},
      {"resource", id.resource},
      {"namespace", id.namespace_},
      {"label selector", id.label_selector},
      {"field selector", id.field_selector},
      {"transform", id.transform},
      {"metadata-only", id.metadata_only ? "true" : "false"},
  };
}

// `dot_safe`: the group keeps its dots; the resource's (real ones have
// none) are escaped, so that "a.b" + "" and "a" + "b" stay distinct.
void AppendEscaped(absl::string_view in, bool dot_safe, std::string* out) {
  for (char c : in) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || (c == '.' && dot_safe);
    if (safe) {
      out->push_back(c);
    } else {
      absl::StrAppendFormat(out, "%%%02X", static_cast<unsigned char>(c));
    }
  }
}

// FNV-1a, 64 bits: fixed forever (it is part of file names on disk), unlike
// absl::Hash, which is salted per process.
uint64_t StableHash(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

bool operator==(const SnapshotIdentity& a, const SnapshotIdentity& b) {
  return DescribeIdentityMismatch(a, b).empty();
}

std::string TransformIdentity(const TransformOptions& transform) {
  std::vector<std::string> drops = transform.drop_fields;
  std::sort(drops.begin(), drops.end());
  drops.erase(std::unique(drops.begin(), drops.end()), drops.end());
  return absl::StrCat(
      "managed_fields=", transform.drop_managed_fields ? "drop" : "keep",
      ";drop=", absl::StrJoin(drops, ","));
}

std::string DescribeIdentityMismatch(const SnapshotIdentity& in_snapshot,
                                     const SnapshotIdentity& expected) {
  const std::vector<Field> got = Fields(in_snapshot);
  const std::vector<Field> want = Fields(expected);
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].value != want[i].value) {
      return absl::StrFormat("%s differs: snapshot \"%s\" vs expected \"%s\"",
                             got[i].name, absl::CHexEscape(got[i].value),
                             absl::CHexEscape(want[i].value));
    }
  }
  return "";
}

std::string SnapshotFileName(const SnapshotIdentity& id) {
  std::string name;
  AppendEscaped(id.resource, /*dot_safe=*/false, &name);
  if (!id.group.empty()) {
    name.push_back('.');
    AppendEscaped(id.group, /*dot_safe=*/true, &name);
  }
  // "." and ".." (and hidden files) are not names we want: a leading dot
  // is escaped like any unsafe byte.
  if (!name.empty() && name[0] == '.') name.replace(0, 1, "%2E");
  if (name.empty()) name = "%";
  const size_t room = kMaxFileName - (sizeof(kSuffix) - 1);
  if (name.size() > room) {
    const std::string hash = absl::StrFormat("-%016x", StableHash(name));
    name.resize(room - hash.size());
    name += hash;
  }
  return name + kSuffix;
}

std::string SnapshotPath(const std::string& dir, const SnapshotIdentity& id) {
  if (dir.empty()) return SnapshotFileName(id);
  if (dir.back() == '/') return dir + SnapshotFileName(id);
  return absl::StrCat(dir, "/", SnapshotFileName(id));
}

}  // namespace informer

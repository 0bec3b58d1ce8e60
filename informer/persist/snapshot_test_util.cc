#include "informer/persist/snapshot_test_util.h"

#include <dirent.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace informer {
namespace snapshot_testing {

std::string ConfigMapJson(int i, int data_bytes, const std::string& ns) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);
  std::string data;
  for (int b = 0; b < data_bytes; ++b) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data.push_back(kAlphabet[(state >> 33) % (sizeof(kAlphabet) - 1)]);
  }
  return absl::StrCat(
      "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{"
      "\"name\":\"",
      absl::StrFormat("cm-%06d", i), "\",\"namespace\":\"", ns, "\",\"uid\":\"",
      absl::StrFormat("6f1c2a3e-0000-4000-8000-%012d", i),
      "\",\"resourceVersion\":\"", 1000 + i,
      "\",\"creationTimestamp\":\"2026-11-30T18:06:29Z\","
      "\"labels\":{\"app\":\"app-",
      i % 10,
      "\"},\"managedFields\":[{\"manager\":\"kubectl-create\","
      "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":"
      "\"2026-11-30T18:06:29Z\",\"fieldsType\":\"FieldsV1\","
      "\"fieldsV1\":{\"f:data\":{\".\":{},\"f:payload\":{}},"
      "\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}}}}]},"
      "\"data\":{\"payload\":\"",
      data, "\"}}");
}

std::vector<ObjectPtr> ConfigMaps(int n, int data_bytes) {
  std::vector<ObjectPtr> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    out.push_back(*Object::Parse(ConfigMapJson(i, data_bytes)));
  }
  return out;
}

namespace {

// Object::json() returns a string_view or a JsonText, depending on whether
// objects may be stored compressed.
template <typename Json>
std::string Copy(const Json& json) {
  if constexpr (std::is_convertible_v<const Json&, absl::string_view>) {
    return std::string(absl::string_view(json));
  } else {
    return std::string(json.view());
  }
}

}  // namespace

std::string JsonOf(const Object& obj) {
  const auto json = obj.json();
  return Copy(json);
}

std::vector<std::string> JsonsOf(const std::vector<ObjectPtr>& objects) {
  std::vector<std::string> out;
  out.reserve(objects.size());
  for (const ObjectPtr& o : objects) out.push_back(JsonOf(*o));
  return out;
}

SnapshotIdentity ConfigMapsIdentity() {
  SnapshotIdentity id;
  id.cluster = "test-cluster";
  id.version = "v1";
  id.resource = "configmaps";
  id.transform = TransformIdentity(TransformOptions());
  return id;
}

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/snapshot-XXXXXX");
  if (mkdtemp(&tmpl[0]) == nullptr) abort();
  return tmpl;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace snapshot_testing
}  // namespace informer

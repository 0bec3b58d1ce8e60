#ifndef INFORMER_PERSIST_SNAPSHOT_TEST_UTIL_H_
#define INFORMER_PERSIST_SNAPSHOT_TEST_UTIL_H_

#include <string>
#include <vector>

#include "informer/object/object.h"
#include "informer/persist/snapshot_identity.h"

namespace informer {
namespace snapshot_testing {

// A ConfigMap as the API server serves it (the emulator's seed shape:
// labels, uid, resourceVersion, creationTimestamp, managedFields, and
// `data_bytes` of deterministic payload), as JSON.
std::string ConfigMapJson(int i, int data_bytes = 64,
                          const std::string& ns = "default");

// `n` such ConfigMaps, parsed with the default transform (managedFields
// dropped, as the informer caches them).
std::vector<ObjectPtr> ConfigMaps(int n, int data_bytes = 64);

// The identity of an informer on all ConfigMaps of cluster "test-cluster".
SnapshotIdentity ConfigMapsIdentity();

// A copy of `obj`'s JSON (whatever type Object::json() returns).
std::string JsonOf(const Object& obj);
std::vector<std::string> JsonsOf(const std::vector<ObjectPtr>& objects);

// A fresh empty directory under TEST_TMPDIR (or /tmp).
std::string MakeTempDir();

// The whole content of `path` ("" if unreadable), and writing it back.
std::string ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::string& content);

// The names in `dir` (not "." and "..").
std::vector<std::string> ListDir(const std::string& dir);

}  // namespace snapshot_testing
}  // namespace informer

#endif  // INFORMER_PERSIST_SNAPSHOT_TEST_UTIL_H_

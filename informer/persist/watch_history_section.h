#ifndef INFORMER_PERSIST_WATCH_HISTORY_SECTION_H_
#define INFORMER_PERSIST_WATCH_HISTORY_SECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_section.h"

namespace informer {

// The optional snapshot section that keeps a resource's Watch history, so
// that the resume tokens apps hold survive a sidecar restart. Optional: a
// build that does not know it skips it (its apps' tokens then get RESET).
inline constexpr char kWatchHistorySection[] = "watch_history";
inline constexpr uint64_t kWatchHistorySectionVersion = 1;

// Tokens of an earlier sidecar run (`run_id`, fan-out `epoch`) name
// positions of this history up to `last_seq`; positions past it are that
// run's own (it may have issued some after the snapshot and then crashed)
// and mean nothing here.
struct WatchTokenAlias {
  std::string run_id;
  uint64_t epoch = 0;
  uint64_t last_seq = 0;
};

// One event of the history: the object's new state (for a deletion its
// final state), its state before (null: none, the key was absent), at
// sequence number `seq`.
struct PersistedWatchEvent {
  uint64_t seq = 0;
  bool deleted = false;
  bool tombstone = false;
  ObjectPtr obj;
  ObjectPtr prev;
};

// A Watch history as written with a snapshot: the events at positions
// `events.front().seq` .. `last_seq` (none: no event kept, tokens at
// `last_seq` still resume), ending exactly at the snapshot's objects.
// `identity` (WatchHistoryIdentity) and `resource_version` tie it to the
// snapshot it was written with. Value type.
struct PersistedWatchHistory {
  std::string identity;
  std::string resource_version;
  uint64_t last_seq = 0;
  std::vector<WatchTokenAlias> aliases;
  std::vector<PersistedWatchEvent> events;
};

// The identity a history records: every field of `id`, in one string.
std::string WatchHistoryIdentity(const SnapshotIdentity& id);

// The section for `history` (records: a header, then one per event; an
// event's state before is written only when it is not the previous
// event's state of the same key).
SnapshotSection EncodeWatchHistorySection(const PersistedWatchHistory& history);

// Decodes and checks a section read from the snapshot of identity
// `expected`, resourceVersion `snapshot_rv` and objects `snapshot_objects`
// (parsing object JSON with `transform`; states equal to a snapshot object
// share it). Never returns a history that does not match the snapshot:
//   Unimplemented       another section version (a future build's);
//   DataLoss            garbled records, positions not consecutive;
//   FailedPrecondition  another identity or resourceVersion, or events
//                       that do not end at the snapshot's objects (a key's
//                       last state differs from the snapshot's: e.g. an
//                       update past the snapshot's, or a deletion of an
//                       object the snapshot still holds).
// The message names the problem. Thread-safe (no shared state).
absl::StatusOr<PersistedWatchHistory> DecodeWatchHistorySection(
    const SnapshotSection& section, const SnapshotIdentity& expected,
    absl::string_view snapshot_rv,
    const std::vector<ObjectPtr>& snapshot_objects,
    const TransformOptions& transform);

}  // namespace informer

#endif  // INFORMER_PERSIST_WATCH_HISTORY_SECTION_H_

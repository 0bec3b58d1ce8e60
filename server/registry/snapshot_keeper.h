#ifndef SERVER_REGISTRY_SNAPSHOT_KEEPER_H_
#define SERVER_REGISTRY_SNAPSHOT_KEEPER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/shared_informer.h"
#include "informer/object/object.h"
#include "informer/persist/directory_lock.h"
#include "informer/persist/snapshot_identity.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_section.h"
#include "informer/util/clock.h"

namespace server {

// SnapshotKeeper keeps informers' caches in a directory on local disk, so
// that a restarted sidecar starts from them instead of listing everything
// again (a warm restart).
//
// Create() locks the directory (a second sidecar on it gets an error that
// names it) and removes the temporary files a killed writer left. Before
// the informers start, Load() puts each one's snapshot into it
// (SharedIndexInformer::SetInitialState), if the snapshot is readable and
// was written for the same identity: the same cluster, group, version,
// resource, namespace, selectors, transform and metadata-only setting.
// Anything else (missing, truncated, corrupted, another format version,
// another identity) is logged with its reason, and that informer starts
// cold: nothing of a snapshot is used unless all of it checks out.
// Overlap: Load() first reads every snapshot's header, and each informer
// whose header checks out begins its resume from the header's
// resourceVersion at once (SharedIndexInformer::BeginResume: the probe
// and the watch run while the objects load; nothing is applied before
// they are in place); a snapshot that then fails to load abandons that
// resume (AbandonResume: the watch is dropped unread, a cold list
// follows).
//
// Writing: WriteAll() writes every synced informer's snapshot (the
// shutdown path calls it before the informers stop); Start() runs it every
// Options::interval on a thread of its own. The cache's object pointers are
// copied under the informer's lock (objects are immutable and shared) and
// written outside it, so event processing never waits for the disk. A
// snapshot is written only when the informer's resourceVersion moved since
// the last write. A failed write leaves the previous snapshot in place.
//
// Thread-safety: all methods are thread-safe; Add and Load before Start.
// Ownership: the informers are not owned and must outlive the keeper (or
// Stop()).
class SnapshotKeeper {
 public:
  struct Options {
    std::string dir;
    // Between periodic writes; 0: WriteAll only when called.
    absl::Duration interval = absl::Minutes(5);
    informer::Clock* clock = informer::RealClock();
    // Test and fault hook, passed to every write (see
    // informer::SnapshotWriteOptions::before_write).
    std::function<absl::Status(uint64_t offset, size_t size)> before_write;
    // Threads decoding (and compressing) a snapshot's objects while the
    // loading thread reads and verifies the file; 0: all on the loading
    // thread (see informer::SnapshotReadOptions::decode_threads).
    int decode_threads = 0;
    // Added to the nice value of the thread of the periodic writes (Linux
    // keeps one per thread; at most 19), so that on a busy node event
    // processing preempts a write rather than waiting behind it; an idle
    // core still runs it at full speed. 0: the process's.
    int writer_nice = 10;
  };

  // What a write stores when a Target's `capture` supplies it: objects
  // and the resourceVersion they reflect at least (as CopyState's), with
  // sections consistent with them.
  struct Captured {
    std::vector<informer::ObjectPtr> objects;
    std::string resource_version;
    std::vector<informer::SnapshotSection> sections;
    // Changes when the sections do while the resourceVersion does not
    // (a write is skipped only when both are as last written).
    std::string change_tag;
  };

  // One informer and what its snapshot must match.
  struct Target {
    informer::SharedIndexInformer* informer = nullptr;
    informer::SnapshotIdentity identity;
    // How its objects are decoded (to read a snapshot back as the
    // informer would have decoded them). Pass the informer's client's own
    // transform: its compressor then compresses the loaded objects with
    // the resource's one dictionary, as it does the listed ones (a second
    // compressor would train and keep a second dictionary).
    informer::TransformOptions transform;
    // Called once the informer was given its snapshot, with the time the
    // snapshot was written (the stale state's seam, see StaleState).
    std::function<void(absl::Time written)> on_loaded;
    // Optional sections besides the objects (the Watch history's, see
    // WatchResumeStore): the names to read back; `on_read` gets the
    // snapshot with them once the informer was given its objects (never
    // for a snapshot not used). `capture`, when set and it returns a value,
    // supplies what a write stores instead of the informer's CopyState
    // (called on the writing thread, no keeper lock held).
    std::vector<std::string> keep_sections;
    std::function<void(const informer::LoadedSnapshot&)> on_read;
    std::function<std::optional<Captured>()> capture;
  };

  struct Stats {
    int64_t writes = 0;
    int64_t write_failures = 0;
    // Of the last write round that wrote anything without a failure.
    absl::Time last_success = absl::InfinitePast();
    // Bytes on disk of the snapshots last written, summed.
    uint64_t bytes = 0;
    int64_t loaded = 0;
    // Snapshots present but unusable (cold starts).
    int64_t rejected = 0;
    // The nice value the periodic writes run at (once Start returned).
    int writer_nice = 0;
  };

  // FailedPrecondition naming the directory when another process holds
  // its lock; the lock's I/O error otherwise.
  static absl::StatusOr<std::unique_ptr<SnapshotKeeper>> Create(
      Options options);
  ~SnapshotKeeper();
  SnapshotKeeper(const SnapshotKeeper&) = delete;
  SnapshotKeeper& operator=(const SnapshotKeeper&) = delete;

  void Add(Target target) ABSL_LOCKS_EXCLUDED(mu_);
  // Loads every target's snapshot into its informer (before it starts),
  // the resumes begun from the headers first (see the class comment).
  // Never fails: an unusable snapshot is a warning and a cold start.
  void Load() ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the periodic writes (no-op with a zero interval).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes every synced target whose resourceVersion moved; OK, or the
  // first failure (each is also logged and counted).
  absl::Status WriteAll() ABSL_LOCKS_EXCLUDED(write_mu_, mu_);
  // Ends the periodic writes (joins the thread); idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  Stats GetStats() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& dir() const { return options_.dir; }

 private:
  struct Slot {
    Target target;
    // The resourceVersion of its last snapshot written or loaded, and the
    // Captured::change_tag written with it.
    std::string written_rv;
    std::string written_tag;
    uint64_t bytes = 0;
    // Load's own (one thread): the informer began resuming from the
    // header's resourceVersion, so the load must end in its state or in
    // AbandonResume.
    bool resuming = false;
  };

  SnapshotKeeper(Options options,
                 std::unique_ptr<informer::DirectoryLock> lock);
  // From the snapshot's header: the informer's BeginResume, if it checks
  // out (else LoadOne finds out why and says so).
  void BeginResume(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  void LoadOne(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  // A snapshot found unusable (after the header, or at SetInitialState):
  // the resume begun, if any, is abandoned; counted as rejected.
  void Reject(Slot* slot, const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status WriteOne(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool StoppingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_;
  }

  const Options options_;
  const std::unique_ptr<informer::DirectoryLock> lock_;
  // Serialises write rounds (the periodic one and the shutdown one).
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  // Stable addresses: WriteOne works on a slot outside mu_.
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // On the writer thread: Options::writer_nice, recorded in stats_.
  void LowerWriterPriority() ABSL_LOCKS_EXCLUDED(mu_);
};

}  // namespace server

#endif  // SERVER_REGISTRY_SNAPSHOT_KEEPER_H_

#include "server/registry/snapshot_keeper.h"

#include <glog/logging.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "informer/persist/snapshot_error.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_writer.h"

namespace server {
namespace {

std::string Millis(absl::Duration d) {
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotKeeper>> SnapshotKeeper::Create(
    Options options) {
  absl::StatusOr<std::unique_ptr<informer::DirectoryLock>> lock =
      informer::DirectoryLock::Acquire(options.dir);
  if (!lock.ok()) {
    return absl::Status(lock.status().code(),
                        absl::StrCat("--cache_dir=", options.dir, ": ",
                                     lock.status().message()));
  }
  // Under the lock no live writer owns them: a killed one's leftovers.
  absl::StatusOr<int> removed =
      informer::RemoveStaleSnapshotTempFiles(options.dir);
  if (!removed.ok()) {
    LOG(WARNING) << "cache directory " << options.dir
                 << ": cannot remove stale temporary files: "
                 << removed.status();
  } else if (*removed > 0) {
    LOG(INFO) << "cache directory " << options.dir << ": removed " << *removed
              << " temporary files a stopped writer left";
  }
  return std::unique_ptr<SnapshotKeeper>(
      new SnapshotKeeper(std::move(options), *std::move(lock)));
}

SnapshotKeeper::SnapshotKeeper(Options options,
                               std::unique_ptr<informer::DirectoryLock> lock)
    : options_(std::move(options)), lock_(std::move(lock)) {}

SnapshotKeeper::~SnapshotKeeper() { Stop(); }

void SnapshotKeeper::Add(Target target) {
  auto slot = std::make_unique<Slot>();
  slot->target = std::move(target);
  absl::MutexLock lock(&mu_);
  slots_.push_back(std::move(slot));
}

void SnapshotKeeper::Load() {
  std::vector<Slot*> slots;
  {
    absl::MutexLock lock(&mu_);
    for (auto& s : slots_) slots.push_back(s.get());
  }
  for (Slot* slot : slots) BeginResume(slot);
  for (Slot* slot : slots) LoadOne(slot);
}

void SnapshotKeeper::BeginResume(Slot* slot) {
  const Target& t = slot->target;
  absl::StatusOr<informer::LoadedSnapshot> header =
      informer::ReadSnapshotHeader(options_.dir, t.identity);
  if (!header.ok()) return;
  if (absl::Status st = t.informer->BeginResume(header->resource_version);
      !st.ok()) {
    LOG(WARNING) << t.informer->name()
                 << ": cannot resume while loading: " << st;
    return;
  }
  slot->resuming = true;
}

void SnapshotKeeper::Reject(Slot* slot, const absl::Status& why) {
  if (slot->resuming) {
    slot->resuming = false;
    absl::Status st = slot->target.informer->AbandonResume(why);
    if (!st.ok()) {
      LOG(ERROR) << slot->target.informer->name()
                 << ": the resume begun is not abandoned: " << st;
    }
  }
  absl::MutexLock lock(&mu_);
  ++stats_.rejected;
}

void SnapshotKeeper::LoadOne(Slot* slot) {
  const Target& t = slot->target;
  const std::string& name = t.informer->name();
  const absl::Time start = absl::Now();
  informer::SnapshotReadOptions read_options;
  read_options.decode_threads = options_.decode_threads;
  read_options.keep_sections = t.keep_sections;
  absl::StatusOr<informer::LoadedSnapshot> loaded = informer::ReadSnapshot(
      options_.dir, t.identity, t.transform, read_options);
  const absl::Time read = absl::Now();
  if (!loaded.ok()) {
    const informer::SnapshotProblem problem =
        informer::GetSnapshotProblem(loaded.status());
    if (problem == informer::SnapshotProblem::kMissing && !slot->resuming) {
      LOG(INFO) << name << ": no snapshot in " << options_.dir
                << ": cold start";
      return;
    }
    LOG(WARNING) << name << ": snapshot not used ("
                 << informer::SnapshotProblemName(problem)
                 << "): " << loaded.status().message() << ": cold start";
    Reject(slot, loaded.status());
    return;
  }
  const size_t count = loaded->objects.size();
  // How they are held: compressed by the resource's compressor as listed
  // objects are (but for small ones, and those it sampled to train on).
  size_t compressed = 0;
  uint64_t stored = 0, json = 0;
  for (const informer::ObjectPtr& o : loaded->objects) {
    compressed += o->compressed() ? 1 : 0;
    stored += o->stored_json_size();
    json += o->json_size();
  }
  const std::string rv = loaded->resource_version;
  const uint64_t bytes = loaded->file_bytes;
  const absl::Time written = loaded->written;
  // For on_read, which sees the objects only once the informer has them.
  std::vector<informer::ObjectPtr> objects;
  if (t.on_read) objects = loaded->objects;
  if (absl::Status st =
          t.informer->SetInitialState(std::move(loaded->objects), rv);
      !st.ok()) {
    LOG(WARNING) << name << ": snapshot not used: " << st << ": cold start";
    Reject(slot, st);
    return;
  }
  slot->resuming = false;
  LOG(INFO) << name << ": loaded " << count << " objects (" << bytes
            << " bytes) at resourceVersion " << rv << " from " << loaded->path
            << " in " << Millis(absl::Now() - start) << " (read and decoded "
            << Millis(read - start) << "; written " << loaded->written << "); "
            << compressed << " stored compressed, " << stored
            << " bytes held for " << json << " bytes of JSON";
  if (t.on_read) {
    loaded->objects = std::move(objects);
    t.on_read(*loaded);
  }
  if (t.on_loaded) t.on_loaded(written);
  absl::MutexLock lock(&mu_);
  slot->written_rv = rv;
  slot->bytes = bytes;
  ++stats_.loaded;
}

void SnapshotKeeper::Start() {
  // Start returns once the thread runs at its priority (GetStats says it).
  auto started = std::make_shared<absl::Notification>();
  {
    absl::MutexLock lock(&mu_);
    if (options_.interval <= absl::ZeroDuration() || thread_.joinable() ||
        stopping_) {
      return;
    }
    thread_ = std::thread([this, started] {
      LowerWriterPriority();
      started->Notify();
      Loop();
    });
  }
  started->WaitForNotification();
}

void SnapshotKeeper::LowerWriterPriority() {
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, tid);
  int now = current;
  if (errno == 0 && options_.writer_nice > 0) {
    const int wanted = std::min(19, current + options_.writer_nice);
    if (setpriority(PRIO_PROCESS, tid, wanted) == 0) {
      now = wanted;
    } else {
      LOG(WARNING) << "snapshots: the periodic writes keep the process's "
                   << "priority (setpriority: " << std::strerror(errno) << ")";
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.writer_nice = now;
}

void SnapshotKeeper::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (options_.clock->AwaitWithDeadline(
              &mu_, absl::Condition(this, &SnapshotKeeper::StoppingLocked),
              options_.clock->Now() + options_.interval)) {
        return;
      }
    }
    // Errors are logged and counted by WriteAll.
    WriteAll().IgnoreError();
  }
}

void SnapshotKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status SnapshotKeeper::WriteAll() {
  absl::MutexLock round(&write_mu_);
  std::vector<Slot*> slots;
  {
    absl::MutexLock lock(&mu_);
    for (auto& s : slots_) slots.push_back(s.get());
  }
  absl::Status first;
  bool wrote = false;
  for (Slot* slot : slots) {
    absl::Status st = WriteOne(slot);
    if (absl::IsAborted(st)) continue;  // nothing new to write
    if (st.ok()) {
      wrote = true;
    } else if (first.ok()) {
      first = st;
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.bytes = 0;
  for (auto& s : slots_) stats_.bytes += s->bytes;
  if (wrote && first.ok()) stats_.last_success = options_.clock->Now();
  return first;
}

absl::Status SnapshotKeeper::WriteOne(Slot* slot) {
  informer::SharedIndexInformer* informer = slot->target.informer;
  // An informer still catching up (or never synced) holds nothing a
  // snapshot does not already have, or nothing worth keeping.
  if (!informer->HasSynced()) return absl::AbortedError("not synced");
  const absl::Time start = absl::Now();
  informer::SnapshotWriteOptions wo;
  std::optional<Captured> captured;
  if (slot->target.capture) captured = slot->target.capture();
  informer::SharedIndexInformer::StateCopy state;
  std::string tag;
  if (captured.has_value()) {
    state.objects = std::move(captured->objects);
    state.resource_version = std::move(captured->resource_version);
    wo.extra_sections = std::move(captured->sections);
    tag = std::move(captured->change_tag);
  } else {
    state = informer->CopyState();
  }
  if (state.resource_version.empty() ||
      (state.resource_version == slot->written_rv &&
       tag == slot->written_tag)) {
    return absl::AbortedError("unchanged");
  }
  wo.clock = options_.clock;
  wo.before_write = options_.before_write;
  absl::StatusOr<informer::SnapshotWriteStats> written =
      informer::WriteSnapshot(options_.dir, slot->target.identity,
                              state.resource_version, state.objects, wo);
  absl::MutexLock lock(&mu_);
  if (!written.ok()) {
    ++stats_.write_failures;
    LOG(WARNING) << informer->name() << ": snapshot not written (the "
                 << "previous one, if any, is kept): " << written.status();
    return written.status();
  }
  ++stats_.writes;
  slot->written_rv = state.resource_version;
  slot->written_tag = tag;
  slot->bytes = written->file_bytes;
  LOG(INFO) << informer->name() << ": snapshot of " << written->objects
            << " objects at resourceVersion " << state.resource_version
            << " written to " << written->path << " (" << written->file_bytes
            << " bytes, objects' JSON " << written->json_bytes << ") in "
            << Millis(absl::Now() - start);
  return absl::OkStatus();
}

SnapshotKeeper::Stats SnapshotKeeper::GetStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace server

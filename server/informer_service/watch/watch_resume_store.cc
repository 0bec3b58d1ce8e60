#include "server/informer_service/watch/watch_resume_store.h"

#include <glog/logging.h>

#include <utility>

namespace server {

void WatchResumeStore::Wire(const std::string& resource,
                            SnapshotKeeper::Target* target) {
  {
    absl::MutexLock lock(&mu_);
    slots_.try_emplace(resource);
  }
  target->keep_sections = {informer::kWatchHistorySection};
  const informer::SnapshotIdentity identity = target->identity;
  const informer::TransformOptions transform = target->transform;
  target->on_read = [this, resource, identity,
                     transform](const informer::LoadedSnapshot& loaded) {
    SeedFromSnapshot(resource, identity, transform, loaded);
  };
  target->capture = [this, resource,
                     identity]() -> std::optional<SnapshotKeeper::Captured> {
    std::optional<Capture> c = CaptureNow(resource);
    if (!c.has_value()) return std::nullopt;
    c->history.identity = informer::WatchHistoryIdentity(identity);
    c->history.resource_version = c->resource_version;
    SnapshotKeeper::Captured out;
    out.sections.push_back(informer::EncodeWatchHistorySection(c->history));
    out.objects = std::move(c->objects);
    out.resource_version = std::move(c->resource_version);
    out.change_tag = std::move(c->change_tag);
    return out;
  };
}

std::optional<WatchResumeStore::Seed> WatchResumeStore::TakeSeed(
    const std::string& resource) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(resource);
  if (it == slots_.end() || !it->second.seed.has_value()) return std::nullopt;
  std::optional<Seed> seed = std::move(it->second.seed);
  it->second.seed.reset();
  return seed;
}

bool WatchResumeStore::Attach(const std::string& resource, Source* source) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(resource);
  if (it == slots_.end()) return false;
  it->second.source = source;
  it->second.parked.reset();
  return true;
}

void WatchResumeStore::Detach(const std::string& resource, Source* source,
                              std::optional<Capture> last) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(resource);
  if (it == slots_.end() || it->second.source != source) return;
  it->second.source = nullptr;
  it->second.parked = std::move(last);
}

std::optional<WatchResumeStore::Capture> WatchResumeStore::CaptureNow(
    const std::string& resource) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(resource);
  if (it == slots_.end()) return std::nullopt;
  if (it->second.source != nullptr) {
    return it->second.source->CaptureForSnapshot();
  }
  return it->second.parked;
}

void WatchResumeStore::SeedFromSnapshot(
    const std::string& resource, const informer::SnapshotIdentity& identity,
    const informer::TransformOptions& transform,
    const informer::LoadedSnapshot& loaded) {
  const informer::SnapshotSection* section = nullptr;
  for (const auto& s : loaded.sections) {
    if (s.name == informer::kWatchHistorySection) section = &s;
  }
  if (section == nullptr) {
    LOG(INFO) << resource << ": the snapshot keeps no Watch history: "
              << "tokens of the last run get RESET";
    return;
  }
  absl::StatusOr<informer::PersistedWatchHistory> history =
      informer::DecodeWatchHistorySection(*section, identity,
                                          loaded.resource_version,
                                          loaded.objects, transform);
  if (!history.ok()) {
    LOG(WARNING) << resource << ": Watch history in " << loaded.path
                 << " not used (" << history.status()
                 << "): tokens of the last run get RESET";
    return;
  }
  const informer::PersistedWatchHistory& h = *history;
  LOG(INFO) << resource << ": Watch history loaded: " << h.events.size()
            << " events, positions up to " << h.last_seq << " ("
            << h.aliases.size() << " earlier runs' tokens resume)";
  absl::MutexLock lock(&mu_);
  slots_[resource].seed = Seed{*std::move(history), loaded.objects};
}

}  // namespace server

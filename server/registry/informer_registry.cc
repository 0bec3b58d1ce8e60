#include "server/registry/informer_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace server {

// The shared state of one InformerRef and its copies: ends the lease when
// the last copy goes.
struct InformerRegistry::Lease {
  Lease(InformerRegistry* r, Slot* s, std::shared_ptr<InformerEntry> e)
      : registry(r), slot(s), entry(std::move(e)) {}
  ~Lease() { registry->Release(slot); }
  InformerRegistry* const registry;
  Slot* const slot;
  const std::shared_ptr<InformerEntry> entry;
};

InformerRegistry::InformerRegistry(Options options)
    : options_(std::move(options)) {}

StaleState::View ObserveStale(const InformerEntry& entry) {
  if (entry.informer == nullptr) return entry.stale.Last();
  // Only once the snapshot's objects are in the cache (the informer
  // started with them): a resume begun from the snapshot's header
  // (BeginResume) probes, and fails while the API server is down, before
  // that, and an empty cache is no stale snapshot. Read first: Resumed()
  // turns false only after a list, which a sync soon follows.
  const bool holds_snapshot = entry.informer->Resumed();
  // Errors first: a sync right after them must not read as stale.
  const int64_t errors =
      holds_snapshot ? entry.informer->GetReflectorCounters().errors : 0;
  return entry.stale.Observe(entry.informer->HasSynced(), errors);
}

absl::StatusOr<std::shared_ptr<InformerEntry>> InformerRegistry::Build(
    ResourceConfig config, bool lazy) const {
  auto entry = std::make_shared<InformerEntry>();
  entry->lazy = lazy;
  // Lazy informers never start from a snapshot.
  if (options_.serve_stale_on_start && !lazy) entry->stale.Enable();
  absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> source =
      factory_(config);
  if (!source.ok()) {
    return absl::Status(
        source.status().code(),
        absl::StrCat("resource \"", config.resource, "\"",
                     config.origin.empty() || lazy
                         ? std::string()
                         : absl::StrCat(" (", config.origin, ")"),
                     ": ", source.status().message()));
  }
  entry->source = *std::move(source);

  informer::SharedIndexInformer::Options options;
  options.name = config.resource;
  options.default_resync_period = config.resync_period;
  options.reflector.use_watch_list = options_.use_watch_list;
  options.reflector.watch_list_after_refusal =
      options_.watch_list_after_refusal;
  options.indexers[std::string(informer::kOwnerUidIndex)] =
      informer::OwnerUidIndexFunc;
  for (const std::string& key : config.label_indexes) {
    options.indexers[informer::LabelIndexName(key)] =
        informer::LabelIndexFunc(key);
  }
  for (const std::string& path : config.field_indexes) {
    options.indexers[informer::FieldIndexName(path)] =
        informer::FieldIndexFunc(path);
  }
  // The informer (its threads) lives no longer than its entry, and the
  // registry outlives every entry.
  options.on_relist_applied = [this, e = entry.get()] {
    Notify([e](const Observer& o) {
      if (o.on_relist_applied) o.on_relist_applied(e);
    });
  };
  entry->informer = std::make_unique<informer::SharedIndexInformer>(
      entry->source.get(), std::move(options), options_.clock);
  entry->config = std::move(config);
  return entry;
}

absl::StatusOr<std::unique_ptr<InformerRegistry>> InformerRegistry::Create(
    std::vector<ResourceConfig> configs, const ListerWatcherFactory& factory,
    Options options) {
  std::unique_ptr<InformerRegistry> registry(
      new InformerRegistry(std::move(options)));
  registry->factory_ = factory;
  ResourceResolver* resolver = registry->options_.resolver;
  for (ResourceConfig& config : configs) {
    if (config.resource.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a resource has an empty name",
          config.origin.empty() ? "" : absl::StrCat(" (", config.origin, ")")));
    }
    if (resolver != nullptr) {
      absl::StatusOr<std::string> canonical =
          resolver->Canonical(config.resource);
      if (!canonical.ok()) {
        return absl::Status(
            canonical.status().code(),
            absl::StrCat("resource \"", config.resource, "\"",
                         config.origin.empty()
                             ? std::string()
                             : absl::StrCat(" (", config.origin, ")"),
                         ": ", canonical.status().message()));
      }
      absl::MutexLock lock(&registry->mu_);
      registry->aliases_[config.resource] = *canonical;
      config.resource = *std::move(canonical);
    }
  }
  std::stable_sort(configs.begin(), configs.end(),
                   [](const ResourceConfig& a, const ResourceConfig& b) {
                     return a.resource < b.resource;
                   });
  for (size_t i = 1; i < configs.size(); ++i) {
    if (configs[i - 1].resource == configs[i].resource) {
      const auto origin = [](const ResourceConfig& c) {
        return c.origin.empty() ? std::string()
                                : absl::StrCat(" (", c.origin, ")");
      };
      return absl::InvalidArgumentError(
          absl::StrCat("resource \"", configs[i].resource, "\" is listed twice",
                       origin(configs[i - 1]), origin(configs[i])));
    }
  }
  for (ResourceConfig& config : configs) {
    absl::StatusOr<std::shared_ptr<InformerEntry>> entry =
        registry->Build(std::move(config), /*lazy=*/false);
    if (!entry.ok()) return entry.status();
    auto slot = std::make_unique<Slot>();
    slot->name = (*entry)->config.resource;
    slot->entry = *entry;
    registry->configured_names_.push_back(slot->name);
    registry->configured_.push_back(*entry);
    absl::MutexLock lock(&registry->mu_);
    registry->slots_[slot->name] = std::move(slot);
  }
  return registry;
}

InformerRegistry::~InformerRegistry() {
  Stop();
  // Entries (and their informers) go with the slots and the graveyard.
}

absl::Status InformerRegistry::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopped_) {
      return absl::FailedPreconditionError("the registry was started before");
    }
    started_ = true;
  }
  for (const auto& entry : configured_) {
    if (absl::Status st = entry->informer->Start(); !st.ok()) {
      return absl::Status(
          st.code(), absl::StrCat("starting the informer of ",
                                  entry->config.resource, ": ", st.message()));
    }
    LOG(INFO) << "informer started: " << entry->config.resource
              << (entry->config.namespace_.empty()
                      ? std::string(" (all namespaces)")
                      : absl::StrCat(" (namespace ", entry->config.namespace_,
                                     ")"));
  }
  if (options_.allow_unlisted) {
    // The first deadline is taken now, not when the thread runs: a clock
    // advanced in between (tests) must not push the schedule back.
    const absl::Time first = options_.clock->Now() + IdlePeriod();
    idle_thread_ = std::thread([this, first] { IdleLoop(first); });
  }
  return absl::OkStatus();
}

void InformerRegistry::Stop() {
  std::vector<std::shared_ptr<InformerEntry>> running;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [name, slot] : slots_) {
      if (slot->entry != nullptr) running.push_back(slot->entry);
    }
    for (const auto& entry : graveyard_) running.push_back(entry);
  }
  if (idle_thread_.joinable()) idle_thread_.join();
  // Informers first: they read from their sources until stopped.
  for (const auto& entry : running) entry->informer->Stop();
}

absl::StatusOr<std::string> InformerRegistry::CanonicalName(
    absl::string_view name) {
  if (options_.resolver == nullptr) return std::string(name);
  {
    absl::MutexLock lock(&mu_);
    auto it = aliases_.find(name);
    if (it != aliases_.end()) return it->second;
  }
  absl::StatusOr<std::string> canonical = options_.resolver->Canonical(name);
  if (!canonical.ok()) return canonical.status();
  absl::MutexLock lock(&mu_);
  aliases_[name] = *canonical;
  return canonical;
}

InformerRef InformerRegistry::LeaseLocked(Slot* slot) {
  ++slot->leases;
  slot->last_used = options_.clock->Now();
  auto lease = std::make_shared<Lease>(this, slot, slot->entry);
  InformerEntry* entry = lease->entry.get();
  return InformerRef(std::shared_ptr<InformerEntry>(std::move(lease), entry));
}

void InformerRegistry::Release(Slot* slot) {
  absl::MutexLock lock(&mu_);
  --slot->leases;
  slot->last_used = options_.clock->Now();
}

absl::Status PersistentSyncError(const InformerEntry& entry) {
  if (entry.informer == nullptr || entry.informer->HasSynced()) {
    return absl::OkStatus();
  }
  absl::Status last = entry.informer->LastError();
  switch (last.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
      return last;
    default:
      return absl::OkStatus();
  }
}

absl::Status InformerRegistry::UnknownResource(absl::string_view name,
                                               absl::string_view why) const {
  std::string msg = absl::StrCat("unknown resource \"", name, "\"");
  if (!why.empty()) absl::StrAppend(&msg, " (", why, ")");
  absl::StrAppend(&msg, "; available: ",
                  configured_names_.empty()
                      ? std::string("(none configured)")
                      : absl::StrJoin(configured_names_, ", "));
  absl::StrAppend(&msg, options_.allow_unlisted
                            ? "; lazy mode is on: any resource the API "
                              "server serves"
                            : "; lazy mode is off: only configured "
                              "resources are served");
  return absl::NotFoundError(msg);
}

absl::StatusOr<InformerRef> InformerRegistry::Find(absl::string_view resource) {
  absl::StatusOr<std::string> canonical = CanonicalName(resource);
  if (!canonical.ok()) {
    if (absl::IsNotFound(canonical.status())) {
      return UnknownResource(resource, canonical.status().message());
    }
    return canonical.status();
  }
  Slot* slot = nullptr;
  InformerRef ref;
  bool wait_for_sync = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(*canonical);
    if (it != slots_.end()) slot = it->second.get();
    if (slot == nullptr || slot->entry == nullptr) {
      if (!options_.allow_unlisted) return UnknownResource(resource, "");
      if (stopped_) {
        return absl::UnavailableError("the sidecar is shutting down");
      }
      if (slot == nullptr) {
        auto fresh = std::make_unique<Slot>();
        fresh->name = *canonical;
        fresh->lazy = true;
        slot = fresh.get();
        slots_[*canonical] = std::move(fresh);
      }
      // One thread builds; concurrent finders wait for it.
      const auto not_starting = [slot]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !slot->starting;
      };
      mu_.Await(absl::Condition(&not_starting));
      if (slot->entry == nullptr) {
        if (stopped_) {
          return absl::UnavailableError("the sidecar is shutting down");
        }
        slot->starting = true;
      }
    }
    if (slot->entry != nullptr) {
      ref = LeaseLocked(slot);
      wait_for_sync = slot->lazy && !slot->synced_reported;
    }
  }
  if (!ref) {
    absl::StatusOr<InformerRef> started = StartLazy(slot, resource);
    if (!started.ok()) return started.status();
    ref = *std::move(started);
    wait_for_sync = true;
  }
  if (wait_for_sync) {
    // A lazy informer still syncing: a first request is better answered
    // from a synced cache a moment later than with UNAVAILABLE.
    ref->informer->WaitForSync(options_.lazy_sync_wait);
    MaybeReportSynced(slot);
  }
  return ref;
}

absl::StatusOr<InformerRef> InformerRegistry::StartLazy(
    Slot* slot, absl::string_view requested) {
  ResourceConfig config;
  config.resource = slot->name;
  config.namespace_ = options_.lazy_namespace;
  config.origin = "lazy";
  absl::StatusOr<std::shared_ptr<InformerEntry>> entry =
      Build(std::move(config), /*lazy=*/true);
  absl::Status started =
      entry.ok() ? (*entry)->informer->Start() : entry.status();
  InformerRef ref;
  {
    absl::MutexLock lock(&mu_);
    slot->starting = false;
    if (started.ok() && stopped_) {
      started = absl::UnavailableError("the sidecar is shutting down");
    }
    if (started.ok()) {
      slot->entry = *entry;
      slot->synced_reported = false;
      ++lazy_starts_;
      ref = LeaseLocked(slot);
    }
  }
  if (!started.ok()) {
    LOG(WARNING) << "lazy informer for " << slot->name
                 << " failed to start: " << started;
    // The half-built entry (if any) stops and goes here, outside the lock.
    return started;
  }
  LOG(INFO) << "lazy informer started: " << slot->name << " (requested as \""
            << requested << "\")";
  return ref;
}

void InformerRegistry::MaybeReportSynced(Slot* slot) {
  InformerEntry* entry = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (slot->entry == nullptr || slot->synced_reported ||
        !slot->entry->informer->HasSynced()) {
      return;
    }
    slot->synced_reported = true;
    entry = slot->entry.get();
  }
  LOG(INFO) << "lazy informer synced: " << entry->config.resource << " ("
            << entry->informer->GetIndexer().Size() << " objects)";
  // The entry cannot be retired before this returns: the caller holds a
  // lease, or this is the idle thread, the only one that retires.
  Notify([entry](const Observer& o) {
    if (o.on_lazy_synced) o.on_lazy_synced(entry);
  });
}

absl::Duration InformerRegistry::IdlePeriod() const {
  return std::clamp(options_.lazy_idle_timeout / 4, absl::Milliseconds(10),
                    absl::Seconds(30));
}

void InformerRegistry::IdleLoop(absl::Time first) {
  const absl::Duration period = IdlePeriod();
  // A fixed schedule, not "now + period" after each check: a clock that
  // jumps (a FakeClock in tests) gets its checks without waiting again.
  absl::Time next = first;
  while (true) {
    std::vector<std::shared_ptr<InformerEntry>> retired;
    std::vector<std::shared_ptr<InformerEntry>> freed;
    std::vector<Slot*> unreported;
    absl::Time check_time;
    {
      absl::MutexLock lock(&mu_);
      options_.clock->AwaitWithDeadline(&mu_, absl::Condition(&stopped_), next);
      if (stopped_) return;
      if (options_.clock->Now() < next) continue;  // spurious wake-up
      next = std::max(next + period, options_.clock->Now() - period);
      // Retired entries nobody references any more are freed below.
      auto keep = std::partition(graveyard_.begin(), graveyard_.end(),
                                 [](const std::shared_ptr<InformerEntry>& e) {
                                   return e.use_count() > 1;
                                 });
      std::move(keep, graveyard_.end(), std::back_inserter(freed));
      graveyard_.erase(keep, graveyard_.end());
      const absl::Time now = options_.clock->Now();
      check_time = now;
      for (auto& [name, slot] : slots_) {
        if (!slot->lazy || slot->entry == nullptr) continue;
        if (!slot->synced_reported) unreported.push_back(slot.get());
        if (slot->leases > 0 || slot->entry->streams.load() > 0) {
          slot->last_used = now;  // busy: the idle time restarts
          continue;
        }
        if (now - slot->last_used < options_.lazy_idle_timeout) continue;
        retired.push_back(slot->entry);
        graveyard_.push_back(std::move(slot->entry));
        slot->entry = nullptr;
        ++lazy_stops_;
      }
    }
    for (Slot* slot : unreported) MaybeReportSynced(slot);
    for (const auto& entry : retired) {
      LOG(INFO) << "lazy informer stopped: " << entry->config.resource
                << " (idle for " << options_.lazy_idle_timeout << ")";
      Notify([e = entry.get()](const Observer& o) {
        if (o.on_retired) o.on_retired(e);
      });
      entry->informer->Stop();
    }
    retired.clear();
    // Destroyed here, outside every lock.
    freed.clear();
    absl::MutexLock lock(&mu_);
    last_idle_check_ = std::max(last_idle_check_, check_time);
  }
}

void InformerRegistry::WaitForIdleCheck(absl::Time at) const {
  absl::MutexLock lock(&mu_);
  const auto reached = [this, at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return last_idle_check_ >= at || stopped_;
  };
  mu_.Await(absl::Condition(&reached));
}

std::vector<std::shared_ptr<InformerEntry>> InformerRegistry::entries() const {
  std::vector<std::shared_ptr<InformerEntry>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, slot] : slots_) {
    if (slot->entry != nullptr) out.push_back(slot->entry);
  }
  return out;
}

std::vector<std::string> InformerRegistry::ResourceNames() const {
  return configured_names_;
}

bool InformerRegistry::AllSynced() const {
  for (const auto& entry : configured_) {
    if (!entry->informer->HasSynced()) return false;
  }
  return true;
}

int InformerRegistry::AddObserver(Observer observer) {
  absl::MutexLock lock(&observers_mu_);
  const int id = next_observer_++;
  observers_[id] = std::move(observer);
  return id;
}

void InformerRegistry::RemoveObserver(int id) {
  absl::MutexLock lock(&observers_mu_);
  observers_.erase(id);
}

void InformerRegistry::Notify(
    const std::function<void(const Observer&)>& call) const {
  absl::ReaderMutexLock lock(&observers_mu_);
  for (const auto& [id, observer] : observers_) call(observer);
}

int InformerRegistry::lazy_starts() const {
  absl::MutexLock lock(&mu_);
  return lazy_starts_;
}

int InformerRegistry::lazy_stops() const {
  absl::MutexLock lock(&mu_);
  return lazy_stops_;
}

bool InformerRegistry::WaitForLazyStops(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lazy_stops_ >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace server

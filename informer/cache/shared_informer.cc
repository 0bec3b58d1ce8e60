#include "informer/cache/shared_informer.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "informer/cache/list_reconciler.h"

namespace informer {
namespace {

// client-go's minimumResyncPeriod: anything faster is a bug, not a setting.
constexpr absl::Duration kMinResyncPeriod = absl::Seconds(1);

Indexers WithNamespaceIndex(Indexers indexers) {
  indexers.try_emplace(std::string(kNamespaceIndex), MetaNamespaceIndexFunc);
  return indexers;
}

DeltaFIFO::Options FifoOptions(KeyListerGetter* known,
                               DeltaFIFO::ProcessFn process) {
  DeltaFIFO::Options o;
  o.known_objects = known;
  o.emit_delta_type_replaced = true;
  o.process_when_idle = std::move(process);
  return o;
}

bool RvAtLeast(absl::string_view a, absl::string_view b) {
  return Reflector::ResourceVersionAtLeast(a, b);
}

}  // namespace

bool HandlerRegistration::HasSynced() const {
  return informer_->HasSynced() && listener_->InitialListDelivered();
}

SharedIndexInformer::SharedIndexInformer(ListerWatcher* lw, Options options,
                                         Clock* clock)
    : lw_(lw),
      options_(std::move(options)),
      clock_(clock),
      indexer_(WithNamespaceIndex(options_.indexers)),
      // A watch event that finds the processing thread idle is handled on
      // the reflector's thread, without waking it: see ProcessLoop.
      fifo_(FifoOptions(&indexer_,
                        [this](const Deltas& deltas, bool initial) {
                          return ProcessWhenIdle(deltas, initial);
                        })),
      resync_check_period_(options_.default_resync_period) {}

SharedIndexInformer::~SharedIndexInformer() { Stop(); }

absl::StatusOr<HandlerRegistration*> SharedIndexInformer::AddEventHandler(
    ResourceEventHandler* handler, HandlerOptions options) {
  if (handler == nullptr) {
    return absl::InvalidArgumentError("AddEventHandler: null handler");
  }
  absl::MutexLock lock(&handle_mu_);
  ProcessorListener::Options lo;
  lo.inline_handler = options.non_blocking;
  lo.max_pending = std::max<size_t>(options.max_pending, 1);
  absl::Duration period =
      options.resync_period.value_or(options_.default_resync_period);
  if (period > absl::ZeroDuration()) {
    period = std::max(period, kMinResyncPeriod);
    if (started_) {
      // The resync loop is already running at resync_check_period_; a
      // faster handler cannot be served faster (client-go warns likewise).
      if (resync_check_period_ <= absl::ZeroDuration()) {
        LOG(WARNING) << options_.name
                     << ": resync requested after start on an informer "
                        "without resync; this handler gets none";
        period = absl::ZeroDuration();
      } else if (period < resync_check_period_) {
        LOG(WARNING) << options_.name << ": resync period " << period
                     << " raised to the informer's " << resync_check_period_;
        period = resync_check_period_;
      }
    } else if (resync_check_period_ <= absl::ZeroDuration() ||
               period < resync_check_period_) {
      resync_check_period_ = period;
    }
  }
  lo.resync_period = period;
  auto listener = std::make_unique<ProcessorListener>(handler, lo, clock_);
  ProcessorListener* l = listener.get();
  registrations_.push_back(
      absl::WrapUnique(new HandlerRegistration(this, std::move(listener))));
  HandlerRegistration* reg = registrations_.back().get();
  if (started_) {
    // Catch the late handler up with the cache as it is now; every later
    // change reaches it through HandleDeltas, which holds handle_mu_ too.
    for (ObjectPtr& obj : indexer_.List()) {
      Notification n;
      n.type = Notification::Type::kAdd;
      n.key = obj->Key();
      n.obj = std::move(obj);
      n.is_in_initial_list = true;
      l->Add(std::move(n));
    }
    l->Start();
  }
  return reg;
}

absl::StatusOr<HandlerRegistration*>
SharedIndexInformer::AddEventHandlerWithResyncPeriod(
    ResourceEventHandler* handler, absl::Duration resync_period) {
  HandlerOptions options;
  options.resync_period = resync_period;
  return AddEventHandler(handler, options);
}

absl::Status SharedIndexInformer::RemoveEventHandler(
    HandlerRegistration* registration) {
  std::unique_ptr<HandlerRegistration> removed;
  {
    absl::MutexLock lock(&handle_mu_);
    auto it = std::find_if(
        registrations_.begin(), registrations_.end(),
        [registration](const auto& r) { return r.get() == registration; });
    if (it == registrations_.end()) {
      return absl::NotFoundError(
          "RemoveEventHandler: registration not found in this informer");
    }
    syncing_.erase((*it)->listener_.get());
    removed = std::move(*it);
    registrations_.erase(it);
  }
  // Joins the listener's thread outside the lock: its handler may be
  // running and may read the cache.
  removed->listener_->Stop();
  return absl::OkStatus();
}

absl::Status SharedIndexInformer::SetTransform(TransformFunc transform) {
  absl::MutexLock lock(&handle_mu_);
  if (started_ || resume_ != Resume::kNone) {
    return absl::FailedPreconditionError(
        "SetTransform: informer already started");
  }
  transform_ = std::move(transform);
  return absl::OkStatus();
}

absl::Status SharedIndexInformer::SetWatchErrorHandler(
    std::function<void(const absl::Status&)> handler) {
  absl::MutexLock lock(&handle_mu_);
  if (started_ || resume_ != Resume::kNone) {
    return absl::FailedPreconditionError(
        "SetWatchErrorHandler: informer already started");
  }
  watch_error_handler_ = std::move(handler);
  return absl::OkStatus();
}

absl::Status SharedIndexInformer::AddIndexers(const Indexers& indexers) {
  return indexer_.AddIndexers(indexers);
}

absl::Status SharedIndexInformer::SetInitialState(
    std::vector<ObjectPtr> objects, std::string resource_version) {
  if (resource_version.empty()) {
    return absl::InvalidArgumentError("SetInitialState: empty resourceVersion");
  }
  for (const ObjectPtr& obj : objects) {
    if (obj == nullptr) {
      return absl::InvalidArgumentError("SetInitialState: null object");
    }
  }
  absl::ReleasableMutexLock lock(&handle_mu_);
  if (resume_ == Resume::kPending) {
    if (resource_version != initial_rv_) {
      return absl::InvalidArgumentError(
          absl::StrCat("SetInitialState: the resume began from "
                       "resourceVersion ",
                       initial_rv_, ", not ", resource_version));
    }
    initial_objects_ = std::move(objects);
    resume_ = Resume::kLoaded;
    std::optional<bool> decided = TakeResumeDecisionLocked();
    lock.Release();
    if (decided.has_value()) FinishResume(*decided);
    return absl::OkStatus();
  }
  if (started_ || resume_ != Resume::kNone) {
    return absl::FailedPreconditionError(
        "SetInitialState: informer already started");
  }
  initial_objects_ = std::move(objects);
  initial_rv_ = std::move(resource_version);
  return absl::OkStatus();
}

absl::Status SharedIndexInformer::BeginResume(std::string resource_version) {
  if (resource_version.empty()) {
    return absl::InvalidArgumentError("BeginResume: empty resourceVersion");
  }
  absl::MutexLock lock(&handle_mu_);
  if (started_ || resume_ != Resume::kNone || !initial_rv_.empty()) {
    return absl::FailedPreconditionError(
        "BeginResume: the informer was started or given a state");
  }
  {
    absl::MutexLock sync_lock(&sync_mu_);
    if (stopped_) {
      return absl::FailedPreconditionError("BeginResume: informer stopped");
    }
  }
  initial_rv_ = std::move(resource_version);
  resume_ = Resume::kPending;
  Reflector::Options ro = ReflectorOptionsLocked();
  ResumeOptions(&ro);
  ro.resume_state_pending = true;
  Reflector* r = nullptr;
  {
    absl::MutexLock reflector_lock(&reflector_mu_);
    reflector_ =
        std::make_unique<Reflector>(lw_, &fifo_, clock_, std::move(ro));
    r = reflector_.get();
  }
  reflector_thread_ = std::thread([r] { r->Run(); });
  LOG(INFO) << options_.name << ": resuming from resourceVersion "
            << initial_rv_ << " while its state loads";
  return absl::OkStatus();
}

absl::Status SharedIndexInformer::AbandonResume(const absl::Status& why) {
  absl::ReleasableMutexLock lock(&handle_mu_);
  if (resume_ != Resume::kPending) {
    return absl::FailedPreconditionError(
        "AbandonResume: no resume waiting for its state");
  }
  LOG(WARNING) << options_.name << ": not resuming from resourceVersion "
               << initial_rv_ << " (" << why.message()
               << "): listing as a cold start";
  initial_rv_.clear();
  resume_ = Resume::kAbandoned;
  std::optional<bool> decided = TakeResumeDecisionLocked();
  lock.Release();
  if (decided.has_value()) FinishResume(*decided);
  return absl::OkStatus();
}

std::optional<bool> SharedIndexInformer::TakeResumeDecisionLocked() {
  if (!started_) return std::nullopt;
  if (resume_ != Resume::kLoaded && resume_ != Resume::kAbandoned) {
    return std::nullopt;
  }
  const bool usable = resume_ == Resume::kLoaded;
  resume_ = Resume::kDone;
  return usable;
}

void SharedIndexInformer::FinishResume(bool usable) {
  if (usable) {
    std::string rv;
    {
      absl::MutexLock lock(&handle_mu_);
      rv = initial_rv_;
    }
    // Installed in the FIFO's critical section, as a staged list commits
    // (the FIFO's lock, then handle_mu_, as every pop takes them): the
    // indexer holds the state and the FIFO has applied its
    // resourceVersion in one step, whatever the reflector is doing. It
    // may be probing an API server that is down for a long while (the
    // state then served stale), so this cannot wait for its gate: what
    // is served must say the resourceVersion the state is at. Nothing is
    // queued yet (the reflector waits at its gate, and a resync finds no
    // object in the empty indexer), so the FIFO takes it.
    const bool applied = fifo_.ReplaceApplied(rv, [this](bool) {
      absl::MutexLock lock(&handle_mu_);
      InstallInitialStateLocked();
      return true;
    });
    if (!applied) {
      LOG(ERROR) << options_.name << ": deltas queued before the resumed "
                 << "state was installed; installing it all the same";
      {
        absl::MutexLock lock(&handle_mu_);
        InstallInitialStateLocked();
      }
      fifo_.NoteResourceVersion(rv);
    }
  }
  // Only now: the watch's events, applied once the reflector is told,
  // find the state they follow.
  Reflector* r = nullptr;
  {
    absl::MutexLock reflector_lock(&reflector_mu_);
    r = reflector_.get();
  }
  r->ResumeStateReady(usable);
}

void SharedIndexInformer::ResumeOptions(Reflector::Options* ro) {
  ro->resume_resource_version = initial_rv_;
  ro->on_caught_up = [this](const std::string& rv) { OnCaughtUp(rv); };
}

void SharedIndexInformer::InstallInitialStateLocked() {
  // Indexed before the reflector applies anything: the first watch event
  // finds the state it follows.
  indexer_.Replace(std::move(initial_objects_), initial_rv_);
  initial_objects_.clear();
  if (!registrations_.empty()) {
    for (ObjectPtr& obj : indexer_.List()) {
      Notification n;
      n.type = Notification::Type::kAdd;
      n.key = obj->Key();
      n.obj = std::move(obj);
      n.is_in_initial_list = true;
      DistributeLocked(n, false);
    }
  }
  {
    absl::MutexLock sync_lock(&sync_mu_);
    awaiting_catch_up_ = true;
    resumed_ = true;
  }
  dedupe_replay_.store(true);
  LOG(INFO) << options_.name << ": starting from " << indexer_.Size()
            << " objects at resourceVersion " << initial_rv_;
}

void SharedIndexInformer::OnCaughtUp(const std::string& rv) {
  {
    absl::MutexLock lock(&sync_mu_);
    if (!awaiting_catch_up_) return;
    catch_up_rv_ = rv;
  }
  RefreshSynced();
}

bool SharedIndexInformer::AlreadyReflected(const Delta& d,
                                           const ObjectPtr& cached) const {
  if (d.type == DeltaType::kDeleted) return cached == nullptr;
  if (d.type != DeltaType::kAdded && d.type != DeltaType::kUpdated) {
    return false;
  }
  return cached != nullptr && cached->uid() == d.object->uid() &&
         RvAtLeast(cached->resource_version(), d.object->resource_version());
}

SharedIndexInformer::StateCopy SharedIndexInformer::CopyState() const {
  StateCopy copy;
  // The RV first: whatever the indexer holds when it is copied reflects
  // at least that RV (the FIFO's applied RV never runs ahead of it).
  absl::MutexLock lock(&handle_mu_);
  copy.resource_version = fifo_.AppliedResourceVersion();
  copy.objects = indexer_.List();
  return copy;
}

bool SharedIndexInformer::Resumed() const {
  absl::MutexLock lock(&sync_mu_);
  return resumed_;
}

absl::Status SharedIndexInformer::Start() {
  std::optional<bool> decided;
  absl::ReleasableMutexLock lock(&handle_mu_);
  if (started_) {
    return absl::FailedPreconditionError("informer already started");
  }
  {
    absl::MutexLock sync_lock(&sync_mu_);
    if (stopped_) {
      return absl::FailedPreconditionError("informer was stopped");
    }
  }
  started_ = true;
  Reflector* r = nullptr;
  if (resume_ == Resume::kNone) {
    Reflector::Options ro = ReflectorOptionsLocked();
    if (!initial_rv_.empty()) {
      InstallInitialStateLocked();
      ResumeOptions(&ro);
    }
    absl::MutexLock reflector_lock(&reflector_mu_);
    reflector_ =
        std::make_unique<Reflector>(lw_, &fifo_, clock_, std::move(ro));
    r = reflector_.get();
  } else {
    // BeginResume's reflector runs already, waiting for the state: given
    // before Start, it is installed below, out of handle_mu_.
    decided = TakeResumeDecisionLocked();
  }
  for (auto& reg : registrations_) reg->listener_->Start();
  process_thread_ = std::thread([this] { ProcessLoop(); });
  if (r != nullptr) reflector_thread_ = std::thread([r] { r->Run(); });
  LOG(INFO) << options_.name << ": informer started";
  lock.Release();
  if (decided.has_value()) FinishResume(*decided);
  return absl::OkStatus();
}

Reflector::Options SharedIndexInformer::ReflectorOptionsLocked() {
  Reflector::Options ro = options_.reflector;
  ro.name = options_.name;
  ro.transform = transform_;
  ro.watch_error_handler = watch_error_handler_;
  ro.resync_period = resync_check_period_;
  ro.should_resync = [this] { return ShouldResync(); };
  ro.on_replaced = [this] { OnRelisted(); };
  ro.begin_list_stage = [this] { return BeginListStage(); };
  return ro;
}

bool SharedIndexInformer::IsStopped() const {
  absl::MutexLock lock(&sync_mu_);
  return stopped_;
}

void SharedIndexInformer::Stop() {
  {
    absl::MutexLock lock(&sync_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  Reflector* r = nullptr;
  {
    absl::MutexLock lock(&reflector_mu_);
    r = reflector_.get();
  }
  if (r != nullptr) r->Stop();
  if (reflector_thread_.joinable()) reflector_thread_.join();
  fifo_.Close();
  if (process_thread_.joinable()) process_thread_.join();
  std::vector<ProcessorListener*> listeners;
  {
    absl::MutexLock lock(&handle_mu_);
    for (auto& reg : registrations_) listeners.push_back(reg->listener_.get());
  }
  for (ProcessorListener* l : listeners) l->Stop();
}

// The consumer of the FIFO's backlogs: a relist's Replace, a resync, and
// the watch events that arrive while it is still busy. A watch event that
// finds the FIFO empty is handled by the reflector's thread in the same
// critical section that queued it (DeltaFIFO::Options::process_when_idle):
// what this loop would have done next, minus the wake-up (a futex wake and
// two context switches per event; what it costs: docs/benchmarks.md,
// section 'Fan-out'). HandleDeltas never blocks (queued
// handlers get a queue entry, inline ones must not block), so the
// reflector's reading is delayed only by the work itself. client-go has no
// such seam: its reflector and processLoop are goroutines, whose hand-off
// costs little.
void SharedIndexInformer::ProcessLoop() {
  const DeltaFIFO::ProcessFn process = [this](const Deltas& deltas,
                                              bool initial) {
    return HandleDeltas(deltas, initial);
  };
  for (;;) {
    absl::Status st = fifo_.Pop(process);
    if (IsFifoClosed(st)) return;
    if (!st.ok()) LOG(ERROR) << options_.name << ": processing: " << st;
    RefreshSynced();
    MaybeRelistApplied();
  }
}

void SharedIndexInformer::RefreshSynced() {
  bool caught_up = false;
  {
    absl::MutexLock lock(&sync_mu_);
    if (awaiting_catch_up_) {
      // Resumed: synced once the indexer reflects the server's RV as it
      // was when the reflector resumed.
      if (catch_up_rv_.empty() ||
          !RvAtLeast(fifo_.AppliedResourceVersion(), catch_up_rv_)) {
        return;
      }
      awaiting_catch_up_ = false;
      dedupe_replay_.store(false);
      LOG(INFO) << options_.name << ": caught up with the server at "
                << "resourceVersion " << catch_up_rv_;
      // The FIFO never saw a list: its HasSynced means nothing here.
      caught_up = true;
    }
  }
  if (caught_up || fifo_.HasSynced()) MarkSynced();
}

void SharedIndexInformer::OnRelisted() {
  // A list brings the cache to the server's state once its deltas are
  // applied: for a resumed informer, the FIFO's HasSynced (true since the
  // resume) cannot tell, the list's resourceVersion can.
  const std::string listed = LastSyncResourceVersion();
  dedupe_replay_.store(false);
  {
    absl::MutexLock lock(&sync_mu_);
    resumed_ = false;
    if (awaiting_catch_up_) catch_up_rv_ = listed;
  }
  RefreshSynced();
  MaybeRelistApplied();
}

void SharedIndexInformer::MaybeRelistApplied() {
  if (!relist_pending_.load(std::memory_order_acquire)) return;
  {
    absl::MutexLock lock(&sync_mu_);
    if (!relist_pending_.load(std::memory_order_relaxed)) return;
    // AppliedResourceVersion advances only once every delta queued before
    // the list's resourceVersion was noted has been popped.
    if (!relist_rv_.empty() &&
        !RvAtLeast(fifo_.AppliedResourceVersion(), relist_rv_)) {
      return;
    }
    relist_pending_.store(false, std::memory_order_relaxed);
    relist_rv_.clear();
  }
  if (options_.on_relist_applied) options_.on_relist_applied();
}

void SharedIndexInformer::MarkSynced() {
  absl::MutexLock lock(&sync_mu_);
  if (awaiting_catch_up_) return;
  if (!synced_) {
    synced_ = true;
    LOG(INFO) << options_.name << ": cache synced";
  }
}

absl::Status SharedIndexInformer::ProcessWhenIdle(const Deltas& deltas,
                                                  bool is_in_initial_list) {
  // The FIFO hands its producer a key only when nothing else is queued, so
  // the initial list has been popped: the informer is synced, which
  // ProcessLoop records only after its last pop returns. Recorded first, so
  // no handler of this event sees the informer unsynced.
  if (!is_in_initial_list) MarkSynced();
  absl::Status st = HandleDeltas(deltas, is_in_initial_list);
  // Logged here as ProcessLoop logs its pops' errors: the producer's own
  // call succeeded whatever this returns.
  if (!st.ok() && !IsRequeue(st)) {
    LOG(ERROR) << options_.name << ": processing: " << st;
  }
  return st;
}

absl::Status SharedIndexInformer::HandleDeltas(const Deltas& deltas,
                                               bool is_in_initial_list) {
  absl::MutexLock lock(&handle_mu_);
  const bool dedupe = dedupe_replay_.load(std::memory_order_relaxed);
  for (const Delta& d : deltas) {
    if (d.object == nullptr) continue;
    const std::string& key = d.object->Key();
    if (dedupe && AlreadyReflected(d, indexer_.GetByKey(key))) continue;
    Notification n;
    // Only handlers read it (an initial list often has none yet).
    if (!registrations_.empty()) n.key = key;
    switch (d.type) {
      case DeltaType::kSync:
      case DeltaType::kReplaced:
      case DeltaType::kAdded:
      case DeltaType::kUpdated: {
        ObjectPtr old = indexer_.GetByKey(key);
        if (old != nullptr) {
          // A relist that found the object unchanged is a sync, not news.
          const bool is_sync =
              d.type == DeltaType::kSync ||
              (d.type == DeltaType::kReplaced &&
               old->resource_version() == d.object->resource_version());
          indexer_.Update(d.object);
          n.type = Notification::Type::kUpdate;
          n.old_obj = std::move(old);
          n.obj = d.object;
          DistributeLocked(n, is_sync);
        } else {
          indexer_.Add(d.object);
          n.type = Notification::Type::kAdd;
          n.obj = d.object;
          n.is_in_initial_list = is_in_initial_list;
          DistributeLocked(n, false);
        }
        break;
      }
      case DeltaType::kDeleted:
        indexer_.DeleteByKey(key);
        n.type = Notification::Type::kDelete;
        n.obj = d.object;
        n.final_state_unknown = d.final_state_unknown;
        DistributeLocked(n, false);
        break;
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<ListStage> SharedIndexInformer::BeginListStage() {
  // A list into a non-empty cache (or with keys queued for it) is
  // compared with it: only what changed becomes deltas.
  const size_t cached = indexer_.Size();
  if (cached != 0 || fifo_.Len() != 0) {
    return std::make_unique<ListReconciler>(
        &indexer_, cached,
        [this](const std::vector<ObjectPtr>& reconciled,
               absl::string_view resource_version) {
          if (!CommitReconciledList(reconciled)) return false;
          // Reported once the FIFO has applied it (see
          // MaybeRelistApplied); the reflector notes the RV next.
          absl::MutexLock lock(&sync_mu_);
          relist_rv_ = std::string(resource_version);
          relist_pending_.store(true, std::memory_order_release);
          return true;
        });
  }
  return std::make_unique<IndexerListStage>(
      indexer_.GetIndexers(),
      [this](Indexer* staged, const std::vector<ObjectPtr>& items,
             absl::string_view resource_version) {
        return CommitStagedList(staged, items, resource_version);
      });
}

bool SharedIndexInformer::CommitStagedList(Indexer* staged,
                                           const std::vector<ObjectPtr>& items,
                                           absl::string_view resource_version) {
  // Under the FIFO's lock and then handle_mu_, as a pop's HandleDeltas:
  // no pop, resync or handler registration runs in between, so a handler
  // added meanwhile gets either the adopted cache or these adds, never
  // both or neither, and a resync's syncs come after them. The adds are
  // handed out in one critical section where the pops took one each: as
  // long in all, at once (inline handlers must be quick anyway).
  return fifo_.ReplaceApplied(resource_version, [&](bool is_initial_list) {
    absl::MutexLock lock(&handle_mu_);
    if (!indexer_.AdoptIfEmpty(staged)) return false;
    if (registrations_.empty()) return true;
    for (const ObjectPtr& obj : items) {
      Notification n;
      n.type = Notification::Type::kAdd;
      n.key = obj->Key();
      n.obj = obj;
      n.is_in_initial_list = is_initial_list;
      DistributeLocked(n, false);
    }
    return true;
  });
}

bool SharedIndexInformer::CommitReconciledList(
    const std::vector<ObjectPtr>& reconciled) {
  absl::StatusOr<DeltaFIFO::ReconcileCounts> counts = fifo_.ReplaceReconciled(
      reconciled, [this](const std::vector<ObjectPtr>& unchanged) {
        DistributeUnchanged(unchanged);
      });
  if (!counts.ok()) {
    LOG(ERROR) << options_.name << ": relist not applied: " << counts.status();
    return false;
  }
  LOG(INFO) << options_.name << ": relist of " << reconciled.size()
            << " objects: " << counts->unchanged << " unchanged (kept), "
            << counts->queued << " new or changed (" << counts->recreated
            << " recreated), " << counts->vanished << " vanished";
  return true;
}

void SharedIndexInformer::DistributeUnchanged(
    const std::vector<ObjectPtr>& unchanged) {
  if (!options_.relist_syncs_unchanged) return;
  // Under the FIFO's lock (ReplaceReconciled), then handle_mu_, as a pop.
  absl::MutexLock lock(&handle_mu_);
  // A sync reaches only handlers whose resync is due: with none, the
  // notifications would go nowhere.
  if (syncing_.empty()) return;
  for (const ObjectPtr& obj : unchanged) {
    Notification n;
    n.type = Notification::Type::kUpdate;
    n.key = obj->Key();
    n.old_obj = obj;
    n.obj = obj;
    DistributeLocked(n, /*is_sync=*/true);
  }
}

void SharedIndexInformer::DistributeLocked(const Notification& n,
                                           bool is_sync) {
  for (auto& reg : registrations_) {
    ProcessorListener* l = reg->listener_.get();
    if (is_sync && !syncing_.contains(l)) continue;
    l->Add(n);
  }
}

bool SharedIndexInformer::ShouldResync() {
  absl::MutexLock lock(&handle_mu_);
  const absl::Time now = clock_->Now();
  syncing_.clear();
  for (auto& reg : registrations_) {
    ProcessorListener* l = reg->listener_.get();
    if (l->ShouldResync(now)) {
      syncing_.insert(l);
      l->DetermineNextResync(now);
    }
  }
  return !syncing_.empty();
}

bool SharedIndexInformer::HasSynced() const {
  // Not fifo_.HasSynced(): that takes the FIFO's lock, which is held while
  // handlers are called inline, so a non-blocking handler asking would
  // deadlock. synced_ is set right after the pop that completed the initial
  // list, or after a Replace of an empty list or a staged list's commit.
  absl::MutexLock lock(&sync_mu_);
  return synced_;
}

bool SharedIndexInformer::WaitForSync(absl::Duration timeout) const {
  absl::MutexLock lock(&sync_mu_);
  clock_->AwaitWithTimeout(
      &sync_mu_,
      absl::Condition(this, &SharedIndexInformer::SyncedOrStoppedLocked),
      timeout);
  return synced_;
}

std::string SharedIndexInformer::LastAppliedResourceVersion() const {
  return fifo_.AppliedResourceVersion();
}

std::string SharedIndexInformer::LastSyncResourceVersion() const {
  absl::MutexLock lock(&reflector_mu_);
  return reflector_ ? reflector_->LastSyncResourceVersion() : "";
}

Reflector::Counters SharedIndexInformer::GetReflectorCounters() const {
  absl::MutexLock lock(&reflector_mu_);
  return reflector_ ? reflector_->GetCounters() : Reflector::Counters{};
}

absl::Status SharedIndexInformer::LastError() const {
  absl::MutexLock lock(&reflector_mu_);
  return reflector_ ? reflector_->LastError() : absl::OkStatus();
}

}  // namespace informer

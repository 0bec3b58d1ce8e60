#include "informer/cache/delta_fifo.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "glog/logging.h"

namespace informer {
namespace {

// Payload type URL marking a status as "requeue these Deltas".
constexpr absl::string_view kRequeuePayloadUrl =
    "type.googleapis.com/informer.DeltaFIFORequeue";
constexpr absl::string_view kClosedMessage = "DeltaFIFO closed";

bool IsTombstone(const Delta& d) {
  return d.type == DeltaType::kDeleted && d.final_state_unknown;
}

}  // namespace

// Two deletions in a row are one disappearance reported twice (a watch
// delete and a relist tombstone, or tombstones from two relists); the
// consumer must see it once. The real delete wins over a tombstone because
// its object is the true final state; of two tombstones the newer wins, as in
// client-go.
void DedupDeltas(Deltas& deltas) {
  const size_t n = deltas.size();
  if (n < 2) return;
  Delta& newer = deltas[n - 1];
  Delta& older = deltas[n - 2];
  if (newer.type != DeltaType::kDeleted || older.type != DeltaType::kDeleted) {
    return;
  }
  if (IsTombstone(older)) older = std::move(newer);
  deltas.pop_back();
}

absl::string_view DeltaTypeName(DeltaType type) {
  switch (type) {
    case DeltaType::kAdded:
      return "Added";
    case DeltaType::kUpdated:
      return "Updated";
    case DeltaType::kDeleted:
      return "Deleted";
    case DeltaType::kReplaced:
      return "Replaced";
    case DeltaType::kSync:
      return "Sync";
  }
  return "Unknown";
}

std::string KeyOf(const Delta& delta) {
  return delta.object == nullptr ? std::string() : delta.object->Key();
}

std::string KeyOf(const Deltas& deltas) {
  const Delta* newest = Newest(deltas);
  return newest == nullptr ? std::string() : KeyOf(*newest);
}

const Delta* Oldest(const Deltas& deltas) {
  return deltas.empty() ? nullptr : &deltas.front();
}

const Delta* Newest(const Deltas& deltas) {
  return deltas.empty() ? nullptr : &deltas.back();
}

absl::Status RequeueStatus(absl::Status cause) {
  if (cause.ok()) cause = absl::AbortedError("DeltaFIFO requeue requested");
  cause.SetPayload(kRequeuePayloadUrl, absl::Cord("requeue"));
  return cause;
}

bool IsRequeue(const absl::Status& status) {
  return status.GetPayload(kRequeuePayloadUrl).has_value();
}

bool IsFifoClosed(const absl::Status& status) {
  return absl::IsCancelled(status) && status.message() == kClosedMessage;
}

DeltaFIFO::DeltaFIFO(Options options)
    : known_objects_(options.known_objects),
      emit_delta_type_replaced_(options.emit_delta_type_replaced),
      process_when_idle_(std::move(options.process_when_idle)) {}

void DeltaFIFO::QueueActionLocked(std::string key, Delta delta) {
  auto [it, inserted] = items_.try_emplace(std::move(key));
  Deltas& deltas = it->second;
  deltas.push_back(std::move(delta));
  DedupDeltas(deltas);
  // Dedup only ever merges two deltas into one, so `deltas` is non-empty and
  // the "key in items_ iff in queue_" invariant holds.
  if (inserted) queue_.push_back(it->first);
}

void DeltaFIFO::QueueProducedLocked(std::string key, Delta delta) {
  const bool was_idle = queue_.empty();
  QueueActionLocked(std::move(key), std::move(delta));
  // Nothing else queued and no Pop mid-way (it would hold the lock): what
  // the next Pop would do, done now, without waking the consumer.
  if (was_idle && process_when_idle_ && !closed_) {
    PopHeadLocked(process_when_idle_);
  }
}

void DeltaFIFO::AddIfNotPresentLocked(std::string key, Deltas deltas) {
  populated_ = true;
  auto [it, inserted] = items_.try_emplace(std::move(key));
  if (!inserted) return;
  it->second = std::move(deltas);
  queue_.push_back(it->first);
}

absl::Status DeltaFIFO::Add(ObjectPtr obj) {
  if (obj == nullptr) return absl::InvalidArgumentError("DeltaFIFO::Add: null");
  std::string key = obj->Key();
  absl::MutexLock lock(&mu_);
  populated_ = true;
  QueueProducedLocked(std::move(key), Delta{DeltaType::kAdded, std::move(obj)});
  return absl::OkStatus();
}

absl::Status DeltaFIFO::Update(ObjectPtr obj) {
  if (obj == nullptr) {
    return absl::InvalidArgumentError("DeltaFIFO::Update: null");
  }
  std::string key = obj->Key();
  absl::MutexLock lock(&mu_);
  populated_ = true;
  QueueProducedLocked(std::move(key),
                      Delta{DeltaType::kUpdated, std::move(obj)});
  return absl::OkStatus();
}

absl::Status DeltaFIFO::Delete(ObjectPtr obj) {
  if (obj == nullptr) {
    return absl::InvalidArgumentError("DeltaFIFO::Delete: null");
  }
  std::string key = obj->Key();
  absl::MutexLock lock(&mu_);
  populated_ = true;
  if (!items_.contains(key) &&
      (known_objects_ == nullptr || known_objects_->GetByKey(key) == nullptr)) {
    // Neither queued nor known: the deletion was presumably reported already
    // by a relist's tombstone. Don't report it twice.
    return absl::OkStatus();
  }
  QueueProducedLocked(std::move(key),
                      Delta{DeltaType::kDeleted, std::move(obj)});
  return absl::OkStatus();
}

absl::Status DeltaFIFO::AddIfNotPresent(absl::string_view key, Deltas deltas) {
  if (key.empty() || deltas.empty()) {
    return absl::InvalidArgumentError(
        "DeltaFIFO::AddIfNotPresent: empty key or deltas");
  }
  absl::MutexLock lock(&mu_);
  AddIfNotPresentLocked(std::string(key), std::move(deltas));
  return absl::OkStatus();
}

absl::Status DeltaFIFO::Replace(const std::vector<ObjectPtr>& list,
                                absl::string_view /*resource_version*/) {
  for (const ObjectPtr& obj : list) {
    if (obj == nullptr) {
      return absl::InvalidArgumentError("DeltaFIFO::Replace: null object");
    }
  }
  const DeltaType action =
      emit_delta_type_replaced_ ? DeltaType::kReplaced : DeltaType::kSync;

  absl::MutexLock lock(&mu_);
  std::vector<std::string> known_keys;
  if (known_objects_ != nullptr) known_keys = known_objects_->ListKeys();
  items_.reserve(items_.size() + list.size());
  if (queue_.empty() && known_keys.empty()) {
    // Nothing queued and nothing known (an initial list): no key can have
    // vanished, so the set of listed keys is not needed. Every key in
    // items_ now is a listed one.
    for (const ObjectPtr& obj : list) {
      QueueActionLocked(obj->Key(), Delta{action, obj});
    }
    // The cache is about to receive all of them (the pops add each).
    if (known_objects_ != nullptr) known_objects_->Reserve(list.size());
    if (!populated_) {
      populated_ = true;
      initial_population_count_ = items_.size();
    }
    return absl::OkStatus();
  }
  absl::flat_hash_set<std::string> listed;
  listed.reserve(list.size());
  for (const ObjectPtr& obj : list) {
    const std::string& key = obj->Key();
    listed.insert(key);
    QueueActionLocked(key, Delta{action, obj});
  }

  size_t queued_deletions = 0;
  // Keys still pending but absent from the relist vanished while we were not
  // watching. Their newest queued object is the newest state we have (newer
  // than knownObjects', which has not seen the queued deltas yet). Collect
  // first: queueing while iterating would invalidate the iteration.
  std::vector<std::pair<std::string, ObjectPtr>> vanished;
  for (const std::string& key : queue_) {
    if (listed.contains(key)) continue;
    const Deltas& deltas = items_.find(key)->second;
    vanished.emplace_back(key, deltas.back().object);
  }
  for (auto& [key, obj] : vanished) {
    ++queued_deletions;
    QueueActionLocked(std::move(key), Delta{DeltaType::kDeleted, std::move(obj),
                                            /*final_state_unknown=*/true});
  }

  if (known_objects_ != nullptr) {
    for (std::string& key : known_keys) {
      if (listed.contains(key) || items_.contains(key)) continue;
      ObjectPtr last = known_objects_->GetByKey(key);
      if (last == nullptr) {
        // Removed from the store between ListKeys and GetByKey: a tombstone
        // without an object would be useless to every consumer.
        LOG(WARNING) << "DeltaFIFO::Replace: known key " << key
                     << " vanished from known objects; no tombstone queued";
        continue;
      }
      ++queued_deletions;
      QueueActionLocked(std::move(key),
                        Delta{DeltaType::kDeleted, std::move(last),
                              /*final_state_unknown=*/true});
    }
  }

  if (!populated_) {
    populated_ = true;
    initial_population_count_ = listed.size() + queued_deletions;
  }
  return absl::OkStatus();
}

absl::StatusOr<DeltaFIFO::ReconcileCounts> DeltaFIFO::ReplaceReconciled(
    const std::vector<ObjectPtr>& list, UnchangedFn on_unchanged) {
  if (known_objects_ == nullptr) {
    return absl::FailedPreconditionError(
        "DeltaFIFO::ReplaceReconciled: no known objects to reconcile with");
  }
  for (const ObjectPtr& obj : list) {
    if (obj == nullptr) {
      return absl::InvalidArgumentError(
          "DeltaFIFO::ReplaceReconciled: null object");
    }
  }
  const DeltaType action =
      emit_delta_type_replaced_ ? DeltaType::kReplaced : DeltaType::kSync;
  ReconcileCounts counts;
  std::vector<ObjectPtr> unchanged;
  absl::MutexLock lock(&mu_);
  // The keys live in the listed objects, which `list` keeps alive.
  absl::flat_hash_set<absl::string_view> listed;
  listed.reserve(list.size());
  for (const ObjectPtr& obj : list) {
    const std::string& key = obj->Key();
    listed.insert(key);
    auto it = items_.find(key);
    const bool queued = it != items_.end();
    // The newest state we have: a queued delta is newer than the store.
    ObjectPtr last =
        queued ? it->second.back().object : known_objects_->GetByKey(key);
    if (!queued && last == obj) {
      unchanged.push_back(obj);
      continue;
    }
    ++counts.queued;
    if (last != nullptr && last->uid() != obj->uid()) {
      ++counts.recreated;
      // After a queued deletion this tombstone is deduplicated away.
      QueueActionLocked(key, Delta{DeltaType::kDeleted, std::move(last),
                                   /*final_state_unknown=*/true});
    }
    QueueActionLocked(key, Delta{action, obj});
  }
  counts.vanished = QueueVanishedLocked(
      [&listed](absl::string_view key) { return listed.contains(key); });
  if (!populated_) {
    // Nothing was queued before (populated_ would be set): what this
    // queued is the initial list still to pop.
    populated_ = true;
    initial_population_count_ = queue_.size();
  }
  counts.unchanged = unchanged.size();
  on_unchanged(unchanged);
  return counts;
}

size_t DeltaFIFO::QueueVanishedLocked(
    absl::FunctionRef<bool(absl::string_view key)> listed) {
  // As in Replace: queued keys first (their newest queued object is the
  // newest state we have), then known keys with nothing queued. Collected
  // first: queueing while iterating would invalidate the iteration.
  std::vector<std::pair<std::string, ObjectPtr>> vanished;
  for (const std::string& key : queue_) {
    if (listed(key)) continue;
    vanished.emplace_back(key, items_.find(key)->second.back().object);
  }
  for (std::string& key : known_objects_->ListKeys()) {
    if (listed(key) || items_.contains(key)) continue;
    ObjectPtr last = known_objects_->GetByKey(key);
    if (last == nullptr) continue;  // removed meanwhile: nothing to report
    vanished.emplace_back(std::move(key), std::move(last));
  }
  for (auto& [key, obj] : vanished) {
    QueueActionLocked(std::move(key), Delta{DeltaType::kDeleted, std::move(obj),
                                            /*final_state_unknown=*/true});
  }
  return vanished.size();
}

bool DeltaFIFO::ReplaceApplied(
    absl::string_view resource_version,
    absl::FunctionRef<bool(bool is_initial_list)> apply) {
  absl::MutexLock lock(&mu_);
  if (!queue_.empty() || !apply(!populated_)) return false;
  // Everything a Replace would have queued has been applied: as far as
  // HasSynced is concerned, an initial list fully popped; and the store is
  // at the list's RV before anyone can see it synced.
  populated_ = true;
  noted_rv_ = std::string(resource_version);
  MarkAppliedLocked();
  return true;
}

absl::Status DeltaFIFO::Resync() {
  if (known_objects_ == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (const std::string& known_key : known_objects_->ListKeys()) {
    ObjectPtr obj = known_objects_->GetByKey(known_key);
    if (obj == nullptr) {
      VLOG(1) << "DeltaFIFO::Resync: key " << known_key
              << " left known objects; not synced";
      continue;
    }
    std::string key = obj->Key();
    // A queued delta is newer than the store's object; a Sync queued after
    // it would hand the consumer the older state last.
    if (items_.contains(key)) continue;
    QueueActionLocked(std::move(key), Delta{DeltaType::kSync, std::move(obj)});
  }
  return absl::OkStatus();
}

absl::Status DeltaFIFO::Pop(const ProcessFn& process) {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &DeltaFIFO::PopReadyLocked));
    if (queue_.empty()) return absl::CancelledError(kClosedMessage);
    absl::optional<absl::Status> status = PopHeadLocked(process);
    if (status.has_value()) return *std::move(status);
  }
}

absl::optional<absl::Status> DeltaFIFO::PopHeadLocked(
    const ProcessFn& process) {
  const bool is_in_initial_list = !HasSyncedLocked();
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  if (initial_population_count_ > 0) --initial_population_count_;
  auto it = items_.find(key);
  if (it == items_.end()) {
    LOG(ERROR) << "DeltaFIFO: key " << key
               << " was queued without deltas; skipped";
    return absl::nullopt;
  }
  Deltas deltas = std::move(it->second);
  items_.erase(it);

  absl::Status status = process(deltas, is_in_initial_list);
  if (IsRequeue(status)) {
    // Still under the lock, so no newer delta for this key can have been
    // queued meanwhile: putting these back keeps per-key order.
    AddIfNotPresentLocked(std::move(key), std::move(deltas));
    status.ErasePayload(kRequeuePayloadUrl);
  }
  // Everything queued before the last note has now been processed.
  if (queue_.empty()) {
    MarkAppliedLocked();
    ReleaseIdleCapacityLocked();
  }
  return status;
}

namespace {

// a < b as numbers (resourceVersions are etcd revisions); false when either
// is not a number.
bool RvBefore(absl::string_view a, absl::string_view b) {
  uint64_t x = 0;
  uint64_t y = 0;
  return absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y) && x < y;
}

}  // namespace

void DeltaFIFO::NoteResourceVersion(absl::string_view resource_version) {
  absl::MutexLock lock(&mu_);
  {
    // The server went back (etcd restored from a backup): the store is at
    // no resourceVersion of the server's line until what brings it there
    // (the relist queued before this note) has been processed. Keeping the
    // later one would let a reader take the old state for the new one.
    absl::MutexLock applied_lock(&applied_mu_);
    if (RvBefore(resource_version, applied_rv_)) applied_rv_.clear();
  }
  noted_rv_ = std::string(resource_version);
  // Pop processes under the lock: an empty queue means every delta queued
  // so far has been processed.
  if (queue_.empty()) MarkAppliedLocked();
}

void DeltaFIFO::ReleaseIdleCapacityLocked() {
  // Erasing never shrinks a hash table: after a list of N objects drained,
  // items_ would keep its N-slot table (~60 bytes a slot) for the life of
  // the informer. Live events need a few slots; the next relist regrows it.
  // (queue_, a deque, frees its blocks as they empty.)
  constexpr size_t kKeptCapacity = 1024;
  if (items_.empty() && items_.capacity() > kKeptCapacity) {
    absl::flat_hash_map<std::string, Deltas>().swap(items_);
  }
}

void DeltaFIFO::MarkAppliedLocked() {
  absl::MutexLock lock(&applied_mu_);
  applied_rv_ = noted_rv_;
}

std::string DeltaFIFO::AppliedResourceVersion() const {
  absl::MutexLock lock(&applied_mu_);
  return applied_rv_;
}

void DeltaFIFO::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool DeltaFIFO::IsClosed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool DeltaFIFO::HasSynced() const {
  absl::MutexLock lock(&mu_);
  return HasSyncedLocked();
}

size_t DeltaFIFO::Len() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

std::vector<std::string> DeltaFIFO::ListKeys() const {
  absl::MutexLock lock(&mu_);
  return std::vector<std::string>(queue_.begin(), queue_.end());
}

std::vector<ObjectPtr> DeltaFIFO::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectPtr> out;
  out.reserve(queue_.size());
  for (const std::string& key : queue_) {
    out.push_back(items_.find(key)->second.back().object);
  }
  return out;
}

absl::optional<Deltas> DeltaFIFO::Get(const ObjectPtr& obj) const {
  if (obj == nullptr) return absl::nullopt;
  return GetByKey(obj->Key());
}

absl::optional<Deltas> DeltaFIFO::GetByKey(absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return absl::nullopt;
  return it->second;
}

}  // namespace informer

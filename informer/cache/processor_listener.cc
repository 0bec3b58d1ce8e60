#include "informer/cache/processor_listener.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace informer {

void CoalesceInto(std::deque<Notification>* tail, Notification next) {
  using Type = Notification::Type;
  if (tail->empty()) {
    tail->push_back(std::move(next));
    return;
  }
  Notification& last = tail->back();
  switch (next.type) {
    case Type::kDelete: {
      if (last.type == Type::kDelete) {
        // Already going away: the pending delete names the object the
        // handler knows; a repeated delete adds nothing.
        return;
      }
      // `last` is an Add or Update the handler has not seen yet. A tail of
      // a single Add means the handler does not know the object at all.
      const bool handler_knows_it =
          !(tail->size() == 1 && last.type == Type::kAdd);
      if (tail->size() == 1 && last.type == Type::kUpdate &&
          last.old_obj != nullptr && next.obj != nullptr &&
          last.old_obj->uid() != next.obj->uid()) {
        // The pending update swapped the object the handler knows for
        // another one under the same key (deleted and recreated while the
        // watch was down; a relist found it). The handler must hear that the
        // object it knows went away: delete that one, in the last state the
        // handler saw, marked as such (client-go's DeletedFinalStateUnknown).
        Notification gone;
        gone.type = Type::kDelete;
        gone.key = std::move(last.key);
        gone.obj = std::move(last.old_obj);
        gone.final_state_unknown = true;
        tail->clear();
        tail->push_back(std::move(gone));
        return;
      }
      tail->pop_back();
      if (!tail->empty()) {
        // [Delete(known), Add(new)] + Delete(new): the known object's
        // delete stays; the new one's add and delete vanish together.
        return;
      }
      if (handler_knows_it) tail->push_back(std::move(next));
      // Otherwise [Add] + Delete: an object the handler never saw came and
      // went; neither is owed.
      return;
    }
    case Type::kUpdate:
      if (last.type == Type::kDelete) {
        tail->push_back(std::move(next));
        return;
      }
      // Add+Update stays an Add (of the latest state, with its initial flag);
      // Update+Update keeps the oldest undelivered old object.
      last.obj = std::move(next.obj);
      return;
    case Type::kAdd:
      if (last.type == Type::kDelete) {
        // Delete of the old object, then Add of the new one: both matter.
        tail->push_back(std::move(next));
        return;
      }
      if (last.type == Type::kUpdate) {
        // The handler knows the object already: report the change.
        last.obj = std::move(next.obj);
        return;
      }
      last.obj = std::move(next.obj);
      last.is_in_initial_list =
          last.is_in_initial_list || next.is_in_initial_list;
      return;
  }
}

namespace {
bool IsInitial(const Notification& n) {
  return n.type == Notification::Type::kAdd && n.is_in_initial_list;
}
}  // namespace

ProcessorListener::ProcessorListener(ResourceEventHandler* handler,
                                     Options options, Clock* clock)
    : handler_(handler),
      options_(options),
      compact_at_(std::max<size_t>(options.max_pending, 1)),
      next_resync_(clock->Now() + options.resync_period) {}

ProcessorListener::~ProcessorListener() { Stop(); }

void ProcessorListener::Start() {
  if (options_.inline_handler) return;
  thread_ = std::thread([this] { Run(); });
}

void ProcessorListener::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ProcessorListener::Add(Notification n) {
  if (options_.inline_handler) {
    absl::MutexLock serial(&inline_mu_);
    Deliver(n);
    absl::MutexLock lock(&mu_);
    ++delivered_;
    return;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (IsInitial(n)) ++initial_outstanding_;
  pending_.push_back(std::move(n));
  if (pending_.size() >= compact_at_) CompactLocked();
}

void ProcessorListener::CompactLocked() {
  const size_t before = pending_.size();
  absl::flat_hash_map<absl::string_view, size_t> group_of;
  std::vector<std::deque<Notification>> groups;
  group_of.reserve(before);
  // Keys live in the notifications; move them into groups only after the
  // map no longer needs the views, so group by index first.
  std::vector<size_t> index(before);
  for (size_t i = 0; i < before; ++i) {
    auto [it, inserted] = group_of.try_emplace(pending_[i].key, groups.size());
    if (inserted) groups.emplace_back();
    index[i] = it->second;
  }
  group_of.clear();
  for (size_t i = 0; i < before; ++i) {
    CoalesceInto(&groups[index[i]], std::move(pending_[i]));
  }
  pending_.clear();
  for (auto& g : groups) {
    for (auto& n : g) pending_.push_back(std::move(n));
  }
  coalesced_ += before - pending_.size();
  compact_at_ = std::max(options_.max_pending, 2 * pending_.size());
  initial_outstanding_ = CountInitialLocked() + (inflight_initial_ ? 1 : 0);
}

size_t ProcessorListener::CountInitialLocked() const {
  return static_cast<size_t>(
      std::count_if(pending_.begin(), pending_.end(), IsInitial));
}

void ProcessorListener::Run() {
  for (;;) {
    Notification n;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ProcessorListener::HasWorkLocked));
      if (stopping_) return;
      n = std::move(pending_.front());
      pending_.pop_front();
      busy_ = true;
      inflight_initial_ = IsInitial(n);
    }
    Deliver(n);
    absl::MutexLock lock(&mu_);
    busy_ = false;
    ++delivered_;
    if (inflight_initial_ && initial_outstanding_ > 0) --initial_outstanding_;
    inflight_initial_ = false;
  }
}

void ProcessorListener::Deliver(const Notification& n) {
  switch (n.type) {
    case Notification::Type::kAdd:
      handler_->OnAdd(n.obj, n.is_in_initial_list);
      break;
    case Notification::Type::kUpdate:
      handler_->OnUpdate(n.old_obj, n.obj);
      break;
    case Notification::Type::kDelete:
      handler_->OnDelete(n.obj, n.final_state_unknown);
      break;
  }
}

bool ProcessorListener::HasWorkLocked() const {
  return stopping_ || !pending_.empty();
}

bool ProcessorListener::IdleLocked() const {
  return stopping_ || (pending_.empty() && !busy_);
}

bool ProcessorListener::ShouldResync(absl::Time now) const {
  if (options_.resync_period <= absl::ZeroDuration()) return false;
  absl::MutexLock lock(&mu_);
  return now >= next_resync_;
}

void ProcessorListener::DetermineNextResync(absl::Time now) {
  absl::MutexLock lock(&mu_);
  next_resync_ = now + options_.resync_period;
}

bool ProcessorListener::InitialListDelivered() const {
  absl::MutexLock lock(&mu_);
  return initial_outstanding_ == 0;
}

void ProcessorListener::WaitIdle() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &ProcessorListener::IdleLocked));
}

ProcessorListener::Stats ProcessorListener::GetStats() const {
  absl::MutexLock lock(&mu_);
  return Stats{pending_.size(), delivered_, coalesced_};
}

}  // namespace informer

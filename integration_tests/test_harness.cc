#include "integration_tests/test_harness.h"

#include "absl/strings/str_cat.h"

namespace integration {

KeyRvMap ToKeyRvMap(const std::vector<std::pair<std::string, int64_t>>& snap) {
  KeyRvMap out;
  for (const auto& [key, rv] : snap) out[key] = absl::StrCat(rv);
  return out;
}

void RecordingHandler::OnAdd(const informer::ObjectPtr& obj,
                             bool is_in_initial_list) {
  (void)is_in_initial_list;
  absl::MutexLock lock(&mu_);
  ++adds_;
  ++adds_per_uid_[std::string(obj->uid())];
  view_[obj->Key()] = std::string(obj->resource_version());
}

void RecordingHandler::OnUpdate(const informer::ObjectPtr& old_obj,
                                const informer::ObjectPtr& new_obj) {
  (void)old_obj;
  absl::MutexLock lock(&mu_);
  ++updates_;
  view_[new_obj->Key()] = std::string(new_obj->resource_version());
}

void RecordingHandler::OnDelete(const informer::ObjectPtr& obj,
                                bool final_state_unknown) {
  absl::MutexLock lock(&mu_);
  view_.erase(obj->Key());
  deletes_.push_back(Deleted{obj->Key(), std::string(obj->resource_version()),
                             final_state_unknown});
}

bool RecordingHandler::AwaitView(const KeyRvMap& expected,
                                 absl::Duration safety_net) {
  absl::MutexLock lock(&mu_);
  struct Args {
    const KeyRvMap* view;
    const KeyRvMap* expected;
  } args{&view_, &expected};
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Args* a) { return *a->view == *a->expected; }, &args),
      safety_net);
}

KeyRvMap RecordingHandler::View() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

absl::flat_hash_map<std::string, int> RecordingHandler::AddsPerUid() const {
  absl::MutexLock lock(&mu_);
  return adds_per_uid_;
}

std::vector<RecordingHandler::Deleted> RecordingHandler::Deletes() const {
  absl::MutexLock lock(&mu_);
  return deletes_;
}

int RecordingHandler::updates() const {
  absl::MutexLock lock(&mu_);
  return updates_;
}

int RecordingHandler::adds() const {
  absl::MutexLock lock(&mu_);
  return adds_;
}

ClockPump::ClockPump(informer::FakeClock* clock)
    : clock_(clock), thread_([this] { Run(); }) {}

ClockPump::~ClockPump() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    // Park on the clock ourselves: WaitForWaiters in the pump thread only
    // returns once someone waits for a future time, and that is us now. The
    // pump sees done_, sets exited_ and our condition wakes us; the deadline
    // is never reached because nobody advances the clock any more.
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&exited_),
                              clock_->Now() + absl::Hours(1));
  }
  thread_.join();
}

void ClockPump::Pause() {
  absl::MutexLock lock(&mu_);
  paused_ = true;
}

void ClockPump::Resume() {
  absl::MutexLock lock(&mu_);
  paused_ = false;
}

std::vector<absl::Duration> ClockPump::Steps() const {
  absl::MutexLock lock(&mu_);
  return steps_;
}

void ClockPump::Run() {
  for (;;) {
    clock_->WaitForWaiters(1);
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ClockPump::CanStepLocked));
      if (done_) {
        exited_ = true;
        return;
      }
    }
    // Re-read after a pause: the waiter we saw may have gone (or a new,
    // earlier one arrived) while time was held.
    const absl::Time deadline = clock_->WaitForWaiters(1);
    {
      absl::MutexLock lock(&mu_);
      if (done_) {
        exited_ = true;
        return;
      }
      if (paused_) continue;
    }
    const absl::Duration step = deadline - clock_->Now();
    if (step <= absl::ZeroDuration()) continue;
    {
      absl::MutexLock lock(&mu_);
      steps_.push_back(step);
    }
    clock_->Advance(step);
  }
}

void ErrorLog::Add(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  errors_.push_back(status);
}

std::vector<absl::Status> ErrorLog::Errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

}  // namespace integration

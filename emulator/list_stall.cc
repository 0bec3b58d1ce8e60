#include "emulator/list_stall.h"

#include <algorithm>

namespace emulator {

void ListStalls::Stall(const ResourceInfo* resource) {
  absl::MutexLock lock(&mu_);
  if (resource == nullptr) {
    all_ = true;
  } else {
    resources_.push_back(resource);
  }
}

void ListStalls::Resume() {
  absl::MutexLock lock(&mu_);
  all_ = false;
  resources_.clear();
  ++generation_;
}

void ListStalls::Shutdown() {
  Resume();
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

absl::optional<int64_t> ListStalls::Check(const ResourceInfo& resource) const {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::nullopt;
  if (all_ || std::find(resources_.begin(), resources_.end(), &resource) !=
                  resources_.end()) {
    return generation_;
  }
  return absl::nullopt;
}

bool ListStalls::Resumed(Wait* wait) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // absl::Condition evaluates this with mu_ held, which the analysis
  // cannot see through the function pointer.
  return wait->self->generation_ != wait->token || wait->self->shutdown_;
}

void ListStalls::AwaitResume(int64_t token) {
  absl::MutexLock lock(&mu_);
  Wait wait{this, token};
  mu_.Await(absl::Condition(&ListStalls::Resumed, &wait));
}

}  // namespace emulator

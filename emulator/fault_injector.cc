#include "emulator/fault_injector.h"

#include "absl/strings/numbers.h"

namespace emulator {

void FaultInjector::ThrottleNextRequests(int count, int retry_after_seconds) {
  absl::MutexLock lock(&mu_);
  throttle_remaining_ = count;
  throttle_retry_after_ = retry_after_seconds;
}

void FaultInjector::FailRequests(absl::string_view verb,
                                 absl::string_view resource, int code,
                                 int count, int retry_after_seconds) {
  absl::MutexLock lock(&mu_);
  failures_.push_back({std::string(verb), std::string(resource), code, count,
                       retry_after_seconds});
}

void FaultInjector::ExpireNextWatch(absl::string_view resource) {
  absl::MutexLock lock(&mu_);
  watch_expiries_.emplace_back(resource);
}

void FaultInjector::ExpireNextContinue() {
  absl::MutexLock lock(&mu_);
  ++continue_expiries_;
}

void FaultInjector::Clear() {
  absl::MutexLock lock(&mu_);
  throttle_remaining_ = 0;
  failures_.clear();
  watch_expiries_.clear();
  continue_expiries_ = 0;
}

absl::optional<FaultInjector::Failure> FaultInjector::OnRequest(
    absl::string_view verb, absl::string_view resource) {
  absl::MutexLock lock(&mu_);
  if (throttle_remaining_ > 0) {
    --throttle_remaining_;
    return Failure{429, throttle_retry_after_};
  }
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if ((it->verb != "*" && it->verb != verb) ||
        (it->resource != "*" && it->resource != resource)) {
      continue;
    }
    Failure f{it->code, it->retry_after_seconds};
    if (it->remaining > 0 && --it->remaining == 0) failures_.erase(it);
    return f;
  }
  return absl::nullopt;
}

bool FaultInjector::TakeWatchExpiry(absl::string_view resource) {
  absl::MutexLock lock(&mu_);
  for (auto it = watch_expiries_.begin(); it != watch_expiries_.end(); ++it) {
    if (*it == "*" || *it == resource) {
      watch_expiries_.erase(it);
      return true;
    }
  }
  return false;
}

bool FaultInjector::TakeContinueExpiry() {
  absl::MutexLock lock(&mu_);
  if (continue_expiries_ == 0) return false;
  --continue_expiries_;
  return true;
}

absl::optional<EmulatorHooks::ControlReply> FaultInjector::HandleControl(
    const ControlRequest& request) {
  auto int_param = [&request](const char* key, int def) {
    int v = def;
    std::string s = request.param(key);
    if (!s.empty() && !absl::SimpleAtoi(s, &v)) v = def;
    return v;
  };
  const std::string resource =
      request.resource == nullptr ? "*" : request.resource->resource;
  if (request.op == "throttle") {
    ThrottleNextRequests(int_param("count", 1), int_param("retry_after", 1));
  } else if (request.op == "fail") {
    std::string verb = request.param("verb");
    FailRequests(verb.empty() ? "*" : verb, resource, int_param("code", 500),
                 int_param("count", 1), int_param("retry_after", 0));
  } else if (request.op == "expire_watch") {
    ExpireNextWatch(resource);
  } else if (request.op == "expire_continue") {
    ExpireNextContinue();
  } else if (request.op == "clear_faults") {
    Clear();
  } else {
    return absl::nullopt;
  }
  return ControlReply{200, "{\"ok\":true}"};
}

}  // namespace emulator

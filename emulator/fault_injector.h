#ifndef EMULATOR_FAULT_INJECTOR_H_
#define EMULATOR_FAULT_INJECTOR_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "emulator/emulator_hooks.h"

namespace emulator {

// FaultInjector holds the request-level faults armed by tests: throttling
// (429 + Retry-After), error responses for a verb and resource, a 410 on the
// next watch, a 410 on the next continue token. It is an EmulatorHooks: the
// HTTP layer consults it once per request, and it serves the control
// endpoints /_emulator/{throttle,fail,expire_watch,expire_continue,
// clear_faults} (see kube_emulator_main.cc). Stream-level faults (cut, stall,
// malformed line) act on open watches and live on the store's Watchers instead.
//
// Thread-safety: all methods are thread-safe. Each armed fault fires for
// exactly its count of matching requests, in arrival order.
class FaultInjector : public EmulatorHooks {
 public:
  // The next `count` API requests (any verb, any resource) get 429 with
  // Retry-After: `retry_after_seconds`.
  void ThrottleNextRequests(int count, int retry_after_seconds);
  // Requests with `verb` ("get", "list", "watch", "create", "update",
  // "patch", "delete"; "*" for any) on `resource` (plural, "*" for any) get
  // `code` (e.g. 500), `count` times (-1: until Clear()), with a
  // Retry-After header when `retry_after_seconds` > 0 (a 429 from API
  // Priority and Fairness, a 503 from a server shutting down).
  void FailRequests(absl::string_view verb, absl::string_view resource,
                    int code, int count, int retry_after_seconds = 0);
  // The next watch on `resource` ("*" for any) gets one ERROR 410 event
  // and ends, as when the watch cache no longer has its RV.
  void ExpireNextWatch(absl::string_view resource);
  // The next request carrying a continue token gets 410 Expired.
  void ExpireNextContinue();
  // Disarms everything above.
  void Clear();

  // EmulatorHooks.
  absl::optional<Failure> OnRequest(absl::string_view verb,
                                    absl::string_view resource) override;
  bool TakeWatchExpiry(absl::string_view resource) override;
  bool TakeContinueExpiry() override;
  absl::optional<ControlReply> HandleControl(
      const ControlRequest& request) override;

 private:
  struct VerbFailure {
    std::string verb;
    std::string resource;
    int code;
    int remaining;  // -1: unlimited
    int retry_after_seconds;
  };

  absl::Mutex mu_;
  int throttle_remaining_ ABSL_GUARDED_BY(mu_) = 0;
  int throttle_retry_after_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<VerbFailure> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> watch_expiries_ ABSL_GUARDED_BY(mu_);
  int continue_expiries_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace emulator

#endif  // EMULATOR_FAULT_INJECTOR_H_

#ifndef EMULATOR_EMULATOR_HOOKS_H_
#define EMULATOR_EMULATOR_HOOKS_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "emulator/resource_registry.h"

namespace emulator {

// EmulatorHooks is how optional parts plug into the serving core (Emulator)
// without the core linking them: fault injection (FaultInjector) and the
// load generator's control endpoint (LoadControl). The sidecar's --demo
// serves the core alone; //emulator:kube_emulator and tests add the hooks
// (EmulatorWithFaults).
//
// Contract: every method has a do-nothing default, so a hook overrides only
// what it needs. The core consults its hooks in the order they were added,
// from its connection threads, concurrently: implementations must be
// thread-safe. Hooks are not owned and must outlive the emulator's Stop().
class EmulatorHooks {
 public:
  // What to answer instead of serving a request.
  struct Failure {
    int code = 0;                 // HTTP status
    int retry_after_seconds = 0;  // Retry-After when > 0
  };
  // A control request, /_emulator/<op>?..., that the core does not serve.
  struct ControlRequest {
    std::string op;
    // ?resource=<name>; null when absent or "*".
    const ResourceInfo* resource = nullptr;
    // A query parameter's value ("" when absent).
    std::function<std::string(const std::string&)> param;
  };
  struct ControlReply {
    int code = 200;
    std::string body;  // JSON
  };

  virtual ~EmulatorHooks() = default;

  // Consulted once per API request (`verb` as in RBAC: "get", "list",
  // "watch", "create", ...; `resource` plural, "" for discovery): a value
  // replaces the answer.
  virtual absl::optional<Failure> OnRequest(absl::string_view verb,
                                            absl::string_view resource) {
    return absl::nullopt;
  }
  // True: this watch on `resource` gets a single ERROR 410 event.
  virtual bool TakeWatchExpiry(absl::string_view resource) { return false; }
  // True: this list's continue token is answered 410 Expired.
  virtual bool TakeContinueExpiry() { return false; }
  // A control operation; nullopt when this hook does not know `op`.
  virtual absl::optional<ControlReply> HandleControl(
      const ControlRequest& request) {
    return absl::nullopt;
  }
};

}  // namespace emulator

#endif  // EMULATOR_EMULATOR_HOOKS_H_

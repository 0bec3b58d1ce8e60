#ifndef INTEGRATION_TESTS_EMULATOR_PROCESS_H_
#define INTEGRATION_TESTS_EMULATOR_PROCESS_H_

// Runs //emulator:kube_emulator as a child process (for tests and
// benchmarks that must keep the API server out of their own address space,
// e.g. to measure the informer's memory alone).

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace integration {

// The kube_emulator binary in this binary's runfiles: tries $TEST_SRCDIR
// (bazel test), $RUNFILES_DIR, `argv0`.runfiles and the working directory
// (bazel run). NotFound when none has it.
absl::StatusOr<std::string> FindEmulatorBinary(absl::string_view argv0);

// One kube_emulator child. Start() returns once the child is serving (it
// prints its port on stdout; we block on the pipe, no polling). The
// destructor SIGTERMs and reaps it.
//
// Thread-compatible. Not copyable.
class EmulatorProcess {
 public:
  // `flags` are passed through (e.g. "--seed_pods=1000"); --port=0 is
  // added. `quiet` sends the child's stderr (its logs) to /dev/null.
  static absl::StatusOr<std::unique_ptr<EmulatorProcess>> Start(
      const std::string& binary, const std::vector<std::string>& flags,
      bool quiet = false);
  ~EmulatorProcess();
  EmulatorProcess(const EmulatorProcess&) = delete;
  EmulatorProcess& operator=(const EmulatorProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const;
  // SIGTERM, then waitpid. Returns the wait status (-1 if already reaped).
  int Terminate();

 private:
  EmulatorProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  const int port_;
};

}  // namespace integration

#endif  // INTEGRATION_TESTS_EMULATOR_PROCESS_H_

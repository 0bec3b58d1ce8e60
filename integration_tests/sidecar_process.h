#ifndef INTEGRATION_TESTS_SIDECAR_PROCESS_H_
#define INTEGRATION_TESTS_SIDECAR_PROCESS_H_

// Runs the real //server:informer_sidecar binary as a child process for
// end-to-end tests: on a unix socket in a fresh short temporary directory
// (TEST_TMPDIR paths are often longer than the 107 characters a socket path
// may have), optionally against an emulator through a generated kubeconfig.

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace integration {

// A binary of this workspace in the runfiles of the running test or binary
// (`relative` like "server/informer_sidecar"): tries $TEST_SRCDIR,
// $RUNFILES_DIR, `argv0`.runfiles and the working directory. NotFound when
// none has it.
absl::StatusOr<std::string> FindRunfile(absl::string_view relative,
                                        absl::string_view argv0 = "");

// Writes a kubeconfig for the plain-HTTP server at `url` (with `token` as
// bearer token when non-empty) into `dir`; returns its path.
absl::StatusOr<std::string> WriteKubeconfig(const std::string& dir,
                                            absl::string_view url,
                                            absl::string_view token = "");

// Follows grpc.health.v1.Health/Watch for `service` ("" = overall) until it
// reports SERVING. DeadlineExceeded after `timeout`; Unavailable if the
// stream ends first. Event-driven: no polling.
absl::Status WaitForHealthServing(const std::shared_ptr<grpc::Channel>& channel,
                                  absl::string_view service = "",
                                  absl::Duration timeout = absl::Seconds(60));

// One informer_sidecar child process.
//
// Start() returns once the child accepts gRPC connections on its socket
// (and, with `wait_serving`, once its overall health is SERVING). The
// destructor SIGKILLs a child still running and removes the temporary
// directory.
//
// Thread-compatible. Not copyable.
class SidecarProcess {
 public:
  struct Options {
    // Passed through. --grpc_listen=unix:<dir>/grpc.sock is added unless
    // the flags set --grpc_listen themselves.
    std::vector<std::string> flags;
    bool wait_serving = true;
    // Send the child's stderr (its logs) to /dev/null.
    bool quiet = false;
    // Unless quiet: append the child's stderr (its logs) to this file, for
    // tests that check what it logged.
    std::string stderr_file;
    absl::Duration start_timeout = absl::Seconds(60);
    // Environment additions ("NAME=value"), replacing inherited ones.
    std::vector<std::string> env;
  };

  // `binary`: the sidecar's path, e.g. from
  // FindRunfile("server/informer_sidecar").
  static absl::StatusOr<std::unique_ptr<SidecarProcess>> Start(
      const std::string& binary, Options options);
  ~SidecarProcess();
  SidecarProcess(const SidecarProcess&) = delete;
  SidecarProcess& operator=(const SidecarProcess&) = delete;

  // "unix:/tmp/.../grpc.sock" (or the --grpc_listen given).
  const std::string& address() const { return address_; }
  // The child's private temporary directory (for config files etc.).
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // A new channel to the sidecar.
  std::shared_ptr<grpc::Channel> NewChannel() const;

  // Sends `signal` (SIGTERM by default) and waits for the exit. Returns the
  // exit code, or -signal when killed by a signal, or -1000 when already
  // reaped.
  int Terminate(int signal = 15);
  // Waits for an exit the sidecar started by itself (no signal is sent:
  // one arriving while it exits would count as a second signal, which
  // exits at once with 128 + signal). Same return values as Terminate().
  int Wait();
  // SIGKILL and reap.
  void Kill();

 private:
  SidecarProcess() = default;
  pid_t pid_ = 0;
  std::string dir_;
  std::string address_;
};

}  // namespace integration

#endif  // INTEGRATION_TESTS_SIDECAR_PROCESS_H_

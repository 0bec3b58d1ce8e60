#ifndef INTEGRATION_TESTS_CHAIN_UTIL_H_
#define INTEGRATION_TESTS_CHAIN_UTIL_H_

// Helpers for tests and benchmarks of chained sidecars (an emulator, a node
// sidecar serving its Kubernetes API facade, pod sidecars reading through
// it with --cache_upstream): waiting for files without polling, the
// emulator's request counters and state, a sidecar's metrics, and waiting
// until a sidecar's cache equals the emulator's state.
//
// Every function is thread-compatible and blocks its caller.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "integration_tests/sidecar_process.h"

namespace integration {

// Waits until `ready` holds for the contents of the file at `path` (a
// missing file reads as ""), woken by inotify on the file's directory (no
// polling), and returns those contents. DeadlineExceeded after `timeout`,
// with the last contents.
absl::StatusOr<std::string> WaitForFile(
    const std::string& path,
    const std::function<bool(const std::string& contents)>& ready,
    absl::Duration timeout);

// "key=value" lines with integer values (a --ports_file).
std::map<std::string, int64_t> ParseKeyValues(const std::string& contents);

// GET /_emulator/requests of the emulator at 127.0.0.1:`port`.
struct EmulatorRequests {
  int64_t list = 0;
  int64_t watch = 0;
  int64_t other = 0;
};
absl::StatusOr<EmulatorRequests> GetEmulatorRequests(int port);

// "namespace/name" -> resourceVersion of every object of `resource` in the
// emulator at 127.0.0.1:`port` (GET /_emulator/state).
using ObjectVersions = std::map<std::string, std::string>;
absl::StatusOr<ObjectVersions> GetEmulatorState(int port,
                                                const std::string& resource);

// The sum of every sample of the metric family `name` (all label sets) on
// the sidecar's /metrics at 127.0.0.1:`http_port`; 0 when absent. `name`
// may go on with the first labels, as in `family{verb="get"`: then only
// the samples starting so count.
absl::StatusOr<double> GetMetricSum(int http_port, const std::string& name);

// Follows an Informer.Watch of `resource` on `channel` until the stream's
// view of the cache equals `want` (keys and resourceVersions), then
// confirms it with a paged Informer.List. Event-driven: every message is
// compared, nothing is polled. DeadlineExceeded after `timeout`, saying how
// the last view differed.
absl::Status WaitForConvergence(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& resource,
                                const ObjectVersions& want,
                                absl::Duration timeout);

// A paged Informer.List of `resource`: key -> resourceVersion.
absl::StatusOr<ObjectVersions> ListVersions(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& resource);

// A sidecar child started with --ports_file in a private directory: its
// process and, once written, its ports ("grpc", "http", "kube_api").
struct PortedSidecar {
  PortedSidecar() = default;
  PortedSidecar(PortedSidecar&&) = default;
  PortedSidecar& operator=(PortedSidecar&&) = default;
  // Kills the child (SidecarProcess) and removes the ports file's directory.
  ~PortedSidecar();

  std::unique_ptr<SidecarProcess> process;
  std::map<std::string, int64_t> ports;
  std::string ports_file;
  std::string dir;
};

// Starts the sidecar with `flags` plus --ports_file and
// --print_events=false, waits for overall health SERVING and, when the
// flags contain --kube_api_listen, for the facade's port in the ports file.
// `stderr_file` and `env` as SidecarProcess::Options (stderr_file empty:
// inherited, unless `quiet`).
absl::StatusOr<PortedSidecar> StartPortedSidecar(
    const std::string& binary, std::vector<std::string> flags,
    const std::string& stderr_file = "", bool quiet = true,
    absl::Duration timeout = absl::Seconds(60),
    std::vector<std::string> env = {});

}  // namespace integration

#endif  // INTEGRATION_TESTS_CHAIN_UTIL_H_

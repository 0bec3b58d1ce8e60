#ifndef INTEGRATION_TESTS_EMULATED_CLUSTER_H_
#define INTEGRATION_TESTS_EMULATED_CLUSTER_H_

// What an end-to-end test of the real informer_sidecar binary against the
// emulator starts from: the kube_emulator of the runfiles as a child, a
// kubeconfig for it, and the sidecar binary of the runfiles.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration_tests/emulator_process.h"

namespace integration {

struct EmulatedClusterOptions {
  // Passed to kube_emulator (e.g. "--seed_pods=30"); its logs are dropped.
  std::vector<std::string> emulator_flags;
  // Where the kubeconfig is written (created if missing).
  std::string dir;
  // Creates the kube-system namespace, as a real cluster has it: the
  // sidecar tells clusters apart by its uid (snapshots, stale serving).
  bool kube_system = false;
};

// The parts; the emulator stops when `emulator` is destroyed.
struct EmulatedCluster {
  std::unique_ptr<EmulatorProcess> emulator;
  std::string kubeconfig;   // a file in options.dir
  std::string sidecar_bin;  // server/informer_sidecar of the runfiles
};

// Starts the emulator and writes its kubeconfig. NotFound when a binary is
// not in the runfiles; the emulator's or the file's error otherwise.
// Thread-compatible.
absl::StatusOr<EmulatedCluster> StartEmulatedCluster(
    const EmulatedClusterOptions& options);

}  // namespace integration

#endif  // INTEGRATION_TESTS_EMULATED_CLUSTER_H_

// informer_sidecar: serves Kubernetes informer caches over gRPC
// (informer.v1.Informer, WorkQueue, Events), with server reflection and
// grpc.health.v1. The flags are in server/app/sidecar_options.cc, the wiring in
// server/app/sidecar_app.cc.

#include <glog/logging.h>
#include <grpc/grpc.h>

#include <cstdlib>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "informer/util/logging.h"
#include "server/app/sidecar_app.h"
#include "server/app/sidecar_options.h"
#include "server/ops/malloc_tuning.h"

namespace {

constexpr char kUsage[] =
    "informer_sidecar: Kubernetes informer caches over gRPC "
    "(informer.v1.Informer: Watch, List, Get, ByIndex, ListIndexValues, "
    "ListResources; informer.v1.WorkQueue; informer.v1.Events).\n"
    "Health (grpc.health.v1): the overall status \"\" and each configured "
    "resource name are NOT_SERVING until the informers synced; a lazily "
    "started resource's name is SERVING while its informer runs.\n"
    "Resources: --resources=pods,... or --config=FILE (YAML); with neither, "
    "lazy mode starts an informer on the first request for any resource and "
    "stops it after --lazy_idle_timeout idle. Any kubectl name works in "
    "requests (po, pod, Pod, pods, deploy, deployments.apps).\n"
    "With --demo, or when no cluster is configured (no --kubeconfig, no "
    "$KUBECONFIG or ~/.kube/config, not in a pod), it runs an in-process "
    "demo cluster whose objects change every second.\n"
    "Usage: informer_sidecar [--demo] [--kubeconfig=FILE] "
    "[--config=FILE | --resources=pods,...] [--grpc_listen=ADDR]";

}  // namespace

int main(int argc, char** argv) {
  // Before anything else (no thread may exist yet): see malloc_tuning.h.
  server::ReexecWithMallocTunables(argv);
  informer::InitProgram(argc, argv, kUsage, server::SidecarFlagGroups());
  // Debian's Abseil is built with Mutex deadlock detection on: it records
  // every lock acquisition order in a global graph, a few percent of the
  // sidecar's CPU under fan-out load. The tests keep it on; the lock order
  // is documented per class.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Before any thread starts, so that only the waiter thread gets them.
  const sigset_t signals = server::BlockShutdownSignals();
  // One gRPC library reference held until the process exits (after the
  // signals are blocked: it starts gRPC's threads). Without it, destroying
  // the server (the last gRPC object) runs grpc_shutdown() synchronously,
  // which joins gRPC's executor threads; one may be in a poll of up to
  // 10 s, so a SIGTERM sometimes took 10 s instead of a fraction of a
  // second. Nothing needs the library torn down: the process exits next.
  grpc_init();
  absl::StatusOr<server::SidecarOptions> options = server::OptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << "informer_sidecar: bad configuration: "
               << options.status().message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<server::Sidecar>> sidecar =
      server::Sidecar::Start(*std::move(options));
  if (!sidecar.ok()) {
    LOG(ERROR) << "informer_sidecar: " << sidecar.status().message();
    return 1;
  }
  // SIGINT/SIGTERM: an orderly shutdown; a second signal, or a shutdown
  // still running past its deadline, exits at once.
  absl::Notification shutdown;
  std::thread(server::WaitForSignals, signals, &shutdown,
              (*sidecar)->shutdown_deadline())
      .detach();
  shutdown.WaitForNotification();
  if (!(*sidecar)->Shutdown()) {
    // Queued events still being written: exit without waiting for them.
    google::FlushLogFiles(google::GLOG_INFO);
    std::_Exit(0);
  }
  sidecar->reset();
  LOG(INFO) << "informer_sidecar: stopped";
  return 0;
}

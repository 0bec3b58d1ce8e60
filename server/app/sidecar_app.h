#ifndef SERVER_APP_SIDECAR_APP_H_
#define SERVER_APP_SIDECAR_APP_H_

#include <grpcpp/security/server_credentials.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "informer/client/kubeconfig.h"
#include "server/app/sidecar_options.h"
#include "server/informer_service/watch/watch_resume_store.h"
#include "server/kubeapi/kube_api_flags.h"

namespace emulator {
class Emulator;
}  // namespace emulator
namespace informer {
class EventPrinter;
namespace client {
class KubeClient;
}  // namespace client
}  // namespace informer

namespace server {

class Authorizer;
class ClusterCheck;
class DiscoveryResolver;
class EventRecording;
class HeapReleaser;
class HttpServer;
class InformerRegistry;
class ResourceResolver;
class SidecarMetrics;
class SidecarServer;
class SnapshotFallbackResolver;
class SnapshotIdentities;
class SnapshotKeeper;
class WorkQueueService;
namespace metrics {
class Registry;
}  // namespace metrics

// Sidecar is the running informer_sidecar: the composition root that wires
// the cluster (or the in-process demo cluster), the informers, the gRPC
// services, the HTTP operations endpoint and the event pipeline from a
// validated SidecarOptions.
//
// Start() brings everything up in order and returns once gRPC serves (the
// informers sync in the background; health turns SERVING when they did).
// Its first log line says which cluster it uses, DEMO MODE included. Any
// failure stops it with an error naming the flag or the part that failed,
// and what was started is torn down.
//
// Shutdown() is the orderly stop: the HTTP probes report shutting down,
// Events and Watch streams end at once, unary calls get
// options.shutdown_grace, queued events are written (bounded by
// options.event_flush_timeout), then informers, the demo cluster and the
// HTTP server stop. It returns false when queued events were left unwritten
// (the caller should exit without running destructors).
//
// Thread-compatible: Start, Shutdown and destruction from one thread.
class Sidecar {
 public:
  static absl::StatusOr<std::unique_ptr<Sidecar>> Start(SidecarOptions options);
  ~Sidecar();
  Sidecar(const Sidecar&) = delete;
  Sidecar& operator=(const Sidecar&) = delete;

  // The bound ports (0: unix socket / no HTTP server).
  int grpc_port() const;
  int http_port() const;
  // True in demo mode (the in-process demo cluster).
  bool demo() const { return demo_ != nullptr; }
  // How long an orderly shutdown may take before the process should exit
  // anyway: the grace, the event flush, and 10 s of slack.
  absl::Duration shutdown_deadline() const;

  bool Shutdown();

 private:
  explicit Sidecar(SidecarOptions options);
  absl::Status ChooseCluster();
  // --cache_dir: locks the directory (a second sidecar on it fails here,
  // before it binds anything).
  absl::Status OpenCacheDir();
  absl::Status StartHttp();
  absl::Status StartCluster();
  absl::Status SetUpSecurity(bool lazy);
  absl::Status CreateRegistry();
  // --cache_dir: each configured informer's snapshot identity, and its
  // snapshot loaded into it (before any informer starts).
  absl::Status LoadSnapshots();
  // --serve_stale_on_start with --cache_dir: what the snapshots say about
  // the resources (when discovery cannot reach the API server) and about
  // the cluster (when its identity cannot be read). Returns the resolver
  // the registry uses: resolver_, or the fallback over it.
  ResourceResolver* ReadSnapshotIdentities();
  absl::StatusOr<std::string> ClusterFromSnapshots(const absl::Status& unread);
  // --cache_dir: the last snapshots, before the informers stop.
  void WriteSnapshotsAtShutdown();
  absl::Status StartServer();
  absl::Status StartPrinters();
  absl::Status StartInformers();

  SidecarOptions options_;
  // The cluster from the flags; unset for the demo cluster (and why).
  absl::optional<informer::client::RestConfig> cluster_;
  std::string demo_reason_;
  // No cluster configured: --cache_upstream serves everything.
  bool upstream_only_ = false;
  // Declared in start order: on a failed start they go in reverse.
  std::unique_ptr<HeapReleaser> heap_;
  std::unique_ptr<metrics::Registry> metrics_;
  std::unique_ptr<SidecarMetrics> ops_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<emulator::Emulator> demo_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  // The --cache_upstream connection the reflectors use, when a cluster is
  // also configured (kube_ then serves writes and discovery); null when
  // there is no upstream or it is the only connection (then kube_ is it).
  std::unique_ptr<informer::client::KubeClient> upstream_;
  std::unique_ptr<DiscoveryResolver> resolver_;
  // Null without --serve_stale_on_start and --cache_dir; else every
  // resolution goes through fallback_resolver_.
  std::unique_ptr<SnapshotIdentities> snapshot_ids_;
  std::unique_ptr<SnapshotFallbackResolver> fallback_resolver_;
  // With snapshot_ids_: gates every informer's source until the API server
  // confirmed a cluster identity trusted from the snapshots.
  std::unique_ptr<ClusterCheck> cluster_check_;
  std::unique_ptr<Authorizer> authorizer_;
  // Null: insecure.
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<InformerRegistry> registry_;
  // Each resource's Watch history to and from its snapshot (with
  // snapshots_): the hub and the keeper both use it.
  std::unique_ptr<WatchResumeStore> watch_resume_;
  // --cache_dir's snapshots (null when off). After registry_: it refers
  // to the informers. Shared with the metrics' scrape callbacks.
  std::shared_ptr<SnapshotKeeper> snapshots_;
  // The Kubernetes API facade (null unless --kube_api_listen): it holds
  // informer leases, so it goes before the registry.
  std::unique_ptr<kubeapi::KubeApiServer> kube_api_;
  std::unique_ptr<WorkQueueService> workqueues_;
  std::unique_ptr<EventRecording> events_;
  std::unique_ptr<SidecarServer> server_;
  std::vector<std::unique_ptr<informer::EventPrinter>> printers_;
  int lazy_health_ = -1;
  bool stopped_ = false;
};

// Blocks SIGINT and SIGTERM in the calling thread and in every thread it
// starts later (call before starting any), so that only WaitForSignals
// receives them. Returns the set.
sigset_t BlockShutdownSignals();

// The first SIGINT/SIGTERM notifies `shutdown`; a second one (or an orderly
// shutdown still running `deadline` later) ends the process at once:
// 128+signal like a shell (130 SIGINT, 143 SIGTERM), 1 on the deadline.
// Runs on its own (detached) thread.
void WaitForSignals(sigset_t signals, absl::Notification* shutdown,
                    absl::Duration deadline);

}  // namespace server

#endif  // SERVER_APP_SIDECAR_APP_H_

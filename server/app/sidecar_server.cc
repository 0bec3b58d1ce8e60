#include "server/app/sidecar_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/grpc/health/v1/health.pb.h"

namespace server {
namespace {

// The longest Shutdown waits for calls in flight (see Shutdown).
constexpr absl::Duration kShutdownDrain = absl::Milliseconds(500);

}  // namespace

namespace {

std::unique_ptr<HeapReleaser> OwnHeapReleaser(
    const SidecarServer::Options& options) {
  if (options.heap_releaser != nullptr) return nullptr;
  HeapReleaser::Options releaser;
  releaser.release = options.release_free_heap;
  return std::make_unique<HeapReleaser>(std::move(releaser));
}

}  // namespace

SidecarServer::SidecarServer(InformerRegistry* registry, const Options& options)
    : registry_(registry),
      service_(registry, options.informer),
      own_heap_releaser_(OwnHeapReleaser(options)),
      heap_releaser_(own_heap_releaser_ != nullptr ? own_heap_releaser_.get()
                                                   : options.heap_releaser) {}

absl::StatusOr<std::unique_ptr<SidecarServer>> SidecarServer::Start(
    InformerRegistry* registry, absl::string_view listen, Options options) {
  std::unique_ptr<SidecarServer> sidecar(new SidecarServer(registry, options));
  // Both are process-wide switches read by every later ServerBuilder.
  grpc::EnableDefaultHealthCheckService(true);
  // gRPC's health service has no protobuf descriptor of its own: reflection
  // would list grpc.health.v1.Health but not describe it, and grpcurl would
  // refuse to call it. Touching our compiled-in definition of the same
  // interface links it and registers it in the pool reflection serves.
  grpc::health::v1::HealthCheckResponse::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string(listen),
                           options.credentials != nullptr
                               ? options.credentials
                               : grpc::InsecureServerCredentials(),
                           &sidecar->port_);
  builder.RegisterService(&sidecar->service_);
  for (grpc::Service* service : options.services) {
    builder.RegisterService(service);
  }
  for (const auto& configure : options.configure) configure(builder);
  sidecar->server_ = builder.BuildAndStart();
  if (sidecar->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on \"", listen, "\""));
  }
  // gRPC reports 1 for unix sockets; there is no port to speak of.
  if (absl::StartsWith(listen, "unix:")) sidecar->port_ = 0;
  grpc::HealthCheckServiceInterface* health =
      sidecar->server_->GetHealthCheckService();
  health->SetServingStatus(false);
  for (const std::string& name : registry->ResourceNames()) {
    health->SetServingStatus(name, false);
  }
  sidecar->health_thread_ =
      std::thread([s = sidecar.get()] { s->WatchSyncs(); });
  InformerRegistry::Observer observer;
  observer.on_relist_applied = [s = sidecar.get()](InformerEntry* e) {
    s->OnRelistApplied(*e);
  };
  sidecar->relist_observer_ = registry->AddObserver(std::move(observer));
  return sidecar;
}

SidecarServer::~SidecarServer() {
  // No more requests for releases; own_heap_releaser_, a member, stops
  // after the health thread (which may wait for one) is joined.
  if (relist_observer_ >= 0) registry_->RemoveObserver(relist_observer_);
  // Start destroys the server it failed to start: nothing runs to stop.
  if (server_ == nullptr) return;
  Shutdown(absl::ZeroDuration());
  Wait();
  if (health_thread_.joinable()) health_thread_.join();
}

void SidecarServer::WatchSyncs() {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  for (const auto& entry : registry_->entries()) {
    // Lazy informers never gate the overall status (and may stop unsynced).
    if (entry->lazy) continue;
    // WaitForSync returns early when the informer stops; the bounded wait
    // lets this thread notice a shutdown of an informer never started.
    while (!entry->informer->WaitForSync(absl::Seconds(1))) {
      if (stopping_.HasBeenNotified()) return;
    }
    health->SetServingStatus(entry->config.resource, true);
    LOG(INFO) << "informer synced: " << entry->config.resource << " ("
              << entry->informer->GetIndexer().Size() << " objects)";
  }
  // The syncs freed as much memory as the caches hold, in holes between
  // cached objects that glibc would keep resident: give them back before
  // reporting SERVING, the moment users look at the footprint. Through
  // the releaser, so that it never runs beside a relist's release.
  heap_releaser_->ReleaseAndWait();
  health->SetServingStatus(true);
  serving_.Notify();
  LOG(INFO) << "all informers synced: health SERVING";
}

void SidecarServer::OnRelistApplied(const InformerEntry& entry) {
  // The relist's new objects grew the heap while the cache still held the
  // ones they replace, freed since: holes glibc keeps resident, and its
  // dynamic trim threshold (raised to 8 MiB by the sync's large frees)
  // keeps even the top. Without a release, RSS settles a relist's worth of
  // objects above the heap in use (docs/perf-log/2026-12-03-soak.md). This
  // runs on the informer's event thread: the trim (tens of ms holding the
  // arena's lock) goes to the releaser's thread.
  LOG(INFO) << "relist of " << entry.config.resource
            << " applied: free heap release requested";
  heap_releaser_->RequestRelease();
}

bool SidecarServer::WaitUntilServing(absl::Duration timeout) const {
  return serving_.WaitForNotificationWithTimeout(timeout);
}

void SidecarServer::Shutdown(absl::Duration grace) {
  std::call_once(stop_once_, [this] {
    stopping_.Notify();
    // Health Watch clients (and probes) learn of the shutdown first.
    server_->GetHealthCheckService()->Shutdown();
    // Informer.Watch streams end at once (UNAVAILABLE, "resume with your
    // token") instead of holding the shutdown for its whole grace period.
    service_.watch_hub().Shutdown();
  });
  // gRPC 1.51's default health service only sends NOT_SERVING to its Watch
  // calls on Shutdown and leaves them open; they (like any long-lived
  // stream) would hold the server for the whole grace. In-flight calls get
  // at most kShutdownDrain, plenty for a unary query of the cache.
  const absl::Duration drain = std::min(grace, kShutdownDrain);
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(drain));
}

void SidecarServer::Wait() { server_->Wait(); }

}  // namespace server

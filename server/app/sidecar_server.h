#ifndef SERVER_APP_SIDECAR_SERVER_H_
#define SERVER_APP_SIDECAR_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/informer_service/informer_service.h"
#include "server/ops/heap_releaser.h"
#include "server/registry/informer_registry.h"

namespace server {

// SidecarServer is the sidecar's gRPC server: informer.v1.Informer over a
// registry, server reflection (v1alpha, what gRPC 1.51 serves), and the
// grpc.health.v1 service.
//
// Health: the overall status ("") is NOT_SERVING until every informer of
// the registry has synced, then SERVING; each resource name is also a
// health service name that turns SERVING when its own informer synced. A
// background thread watches for the syncs; starting the registry is the
// caller's job (before or after Start).
//
// Memory: once every informer has synced, and after each relist any
// informer of the registry applies, the heap's free memory is given back
// to the kernel (ReleaseFreeHeapMemory): both free about as much as they
// replaced, in holes glibc would keep resident. The releases run on a
// HeapReleaser's thread, not on the informer's: a relist only asks for
// one (a burst of relists coalesces), while the health status turns
// SERVING after the post-sync release has finished.
//
// Thread-safety: Shutdown/Wait/WaitUntilServing from any thread. The
// registry must outlive the server. Destruction shuts down and joins.
class SidecarServer {
 public:
  // How the server is built. Services of other issues (work queues, events)
  // and operational settings (credentials, keepalive, limits, interceptors)
  // plug in here so that main.cc stays a list of wiring steps.
  struct Options {
    InformerService::Options informer;
    // More services to serve; not owned, must outlive the server.
    std::vector<grpc::Service*> services;
    // Listening credentials; null means insecure (loopback/unix default).
    std::shared_ptr<grpc::ServerCredentials> credentials;
    // Called on the builder before BuildAndStart (channel arguments,
    // message size limits, keepalive, interceptors...).
    std::vector<std::function<void(grpc::ServerBuilder&)>> configure;
    // Runs the releases (see Memory above); not owned, must outlive the
    // server. Null: the server runs its own, over release_free_heap.
    HeapReleaser* heap_releaser = nullptr;
    // Gives the heap's free memory back, for the server's own releaser
    // (null: ReleaseFreeHeapMemory); replaceable for tests.
    std::function<bool()> release_free_heap;
  };

  // Binds `listen` ("host:port", port 0 picks one; or "unix:/path") and
  // starts serving. Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<SidecarServer>> Start(
      InformerRegistry* registry, absl::string_view listen, Options options);
  static absl::StatusOr<std::unique_ptr<SidecarServer>> Start(
      InformerRegistry* registry, absl::string_view listen,
      InformerService::Options options = {}) {
    Options all;
    all.informer = std::move(options);
    return Start(registry, listen, std::move(all));
  }

  // The Informer service (for wiring, e.g. metrics).
  InformerService& informer_service() { return service_; }
  grpc::Server* grpc_server() { return server_.get(); }

  ~SidecarServer();
  SidecarServer(const SidecarServer&) = delete;
  SidecarServer& operator=(const SidecarServer&) = delete;

  // The bound TCP port (0 for unix sockets).
  int port() const { return port_; }
  // True once the overall health status is SERVING, waiting up to `timeout`.
  bool WaitUntilServing(absl::Duration timeout) const;
  // Stops accepting calls. Informer.Watch streams end at once with
  // UNAVAILABLE ("sidecar shutting down, resume with your token"), health
  // watchers get NOT_SERVING; calls still running get `grace` (at most
  // 500 ms) to finish, then are cancelled.
  void Shutdown(absl::Duration grace);
  // Blocks until Shutdown completes.
  void Wait();

 private:
  SidecarServer(InformerRegistry* registry, const Options& options);
  void WatchSyncs();
  // The registry's observer: `entry`'s relist is in its cache.
  void OnRelistApplied(const InformerEntry& entry);

  InformerRegistry* const registry_;
  InformerService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification serving_;
  std::once_flag stop_once_;
  absl::Notification stopping_;
  std::thread health_thread_;
  // Null when Options::heap_releaser is given.
  std::unique_ptr<HeapReleaser> own_heap_releaser_;
  HeapReleaser* const heap_releaser_;
  // The registry observer's id (-1: none).
  int relist_observer_ = -1;
};

}  // namespace server

#endif  // SERVER_APP_SIDECAR_SERVER_H_

#ifndef SERVER_INFORMER_SERVICE_INFORMER_SERVICE_H_
#define SERVER_INFORMER_SERVICE_INFORMER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/watch/watch_hub.h"
#include "server/registry/informer_registry.h"
#include "server/rpc/grpc_conversions.h"
#include "server/security/authz.h"

namespace server {

// InformerService serves the unary queries of informer.v1.Informer (Get,
// List, ByIndex, ListIndexValues, ListResources) from the registry's
// informer caches, and Watch as a callback stream (see WatchHub).
//
// List paging: the first page takes a snapshot (the matching objects, sorted
// by key; objects are shared, not copied) and later pages read from it, so a
// paged list is consistent however the cache changes meanwhile. The continue
// token names the service run, the snapshot and the offset. Snapshots expire
// `snapshot_ttl` after their last use, and at most `max_snapshots` are kept
// (the least recently used goes first); an expired token gets
// FAILED_PRECONDITION telling the client to start over (as the API server's
// 410 for an expired continue token).
//
// Thread-safety: the gRPC sync server calls it from many threads; the
// snapshot table is guarded by a mutex. The registry and clock are not owned
// and must outlive the service.
//
// Watch is a raw (ByteBuffer) callback method: responses are assembled from
// object bytes serialized once and shared by every stream (see WatchHub).
class InformerService final
    : public informer::v1::Informer::WithRawCallbackMethod_Watch<
          informer::v1::Informer::Service> {
 public:
  struct Options {
    absl::Duration snapshot_ttl = absl::Minutes(5);
    size_t max_snapshots = 64;
    WatchOptions watch;
    // Who may read what (server/security/authz.h); null = everybody,
    // everything. Not owned; must outlive the service.
    const Authorizer* authorizer = nullptr;
    // Upper bound on a List page's bytes, whatever the request's
    // max_page_bytes asks (0: none; the default page stays
    // kDefaultMaxPageBytes). Keeps pages under the server's message cap.
    int64_t max_page_bytes = 0;
    // Counts Watch calls here, for a metrics interceptor that leaves them
    // alone (gRPC runs a call's interceptors on every message it sends).
    // Called as every Watch call starts; what it returns is called once,
    // when that call is over, with the status it ended with. Empty: none.
    using CallEnd = std::function<void(const grpc::Status&)>;
    std::function<CallEnd(const grpc::CallbackServerContext&)> count_watch_call;
  };
  static constexpr int32_t kDefaultListLimit = 500;
  static constexpr int32_t kMaxListLimit = 10000;
  // The default per-page cap: gRPC clients' default receive limit.
  static constexpr int64_t kDefaultMaxPageBytes = 4 << 20;

  InformerService(InformerRegistry* registry, Options options,
                  informer::Clock* clock = informer::RealClock());

  // `request` is a serialized informer.v1.WatchRequest.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  // The Watch streams' hub (tests pause writes and observe queues with it).
  WatchHub& watch_hub() { return *watch_hub_; }
  grpc::Status List(grpc::ServerContext* context,
                    const informer::v1::ListRequest* request,
                    informer::v1::ListResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context,
                   const informer::v1::GetRequest* request,
                   informer::v1::GetResponse* response) override;
  grpc::Status ByIndex(grpc::ServerContext* context,
                       const informer::v1::ByIndexRequest* request,
                       informer::v1::ByIndexResponse* response) override;
  grpc::Status ListIndexValues(
      grpc::ServerContext* context,
      const informer::v1::ListIndexValuesRequest* request,
      informer::v1::ListIndexValuesResponse* response) override;
  grpc::Status ListResources(
      grpc::ServerContext* context,
      const informer::v1::ListResourcesRequest* request,
      informer::v1::ListResourcesResponse* response) override;

 private:
  struct Snapshot {
    std::string resource;
    std::string namespace_;
    std::string label_selector;
    std::string resource_version;
    std::vector<informer::ObjectPtr> objects;  // sorted by key
    absl::Time last_used;
  };

  absl::StatusOr<InformerRef> Lookup(const std::string& resource,
                                     bool allow_stale) const;
  absl::Status DoList(const informer::v1::ListRequest& request,
                      informer::v1::ListResponse* response);
  absl::StatusOr<std::shared_ptr<Snapshot>> TakeSnapshot(
      const informer::v1::ListRequest& request, InformerEntry* entry);
  absl::StatusOr<std::shared_ptr<const Snapshot>> FindSnapshot(uint64_t id);
  // Drops snapshots unused for snapshot_ttl; with `make_room`, also the
  // least recently used ones until one more fits.
  void ExpireSnapshotsLocked(bool make_room) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  InformerRegistry* const registry_;
  const Options options_;
  informer::Clock* const clock_;
  // Distinguishes tokens of this process from those of an earlier run.
  const std::string run_id_;

  // Registers one handler per informer; destroyed before the registry.
  std::unique_ptr<WatchHub> watch_hub_;

  absl::Mutex mu_;
  uint64_t next_snapshot_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Snapshot>> snapshots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_INFORMER_SERVICE_H_

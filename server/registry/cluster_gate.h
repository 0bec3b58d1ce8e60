#ifndef SERVER_REGISTRY_CLUSTER_GATE_H_
#define SERVER_REGISTRY_CLUSTER_GATE_H_

// For a sidecar that started from its snapshots' own cluster identity
// (--serve_stale_on_start with the API server unreachable at start): no
// list or watch reaches the API server before it has confirmed that it is
// that cluster. A snapshot's resourceVersion means nothing to another
// cluster: a watch resumed there could mix the two clusters' objects.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "informer/listwatch/lister_watcher.h"

namespace server {

// The cluster identity trusted from the snapshots, and whether the API
// server confirmed it. Until Trust() is called nothing is gated (the
// identity was read from the API server itself). After it, Verify() reads
// the API server's identity through `read` until a read settles it (one
// read per call; the callers, reflectors, back off between attempts): then
// it is confirmed for good, or it is another cluster, for good, and
// `on_mismatch` is called once with what it is.
//
// Identities come in two kinds (cluster_identity.h): the kube-system
// namespace's uid ("uid:...") and, where that cannot be read, the API
// server's URL and CA ("server:..."). Only the same kind settles it:
//   - trusted a uid, read the URL and CA: the namespace cannot be read now
//     (a restarting API server answers 403 until its RBAC caches filled;
//     RBAC changed): nothing is settled, the read is tried again;
//   - trusted the URL and CA, read a uid (get on namespaces granted since):
//     `fallback` gives the URL-and-CA identity of the API server read,
//     which settles it as a start without snapshots would.
//
// Thread-safe; reads are serialised (one in flight). Trust before the
// informers start.
class ClusterCheck {
 public:
  ClusterCheck(std::function<absl::StatusOr<std::string>()> read,
               std::function<void(const std::string& actual)> on_mismatch,
               std::function<std::string()> fallback = nullptr)
      : read_(std::move(read)),
        on_mismatch_(std::move(on_mismatch)),
        fallback_(std::move(fallback)) {}

  void Trust(std::string identity) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when nothing is trusted or once confirmed; the read's error while
  // the API server cannot be read; Unavailable while the identity read is
  // of the other kind (see above); FailedPrecondition naming both
  // identities for another cluster.
  absl::Status Verify() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The identity to compare with trusted_ for `read`, the API server's;
  // empty when `read` settles nothing (a status saying why in *why).
  std::string Comparable(const std::string& read, absl::Status* why) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<absl::StatusOr<std::string>()> read_;
  const std::function<void(const std::string&)> on_mismatch_;
  const std::function<std::string()> fallback_;
  absl::Mutex mu_;
  std::string trusted_ ABSL_GUARDED_BY(mu_);
  // Empty until a read settled it; then the API server's identity, of the
  // trusted kind.
  std::string actual_ ABSL_GUARDED_BY(mu_);
};

// A ListerWatcher that calls its inner one only once `check` verified the
// cluster; until then (and for good with another cluster) every List and
// Watch fails with Verify()'s error, so the informer keeps serving its
// snapshot, stale. Owns `inner`; `check` must outlive it. Thread-safe as
// the inner one is.
class ClusterGatedSource final : public informer::ListerWatcher {
 public:
  ClusterGatedSource(std::unique_ptr<informer::ListerWatcher> inner,
                     ClusterCheck* check)
      : inner_(std::move(inner)), check_(check) {}

  absl::StatusOr<informer::ObjectList> List(
      const informer::ListOptions& options) override;
  absl::StatusOr<informer::ObjectList> ListWithItems(
      const informer::ListOptions& options, const ItemFn& on_item) override;
  absl::StatusOr<std::unique_ptr<informer::WatchStream>> Watch(
      const informer::WatchOptions& options) override;
  uint64_t BytesReceived() const override { return inner_->BytesReceived(); }

  const informer::ListerWatcher* inner() const { return inner_.get(); }

 private:
  const std::unique_ptr<informer::ListerWatcher> inner_;
  ClusterCheck* const check_;
};

}  // namespace server

#endif  // SERVER_REGISTRY_CLUSTER_GATE_H_

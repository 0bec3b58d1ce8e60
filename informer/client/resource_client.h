#ifndef INFORMER_CLIENT_RESOURCE_CLIENT_H_
#define INFORMER_CLIENT_RESOURCE_CLIENT_H_

// Requests against one resource (e.g. apps/v1 deployments in namespace
// "demo", or across all namespaces): list, watch, create and patch. It is
// also the informer::ListerWatcher a reflector uses to reach a real API
// server.
//
// Metadata-only mode asks the server for PartialObjectMetadata(List) (names,
// labels, annotations, owners; no spec/status): the largest memory saving
// available when a cache only needs metadata.
//
// Thread-safe: List, Watch, Create and Patch may run concurrently.
// `transport` must outlive the client and its watch streams.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/client/discovery.h"
#include "informer/client/http_transport.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/object/object.h"
#include "informer/object/wire.h"

namespace informer {
namespace client {

inline constexpr char kAcceptMetadataList[] =
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
inline constexpr char kAcceptMetadata[] =
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";

struct ResourceClientOptions {
  bool metadata_only = false;
  TransformOptions transform;
  // Server-side filters applied to every List and Watch whose options set
  // none of their own (an informer restricted to a selection of objects;
  // client-go's tweakListOptions).
  std::string label_selector;
  std::string field_selector;
  // A watch that receives no byte for this long is treated as hung: closed
  // and reported (DeadlineExceeded) so the reflector re-watches from its
  // last resourceVersion. This is the only way to notice a peer that keeps
  // acknowledging but sends nothing (a stuck proxy, a server stopped
  // mid-response). kube-apiserver's watch cache bookmarks every watch that
  // allows bookmarks about once a minute (defaultBookmarkFrequency in
  // apiserver/pkg/storage/cacher, dispatched within about a second), so 75
  // s leaves 15 s of margin for a busy server. Dropped packets are noticed
  // sooner, by RestConfig::tcp_timeout.
  absl::Duration watch_idle_timeout = absl::Seconds(75);
  // Threads that decode a large list response while it downloads, besides
  // the listing thread (see StreamingListDecoder), and a WatchList's
  // initial events (see WatchDecoder). Decoding and building the objects
  // is most of an initial sync's client CPU; 0 decodes inline.
  int list_decode_threads = 1;
  // Paged lists: request page N+1 as soon as page N's metadata.continue has
  // arrived (the API server writes it before the items), so that the next
  // page is on its way while this one downloads and decodes. The next List
  // call with exactly those options (the continue token, no
  // resourceVersion, as a pager sends) takes the prefetched answer, error
  // included; any other call discards it. At most one page is prefetched.
  bool prefetch_list_pages = true;
};

enum class PatchType { kMerge, kStrategicMerge, kJson };
absl::string_view PatchContentType(PatchType type);

class ResourceClient final : public ListerWatcher {
 public:
  // `ns` empty: all namespaces (or a cluster-scoped resource).
  ResourceClient(HttpTransport* transport, ApiResource resource, std::string ns,
                 ResourceClientOptions options = {});
  // Cancels and waits for a prefetched page still in flight.
  ~ResourceClient() override;

  absl::StatusOr<ObjectList> List(const ListOptions& options) override;
  // Hands over the items as the streaming decoder completes them, during
  // the download (a prefetched page's once it is taken).
  absl::StatusOr<ObjectList> ListWithItems(const ListOptions& options,
                                           const ItemFn& on_item) override;
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) override;

  // POST a JSON object to the collection; returns the server's answer.
  absl::StatusOr<std::string> Create(absl::string_view json);
  // PATCH the named object.
  absl::StatusOr<std::string> Patch(absl::string_view name, PatchType type,
                                    absl::string_view body);

  // Request paths (with query), exposed for tests and logs.
  std::string CollectionPath() const;
  std::string ListPath(const ListOptions& options) const;
  std::string WatchPath(const WatchOptions& options) const;

  const ApiResource& resource() const { return resource_; }
  // How its objects are decoded, with the compressor every object of the
  // resource shares (a snapshot load decodes through it too).
  const TransformOptions& transform() const { return options_.transform; }

  // Response body bytes this client's lists and watches received so far
  // (after content decoding; error bodies excluded). Thread-safe; monotonic.
  // For the reflector's "bytes received" counter.
  uint64_t bytes_received() const {
    return bytes_received_->load(std::memory_order_relaxed);
  }
  uint64_t BytesReceived() const override { return bytes_received(); }

 private:
  struct Prefetch;

  // One list request, decoded while it downloads. `cancel` (may be null)
  // abandons it. `on_item` (may be null) gets each item as it is decoded.
  absl::StatusOr<ObjectList> Fetch(const ListOptions& options,
                                   const std::atomic<bool>* cancel,
                                   const ItemFn* on_item = nullptr);
  // Starts fetching `next` in the background. While a prefetch is pending
  // (its own head named `next`), `next` waits until the pager takes that
  // one, so every page is prefetched while at most one runs ahead.
  void StartPrefetch(ListOptions next) ABSL_LOCKS_EXCLUDED(prefetch_mu_);
  void StartPrefetchLocked(ListOptions next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(prefetch_mu_);
  // The pending prefetch if it is for `path`; one for another path is
  // cancelled and discarded.
  std::unique_ptr<Prefetch> TakePrefetch(const std::string& path)
      ABSL_LOCKS_EXCLUDED(prefetch_mu_);

  HttpTransport* const transport_;
  const ApiResource resource_;
  const std::string namespace_;
  const ResourceClientOptions options_;
  // Shared with watch streams, which may outlive the client.
  const std::shared_ptr<std::atomic<uint64_t>> bytes_received_ =
      std::make_shared<std::atomic<uint64_t>>(0);

  absl::Mutex prefetch_mu_;
  std::unique_ptr<Prefetch> prefetch_ ABSL_GUARDED_BY(prefetch_mu_);
  // The page after prefetch_, to start when the pager takes prefetch_.
  std::unique_ptr<ListOptions> next_prefetch_ ABSL_GUARDED_BY(prefetch_mu_);
  bool closing_ ABSL_GUARDED_BY(prefetch_mu_) = false;
};

// Percent-encodes a query parameter value.
std::string QueryEscape(absl::string_view value);

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_RESOURCE_CLIENT_H_

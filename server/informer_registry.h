#ifndef SERVER_INFORMER_REGISTRY_H_
#define SERVER_INFORMER_REGISTRY_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/clock.h"
#include "informer/index.h"
#include "informer/lister_watcher.h"
#include "informer/shared_informer.h"

namespace server {

// What one informer watches and how its cache is indexed.
struct ResourceConfig {
  // The resource as users name it in requests ("pods", "deployments.apps").
  std::string resource;
  // "" = all namespaces.
  std::string namespace_;
  // Extra indexes: label keys (index "label:<key>"), dotted field paths
  // (index "field:<path>"). The "namespace" and "ownerUid" indexes are
  // always present.
  std::vector<std::string> label_indexes;
  std::vector<std::string> field_indexes;
  // Default resync period of the informer (0: none).
  absl::Duration resync_period = absl::ZeroDuration();
};

// Builds the ListerWatcher of one resource (the sidecar resolves the name
// through API discovery; tests return an informer::FakeSource).
using ListerWatcherFactory =
    std::function<absl::StatusOr<std::unique_ptr<informer::ListerWatcher>>(
        const ResourceConfig& config)>;

// One informer of the registry. The informer and source live as long as
// the registry.
struct InformerEntry {
  ResourceConfig config;
  std::unique_ptr<informer::ListerWatcher> source;
  std::unique_ptr<informer::SharedIndexInformer> informer;
  // Open Watch streams on this resource, reported by ListResources; the
  // watch hub (server/watch_stream.h) counts them up and down.
  std::atomic<int> streams{0};
};

// InformerRegistry owns one SharedIndexInformer per configured resource,
// each with its source and indexes, and finds them by resource name.
//
// Lifecycle: Create() builds everything (nothing runs yet); Start() starts
// every informer; Stop() (also run by the destructor) stops them all. The
// set of resources is fixed at creation, so lookups need no lock.
//
// Thread-safety: Find/entries/AllSynced from any thread; Start/Stop from one.
// The clock must outlive the registry.
class InformerRegistry {
 public:
  // InvalidArgument for an empty or duplicate resource name; the factory's
  // error (with the resource named) when a source cannot be built.
  static absl::StatusOr<std::unique_ptr<InformerRegistry>> Create(
      std::vector<ResourceConfig> configs, const ListerWatcherFactory& factory,
      informer::Clock* clock = informer::RealClock());

  ~InformerRegistry();
  InformerRegistry(const InformerRegistry&) = delete;
  InformerRegistry& operator=(const InformerRegistry&) = delete;

  absl::Status Start();
  void Stop();

  // The informer of `resource` (exact configured name). NotFound naming the
  // available resources otherwise.
  absl::StatusOr<InformerEntry*> Find(absl::string_view resource) const;
  // Every entry, sorted by resource name.
  const std::vector<std::unique_ptr<InformerEntry>>& entries() const {
    return entries_;
  }
  // The configured resource names, sorted.
  std::vector<std::string> ResourceNames() const;
  // True once every informer has synced.
  bool AllSynced() const;

 private:
  InformerRegistry() = default;

  std::vector<std::unique_ptr<InformerEntry>> entries_;
};

}  // namespace server

#endif  // SERVER_INFORMER_REGISTRY_H_

#ifndef SERVER_REGISTRY_RESOURCE_RESOLVER_H_
#define SERVER_REGISTRY_RESOURCE_RESOLVER_H_

// Resolution of the resource names requests use ("pods", "pod", "po",
// "Pod", "deployments.apps", "deploy", a CRD's plural or short name) to one
// canonical name per resource, so every spelling reaches the same informer.
//
// Canonical name: the plural for the core group ("pods"), plural.group
// otherwise ("deployments.apps") -- the spelling kubectl prints and accepts.

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/client/discovery.h"
#include "informer/util/clock.h"

namespace server {

// "pods" for core/v1 pods, "deployments.apps" for apps/v1 deployments.
std::string CanonicalResourceName(const informer::client::ApiResource& r);

// Maps a requested name to its canonical name. Thread-safe.
class ResourceResolver {
 public:
  virtual ~ResourceResolver() = default;
  // NotFound when no resource has this name; other errors when discovery
  // itself failed.
  virtual absl::StatusOr<std::string> Canonical(absl::string_view name) = 0;
};

// Resolves against a fixed list of resources in precedence order (tests,
// or a snapshot of discovery).
class StaticResolver final : public ResourceResolver {
 public:
  explicit StaticResolver(std::vector<informer::client::ApiResource> resources)
      : resources_(std::move(resources)) {}
  absl::StatusOr<std::string> Canonical(absl::string_view name) override;

 private:
  const std::vector<informer::client::ApiResource> resources_;
};

// Resolves through the API server's discovery (cached). A name that is not
// in the cache makes discovery refresh (a CRD installed after start-up is
// found), but at most once per `min_refresh_interval`: a client asking for
// nonsense names in a loop must not turn into a discovery storm against
// the API server.
//
// Thread-safe. `discovery` and `clock` must outlive the resolver.
class DiscoveryResolver final : public ResourceResolver {
 public:
  DiscoveryResolver(informer::client::Discovery* discovery,
                    informer::Clock* clock = informer::RealClock(),
                    absl::Duration min_refresh_interval = absl::Seconds(10))
      : discovery_(discovery),
        clock_(clock),
        min_refresh_interval_(min_refresh_interval) {}
  absl::StatusOr<std::string> Canonical(absl::string_view name) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  informer::client::Discovery* const discovery_;
  informer::Clock* const clock_;
  const absl::Duration min_refresh_interval_;
  absl::Mutex mu_;
  absl::Time last_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace server

#endif  // SERVER_REGISTRY_RESOURCE_RESOLVER_H_

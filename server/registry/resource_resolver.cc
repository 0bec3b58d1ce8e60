#include "server/registry/resource_resolver.h"

#include "absl/strings/str_cat.h"

namespace server {

std::string CanonicalResourceName(const informer::client::ApiResource& r) {
  return r.group.empty() ? r.resource : absl::StrCat(r.resource, ".", r.group);
}

absl::StatusOr<std::string> StaticResolver::Canonical(absl::string_view name) {
  absl::StatusOr<informer::client::ApiResource> r =
      informer::client::ResolveResource(resources_, name);
  if (!r.ok()) return r.status();
  return CanonicalResourceName(*r);
}

absl::StatusOr<std::string> DiscoveryResolver::Canonical(
    absl::string_view name) {
  const std::vector<informer::client::ApiResource> cached =
      discovery_->Resources();
  if (!cached.empty()) {
    absl::StatusOr<informer::client::ApiResource> r =
        informer::client::ResolveResource(cached, name);
    if (r.ok()) return CanonicalResourceName(*r);
    if (!absl::IsNotFound(r.status())) return r.status();
    absl::MutexLock lock(&mu_);
    if (clock_->Now() - last_refresh_ < min_refresh_interval_) {
      return r.status();
    }
    last_refresh_ = clock_->Now();
  } else {
    absl::MutexLock lock(&mu_);
    last_refresh_ = clock_->Now();
  }
  // Discovery::Resolve loads (or refreshes) and resolves.
  absl::StatusOr<informer::client::ApiResource> r = discovery_->Resolve(name);
  if (!r.ok()) return r.status();
  return CanonicalResourceName(*r);
}

}  // namespace server

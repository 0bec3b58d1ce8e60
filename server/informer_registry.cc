#include "server/informer_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace server {

absl::StatusOr<std::unique_ptr<InformerRegistry>> InformerRegistry::Create(
    std::vector<ResourceConfig> configs, const ListerWatcherFactory& factory,
    informer::Clock* clock) {
  std::sort(configs.begin(), configs.end(),
            [](const ResourceConfig& a, const ResourceConfig& b) {
              return a.resource < b.resource;
            });
  for (size_t i = 1; i < configs.size(); ++i) {
    if (configs[i - 1].resource == configs[i].resource) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource \"", configs[i].resource, "\" is listed twice"));
    }
  }
  std::unique_ptr<InformerRegistry> registry(new InformerRegistry());
  for (size_t i = 0; i < configs.size(); ++i) {
    ResourceConfig& config = configs[i];
    if (config.resource.empty()) {
      return absl::InvalidArgumentError("a resource has an empty name");
    }
    auto entry = std::make_unique<InformerEntry>();
    absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> source =
        factory(config);
    if (!source.ok()) {
      return absl::Status(source.status().code(),
                          absl::StrCat("resource \"", config.resource,
                                       "\": ", source.status().message()));
    }
    entry->source = *std::move(source);

    informer::SharedIndexInformer::Options options;
    options.name = config.resource;
    options.default_resync_period = config.resync_period;
    options.indexers[std::string(informer::kOwnerUidIndex)] =
        informer::OwnerUidIndexFunc;
    for (const std::string& key : config.label_indexes) {
      options.indexers[informer::LabelIndexName(key)] =
          informer::LabelIndexFunc(key);
    }
    for (const std::string& path : config.field_indexes) {
      options.indexers[informer::FieldIndexName(path)] =
          informer::FieldIndexFunc(path);
    }
    entry->informer = std::make_unique<informer::SharedIndexInformer>(
        entry->source.get(), std::move(options), clock);
    entry->config = std::move(config);
    registry->entries_.push_back(std::move(entry));
  }
  return registry;
}

InformerRegistry::~InformerRegistry() { Stop(); }

absl::Status InformerRegistry::Start() {
  for (const auto& entry : entries_) {
    if (absl::Status st = entry->informer->Start(); !st.ok()) {
      return absl::Status(
          st.code(), absl::StrCat("starting the informer of ",
                                  entry->config.resource, ": ", st.message()));
    }
    LOG(INFO) << "informer started: " << entry->config.resource
              << (entry->config.namespace_.empty()
                      ? std::string(" (all namespaces)")
                      : absl::StrCat(" (namespace ", entry->config.namespace_,
                                     ")"));
  }
  return absl::OkStatus();
}

void InformerRegistry::Stop() {
  // Informers first: they read from their sources until stopped.
  for (const auto& entry : entries_) entry->informer->Stop();
}

absl::StatusOr<InformerEntry*> InformerRegistry::Find(
    absl::string_view resource) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), resource,
      [](const std::unique_ptr<InformerEntry>& e, absl::string_view r) {
        return e->config.resource < r;
      });
  if (it != entries_.end() && (*it)->config.resource == resource) {
    return it->get();
  }
  return absl::NotFoundError(
      absl::StrCat("unknown resource \"", resource, "\"; available: ",
                   entries_.empty() ? std::string("(none)")
                                    : absl::StrJoin(ResourceNames(), ", ")));
}

std::vector<std::string> InformerRegistry::ResourceNames() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& entry : entries_) names.push_back(entry->config.resource);
  return names;
}

bool InformerRegistry::AllSynced() const {
  for (const auto& entry : entries_) {
    if (!entry->informer->HasSynced()) return false;
  }
  return true;
}

}  // namespace server

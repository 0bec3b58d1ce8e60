#include "informer/cache/list_stage.h"

#include <utility>

namespace informer {

IndexerListStage::IndexerListStage(const Indexers& indexers, CommitFn commit)
    : staged_(indexers), commit_(std::move(commit)) {}

absl::Status IndexerListStage::Add(const ObjectPtr& obj) {
  if (obj == nullptr) {
    return absl::InvalidArgumentError("list stage: null object");
  }
  if (duplicate_key_) return absl::OkStatus();
  staged_.Add(obj);
  ++added_;
  // A key seen before replaced its object rather than adding one.
  if (staged_.Size() != added_) duplicate_key_ = true;
  return absl::OkStatus();
}

bool IndexerListStage::Commit(const std::vector<ObjectPtr>& items,
                              absl::string_view resource_version) {
  if (duplicate_key_ || items.size() != added_) return false;
  return commit_(&staged_, items, resource_version);
}

}  // namespace informer

#include "informer/cache/list_reconciler.h"

#include <utility>

namespace informer {

ListReconciler::ListReconciler(const KeyListerGetter* cache,
                               size_t expected_items, CommitFn commit)
    : cache_(cache), commit_(std::move(commit)) {
  reconciled_.reserve(expected_items);
}

bool ListReconciler::SameVersion(const Object& a, const Object& b) {
  return !a.resource_version().empty() &&
         a.resource_version() == b.resource_version() && a.uid() == b.uid();
}

absl::Status ListReconciler::Add(const ObjectPtr& obj) {
  if (obj == nullptr) {
    return absl::InvalidArgumentError("list reconciler: null object");
  }
  ObjectPtr cached = cache_->GetByKey(obj->Key());
  if (cached != nullptr && SameVersion(*cached, *obj)) {
    // The caller lets `obj` go once this returns: the cache's object
    // stands for it.
    ++kept_;
    reconciled_.push_back(std::move(cached));
  } else {
    reconciled_.push_back(obj);
  }
  return absl::OkStatus();
}

bool ListReconciler::Commit(const std::vector<ObjectPtr>& /*items*/,
                            absl::string_view resource_version) {
  return commit_(reconciled_, resource_version);
}

}  // namespace informer

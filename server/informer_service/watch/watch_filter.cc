#include "server/informer_service/watch/watch_filter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace server {

bool WatchFilter::Matches(const informer::Object& obj) const {
  if (!namespace_.empty() && obj.namespace_() != namespace_) return false;
  if (!selector.Matches(obj)) return false;
  if (index_fn) {
    const informer::IndexValues values = index_fn(obj);
    return std::find(values.begin(), values.end(), index_value) != values.end();
  }
  return true;
}

std::shared_ptr<const WatchFilter> FilterInterner::Intern(
    absl::string_view scope, absl::string_view selector_text,
    WatchFilter filter) {
  // Each part length-prefixed, so no two different filters share a key
  // whatever their parts contain.
  std::string key;
  for (absl::string_view part :
       {scope, absl::string_view(filter.namespace_), selector_text,
        absl::string_view(filter.index_name),
        absl::string_view(filter.index_value)}) {
    absl::StrAppend(&key, part.size(), ":", part);
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = filters_.try_emplace(std::move(key));
  if (!inserted) {
    if (std::shared_ptr<const WatchFilter> live = it->second.lock()) {
      return live;
    }
  }
  auto made = std::make_shared<const WatchFilter>(std::move(filter));
  it->second = made;
  if (filters_.size() >= sweep_at_) {
    absl::erase_if(filters_,
                   [](const auto& entry) { return entry.second.expired(); });
    sweep_at_ = std::max<size_t>(64, 2 * filters_.size());
  }
  return made;
}

size_t FilterInterner::SizeForTest() const {
  absl::MutexLock lock(&mu_);
  return filters_.size();
}

FilterVerdicts::Verdict FilterVerdicts::Evaluate(
    const WatchFilter& filter) const {
  Verdict v;
  v.before = before_ != nullptr && filter.Matches(*before_);
  v.after = after_ != nullptr && filter.Matches(*after_);
  return v;
}

FilterVerdicts::Verdict FilterVerdicts::For(const WatchFilter& filter) {
  for (const Remembered& r : remembered_) {
    if (r.filter == &filter) return r.verdict;
  }
  const Verdict v = Evaluate(filter);
  if (remembered_.size() < kRemembered) remembered_.push_back({&filter, v});
  return v;
}

}  // namespace server

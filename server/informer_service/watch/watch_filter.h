#ifndef SERVER_INFORMER_SERVICE_WATCH_WATCH_FILTER_H_
#define SERVER_INFORMER_SERVICE_WATCH_WATCH_FILTER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/index.h"
#include "informer/labels/label_selector.h"
#include "informer/object/object.h"

namespace server {

// What a Watch request filters on. A pure function of an object.
struct WatchFilter {
  std::string namespace_;
  informer::LabelSelector selector;
  std::string index_name;
  std::string index_value;
  informer::IndexFunc index_fn;  // null: no index filter

  bool Empty() const {
    return namespace_.empty() && selector.Empty() && !index_fn;
  }
  bool Matches(const informer::Object& obj) const;
};

// Hands out one shared WatchFilter per distinct filter, so that the streams
// opened with the same filter (typically many clients of one namespace)
// hold the same object and a fan-out can judge an event once for all of
// them (FilterVerdicts). Two filters are the same when their scope (a
// fan-out) and the request's namespace, label selector text, index name and
// index value are: the same text parses to the same selector, and one
// fan-out's index names denote one function each. Filters no stream holds
// any more are forgotten (weak references, swept as the table grows).
//
// Thread-safety: Intern may be called from any thread.
class FilterInterner {
 public:
  // `scope` separates fan-outs (their index functions may differ);
  // `selector_text` is the text `filter.selector` was parsed from.
  std::shared_ptr<const WatchFilter> Intern(absl::string_view scope,
                                            absl::string_view selector_text,
                                            WatchFilter filter)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Distinct filters currently remembered (live or not yet swept).
  size_t SizeForTest() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<const WatchFilter>> filters_
      ABSL_GUARDED_BY(mu_);
  // Sweep expired entries when the table reaches this size.
  size_t sweep_at_ ABSL_GUARDED_BY(mu_) = 64;
};

// One event's verdicts, per filter object: does the filter hold the event's
// state before and its state after? A fan-out delivers an event to every
// stream; streams sharing a filter object (FilterInterner) get the verdict
// computed for the first of them, so an event to N streams of one filter
// costs two evaluations, not 2N. Remembers up to kRemembered distinct
// filters; others are evaluated each time.
//
// Thread-safety: none; one per event, on the dispatching thread. The
// objects must outlive it.
class FilterVerdicts {
 public:
  struct Verdict {
    bool before = false;
    bool after = false;
  };
  static constexpr size_t kRemembered = 8;

  // `before`/`after`: the states (null: absent).
  FilterVerdicts(const informer::Object* before, const informer::Object* after)
      : before_(before), after_(after) {}
  FilterVerdicts(const FilterVerdicts&) = delete;
  FilterVerdicts& operator=(const FilterVerdicts&) = delete;

  Verdict For(const WatchFilter& filter);

 private:
  struct Remembered {
    const WatchFilter* filter;
    Verdict verdict;
  };
  Verdict Evaluate(const WatchFilter& filter) const;

  const informer::Object* const before_;
  const informer::Object* const after_;
  absl::InlinedVector<Remembered, kRemembered> remembered_;
};

}  // namespace server

#endif  // SERVER_INFORMER_SERVICE_WATCH_WATCH_FILTER_H_

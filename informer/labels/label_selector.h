#ifndef INFORMER_LABELS_LABEL_SELECTOR_H_
#define INFORMER_LABELS_LABEL_SELECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"

namespace informer {

// LabelSelector is a parsed Kubernetes label selector (apimachinery's
// labels.Parse), e.g. "app=web,tier in (front,back),!canary,env".
//
// Syntax: requirements separated by ','; each is one of
//   key = value, key == value   the label is present with that value
//   key != value                the label is absent or has another value
//   key in (v1, v2, ...)        the label is present with one of the values
//   key notin (v1, v2, ...)     the label is absent or has none of them
//   key                         the label is present (exists)
//   !key                        the label is absent
//   key > N, key < N            the label is present and, read as a
//                               decimal int64, greater (less) than N
// Whitespace around tokens is ignored; values may be empty ("key=").
// An empty selector matches everything. Keys are label keys (optional DNS
// prefix, '/', name of at most 63 characters); values at most 63 characters
// of [A-Za-z0-9._-].
//
// Immutable after Parse; safe to share between threads.
class LabelSelector {
 public:
  enum class Op {
    kEquals,
    kNotEquals,
    kIn,
    kNotIn,
    kExists,
    kDoesNotExist,
    kGreaterThan,
    kLessThan,
  };
  struct Requirement {
    std::string key;
    Op op;
    // One value for kEquals/kNotEquals, one or more for kIn/kNotIn (sorted,
    // deduplicated), none for kExists/kDoesNotExist. kGreaterThan/kLessThan
    // keep their one value's text here and its number in `number`.
    std::vector<std::string> values;
    int64_t number = 0;
  };

  // InvalidArgument saying what is wrong and where (character offset).
  static absl::StatusOr<LabelSelector> Parse(absl::string_view selector);

  // The selector that matches every object.
  LabelSelector() = default;

  // True when every requirement holds for `obj`'s labels.
  bool Matches(const informer::Object& obj) const;
  bool Empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace informer

#endif  // INFORMER_LABELS_LABEL_SELECTOR_H_

#ifndef EMULATOR_SELECTOR_H_
#define EMULATOR_SELECTOR_H_

// Label and field selectors in the API server's query syntax
// (`labelSelector=app=web,tier in (a,b),!canary`,
// `fieldSelector=metadata.name=foo`). Parsed once per request, then matched
// against each object. Immutable after parsing: safe to share across threads.
//
// Independent of the sidecar's parser (informer/labels) on purpose: the
// emulator stands for the API server, and a shared parser would hide its
// bugs from every end-to-end test. selector_differential_test compares the
// two on a corpus.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emulator {

// Sorted by key; the shape StoredObject keeps labels and field values in.
using StringPairs = std::vector<std::pair<std::string, std::string>>;

// nullptr when `key` is absent. `pairs` must be sorted by key.
const std::string* LookupPair(const StringPairs& pairs, absl::string_view key);

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
    kLessThan
  };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };

  // The empty selector matches everything.
  LabelSelector() = default;

  // Supports =, ==, !=, in (...), notin (...), `key` (exists), `!key`
  // (does not exist), and the gt/lt forms `key>N`, `key<N`.
  // InvalidArgument with the kube-like message for malformed input.
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);

  bool Matches(const StringPairs& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  struct Term {
    std::string field;
    std::string value;
    bool negated;  // !=
  };

  FieldSelector() = default;

  // `f=v`, `f==v`, `f!=v` joined by commas; `\,` `\=` `\\` escape. Fields
  // must be metadata.name, metadata.namespace or one of `allowed` (else
  // InvalidArgument "field label not supported: <f>").
  static absl::StatusOr<FieldSelector> Parse(
      absl::string_view text, const std::vector<std::string>& allowed);

  // `fields` holds the object's selectable values (sorted); an absent field
  // compares as "".
  bool Matches(const StringPairs& fields) const;
  bool empty() const { return terms_.empty(); }
  const std::vector<Term>& terms() const { return terms_; }

 private:
  std::vector<Term> terms_;
};

}  // namespace emulator

#endif  // EMULATOR_SELECTOR_H_

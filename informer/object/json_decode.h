#ifndef INFORMER_OBJECT_JSON_DECODE_H_
#define INFORMER_OBJECT_JSON_DECODE_H_

// Internal to //informer/object:object and //informer/object:wire: the
// simdjson-based decoding shared by Object::Parse and the wire envelopes
// (lists, watch events). Not a public API.
//
// Strategy (why it is fast AND strict):
//   1. simdjson::minify copies the input into a padded buffer (simdjson reads
//      up to SIMDJSON_PADDING bytes past the end) and removes whitespace, at
//      >10 GB/s. API server bodies are already compact, so this is usually a
//      plain padded copy.
//   2. A simdjson DOM parse validates the WHOLE document (atoms, numbers,
//      nesting, UTF-8), which On-Demand would not do for skipped values: we
//      never cache invalid JSON. Metadata is read from the DOM.
//   3. The cached text is the compact input with dropped members cut out by
//      byte ranges, found by a small scanner that may assume valid compact
//      JSON. Nothing is re-serialised, so numbers and escapes stay as the
//      server wrote them, and only the objects on a dropped path are scanned.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"
#include "simdjson.h"

namespace informer {
namespace json_internal {

// One parsed JSON document: a validated DOM plus the compact text it came
// from. Reusable (Parse again) so a thread can keep one and its buffers.
// Not thread-safe; the DOM and the text are valid until the next Parse.
class ParsedJson {
 public:
  ParsedJson() = default;
  ParsedJson(const ParsedJson&) = delete;
  ParsedJson& operator=(const ParsedJson&) = delete;

  // InvalidArgument for malformed JSON (simdjson's reason in the message).
  absl::Status Parse(absl::string_view json);

  simdjson::dom::element root() const { return root_; }
  // The compact (whitespace-free) text of the whole document.
  absl::string_view compact() const {
    return absl::string_view(compact_.get(), compact_size_);
  }

 private:
  simdjson::dom::parser parser_;
  simdjson::dom::element root_;
  std::unique_ptr<char[]> compact_;
  size_t compact_capacity_ = 0;
  size_t compact_size_ = 0;
  std::unique_ptr<char[]> original_;  // only used when input had whitespace
  size_t original_capacity_ = 0;
};

// Runs fn(ParsedJson&) with a per-thread ParsedJson for small documents
// (keeps its buffers between calls) or a fresh one for large ones (so a
// thread does not hold megabytes forever after one big list).
template <typename Fn>
auto WithParsedJson(absl::string_view json, Fn fn)
    -> decltype(fn(std::declval<ParsedJson&>())) {
  constexpr size_t kThreadLocalLimit = 256 << 10;
  if (json.size() <= kThreadLocalLimit) {
    thread_local ParsedJson tls;
    return fn(tls);
  }
  ParsedJson local;
  return fn(local);
}

// Paths to drop, as a tree: {"metadata.managedFields", "status.x"} becomes
// metadata{managedFields*}, status{x*} (* = drop this member).
struct DropNode {
  std::string key;
  bool drop = false;
  std::vector<DropNode> children;
};

// The tree for `transform`. Default transforms reuse a static tree.
std::shared_ptr<const DropNode> BuildDropTree(
    const TransformOptions& transform);

// Builds an Object from a DOM object `value` whose compact text is `compact`
// (a slice of ParsedJson::compact()). `where` prefixes error messages.
// `compressor` (may be null) compresses the JSON at rest.
absl::StatusOr<ObjectPtr> BuildObject(simdjson::dom::element value,
                                      absl::string_view compact,
                                      const DropNode& drops,
                                      absl::string_view where,
                                      JsonCompressor* compressor);

// Scanner over VALID compact JSON (as produced by ParsedJson).
// Returns the end (one past) of the value starting at `p`.
const char* SkipValue(const char* p, const char* end);
// For an object starting at `p` ('{'), finds member `key` (raw key bytes) and
// returns its value's text; empty view when absent.
absl::string_view FindMemberValue(const char* p, const char* end,
                                  absl::string_view key);
// For an array starting at `p` ('['), the text of each element.
std::vector<absl::string_view> ArrayElements(const char* p, const char* end);

// A list body split WITHOUT parsing it, for decoding its items one by one
// with a small, cache-resident parser instead of one DOM of the whole list
// (whose megabytes of fresh buffers cost more in page faults than the parse).
// Works on unvalidated input (every read is bounded); the caller validates
// the envelope (the body with "[]" for the items) and each item, which
// together prove the whole body valid. False when the text does not look
// like {..."items":[...]...}.
struct ListSplit {
  size_t items_begin = 0;  // offset of '['
  size_t items_end = 0;    // offset one past ']'
  std::vector<absl::string_view> items;
};
bool SplitList(absl::string_view json, ListSplit* out);

// Type name for messages.
absl::string_view TypeName(simdjson::dom::element_type type);

// Reads an optional string member: absent or null -> "", other type ->
// InvalidArgument naming `where`.`key`.
// The view points into the DOM (valid until the next ParsedJson::Parse).
absl::Status GetOptionalString(simdjson::dom::object obj, const char* key,
                               absl::string_view where, absl::string_view* out);

// Byte classes for scanners that skip JSON containers (outside strings):
// one table load per byte instead of five compares.
enum ByteClass : unsigned char {
  kOther = 0,
  kQuote = 1,
  kOpen = 2,
  kClose = 3
};
struct ByteClasses {
  unsigned char c[256] = {};
  constexpr ByteClasses() {
    c[static_cast<unsigned char>('"')] = kQuote;
    c[static_cast<unsigned char>('{')] = kOpen;
    c[static_cast<unsigned char>('[')] = kOpen;
    c[static_cast<unsigned char>('}')] = kClose;
    c[static_cast<unsigned char>(']')] = kClose;
  }
};
inline constexpr ByteClasses kByteClasses;

}  // namespace json_internal
}  // namespace informer

#endif  // INFORMER_OBJECT_JSON_DECODE_H_

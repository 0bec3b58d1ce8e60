#ifndef INFORMER_UTIL_YAML_READER_H_
#define INFORMER_UTIL_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace informer {

// Bounds checked before yaml-cpp sees a document. yaml-cpp parses
// recursively, so a hostile file nested thousands of levels deep would
// overflow the stack inside the library; real configuration files nest
// fewer than ten levels.
struct YamlLimits {
  size_t max_bytes = 16 << 20;
  int max_nesting = 64;
};

// Parses one YAML document of the file `file` (used in messages only).
// InvalidArgument for a document over the limits, and for a syntax error:
// "FILE:LINE:COLUMN: invalid YAML: WHAT". An empty document is a Null node.
absl::StatusOr<YAML::Node> LoadYaml(absl::string_view text,
                                    absl::string_view file,
                                    const YamlLimits& limits = {});

// Reads typed fields out of a parsed document and keeps the first error,
// which names the file, the line and column of the offending node, and the
// field's dotted path: "FILE:LINE:COLUMN: FIELD: PROBLEM", e.g.
// "config.yaml:4:13: resources[0].namespace: expected a string".
//
// Each accessor takes the parent mapping, the key and the dotted path of
// the parent (`field`, "" at the top level); it returns false after
// recording an error (the first error is kept) and true otherwise. An absent
// key leaves the output alone and returns true. What a null value ("key:"
// with nothing after it) means is the reader's `NullIs`: absent (kubeconfig
// style), or a wrong type ("namespace:" left empty by mistake).
//
// Not thread-safe (one reader walks one document); holds no reference to
// the document.
class YamlReader {
 public:
  enum class NullIs { kAbsent, kWrongType };

  explicit YamlReader(absl::string_view file, NullIs null_is = NullIs::kAbsent)
      : file_(file), null_is_(null_is) {}

  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

  // "FILE:LINE:COLUMN" of `node`, or FILE when it has no position.
  std::string Where(const YAML::Node& node) const;

  // Records "WHERE: FIELD: PROBLEM" unless an error is already recorded.
  // Always returns false, so that `return r.Fail(...)` reads naturally.
  bool Fail(const YAML::Node& node, absl::string_view field,
            absl::string_view problem);

  // "field.key", or "key" when `field` is empty.
  static std::string Join(absl::string_view field, absl::string_view key);

  // Every key of `map` is a string found in `known`.
  bool KnownKeys(const YAML::Node& map, absl::string_view field,
                 const std::vector<absl::string_view>& known);

  // A scalar, as text. `present`, when given, says whether the key was set.
  bool String(const YAML::Node& map, absl::string_view key,
              absl::string_view field, std::string* out,
              bool* present = nullptr);

  // true/false (and YAML's other spellings of them).
  bool Bool(const YAML::Node& map, absl::string_view key,
            absl::string_view field, bool* out);

  // A mapping or a list; absent gives an undefined node.
  bool Map(const YAML::Node& map, absl::string_view key,
           absl::string_view field, YAML::Node* out);
  bool Sequence(const YAML::Node& map, absl::string_view key,
                absl::string_view field, YAML::Node* out);

  // A list of non-blank strings; a single string is a list of one.
  bool StringList(const YAML::Node& map, absl::string_view key,
                  absl::string_view field, std::vector<std::string>* out);

 private:
  // The value under `key`, or an undefined node when absent (or, with
  // NullIs::kAbsent, null) or when `map` is not a mapping.
  YAML::Node Child(const YAML::Node& map, absl::string_view key) const;
  bool Kind(const YAML::Node& map, absl::string_view key,
            absl::string_view field, YAML::NodeType::value type,
            absl::string_view expected, YAML::Node* out);

  std::string file_;
  NullIs null_is_;
  absl::Status status_;
};

}  // namespace informer

#endif  // INFORMER_UTIL_YAML_READER_H_

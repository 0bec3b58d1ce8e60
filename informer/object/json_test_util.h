#ifndef INFORMER_OBJECT_JSON_TEST_UTIL_H_
#define INFORMER_OBJECT_JSON_TEST_UTIL_H_

// Test/benchmark helpers for the captured kube-apiserver v1.24 responses in
// //testdata:kube_apiserver_v1_24. testonly.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace informer {
namespace json_testing {

// Where the captures live: $INFORMER_TESTDATA_DIR if set, else the runfiles
// path "testdata/kube-apiserver-v1.24" (tests and `bazel run` start in the
// runfiles tree of the workspace).
std::string DefaultCaptureDir();

// Reads `dir`/`name`; names ending in ".gz" are gunzipped.
absl::StatusOr<std::string> ReadCapture(absl::string_view dir,
                                        absl::string_view name);
// ReadCapture(DefaultCaptureDir(), name).
absl::StatusOr<std::string> ReadCapture(absl::string_view name);

// The capture ".txt" files hold a response body and its "HTTP <code>" line,
// separated by a blank line. These split them.
absl::string_view HttpCaptureBody(absl::string_view text);
int HttpCaptureCode(absl::string_view text);  // -1 when absent

}  // namespace json_testing
}  // namespace informer

#endif  // INFORMER_OBJECT_JSON_TEST_UTIL_H_

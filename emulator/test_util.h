#ifndef EMULATOR_TEST_UTIL_H_
#define EMULATOR_TEST_UTIL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace emulator {

// Contents of testdata/kube-apiserver-v1.24/<name> (from the test's
// runfiles); CHECK-fails when missing.
std::string ReadCapture(absl::string_view name);

// The JSON body of an error capture (error-404.txt etc.: body, blank line,
// "HTTP <code>").
std::string CaptureBody(absl::string_view name);
int CaptureCode(absl::string_view name);

}  // namespace emulator

#endif  // EMULATOR_TEST_UTIL_H_

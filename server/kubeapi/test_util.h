#ifndef SERVER_KUBEAPI_TEST_UTIL_H_
#define SERVER_KUBEAPI_TEST_UTIL_H_

// Test helpers: the real API server's captures (testdata/kube-apiserver-v1.24).

#include <string>

namespace server {
namespace kubeapi {

// The whole file (test runfiles). CHECK-fails when missing.
std::string ReadCapture(const std::string& name);
// The body of an error-*.txt style capture: the text before the blank line
// and "HTTP NNN" trailer.
std::string CaptureBody(const std::string& name);
// The HTTP code of such a capture.
int CaptureCode(const std::string& name);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_TEST_UTIL_H_

#include "server/kubeapi/test_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace server {
namespace kubeapi {

std::string ReadCapture(const std::string& name) {
  std::ifstream in("testdata/kube-apiserver-v1.24/" + name, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "missing capture %s\n", name.c_str());
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string CaptureBody(const std::string& name) {
  std::string all = ReadCapture(name);
  size_t at = all.find("\n\nHTTP ");
  return at == std::string::npos ? all : all.substr(0, at);
}

int CaptureCode(const std::string& name) {
  std::string all = ReadCapture(name);
  size_t at = all.find("\n\nHTTP ");
  int code = 0;
  if (at != std::string::npos) {
    (void)absl::SimpleAtoi(
        absl::StripAsciiWhitespace(absl::string_view(all).substr(at + 7)),
        &code);
  }
  return code;
}

}  // namespace kubeapi
}  // namespace server

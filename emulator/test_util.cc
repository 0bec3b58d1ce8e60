#include "emulator/test_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emulator {

std::string ReadCapture(absl::string_view name) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  std::string path = absl::StrCat(dir ? dir : ".", "/", ws ? ws : "",
                                  "/testdata/kube-apiserver-v1.24/", name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "missing capture %s\n", path.c_str());
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string CaptureBody(absl::string_view name) {
  std::string text = ReadCapture(name);
  return text.substr(0, text.find('\n'));
}

int CaptureCode(absl::string_view name) {
  std::string text = ReadCapture(name);
  size_t pos = text.rfind("HTTP ");
  int code = 0;
  if (pos != std::string::npos) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.substr(pos + 5)),
                          &code)) {
      code = 0;
    }
  }
  return code;
}

}  // namespace emulator

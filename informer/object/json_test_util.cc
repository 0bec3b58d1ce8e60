#include "informer/object/json_test_util.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace informer {
namespace json_testing {
namespace {

absl::StatusOr<std::string> Gunzip(absl::string_view in) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError("inflateInit2 failed");
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return absl::DataLossError(absl::StrCat("inflate failed: ", rc));
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace

std::string DefaultCaptureDir() {
  const char* env = std::getenv("INFORMER_TESTDATA_DIR");
  if (env != nullptr && env[0] != '\0') return env;
  return "testdata/kube-apiserver-v1.24";
}

absl::StatusOr<std::string> ReadCapture(absl::string_view dir,
                                        absl::string_view name) {
  const std::string path = absl::StrCat(dir, "/", name);
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  if (absl::EndsWith(name, ".gz")) return Gunzip(ss.str());
  return ss.str();
}

absl::StatusOr<std::string> ReadCapture(absl::string_view name) {
  return ReadCapture(DefaultCaptureDir(), name);
}

absl::string_view HttpCaptureBody(absl::string_view text) {
  for (absl::string_view part : absl::StrSplit(text, "\n\n")) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::StartsWith(part, "{")) return part;
  }
  return absl::string_view();
}

int HttpCaptureCode(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "HTTP ")) {
      int code = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &code)) {
        return code;
      }
    }
  }
  return -1;
}

}  // namespace json_testing
}  // namespace informer

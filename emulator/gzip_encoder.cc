#include "emulator/gzip_encoder.h"

#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace emulator {

bool AcceptsGzip(absl::string_view accept_encoding) {
  for (absl::string_view token : absl::StrSplit(accept_encoding, ',')) {
    if (absl::StripAsciiWhitespace(token) == "gzip") return true;
  }
  return false;
}

struct GzipEncoder::State {
  z_stream z{};
  bool finished = false;
};

GzipEncoder::GzipEncoder() : state_(std::make_unique<State>()) {
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  // Level 1: the emulator's lists are large and CPU is the scarce resource
  // on a shared test machine; the format is what matters to clients.
  const int rc =
      deflateInit2(&state_->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  CHECK_EQ(rc, Z_OK) << "deflateInit2";
}

GzipEncoder::~GzipEncoder() { deflateEnd(&state_->z); }

void GzipEncoder::Run(absl::string_view in, int mode, std::string* out) {
  z_stream& z = state_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  while (true) {
    const size_t before = out->size();
    const size_t room = deflateBound(&z, z.avail_in) + 64;
    out->resize(before + room);
    z.next_out = reinterpret_cast<Bytef*>(&(*out)[before]);
    z.avail_out = static_cast<uInt>(room);
    const int rc = deflate(&z, mode);
    out->resize(before + room - z.avail_out);
    CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR)
        << "deflate: " << rc;
    if (rc == Z_STREAM_END) return;
    // Without Z_FINISH, done once all input is consumed (deflate keeps what
    // does not fill a block for later).
    if (mode == Z_NO_FLUSH && z.avail_in == 0) return;
  }
}

void GzipEncoder::Write(absl::string_view in, std::string* out) {
  CHECK(!state_->finished) << "GzipEncoder::Write after Finish";
  Run(in, Z_NO_FLUSH, out);
}

void GzipEncoder::Finish(std::string* out) {
  CHECK(!state_->finished) << "GzipEncoder::Finish twice";
  Run(absl::string_view(), Z_FINISH, out);
  state_->finished = true;
}

std::string GzipAll(absl::string_view body) {
  GzipEncoder encoder;
  std::string out;
  out.reserve(body.size() / 4 + 64);
  encoder.Write(body, &out);
  encoder.Finish(&out);
  return out;
}

absl::StatusOr<std::string> Gunzip(absl::string_view gz) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) {
    return absl::InternalError("inflateInit2 failed");
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    char buf[64 << 10];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated
  }
  const bool trailing = z.avail_in != 0;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a complete gzip stream (zlib ", rc, ")"));
  }
  if (trailing) {
    return absl::InvalidArgumentError("bytes after the end of the gzip stream");
  }
  return out;
}

}  // namespace emulator

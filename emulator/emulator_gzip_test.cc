// The emulator compresses as kube-apiserver v1.24 does: a non-watch body
// over 128 KiB is gzipped when the request's Accept-Encoding asks for it;
// smaller bodies and watch streams never are. Real HTTP over loopback.

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "emulator/emulator.h"
#include "emulator/gzip_encoder.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace emulator {
namespace {

constexpr char kPods[] = "/api/v1/namespaces/benchpods/pods";

class EmulatorGzipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EmulatorOptions options;
    options.seed_pods = 600;  // a few MB: a streamed list
    emu_ = std::make_unique<Emulator>(options);
    ASSERT_TRUE(emu_->Start().ok());
  }
  void TearDown() override { emu_->Stop(); }

  // The response exactly as it came over the wire (httplib must not
  // decode it), with `accept_encoding` unless it is null.
  httplib::Result Get(const std::string& path, const char* accept_encoding) {
    httplib::Client cli("127.0.0.1", emu_->port());
    cli.set_read_timeout(60);
    cli.set_decompress(false);
    httplib::Headers headers;
    if (accept_encoding != nullptr) {
      headers.emplace("Accept-Encoding", accept_encoding);
    }
    return cli.Get(path.c_str(), headers);
  }

  std::unique_ptr<Emulator> emu_;
};

// Lists of every size class: streamed (> 1 MiB), built in memory but over
// the threshold, and small.
TEST_F(EmulatorGzipTest, ListsOver128KiBAreGzippedOnlyWhenAsked) {
  for (const std::string& path :
       {std::string(kPods), absl::StrCat(kPods, "?limit=100")}) {
    SCOPED_TRACE(path);
    auto plain = Get(path, nullptr);
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200);
    EXPECT_FALSE(plain->has_header("Content-Encoding"));
    ASSERT_GT(plain->body.size(), kGzipThresholdBytes);
    EXPECT_TRUE(absl::StartsWith(plain->body, "{\"kind\":\"PodList\""));

    auto gz = Get(path, "gzip");
    ASSERT_TRUE(gz);
    ASSERT_EQ(gz->status, 200);
    EXPECT_EQ(gz->get_header_value("Content-Encoding"), "gzip");
    EXPECT_EQ(gz->get_header_value("Vary"), "Accept-Encoding");
    EXPECT_EQ(gz->get_header_value("Content-Type"), "application/json");
    EXPECT_LT(gz->body.size(), plain->body.size() / 2);
    absl::StatusOr<std::string> decoded = Gunzip(gz->body);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, plain->body);

    // Other codings, and gzip with parameters, are not gzip to the API
    // server.
    auto other = Get(path, "deflate, br");
    ASSERT_TRUE(other);
    EXPECT_FALSE(other->has_header("Content-Encoding"));
    EXPECT_EQ(other->body, plain->body);
  }
  // httplib's own decoder agrees with ours on the streamed list.
  httplib::Client cli("127.0.0.1", emu_->port());
  cli.set_read_timeout(60);
  auto decoded = cli.Get(kPods, {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->body, Get(kPods, nullptr)->body);
}

TEST_F(EmulatorGzipTest, SmallResponsesAreNeverGzipped) {
  for (const std::string& path :
       {absl::StrCat(kPods, "?limit=5"), std::string("/api/v1"),
        absl::StrCat(kPods, "/pod-000001"),
        std::string("/api/v1/namespaces/benchpods/pods/missing")}) {
    SCOPED_TRACE(path);
    auto res = Get(path, "gzip");
    ASSERT_TRUE(res);
    EXPECT_LE(res->body.size(), kGzipThresholdBytes);
    EXPECT_FALSE(res->has_header("Content-Encoding"));
    EXPECT_EQ(res->body.front(), '{');
  }
}

// A watch whose initial events alone are megabytes: still plain text, one
// event per line, as the API server never compresses watches.
TEST_F(EmulatorGzipTest, WatchesAreNeverGzipped) {
  httplib::Client cli("127.0.0.1", emu_->port());
  cli.set_read_timeout(60);
  cli.set_decompress(false);
  std::string encoding = "unset";
  std::string data;
  int64_t lines = 0;
  auto res = cli.Get(
      absl::StrCat(kPods, "?watch=1&resourceVersion=0").c_str(),
      {{"Accept-Encoding", "gzip"}},
      [&](const httplib::Response& r) {
        encoding = r.get_header_value("Content-Encoding");
        return true;
      },
      [&](const char* d, size_t n) {
        data.append(d, n);
        lines += std::count(d, d + n, '\n');
        // Enough: every initial ADDED event has arrived.
        return lines < 600;
      });
  // The client ended the stream itself after the initial events.
  EXPECT_FALSE(res);
  EXPECT_EQ(encoding, "");
  ASSERT_GT(data.size(), kGzipThresholdBytes);
  EXPECT_TRUE(absl::StartsWith(data, "{\"type\":\"ADDED\""));
  EXPECT_GE(lines, 600);
}

}  // namespace
}  // namespace emulator

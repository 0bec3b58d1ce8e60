#include "informer/client/curl_response.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "absl/status/status.h"

namespace informer {
namespace client {
namespace {

size_t Header(ResponseState& st, std::string line) {
  return OnCurlHeader(line.data(), 1, line.size(), &st);
}

size_t Write(ResponseState& st, std::string chunk) {
  return OnCurlWrite(chunk.data(), 1, chunk.size(), &st);
}

TEST(CurlResponseTest, StatusHeadersAndBody) {
  std::atomic<uint64_t> total{7};
  ResponseState st;
  st.total_bytes = &total;
  st.reserve_from_length = true;
  EXPECT_EQ(Header(st, "HTTP/1.1 100 Continue\r\n"), 23u);
  EXPECT_EQ(Header(st, "\r\n"), 2u);
  EXPECT_FALSE(st.headers_done);  // an interim answer
  Header(st, "HTTP/1.1 200 OK\r\n");
  Header(st, "Content-Type: application/json\r\n");
  Header(st, "Content-Length: 4096\r\n");
  Header(st, "\r\n");
  EXPECT_EQ(st.status, 200);
  EXPECT_TRUE(st.headers_done);
  EXPECT_EQ(st.Header("content-type"), "application/json");
  EXPECT_EQ(st.Header("retry-after"), "");
  EXPECT_GE(st.body.capacity(), 4096u);  // reserved from Content-Length
  EXPECT_EQ(Write(st, "{\"a\":"), 5u);
  EXPECT_EQ(Write(st, "1}"), 2u);
  EXPECT_EQ(st.body, "{\"a\":1}");
  EXPECT_EQ(st.bytes, 7u);
  EXPECT_EQ(total.load(), 14u);
}

TEST(CurlResponseTest, ANewStatusLineStartsTheHeadersOver) {
  ResponseState st;
  Header(st, "HTTP/1.1 302 Found\r\n");
  Header(st, "Location: /elsewhere\r\n");
  Header(st, "\r\n");
  Header(st, "HTTP/2 404 \r\n");
  EXPECT_EQ(st.status, 404);
  EXPECT_FALSE(st.headers_done);
  EXPECT_EQ(st.Header("location"), "");
}

TEST(CurlResponseTest, AStreamPausesPastItsLimit) {
  ResponseState st;
  st.pause_above = 4;
  Header(st, "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(Write(st, "abcd"), 4u);
  EXPECT_EQ(Write(st, "e"), static_cast<size_t>(CURL_WRITEFUNC_PAUSE));
  EXPECT_TRUE(st.paused);
  EXPECT_EQ(st.body, "abcd");
  st.body.clear();  // the reader took it
  EXPECT_EQ(Write(st, "e"), 1u);
  EXPECT_EQ(st.body, "e");
}

TEST(CurlResponseTest, ASinkTakesA2xxBodyAndItsErrorAbortsTheTransfer) {
  std::string sunk;
  const std::function<absl::Status(absl::string_view)> sink =
      [&](absl::string_view chunk) {
        sunk.append(chunk.data(), chunk.size());
        return sunk.size() > 3 ? absl::DataLossError("enough")
                               : absl::OkStatus();
      };
  ResponseState st;
  st.sink = &sink;
  Header(st, "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(Write(st, "ab"), 2u);
  EXPECT_EQ(Write(st, "cd"), 0u);  // short: libcurl aborts
  EXPECT_EQ(st.sink_status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(sunk, "abcd");
  EXPECT_TRUE(st.body.empty());

  ResponseState error;
  error.sink = &sink;
  Header(error, "HTTP/1.1 500 Internal Server Error\r\n");
  Write(error, "oops");  // not a 2xx: kept for the error message
  EXPECT_EQ(error.body, "oops");
}

TEST(CurlResponseTest, ReserveBodyGrowsGeometrically) {
  std::string body = "xy";
  ReserveBody(&body, 100);
  EXPECT_GE(body.capacity(), 100u);
  ReserveBody(&body, kHugePageBodyBytes + 1);
  EXPECT_GE(body.capacity(), kHugePageBodyBytes + 1);
  EXPECT_EQ(body, "xy");  // contents kept
}

}  // namespace
}  // namespace client
}  // namespace informer

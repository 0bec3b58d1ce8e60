#include "emulator/gzip_encoder.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace emulator {
namespace {

// JSON-like text that compresses the way lists do (repetitive, not trivial).
std::string SampleText(int items) {
  std::string s = "{\"kind\":\"PodList\",\"items\":[";
  for (int i = 0; i < items; ++i) {
    if (i) s += ',';
    absl::StrAppend(&s, "{\"metadata\":{\"name\":\"pod-", i, "\",\"uid\":\"",
                    i * 7919, "\"},\"spec\":{\"node\":\"n", i % 13, "\"}}");
  }
  return s + "]}";
}

TEST(GzipEncoderTest, WholeBodyRoundTripsAndIsGzip) {
  const std::string text = SampleText(20000);
  const std::string gz = GzipAll(text);
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), text.size() / 4);
  absl::StatusOr<std::string> back = Gunzip(gz);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, text);
}

TEST(GzipEncoderTest, PiecewiseWritesEqualTheWhole) {
  const std::string text = SampleText(5000);
  GzipEncoder encoder;
  std::string gz;
  for (size_t i = 0; i < text.size(); i += 4099) {
    encoder.Write(absl::string_view(text).substr(i, 4099), &gz);
  }
  encoder.Finish(&gz);
  absl::StatusOr<std::string> back = Gunzip(gz);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, text);
}

TEST(GzipEncoderTest, GunzipRejectsTruncatedAndTrailingBytes) {
  const std::string gz = GzipAll(SampleText(100));
  EXPECT_FALSE(Gunzip(gz.substr(0, gz.size() - 5)).ok());
  EXPECT_FALSE(Gunzip(gz + "x").ok());
  EXPECT_FALSE(Gunzip("{\"kind\":\"List\"}").ok());
}

TEST(AcceptsGzipTest, ReadsTokensAsTheApiServerDoes) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, gzip"));
  EXPECT_TRUE(AcceptsGzip(" gzip ,br"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=1"));  // parameters: not the bare token
  EXPECT_FALSE(AcceptsGzip("x-gzip"));
}

}  // namespace
}  // namespace emulator

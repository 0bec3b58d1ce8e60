#include "informer/client/line_splitter.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace informer {
namespace client {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Drain(LineSplitter* s) {
  std::vector<std::string> out;
  std::string line;
  while (s->NextLine(&line)) out.push_back(line);
  return out;
}

const char kRecorded[] = "testdata/kube-apiserver-v1.24/watch-configmaps.jsonl";

std::vector<std::string> ExpectedLines(const std::string& body) {
  std::vector<std::string> lines =
      absl::StrSplit(body, '\n', absl::SkipEmpty());
  return lines;
}

TEST(LineSplitterTest, RecordedStreamCutAtEveryByteBoundary) {
  const std::string body = ReadFile(kRecorded);
  ASSERT_FALSE(body.empty());
  const std::vector<std::string> expected = ExpectedLines(body);
  ASSERT_EQ(expected.size(), 5u);
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    LineSplitter s;
    ASSERT_TRUE(s.Append(absl::string_view(body).substr(0, cut)).ok());
    std::vector<std::string> got = Drain(&s);
    ASSERT_TRUE(s.Append(absl::string_view(body).substr(cut)).ok());
    std::vector<std::string> rest = Drain(&s);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, expected) << "cut at " << cut;
    EXPECT_TRUE(s.Finish().ok()) << "cut at " << cut;
  }
}

TEST(LineSplitterTest, RecordedStreamCutAtEveryPairOfBoundariesInOneEvent) {
  // Three pieces, both cuts inside the first event: covers an event spanning
  // several chunks.
  const std::string body = ReadFile(kRecorded);
  const std::vector<std::string> expected = ExpectedLines(body);
  const size_t first_end = body.find('\n');
  for (size_t a = 0; a <= first_end; a += 7) {
    for (size_t b = a; b <= first_end + 1; b += 11) {
      LineSplitter s;
      std::vector<std::string> got;
      for (absl::string_view piece : {absl::string_view(body).substr(0, a),
                                      absl::string_view(body).substr(a, b - a),
                                      absl::string_view(body).substr(b)}) {
        ASSERT_TRUE(s.Append(piece).ok());
        std::vector<std::string> lines = Drain(&s);
        got.insert(got.end(), lines.begin(), lines.end());
      }
      EXPECT_EQ(got, expected) << a << "," << b;
    }
  }
}

TEST(LineSplitterTest, ByteAtATime) {
  const std::string body = ReadFile(kRecorded);
  LineSplitter s;
  std::vector<std::string> got;
  for (char c : body) {
    ASSERT_TRUE(s.Append(absl::string_view(&c, 1)).ok());
    std::vector<std::string> lines = Drain(&s);
    got.insert(got.end(), lines.begin(), lines.end());
  }
  EXPECT_EQ(got, ExpectedLines(body));
}

TEST(LineSplitterTest, ViewsAreTheSameLinesWithoutACopy) {
  // Fed in odd chunks, the views (each used before the next call) are the
  // lines NextLine would copy.
  const std::string body = ReadFile(kRecorded);
  LineSplitter s;
  std::vector<std::string> got;
  for (size_t at = 0; at < body.size(); at += 333) {
    ASSERT_TRUE(s.Append(absl::string_view(body).substr(at, 333)).ok());
    absl::string_view line;
    while (s.NextLineView(&line)) got.emplace_back(line);
  }
  EXPECT_EQ(got, ExpectedLines(body));
  EXPECT_TRUE(s.Finish().ok());
}

TEST(LineSplitterTest, CrLfEndingsAndBlankLinesAreDropped) {
  LineSplitter s;
  ASSERT_TRUE(s.Append("{\"a\":1}\r").ok());
  EXPECT_TRUE(Drain(&s).empty());
  ASSERT_TRUE(s.Append("\n\n \r\n{\"b\":2}\n").ok());
  EXPECT_EQ(Drain(&s), (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_TRUE(s.Finish().ok());
}

TEST(LineSplitterTest, PartialLastLineIsAnError) {
  LineSplitter s;
  ASSERT_TRUE(s.Append("{\"type\":\"ADDED\"}\n{\"type\":\"MOD").ok());
  EXPECT_EQ(Drain(&s).size(), 1u);
  absl::Status st = s.Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.buffered_bytes(), 12u);
}

TEST(LineSplitterTest, TrailingWhitespaceIsNotAnEvent) {
  LineSplitter s;
  ASSERT_TRUE(s.Append("{}\n  ").ok());
  EXPECT_EQ(Drain(&s).size(), 1u);
  EXPECT_TRUE(s.Finish().ok());
}

TEST(LineSplitterTest, OverlongLineIsRejected) {
  LineSplitter s(/*max_line_bytes=*/16);
  ASSERT_TRUE(s.Append("0123456789\n0123456789").ok());
  EXPECT_EQ(Drain(&s), std::vector<std::string>{"0123456789"});
  EXPECT_EQ(s.Append("0123456789").code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(LineSplitterTest, ManyLinesInOneChunkAfterCompaction) {
  LineSplitter s;
  std::string chunk;
  for (int i = 0; i < 1000; ++i) chunk += std::to_string(i) + "\n";
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(s.Append(chunk).ok());
    std::vector<std::string> lines = Drain(&s);
    ASSERT_EQ(lines.size(), 1000u);
    EXPECT_EQ(lines.back(), "999");
  }
  EXPECT_EQ(s.buffered_bytes(), 0u);
}

}  // namespace
}  // namespace client
}  // namespace informer

#include "informer/persist/snapshot_format.h"

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/persist/snapshot_identity.h"

namespace informer {
namespace snapshot_format {
namespace {

TEST(SnapshotFormatTest, Crc32IsZlibs) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(Crc32(""), 0u);
}

TEST(SnapshotFormatTest, FixedIntegersAreLittleEndian) {
  char buf[4];
  PutFixed32(0x01020304u, buf);
  EXPECT_EQ(std::string(buf, 4), std::string("\x04\x03\x02\x01", 4));
  EXPECT_EQ(GetFixed32(buf), 0x01020304u);
}

TEST(SnapshotFormatTest, VarintsRoundTrip) {
  std::string out;
  const uint64_t values[] = {0, 1, 127, 128, 300, 1u << 31, ~uint64_t{0}};
  for (uint64_t v : values) {
    const size_t before = out.size();
    AppendVarint(v, &out);
    EXPECT_EQ(out.size() - before, VarintSize(v)) << v;
  }
  AppendString("hello", &out);
  PayloadCursor cursor(out);
  for (uint64_t v : values) {
    uint64_t got = 0;
    ASSERT_TRUE(cursor.ReadVarint(&got));
    EXPECT_EQ(got, v);
  }
  absl::string_view s;
  ASSERT_TRUE(cursor.ReadString(&s));
  EXPECT_EQ(s, "hello");
  EXPECT_TRUE(cursor.done());
  uint64_t v = 0;
  EXPECT_FALSE(cursor.ReadVarint(&v));
}

TEST(SnapshotFormatTest, CursorRefusesOverrunsAndOverlongVarints) {
  std::string s;
  AppendVarint(10, &s);
  s += "abc";  // a string of 10 announced, 3 present
  PayloadCursor cursor(s);
  absl::string_view out;
  EXPECT_FALSE(cursor.ReadString(&out));
  EXPECT_TRUE(cursor.done());
  const std::string ones(11, '\xff');
  PayloadCursor endless(ones);
  uint64_t v = 0;
  EXPECT_FALSE(endless.ReadVarint(&v));
  EXPECT_TRUE(endless.done());
}

TEST(SnapshotFormatTest, PrologueIsMagicVersionAndChecksum) {
  const std::string p = EncodePrologue(1);
  ASSERT_EQ(p.size(), kPrologueBytes);
  EXPECT_EQ(p.substr(0, 8), std::string("\x89INFSNP\n", 8));
  EXPECT_EQ(GetFixed32(p.data() + 8), 1u);
  EXPECT_EQ(GetFixed32(p.data() + 12), Crc32(p.substr(0, 12)));
}

TEST(SnapshotFormatTest, FrameHeaderChecksumsTypeAndSize) {
  char h[kFrameHeaderBytes];
  EncodeFrameHeader(kRecordsFrame, 1234, h);
  EXPECT_EQ(GetFixed32(h), uint32_t{kRecordsFrame});
  EXPECT_EQ(GetFixed32(h + 4), 1234u);
  EXPECT_EQ(GetFixed32(h + 8), Crc32(absl::string_view(h, 8)));
}

Header SampleHeader() {
  Header h;
  h.identity.cluster = "c";
  h.identity.group = "apps";
  h.identity.version = "v1";
  h.identity.resource = "deployments";
  h.identity.kind = "Deployment";
  h.identity.namespace_ = "ns";
  h.identity.label_selector = "a=b";
  h.identity.field_selector = "f=g";
  h.identity.transform = "t";
  h.identity.metadata_only = true;
  h.resource_version = "12345";
  h.written = absl::FromUnixNanos(1764787200123456789);
  h.writer = "informer-sidecar";
  return h;
}

TEST(SnapshotFormatTest, HeaderRoundTrips) {
  const Header h = SampleHeader();
  absl::StatusOr<Header> got = DecodeHeader(EncodeHeader(h));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->identity, h.identity);
  EXPECT_EQ(got->identity.kind, "Deployment");
  EXPECT_EQ(got->resource_version, "12345");
  EXPECT_EQ(got->written, h.written);
  EXPECT_EQ(got->writer, "informer-sidecar");
}

// Builds a header payload from key/value pairs.
std::string KeyValues(
    std::initializer_list<std::pair<std::string, std::string>> kv) {
  std::string out;
  AppendVarint(kv.size(), &out);
  for (const auto& [k, v] : kv) {
    AppendString(k, &out);
    AppendString(v, &out);
  }
  return out;
}

std::initializer_list<std::pair<std::string, std::string>> kComplete = {
    {"cluster", "c"},
    {"group", ""},
    {"version", "v1"},
    {"resource", "pods"},
    {"namespace", ""},
    {"label_selector", ""},
    {"field_selector", ""},
    {"transform", "t"},
    {"metadata_only", "false"},
    {"resource_version", "7"},
    {"written_unix_nanos", "5"},
    {"writer", "w"},
};

TEST(SnapshotFormatTest, HeaderWithoutTheKindDecodesWithAnEmptyKind) {
  // As written before the kind was recorded.
  absl::StatusOr<Header> got = DecodeHeader(KeyValues(kComplete));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->identity.resource, "pods");
  EXPECT_EQ(got->identity.kind, "");
}

TEST(SnapshotFormatTest, HeaderIgnoresUnknownKeys) {
  std::string payload = KeyValues(kComplete);
  // One more key: rewrite the count (12 -> 13) and append it.
  payload[0] = 13;
  AppendString("added_later", &payload);
  AppendString("whatever", &payload);
  absl::StatusOr<Header> got = DecodeHeader(payload);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->identity.resource, "pods");
}

TEST(SnapshotFormatTest, HeaderRefusesMissingDuplicateAndBadValues) {
  EXPECT_EQ(DecodeHeader(KeyValues({{"cluster", "c"}})).status().message(),
            "header lacks the key \"group\"");
  EXPECT_EQ(DecodeHeader(KeyValues({{"cluster", "c"}, {"cluster", "d"}}))
                .status()
                .message(),
            "header: key \"cluster\" appears twice");
  std::string payload = KeyValues(kComplete);
  EXPECT_TRUE(DecodeHeader(payload).ok());
  EXPECT_FALSE(DecodeHeader(payload + "x").ok());
  EXPECT_FALSE(DecodeHeader(payload.substr(0, payload.size() - 1)).ok());
  EXPECT_FALSE(DecodeHeader("").ok());
  const std::string bad_bool = KeyValues({
      {"cluster", "c"},
      {"group", ""},
      {"version", "v1"},
      {"resource", "pods"},
      {"namespace", ""},
      {"label_selector", ""},
      {"field_selector", ""},
      {"transform", "t"},
      {"metadata_only", "yes"},
      {"resource_version", "7"},
      {"written_unix_nanos", "5"},
      {"writer", "w"},
  });
  EXPECT_EQ(DecodeHeader(bad_bool).status().message(),
            "header: metadata_only is \"yes\"");
}

}  // namespace
}  // namespace snapshot_format
}  // namespace informer

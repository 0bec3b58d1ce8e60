#include "informer/persist/object_block_decoder.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "informer/persist/snapshot_format.h"
#include "informer/persist/snapshot_test_util.h"

namespace informer {
namespace {

using snapshot_testing::ConfigMapJson;

// A block of records: the JSON of ConfigMaps first..first+n-1, with
// `bad` (if >= 0) replaced by text that is not an object.
std::string Block(int first, int n, int bad = -1) {
  std::string out;
  for (int i = first; i < first + n; ++i) {
    snapshot_format::AppendString(i == bad ? "[]" : ConfigMapJson(i, 20), &out);
  }
  return out;
}

TEST(ObjectBlockDecoderTest, KeepsTheBlocksOrderWithAndWithoutThreads) {
  for (int threads : {0, 1, 2, 4}) {
    ObjectBlockDecoder decoder(TransformOptions(), threads);
    for (int b = 0; b < 40; ++b) {
      ASSERT_TRUE(decoder.Add(Block(b * 25, 25), b * 25 + 1, 1000 + b));
    }
    absl::StatusOr<std::vector<ObjectPtr>> objects = decoder.Finish();
    ASSERT_TRUE(objects.ok()) << objects.status();
    ASSERT_EQ(objects->size(), 1000u);
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ((*objects)[i]->Key(), absl::StrFormat("default/cm-%06d", i))
          << "threads " << threads;
    }
  }
}

TEST(ObjectBlockDecoderTest, ReportsTheEarliestFailedBlock) {
  for (int threads : {0, 2}) {
    ObjectBlockDecoder decoder(TransformOptions(), threads);
    bool accepted = true;
    for (int b = 0; b < 20 && accepted; ++b) {
      // Blocks 5 and 12 each hold a bad record.
      const int bad = b == 5 ? 5 * 10 + 3 : b == 12 ? 12 * 10 + 7 : -1;
      accepted = decoder.Add(Block(b * 10, 10, bad), b * 10 + 1, 100 * b);
    }
    absl::StatusOr<std::vector<ObjectPtr>> objects = decoder.Finish();
    ASSERT_FALSE(objects.ok());
    EXPECT_EQ(objects.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(
        objects.status().message(),
        "object 54 (in the RECORDS frame at offset 500) does not decode: "))
        << objects.status();
  }
}

TEST(ObjectBlockDecoderTest, AnOverrunningRecordIsAnError) {
  ObjectBlockDecoder decoder(TransformOptions(), 0);
  std::string block = Block(0, 2);
  snapshot_format::AppendVarint(100, &block);  // 100 bytes announced, none
  EXPECT_FALSE(decoder.Add(block, 1, 16));
  EXPECT_EQ(decoder.Finish().status().message(),
            "object 3 (in the RECORDS frame at offset 16) does not decode: "
            "its record overruns the block");
}

TEST(ObjectBlockDecoderTest, NoBlocksNoObjects) {
  ObjectBlockDecoder decoder(TransformOptions(), 2);
  absl::StatusOr<std::vector<ObjectPtr>> objects = decoder.Finish();
  ASSERT_TRUE(objects.ok());
  EXPECT_TRUE(objects->empty());
}

TEST(ObjectBlockDecoderTest, DestroyingWithoutFinishJoinsTheWorkers) {
  ObjectBlockDecoder decoder(TransformOptions(), 2);
  for (int b = 0; b < 10; ++b) decoder.Add(Block(b * 10, 10), b * 10 + 1, b);
}

}  // namespace
}  // namespace informer

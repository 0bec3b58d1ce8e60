#include "informer/object/ordered_batch_decoder.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using Decoder = OrderedBatchDecoder<int>;

// Decodes "N" to N; anything else is an error naming the index.
absl::StatusOr<int> ParseInt(absl::string_view text, size_t index) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("item ", index, ": bad"));
  }
  return v;
}

Decoder::Options SmallBatches(int threads) {
  Decoder::Options o;
  o.threads = threads;
  o.batch_bytes = 16;  // a few items per batch
  return o;
}

// Takes every batch (waiting), in order; returns the values and the first
// error.
std::vector<int> TakeAll(Decoder* d, absl::Status* error) {
  std::vector<int> values;
  size_t expected_first = 0;
  while (std::unique_ptr<Decoder::Batch> b = d->TakeNext(/*wait=*/true)) {
    EXPECT_EQ(b->first_index, expected_first);
    values.insert(values.end(), b->out.begin(), b->out.end());
    expected_first += b->out.size();
    if (!b->status.ok()) {
      *error = b->status;
      break;
    }
  }
  return values;
}

TEST(OrderedBatchDecoderTest, KeepsOrderAcrossManyBatchesAndThreads) {
  for (int threads : {1, 3}) {
    Decoder d(SmallBatches(threads), ParseInt);
    for (int i = 0; i < 5000; ++i) d.Add(absl::StrCat(i));
    d.Flush();
    EXPECT_EQ(d.added(), 5000u);
    absl::Status error;
    std::vector<int> values = TakeAll(&d, &error);
    EXPECT_TRUE(error.ok()) << error;
    ASSERT_EQ(values.size(), 5000u);
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(values[i], i);
    EXPECT_FALSE(d.failed());
  }
}

TEST(OrderedBatchDecoderTest, TakeWithoutWaitNeverReordersOrBlocks) {
  // Batches taken as they complete, interleaved with adding: same order.
  Decoder d(SmallBatches(2), ParseInt);
  std::vector<int> values;
  size_t next_first = 0;
  auto take = [&](bool wait) {
    while (std::unique_ptr<Decoder::Batch> b = d.TakeNext(wait)) {
      EXPECT_EQ(b->first_index, next_first);
      next_first += b->out.size();
      values.insert(values.end(), b->out.begin(), b->out.end());
    }
  };
  for (int i = 0; i < 3000; ++i) {
    d.Add(absl::StrCat(i));
    if (i % 7 == 0) take(/*wait=*/false);
  }
  d.Flush();
  take(/*wait=*/true);
  ASSERT_EQ(values.size(), 3000u);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(values[i], i);
}

TEST(OrderedBatchDecoderTest, OneBatchStartsNoThreadAndFlushIsNeeded) {
  std::atomic<int> other_threads{0};
  const std::thread::id feeder = std::this_thread::get_id();
  Decoder::Options o;
  o.threads = 2;
  Decoder d(o, [&](absl::string_view text, size_t index) {
    if (std::this_thread::get_id() != feeder) ++other_threads;
    return ParseInt(text, index);
  });
  d.Add("1");
  d.Add("2");
  // Not submitted yet: nothing to take.
  EXPECT_EQ(d.TakeNext(/*wait=*/true), nullptr);
  d.Flush();
  std::unique_ptr<Decoder::Batch> b = d.TakeNext(/*wait=*/true);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->out, (std::vector<int>{1, 2}));
  EXPECT_EQ(other_threads.load(), 0);
  EXPECT_EQ(d.TakeNext(/*wait=*/true), nullptr);
}

TEST(OrderedBatchDecoderTest, BadItemEndsItsBatchWithTheItemsBeforeIt) {
  Decoder d(SmallBatches(2), ParseInt);
  for (int i = 0; i < 100; ++i) d.Add(absl::StrCat(i));
  d.Add("x");  // item 100
  for (int i = 101; i < 200; ++i) d.Add(absl::StrCat(i));
  d.Add("y");  // item 200: a later bad item is not the one reported
  d.Flush();
  absl::Status error;
  std::vector<int> values = TakeAll(&d, &error);
  EXPECT_EQ(error, absl::InvalidArgumentError("item 100: bad"));
  ASSERT_EQ(values.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(values[i], i);
  EXPECT_TRUE(d.failed());
}

TEST(OrderedBatchDecoderTest, StopsWithBatchesQueued) {
  // Destroying with work queued and batches untaken joins the workers.
  for (int round = 0; round < 20; ++round) {
    Decoder d(SmallBatches(2), ParseInt);
    for (int i = 0; i < 500; ++i) d.Add(absl::StrCat(i));
    d.Flush();
    if (round % 2 == 0) d.StopWorkers();
  }
}

}  // namespace
}  // namespace informer

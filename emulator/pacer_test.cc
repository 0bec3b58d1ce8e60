#include "emulator/pacer.h"

#include <thread>

#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace emulator {
namespace {

// Times computed from doubles: equal to the microsecond.
void ExpectAt(absl::Time got, absl::Time want) {
  EXPECT_LT(absl::AbsDuration(got - want), absl::Microseconds(1))
      << got << " vs " << want;
}

TEST(PacerTest, AFullBucketSendsAtOnceThenTheRateHolds) {
  informer::FakeClock clock;
  const absl::Time t0 = clock.Now();
  Pacer pacer(/*bytes_per_sec=*/1000, /*burst=*/500, &clock);
  EXPECT_EQ(pacer.Reserve(500), t0) << "the bucket starts full";
  // 250 bytes of debt at 1000 B/s: a quarter of a second.
  ExpectAt(pacer.Reserve(250), t0 + absl::Milliseconds(250));
  // The next write waits for both debts.
  ExpectAt(pacer.Reserve(250), t0 + absl::Milliseconds(500));
  clock.Advance(absl::Milliseconds(500));
  // Debt paid; the bucket is empty, so 100 bytes cost 100 ms.
  ExpectAt(pacer.Reserve(100), clock.Now() + absl::Milliseconds(100));
}

TEST(PacerTest, IdleTimeRefillsNoMoreThanTheBurst) {
  informer::FakeClock clock;
  Pacer pacer(1000, 500, &clock);
  EXPECT_EQ(pacer.Reserve(500), clock.Now());
  clock.Advance(absl::Seconds(10));  // would be 10,000 bytes uncapped
  EXPECT_EQ(pacer.Reserve(500), clock.Now());
  ExpectAt(pacer.Reserve(1000), clock.Now() + absl::Seconds(1));
}

TEST(PacerTest, AWriteLargerThanTheBucketGoesAtOnceAndTheNextOnePays) {
  informer::FakeClock clock;
  const absl::Time t0 = clock.Now();
  Pacer pacer(1e6, 1000, &clock);
  // A 1 MB body in ten chunks at 1 MB/s: the first goes at once (into
  // debt), the last after the whole megabyte minus the bucket is paid.
  absl::Time last;
  for (int i = 0; i < 10; ++i) last = pacer.Reserve(100000);
  ExpectAt(last, t0 + absl::Milliseconds(999));
}

TEST(PacerTest, TakeWaitsOnTheClock) {
  informer::FakeClock clock;
  Pacer pacer(1000, 0, &clock);
  bool done = false;
  std::thread writer([&] {
    pacer.Take(2000);  // two seconds at 1000 B/s
    done = true;
  });
  clock.WaitForWaiters(1);
  clock.Advance(absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  writer.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(pacer.Reserve(0), clock.Now()) << "debt paid";
}

}  // namespace
}  // namespace emulator

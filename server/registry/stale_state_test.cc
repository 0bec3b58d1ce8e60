#include "server/registry/stale_state.h"

#include "gtest/gtest.h"

namespace server {
namespace {

const absl::Time kWritten = absl::FromUnixSeconds(1700000000);

TEST(StaleStateTest, NeverStaleWhenNotEnabled) {
  StaleState s;
  s.MarkLoadedFromSnapshot(kWritten);
  EXPECT_FALSE(s.Observe(false, 3).stale);
  EXPECT_FALSE(s.Observe(true, 3).turned_fresh);
}

TEST(StaleStateTest, NeverStaleWithoutASnapshot) {
  StaleState s;
  s.Enable();
  EXPECT_FALSE(s.Observe(false, 5).stale);
  EXPECT_EQ(s.Last().snapshot_written, absl::InfinitePast());
}

TEST(StaleStateTest, CatchingUpWithoutErrorIsNotStale) {
  StaleState s;
  s.Enable();
  s.MarkLoadedFromSnapshot(kWritten);
  EXPECT_FALSE(s.Observe(false, 0).stale);
  const StaleState::View v = s.Observe(true, 0);
  EXPECT_FALSE(v.stale);
  EXPECT_FALSE(v.turned_fresh);
  // A failure after the sync never makes it stale.
  EXPECT_FALSE(s.Observe(false, 1).stale);
}

TEST(StaleStateTest, StaleAfterAFailureUntilSynced) {
  StaleState s;
  s.Enable();
  s.MarkLoadedFromSnapshot(kWritten);
  StaleState::View v = s.Observe(false, 1);
  EXPECT_TRUE(v.stale);
  EXPECT_FALSE(v.turned_fresh);
  EXPECT_EQ(v.snapshot_written, kWritten);
  // Latched: the error count is what the reflector saw so far.
  EXPECT_TRUE(s.Observe(false, 1).stale);
  EXPECT_TRUE(s.Last().stale);
  v = s.Observe(true, 1);
  EXPECT_FALSE(v.stale);
  EXPECT_TRUE(v.turned_fresh);
  // Fresh for good, even if the informer fails (or relists) later.
  v = s.Observe(false, 7);
  EXPECT_FALSE(v.stale);
  EXPECT_TRUE(v.turned_fresh);
}

}  // namespace
}  // namespace server

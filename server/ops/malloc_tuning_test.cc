#include "server/ops/malloc_tuning.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"

namespace server {
namespace {

TEST(MallocTuningTest, AppliesOnlyWhenTheUserSetNothing) {
  EXPECT_TRUE(ShouldApplyMallocTunables(nullptr));
  EXPECT_FALSE(ShouldApplyMallocTunables(""));
  EXPECT_FALSE(ShouldApplyMallocTunables("glibc.malloc.arena_max=4"));
  EXPECT_FALSE(ShouldApplyMallocTunables(kMallocTunables));
}

TEST(MallocTuningTest, TunablesNameHugePagesAndOneArena) {
  const std::string t = kMallocTunables;
  EXPECT_TRUE(absl::StrContains(t, "glibc.malloc.hugetlb=1"));
  EXPECT_TRUE(absl::StrContains(t, "glibc.malloc.arena_max=1"));
}

}  // namespace
}  // namespace server

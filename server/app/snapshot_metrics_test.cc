#include "server/app/snapshot_metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"

namespace server {
namespace {

TEST(SnapshotMetricsTest, EverySeriesFromTheKeepersStats) {
  SnapshotKeeper::Options o;
  const char* tmp = std::getenv("TEST_TMPDIR");
  o.dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/cache";
  o.interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
      SnapshotKeeper::Create(std::move(o));
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  std::shared_ptr<SnapshotKeeper> shared = *std::move(keeper);
  metrics::Registry registry;
  ASSERT_TRUE(RegisterSnapshotMetrics(&registry, shared).ok());
  const std::string text = registry.Render();
  for (const char* series : {
           "informer_sidecar_snapshot_writes_total 0",
           "informer_sidecar_snapshot_write_failures_total 0",
           "informer_sidecar_snapshot_bytes 0",
           "informer_sidecar_snapshot_last_success_age_seconds -1",
           "informer_sidecar_snapshots_loaded_total 0",
           "informer_sidecar_snapshots_rejected_total 0",
       }) {
    EXPECT_TRUE(absl::StrContains(text, series)) << series << "\n" << text;
  }
  // A second registration of the same names fails.
  EXPECT_FALSE(RegisterSnapshotMetrics(&registry, shared).ok());
}

}  // namespace
}  // namespace server

// informer_sidecar_snapshot_*: the --cache_dir keeper's writes and loads
// as metrics.
#ifndef SERVER_APP_SNAPSHOT_METRICS_H_
#define SERVER_APP_SNAPSHOT_METRICS_H_

#include <memory>

#include "absl/status/status.h"
#include "server/ops/metrics.h"
#include "server/registry/snapshot_keeper.h"

namespace server {

// Registers in `registry` the keeper's counters (writes, write failures,
// loads, rejections) and gauges (bytes last written, seconds since the
// last successful write round, -1 before one), read from
// keeper->GetStats() at scrape time: the registry shares ownership of
// `keeper`. An error when a name is taken already.
absl::Status RegisterSnapshotMetrics(
    metrics::Registry* registry, const std::shared_ptr<SnapshotKeeper>& keeper);

}  // namespace server

#endif  // SERVER_APP_SNAPSHOT_METRICS_H_

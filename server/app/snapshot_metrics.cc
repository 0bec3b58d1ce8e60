#include "server/app/snapshot_metrics.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/app/sidecar_metrics.h"

namespace server {

absl::Status RegisterSnapshotMetrics(metrics::Registry* registry,
                                     const std::shared_ptr<SnapshotKeeper>& k) {
  struct Def {
    const char* name;
    const char* help;
    bool counter;
    std::function<double(const SnapshotKeeper::Stats&)> value;
  };
  const Def defs[] = {
      {"snapshot_writes_total", "Cache snapshots written to --cache_dir.", true,
       [](const SnapshotKeeper::Stats& s) { return s.writes; }},
      {"snapshot_write_failures_total",
       "Cache snapshot writes that failed (the previous snapshot is kept).",
       true, [](const SnapshotKeeper::Stats& s) { return s.write_failures; }},
      {"snapshot_bytes", "Bytes on disk of the snapshots last written.", false,
       [](const SnapshotKeeper::Stats& s) {
         return static_cast<double>(s.bytes);
       }},
      {"snapshot_last_success_age_seconds",
       "Seconds since the last snapshot write round that succeeded (-1: "
       "none yet).",
       false,
       [](const SnapshotKeeper::Stats& s) {
         return s.last_success == absl::InfinitePast()
                    ? -1.0
                    : absl::ToDoubleSeconds(absl::Now() - s.last_success);
       }},
      {"snapshots_loaded_total",
       "Informers started from their snapshot (warm restarts).", true,
       [](const SnapshotKeeper::Stats& s) { return s.loaded; }},
      {"snapshots_rejected_total",
       "Snapshots present but not used (unreadable, corrupted, another "
       "version or identity): cold starts.",
       true, [](const SnapshotKeeper::Stats& s) { return s.rejected; }},
  };
  for (const Def& d : defs) {
    metrics::SampleFn fn = [k, value = d.value] {
      metrics::Sample sample;
      sample.value = value(k->GetStats());
      return std::vector<metrics::Sample>{sample};
    };
    const std::string name = absl::StrCat(kMetricPrefix, d.name);
    absl::Status st = d.counter
                          ? registry->AddCallbackCounter(name, d.help, {}, fn)
                          : registry->AddCallbackGauge(name, d.help, {}, fn);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace server

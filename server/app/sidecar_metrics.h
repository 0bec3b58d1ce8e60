#ifndef SERVER_APP_SIDECAR_METRICS_H_
#define SERVER_APP_SIDECAR_METRICS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "informer/client/http_transport.h"
#include "server/informer_service/watch/watch_hub.h"
#include "server/ops/heap_releaser.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"

namespace server {

// The metric name prefix of everything the sidecar exports.
inline constexpr char kMetricPrefix[] = "informer_sidecar_";

// SidecarMetrics registers the sidecar's own metrics (informer_sidecar_*)
// in a registry:
//
//   informer_synced{resource}                    gauge 1/0
//   informer_objects{resource}                   gauge, cached objects
//   informer_events_total{resource,type}         counter, ADDED/MODIFIED/
//                                                DELETED/BOOKMARK received
//   informer_lists_total{resource}               counter
//   informer_relists_total{resource}             counter
//   informer_watch_restarts_total{resource}      counter, watches after the
//                                                first
//   informer_errors_total{resource,kind}         counter (http_410,
//                                                UNAVAILABLE, ...)
//   informer_bytes_received_total{resource}      counter
//   api_request_duration_seconds{verb,code}      histogram (code 0: no
//                                                answer; verb WATCH: time
//                                                to headers)
//   watch_streams_open{resource}                 gauge
//   watch_events_in_total                        counter, informer events
//                                                the fan-outs handled
//   watch_events_out_total{type}                 counter, events written
//   watch_coalesced_events_total                 counter
//   watch_streams_exhausted_total                counter, slow streams ended
//                                                RESOURCE_EXHAUSTED
//   watch_queue_depth_max                        gauge, longest per-stream
//                                                queue now
//   watch_queue_depth_peak                       gauge, largest per-stream
//                                                queue seen
//   watch_history_events{resource}               gauge, events kept for
//                                                resuming streams
//   watch_history_bytes{resource}                gauge, bytes they alone
//                                                keep alive
//   heap_in_use_age_seconds                      gauge, how old the next
//                                                one is at most
//   heap_in_use_bytes                            gauge, heap allocated and
//                                                not freed (mallinfo2), as
//                                                last measured
//   watch_pending_bytes{resource}                gauge, object bytes the
//                                                stream queues reference
//   watch_inflight_bytes{resource}               gauge, writes gRPC holds
//
// Informer and Watch metrics are read at scrape time from what Attach()
// was given; Detach() before destroying those (scrapes then show only the
// API client's metrics). No metric carries object data.
//
// Thread-safety: all methods are thread-safe.
class SidecarMetrics {
 public:
  // `heap` (not owned, must outlive the metrics) measures the heap in use
  // off the scrape path; null: no heap_in_use_* metrics.
  static absl::StatusOr<std::unique_ptr<SidecarMetrics>> Create(
      metrics::Registry* registry, HeapReleaser* heap = nullptr);

  // For TransportOptions::observer (before the API client is built); the
  // SidecarMetrics must outlive the transport.
  std::function<void(const informer::client::RequestObservation&)>
  ApiObserver();

  // Sources of the scrape-time metrics; either may be null. Not owned.
  void Attach(InformerRegistry* informers, WatchHub* watch_hub);
  void Detach() { Attach(nullptr, nullptr); }

  // Configured (non-lazy) informers that have not synced, sorted (for
  // /readyz); {"informers not started"} before Attach. Informers serving
  // stale data count as ready with SetReadyWhenStale(true), else they are
  // named "RESOURCE (stale)".
  std::vector<std::string> NotReady() const;
  void SetReadyWhenStale(bool ready) { ready_when_stale_.store(ready); }

 private:
  SidecarMetrics() = default;
  absl::Status Register(metrics::Registry* registry);
  // One scrape-time metric, registered by Register().
  struct MetricDef {
    const char* name;
    const char* help;
    bool counter;  // else a gauge
    std::vector<std::string> labels;
    metrics::SampleFn fn;
  };
  // The metric definitions by group, appended to `defs`.
  // informer_synced, informer_objects, informer_events_total: what the
  // informers hold and the events their reflectors received.
  void AddInformerMetrics(std::vector<MetricDef>* defs);
  // informer_{lists,relists,watch_restarts,errors,bytes_received}_total:
  // the reflectors' list/watch cycles, failures and traffic.
  void AddListWatchMetrics(std::vector<MetricDef>* defs);
  // watch_*: the Watch streams and their fan-outs.
  void AddWatchMetrics(std::vector<MetricDef>* defs);
  // The Watch histories' and streams' memory (part of AddWatchMetrics).
  void AddWatchMemoryMetrics(std::vector<MetricDef>* defs);
  // heap_in_use_*: the process's heap, to tell data from what the
  // allocator keeps (RSS). Only with heap_.
  void AddProcessMetrics(std::vector<MetricDef>* defs);
  // A sample function running `read(hub, &samples)` on the attached
  // WatchHub (under mu_, shared); no samples when none is attached.
  template <typename Read>
  metrics::SampleFn HubSample(Read read);
  // Runs `fn` on every entry with the registry attached (under mu_, shared).
  template <typename Fn>
  std::vector<metrics::Sample> ForEachEntry(Fn fn) const;

  metrics::HistogramFamily* api_seconds_ = nullptr;
  HeapReleaser* heap_ = nullptr;
  mutable absl::Mutex mu_;
  InformerRegistry* informers_ ABSL_GUARDED_BY(mu_) = nullptr;
  WatchHub* watch_hub_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<bool> ready_when_stale_{false};
};

}  // namespace server

#endif  // SERVER_APP_SIDECAR_METRICS_H_

#include "server/app/sidecar_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/informer/v1/informer.pb.h"

namespace server {

namespace {

std::string M(absl::string_view name) {
  return absl::StrCat(kMetricPrefix, name);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SidecarMetrics>> SidecarMetrics::Create(
    metrics::Registry* registry, HeapReleaser* heap) {
  std::unique_ptr<SidecarMetrics> m(new SidecarMetrics());
  m->heap_ = heap;
  if (absl::Status st = m->Register(registry); !st.ok()) return st;
  return m;
}

std::function<void(const informer::client::RequestObservation&)>
SidecarMetrics::ApiObserver() {
  metrics::HistogramFamily* h = api_seconds_;
  return [h](const informer::client::RequestObservation& o) {
    h->With({o.verb, absl::StrCat(o.code)})
        .Observe(absl::ToDoubleSeconds(o.latency));
  };
}

void SidecarMetrics::Attach(InformerRegistry* informers, WatchHub* watch_hub) {
  absl::MutexLock lock(&mu_);
  informers_ = informers;
  watch_hub_ = watch_hub;
}

std::vector<std::string> SidecarMetrics::NotReady() const {
  absl::ReaderMutexLock lock(&mu_);
  if (informers_ == nullptr) return {"informers not started"};
  std::vector<std::string> out;
  for (const auto& e : informers_->entries()) {
    if (e->lazy || e->informer == nullptr) continue;
    if (e->informer->HasSynced()) continue;
    if (!ObserveStale(*e).stale) {
      out.push_back(e->config.resource);
    } else if (!ready_when_stale_.load()) {
      out.push_back(absl::StrCat(e->config.resource, " (stale)"));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <typename Fn>
std::vector<metrics::Sample> SidecarMetrics::ForEachEntry(Fn fn) const {
  std::vector<metrics::Sample> out;
  absl::ReaderMutexLock lock(&mu_);
  if (informers_ == nullptr) return out;
  for (const auto& e : informers_->entries()) {
    if (e->informer == nullptr) continue;
    fn(*e, &out);
  }
  return out;
}

absl::Status SidecarMetrics::Register(metrics::Registry* r) {
  absl::StatusOr<metrics::HistogramFamily*> api = r->AddHistogram(
      M("api_request_duration_seconds"),
      "Kubernetes API requests by verb (HTTP method; WATCH: time to the "
      "response headers) and HTTP code (0: no answer).",
      {"verb", "code"}, metrics::LatencyBuckets());
  if (!api.ok()) return api.status();
  api_seconds_ = *api;
  // The registry renders families in registration order: keep it stable.
  std::vector<MetricDef> defs;
  AddInformerMetrics(&defs);
  AddListWatchMetrics(&defs);
  AddWatchMetrics(&defs);
  AddProcessMetrics(&defs);
  for (MetricDef& d : defs) {
    absl::Status st =
        d.counter ? r->AddCallbackCounter(M(d.name), d.help, d.labels, d.fn)
                  : r->AddCallbackGauge(M(d.name), d.help, d.labels, d.fn);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

void SidecarMetrics::AddInformerMetrics(std::vector<MetricDef>* defs) {
  using metrics::Sample;
  defs->push_back({"informer_synced",
                   "1 once the informer's first list was delivered.",
                   false,
                   {"resource"},
                   [this] {
                     return ForEachEntry(
                         [](const InformerEntry& e, std::vector<Sample>* o) {
                           o->push_back({{e.config.resource},
                                         e.informer->HasSynced() ? 1.0 : 0.0});
                         });
                   }});
  defs->push_back({"informer_stale",
                   "1 while the informer serves its snapshot unconfirmed by "
                   "the API server (--serve_stale_on_start).",
                   false,
                   {"resource"},
                   [this] {
                     return ForEachEntry([](const InformerEntry& e,
                                            std::vector<Sample>* o) {
                       const bool stale = ObserveStale(e).stale;
                       o->push_back({{e.config.resource}, stale ? 1.0 : 0.0});
                     });
                   }});
  defs->push_back(
      {"informer_objects",
       "Objects in the informer's cache.",
       false,
       {"resource"},
       [this] {
         return ForEachEntry([](const InformerEntry& e,
                                std::vector<Sample>* o) {
           o->push_back({{e.config.resource},
                         static_cast<double>(e.informer->GetIndexer().Size())});
         });
       }});
  defs->push_back(
      {"informer_events_total",
       "Watch events the informer's reflector received, by type.",
       true,
       {"resource", "type"},
       [this] {
         return ForEachEntry(
             [](const InformerEntry& e, std::vector<Sample>* o) {
               const informer::Reflector::Counters c =
                   e.informer->GetReflectorCounters();
               const std::string& r = e.config.resource;
               o->push_back({{r, "ADDED"}, double(c.events_added)});
               o->push_back({{r, "MODIFIED"}, double(c.events_modified)});
               o->push_back({{r, "DELETED"}, double(c.events_deleted)});
               o->push_back({{r, "BOOKMARK"}, double(c.bookmarks)});
             });
       }});
}

void SidecarMetrics::AddListWatchMetrics(std::vector<MetricDef>* defs) {
  using metrics::Sample;
  defs->push_back(
      {"informer_lists_total",
       "Full lists (initial and relists).",
       true,
       {"resource"},
       [this] {
         return ForEachEntry(
             [](const InformerEntry& e, std::vector<Sample>* o) {
               o->push_back({{e.config.resource},
                             double(e.informer->GetReflectorCounters().lists)});
             });
       }});
  defs->push_back(
      {"informer_relists_total",
       "Lists after the first one.",
       true,
       {"resource"},
       [this] {
         return ForEachEntry([](const InformerEntry& e,
                                std::vector<Sample>* o) {
           o->push_back({{e.config.resource},
                         double(e.informer->GetReflectorCounters().relists)});
         });
       }});
  defs->push_back(
      {"informer_watch_restarts_total",
       "Watches opened after the first one (timeouts, cut connections, "
       "errors).",
       true,
       {"resource"},
       [this] {
         return ForEachEntry(
             [](const InformerEntry& e, std::vector<Sample>* o) {
               const int64_t w = e.informer->GetReflectorCounters().watches;
               o->push_back(
                   {{e.config.resource}, double(std::max<int64_t>(w - 1, 0))});
             });
       }});
  defs->push_back({"informer_errors_total",
                   "List/watch errors by kind: http_<code> when the API server "
                   "answered, else the status code name.",
                   true,
                   {"resource", "kind"},
                   [this] {
                     return ForEachEntry([](const InformerEntry& e,
                                            std::vector<Sample>* o) {
                       for (const auto& [kind, n] :
                            e.informer->GetReflectorCounters().errors_by_kind) {
                         o->push_back({{e.config.resource, kind}, double(n)});
                       }
                     });
                   }});
  defs->push_back(
      {"informer_bytes_received_total",
       "Response body bytes received from the API server (lists and "
       "watches).",
       true,
       {"resource"},
       [this] {
         return ForEachEntry(
             [](const InformerEntry& e, std::vector<Sample>* o) {
               o->push_back(
                   {{e.config.resource},
                    double(e.informer->GetReflectorCounters().bytes_received)});
             });
       }});
}

template <typename Read>
metrics::SampleFn SidecarMetrics::HubSample(Read read) {
  return [this, read] {
    std::vector<metrics::Sample> out;
    absl::ReaderMutexLock lock(&mu_);
    if (watch_hub_ != nullptr) read(*watch_hub_, &out);
    return out;
  };
}

void SidecarMetrics::AddWatchMetrics(std::vector<MetricDef>* defs) {
  using metrics::Sample;
  defs->push_back(
      {"watch_streams_open",
       "Open Informer.Watch streams.",
       false,
       {"resource"},
       [this] {
         return ForEachEntry(
             [](const InformerEntry& e, std::vector<Sample>* o) {
               o->push_back({{e.config.resource}, double(e.streams.load())});
             });
       }});
  defs->push_back({"watch_events_in_total",
                   "Informer events the Watch fan-outs handled.",
                   true,
                   {},
                   HubSample([](const WatchHub& h, std::vector<Sample>* o) {
                     o->push_back({{}, double(h.events())});
                   })});
  defs->push_back(
      {"watch_events_out_total",
       "Events written to Watch streams, by type.",
       true,
       {"type"},
       HubSample([](const WatchHub& h, std::vector<Sample>* o) {
         const WatchHub::Counters c = h.GetCounters();
         for (size_t i = 1; i < c.events_out.size(); ++i) {
           if (!informer::v1::EventType_IsValid(static_cast<int>(i))) continue;
           std::string name = informer::v1::EventType_Name(
               static_cast<informer::v1::EventType>(i));
           o->push_back({{std::string(absl::StripPrefix(name, "EVENT_TYPE_"))},
                         double(c.events_out[i])});
         }
       })});
  defs->push_back({"watch_coalesced_events_total",
                   "Pending Watch events removed by coalescing per object for "
                   "slow streams.",
                   true,
                   {},
                   HubSample([](const WatchHub& h, std::vector<Sample>* o) {
                     o->push_back({{}, double(h.GetCounters().coalesced)});
                   })});
  defs->push_back(
      {"watch_streams_exhausted_total",
       "Watch streams ended RESOURCE_EXHAUSTED (too far behind; their "
       "pending events dropped).",
       true,
       {},
       HubSample([](const WatchHub& h, std::vector<Sample>* o) {
         o->push_back({{}, double(h.GetCounters().streams_exhausted)});
       })});
  defs->push_back({"watch_queue_depth_max",
                   "The longest pending queue of any open Watch stream now.",
                   false,
                   {},
                   HubSample([](const WatchHub& h, std::vector<Sample>* o) {
                     o->push_back({{}, double(h.MaxPendingNow())});
                   })});
  AddWatchMemoryMetrics(defs);
  defs->push_back({"watch_queue_depth_peak",
                   "The largest pending queue any Watch stream has held.",
                   false,
                   {},
                   HubSample([](const WatchHub& h, std::vector<Sample>* o) {
                     o->push_back({{}, double(h.peak_pending())});
                   })});
}

// What the histories and streams hold, per resource with a fan-out.
void SidecarMetrics::AddWatchMemoryMetrics(std::vector<MetricDef>* defs) {
  using metrics::Sample;
  auto memory = [this](size_t WatchMemoryStats::*field) {
    return HubSample([field](const WatchHub& h, std::vector<Sample>* o) {
      for (const WatchMemoryStats& m : h.MemoryNow()) {
        o->push_back({{m.resource}, double(m.*field)});
      }
    });
  };
  defs->push_back({"watch_history_events",
                   "Events each resource's Watch history keeps for resuming "
                   "streams (bounded by --watch_history).",
                   false,
                   {"resource"},
                   memory(&WatchMemoryStats::history_events)});
  defs->push_back({"watch_history_bytes",
                   "Bytes each resource's Watch history alone keeps alive: "
                   "past object states and events, not the current states "
                   "(bounded by --watch_history_bytes).",
                   false,
                   {"resource"},
                   memory(&WatchMemoryStats::history_bytes)});
  defs->push_back({"watch_pending_bytes",
                   "Bytes of object states the resource's Watch stream "
                   "queues reference (mostly shared with the history and "
                   "the cache).",
                   false,
                   {"resource"},
                   memory(&WatchMemoryStats::pending_bytes)});
  defs->push_back({"watch_inflight_bytes",
                   "Bytes of the resource's Watch writes gRPC holds (one "
                   "per stream at most; a stream whose client does not read "
                   "keeps its write there).",
                   false,
                   {"resource"},
                   memory(&WatchMemoryStats::inflight_bytes)});
}

void SidecarMetrics::AddProcessMetrics(std::vector<MetricDef>* defs) {
  if (heap_ == nullptr) return;
  // mallinfo2 walks the heap's free lists under the arena's lock (up to
  // ~150 ms when fragmented): never on a scrape, at most once per 10 s on
  // scrapes' behalf (see HeapReleaser).
  // The age first, read without asking for a measurement: a scrape's
  // heap_in_use_bytes (which may ask) is then at most that old.
  defs->push_back({"heap_in_use_age_seconds",
                   "Seconds since heap_in_use_bytes was measured, read just "
                   "before it: its value is at most this old.",
                   false,
                   {},
                   [h = heap_] {
                     return std::vector<metrics::Sample>{
                         {{}, absl::ToDoubleSeconds(h->PeekHeapInUse().age)}};
                   }});
  defs->push_back(
      {"heap_in_use_bytes",
       "Heap bytes allocated and not freed (glibc's mallinfo2: uordblks + "
       "hblkhd), as last measured: after each release of free heap, and "
       "right after a scrape that finds the value 10 s old or older (that "
       "scrape still gets the older one). So it can be 10 s plus the time "
       "since the previous scrape old (heap_in_use_age_seconds). RSS far "
       "above it is freed memory the allocator keeps, not data.",
       false,
       {},
       [h = heap_] {
         return std::vector<metrics::Sample>{
             {{}, double(h->LastHeapInUse().bytes)}};
       }});
}

}  // namespace server

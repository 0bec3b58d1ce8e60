#include "server/app/sidecar_metrics.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/app/sidecar_server.h"
#include "server/ops/heap_releaser.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
namespace v1 = informer::v1;

// The value of the sample `series` (name and labels as rendered); -1 if
// absent.
double SampleValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ")) {
      double v = 0;
      if (absl::SimpleAtod(line, &v)) return v;
    }
  }
  return -1;
}

TEST(SidecarMetricsTest, ApiObserverFeedsTheLatencyHistogram) {
  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  auto observe = (*m)->ApiObserver();
  informer::client::RequestObservation o;
  o.verb = "GET";
  o.code = 200;
  o.latency = absl::Milliseconds(3);
  observe(o);
  observe(o);
  o.verb = "WATCH";
  o.code = 0;
  observe(o);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("informer_sidecar_api_request_duration_seconds_"
                              "count{verb=\"GET\",code=\"200\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_api_request_duration_seconds_"
                              "bucket{verb=\"GET\",code=\"200\",le=\"0.005\"} "
                              "2\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_api_request_duration_seconds_"
                              "count{verb=\"WATCH\",code=\"0\"} 1\n"));
  // Nothing attached: no informer series, and not ready.
  EXPECT_THAT(text, Not(HasSubstr("informer_sidecar_informer_synced{")));
  EXPECT_THAT((*m)->NotReady(), ElementsAre("informers not started"));
}

TEST(SidecarMetricsTest, HeapInUseFollowsTheHeapOffTheScrapePath) {
  informer::FakeClock clock;
  HeapReleaser::Options heap_options;
  heap_options.release = [] { return true; };  // the real measurement only
  heap_options.clock = &clock;
  heap_options.measure_interval = absl::Seconds(10);
  HeapReleaser heap(std::move(heap_options));
  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry, &heap);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string series = "informer_sidecar_heap_in_use_bytes";
  const std::string age = "informer_sidecar_heap_in_use_age_seconds";
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE informer_sidecar_heap_in_use_bytes "
                              "gauge\n"));
  EXPECT_EQ(SampleValue(text, age), 0);
  const double before = SampleValue(text, series);
  // 32 MiB more in use while held, whatever the allocator keeps after.
  std::vector<std::unique_ptr<char[]>> held;
  for (int i = 0; i < 32 * 1024; ++i) {
    held.emplace_back(new char[1024]);
    held.back()[0] = 1;
  }
  // A scrape does not measure: the last value, and how old it is.
  clock.Advance(absl::Seconds(4));
  text = registry.Render();
  EXPECT_EQ(SampleValue(text, series), before);
  EXPECT_EQ(SampleValue(text, age), 4);
  // Nor when it is old: it asks the releaser's thread, which measured by
  // the time a release waited for is done.
  clock.Advance(absl::Seconds(6));
  text = registry.Render();
  EXPECT_EQ(SampleValue(text, series), before);
  EXPECT_EQ(SampleValue(text, age), 10);
  ASSERT_TRUE(heap.ReleaseAndWait());
  text = registry.Render();
  const double during = SampleValue(text, series);
  EXPECT_EQ(SampleValue(text, age), 0);
  held.clear();
  ASSERT_TRUE(heap.ReleaseAndWait());
  const double after = SampleValue(registry.Render(), series);
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator replaces glibc's heap: the gauge is exported, what
  // it reads is glibc's (nearly empty) heap.
  EXPECT_GE(before, 0);
  EXPECT_GE(during, 0);
  EXPECT_GE(after, 0);
#else
  EXPECT_GT(before, 0);
  EXPECT_GE(during, before + (32 << 20));
  EXPECT_LE(after, before + (1 << 20));
#endif
}

TEST(SidecarMetricsTest, NoHeapMetricsWithoutAReleaser) {
  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(registry.Render(), Not(HasSubstr("heap_in_use")));
}

TEST(SidecarMetricsTest, InformerAndWatchMetricsFollowTheRegistry) {
  informer::FakeSource* pods = nullptr;
  auto informers = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&pods](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto s = std::make_unique<informer::FakeSource>();
        pods = s.get();
        return s;
      });
  ASSERT_TRUE(informers.ok()) << informers.status();
  ASSERT_TRUE(pods->Add("default", "a").ok());
  ASSERT_TRUE(pods->Add("default", "b").ok());

  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  auto sidecar = SidecarServer::Start(informers->get(), "127.0.0.1:0");
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  (*m)->Attach(informers->get(), &(*sidecar)->informer_service().watch_hub());
  EXPECT_THAT((*m)->NotReady(), ElementsAre("pods"));
  EXPECT_THAT(registry.Render(),
              HasSubstr("informer_sidecar_informer_synced{resource=\"pods\"} "
                        "0\n"));

  ASSERT_TRUE((*informers)->Start().ok());
  ASSERT_TRUE((*sidecar)->WaitUntilServing(absl::Seconds(30)));
  EXPECT_THAT((*m)->NotReady(), IsEmpty());

  auto stub = v1::Informer::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*sidecar)->port()),
                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.set_resource("pods");
  auto reader = stub->Watch(&ctx, req);
  // Initial state, then INITIAL_STATE_DONE.
  int initial = 0;
  bool done = false;
  while (!done) {
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_ADDED) ++initial;
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) done = true;
    }
  }
  EXPECT_EQ(initial, 2);
  // A live event: once the stream has it, the reflector and the fan-out
  // have counted it.
  ASSERT_TRUE(pods->Add("default", "c").ok());
  bool live = false;
  while (!live) {
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_ADDED) live = true;
    }
  }
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("informer_sidecar_informer_synced{resource="
                              "\"pods\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_informer_objects{resource="
                              "\"pods\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_informer_events_total{"
                              "resource=\"pods\",type=\"ADDED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_informer_lists_total{resource="
                              "\"pods\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_informer_relists_total{"
                              "resource=\"pods\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_watch_streams_open{resource="
                              "\"pods\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_watch_events_out_total{type="
                              "\"ADDED\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("informer_sidecar_watch_events_out_total{type="
                              "\"INITIAL_STATE_DONE\"} 1\n"));
  // Every type has its series, the last one (FRESH) included.
  EXPECT_THAT(text, HasSubstr("informer_sidecar_watch_events_out_total{type="
                              "\"FRESH\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("informer_sidecar_watch_coalesced_events_total 0\n"));
  EXPECT_THAT(text,
              HasSubstr("informer_sidecar_watch_streams_exhausted_total 0\n"));
  // No object data in metrics.
  EXPECT_THAT(text, Not(HasSubstr("default/a")));

  ctx.TryCancel();
  reader->Finish();
  (*m)->Detach();
  EXPECT_THAT(registry.Render(),
              Not(HasSubstr("informer_sidecar_informer_synced{")));
  (*sidecar)->Shutdown(absl::ZeroDuration());
  (*sidecar)->Wait();
  sidecar->reset();
  (*informers)->Stop();
}

// An informer serving its snapshot stale (--serve_stale_on_start): the
// stale gauge is 1 and /readyz names it, unless --ready_when_stale; once
// the source answers, the gauge is 0 and it is ready.
TEST(SidecarMetricsTest, StaleInformerGaugeAndReadiness) {
  informer::FakeSource* pods = nullptr;
  InformerRegistry::Options options;
  options.serve_stale_on_start = true;
  auto informers = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&pods](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto s = std::make_unique<informer::FakeSource>();
        pods = s.get();
        return s;
      },
      std::move(options));
  ASSERT_TRUE(informers.ok()) << informers.status();
  ASSERT_TRUE(pods->Add("default", "a").ok());
  InformerRef entry = *(*informers)->Find("pods");
  ASSERT_TRUE(entry->informer
                  ->SetInitialState({pods->Snapshot().begin()->second},
                                    pods->CurrentResourceVersion())
                  .ok());
  entry->stale.MarkLoadedFromSnapshot(absl::Now());
  pods->FailLists(1000000, absl::UnavailableError("connection refused"));

  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  (*m)->Attach(informers->get(), nullptr);
  const std::string gauge =
      "informer_sidecar_informer_stale{resource=\"pods\"}";
  EXPECT_EQ(SampleValue(registry.Render(), gauge), 0);
  ASSERT_TRUE((*informers)->Start().ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (SampleValue(registry.Render(), gauge) != 1) {
    ASSERT_LT(absl::Now(), deadline) << "never stale";
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT((*m)->NotReady(), ElementsAre("pods (stale)"));
  (*m)->SetReadyWhenStale(true);
  EXPECT_THAT((*m)->NotReady(), IsEmpty());
  (*m)->SetReadyWhenStale(false);

  pods->FailLists(0, absl::OkStatus());
  ASSERT_TRUE(entry->informer->WaitForSync(absl::Seconds(30)));
  EXPECT_EQ(SampleValue(registry.Render(), gauge), 0);
  EXPECT_THAT((*m)->NotReady(), IsEmpty());
  (*m)->Detach();
  (*informers)->Stop();
}

// The FRESH a stream told stale gets once its informer caught up is
// counted with the events written, as every other type is.
TEST(SidecarMetricsTest, TheFreshEventIsCounted) {
  informer::FakeSource* pods = nullptr;
  InformerRegistry::Options options;
  options.serve_stale_on_start = true;
  auto informers = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&pods](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto s = std::make_unique<informer::FakeSource>();
        pods = s.get();
        return s;
      },
      std::move(options));
  ASSERT_TRUE(informers.ok()) << informers.status();
  ASSERT_TRUE(pods->Add("default", "a").ok());
  InformerRef entry = *(*informers)->Find("pods");
  ASSERT_TRUE(entry->informer
                  ->SetInitialState({pods->Snapshot().begin()->second},
                                    pods->CurrentResourceVersion())
                  .ok());
  entry->stale.MarkLoadedFromSnapshot(absl::Now());
  pods->FailLists(1000000, absl::UnavailableError("connection refused"));
  pods->FailWatches(1000000, absl::UnavailableError("connection refused"));

  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  auto sidecar = SidecarServer::Start(informers->get(), "127.0.0.1:0");
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  (*m)->Attach(informers->get(), &(*sidecar)->informer_service().watch_hub());
  ASSERT_TRUE((*informers)->Start().ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!ObserveStale(*entry).stale) {
    ASSERT_LT(absl::Now(), deadline) << "never stale";
    absl::SleepFor(absl::Milliseconds(10));
  }
  auto stub = v1::Informer::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*sidecar)->port()),
                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchRequest req;
  req.set_resource("pods");
  auto reader = stub->Watch(&ctx, req);
  bool stale_done = false;
  while (!stale_done) {
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) {
        EXPECT_TRUE(e.stale());
        stale_done = true;
      }
    }
  }
  const std::string fresh =
      "informer_sidecar_watch_events_out_total{type=\"FRESH\"}";
  EXPECT_EQ(SampleValue(registry.Render(), fresh), 0);

  pods->FailLists(0, absl::OkStatus());
  pods->FailWatches(0, absl::OkStatus());
  bool got_fresh = false;
  while (!got_fresh) {
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_FRESH) got_fresh = true;
    }
  }
  // Counted when its write started, before the client could read it.
  EXPECT_EQ(SampleValue(registry.Render(), fresh), 1);
  ctx.TryCancel();
  reader->Finish();
  (*m)->Detach();
  (*sidecar)->Shutdown(absl::ZeroDuration());
  (*sidecar)->Wait();
  sidecar->reset();
  (*informers)->Stop();
}

// A stream that cannot write (paused) coalesces its queue, and one that
// falls too far behind ends RESOURCE_EXHAUSTED: both are counted.
TEST(SidecarMetricsTest, CoalescedAndExhaustedStreamsAreCounted) {
  informer::FakeSource* pods = nullptr;
  auto informers = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&pods](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto s = std::make_unique<informer::FakeSource>();
        pods = s.get();
        return s;
      });
  ASSERT_TRUE(informers.ok()) << informers.status();
  ASSERT_TRUE(pods->Add("default", "a").ok());
  ASSERT_TRUE(pods->Add("default", "b").ok());
  metrics::Registry registry;
  auto m = SidecarMetrics::Create(&registry);
  ASSERT_TRUE(m.ok()) << m.status();
  InformerService::Options options;
  options.watch.max_queue = 4;
  options.watch.max_pending_keys = 1;
  auto sidecar = SidecarServer::Start(informers->get(), "127.0.0.1:0", options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  WatchHub& hub = (*sidecar)->informer_service().watch_hub();
  (*m)->Attach(informers->get(), &hub);
  ASSERT_TRUE((*informers)->Start().ok());
  ASSERT_TRUE((*sidecar)->WaitUntilServing(absl::Seconds(30)));

  auto stub = v1::Informer::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*sidecar)->port()),
                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.set_resource("pods");
  auto reader = stub->Watch(&ctx, req);
  bool done = false;
  while (!done) {
    v1::WatchResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    for (const v1::Event& e : resp.events()) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) done = true;
    }
  }
  hub.SetWritesPaused(true);
  const uint64_t seen = hub.events();
  // Six updates of one object: the queue reaches max_queue and collapses
  // to one pending event per key.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(pods->Modify("default", "a", {{"n", absl::StrCat(i)}}).ok());
  }
  hub.WaitForEvents(seen + 6);
  std::string text = registry.Render();
  EXPECT_GT(SampleValue(text, "informer_sidecar_watch_coalesced_events_total"),
            0);
  // What is still queued for the paused stream.
  EXPECT_GE(SampleValue(text, "informer_sidecar_watch_queue_depth_max"), 1);
  EXPECT_GE(SampleValue(text, "informer_sidecar_watch_queue_depth_peak"), 4);
  EXPECT_THAT(text,
              HasSubstr("informer_sidecar_watch_streams_exhausted_total 0\n"));
  // A second object pending: two keys, over max_pending_keys.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(pods->Modify("default", "b", {{"n", absl::StrCat(i)}}).ok());
  }
  v1::WatchResponse rest;
  while (reader->Read(&rest)) {
  }
  EXPECT_EQ(reader->Finish().error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  text = registry.Render();
  EXPECT_THAT(text,
              HasSubstr("informer_sidecar_watch_streams_exhausted_total 1\n"));
  hub.SetWritesPaused(false);
  (*m)->Detach();
  (*sidecar)->Shutdown(absl::ZeroDuration());
  (*sidecar)->Wait();
  sidecar->reset();
  (*informers)->Stop();
}

}  // namespace
}  // namespace server

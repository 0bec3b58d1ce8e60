// The facade over a real upstream: the API server emulator over HTTP, the
// project's API client and informers in between, as in the sidecar. What
// needs the API server's own behaviour lives here: bookmarks that move the
// resourceVersion without any change of the cached resource, slow watch
// clients under churn of large objects, and lazily started resources.

#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/client/kube_client.h"
#include "server/kubeapi/api_status.h"
#include "server/kubeapi/kube_api_flags.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/kubeapi/kube_api_test_client.h"
#include "server/kubeapi/test_util.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"
#include "server/registry/resource_resolver.h"

namespace server {
namespace kubeapi {
namespace {

std::string ConfigMapJson(const std::string& ns, const std::string& name,
                          size_t data_bytes = 1) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
      R"(","namespace":")", ns, R"("},"data":{"k":")",
      std::string(data_bytes, 'x'), R"("}})");
}

std::string PodJson(const std::string& ns, const std::string& name) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
      R"(","namespace":")", ns,
      R"("},"spec":{"containers":[{"name":"c","image":"busybox"}]}})");
}

// The resourceVersion of a watch event line or list ("...":"N"), first
// occurrence after `from`.
int64_t RvIn(const std::string& text, size_t from = 0) {
  const std::string key = R"("resourceVersion":")";
  size_t at = text.find(key, from);
  if (at == std::string::npos) return -1;
  at += key.size();
  int64_t rv = -1;
  (void)absl::SimpleAtoi(text.substr(at, text.find('"', at) - at), &rv);
  return rv;
}

class KubeApiEmulatorTest : public ::testing::Test {
 protected:
  // Starts the emulator (bookmarks and etcd's progress notifications every
  // 100 ms, where the API server bookmarks every minute and etcd notifies
  // every 10), informers for `resources` and the facade.
  void StartAll(KubeApiServer::Options o,
                std::vector<std::string> resources = {"configmaps"},
                bool lazy = false) {
    emulator::EmulatorOptions eo;
    eo.v1_24 = true;
    eo.bookmark_interval = absl::Milliseconds(100);
    eo.progress_notify_interval = absl::Milliseconds(100);
    emulator_ = std::make_unique<emulator::EmulatorWithFaults>(eo);
    ASSERT_TRUE(emulator_->Start().ok());
    informer::client::RestConfig rest;
    rest.server = emulator_->url();
    auto kube = informer::client::KubeClient::Create(rest);
    ASSERT_TRUE(kube.ok()) << kube.status();
    kube_ = *std::move(kube);
    resolver_ = std::make_unique<DiscoveryResolver>(kube_->discovery());
    InformerRegistry::Options ro;
    ro.resolver = resolver_.get();
    ro.allow_unlisted = lazy;
    ro.lazy_idle_timeout = lazy_idle_timeout_;
    ro.lazy_sync_wait = absl::Milliseconds(200);
    std::vector<ResourceConfig> configs;
    for (const std::string& r : resources) configs.push_back({.resource = r});
    informer::client::KubeClient* client = kube_.get();
    auto registry = InformerRegistry::Create(
        configs,
        [client](const ResourceConfig& c)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          auto rc = client->ForResource(c.resource, c.namespace_);
          if (!rc.ok()) return rc.status();
          return std::unique_ptr<informer::ListerWatcher>(*std::move(rc));
        },
        ro);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    ASSERT_TRUE(registry_->Start().ok());
    auto served = ResourcesOf(*registry_, kube_->discovery());
    ASSERT_TRUE(served.ok()) << served.status();
    o.listen = "127.0.0.1:0";
    o.registry = registry_.get();
    o.resources = *served;
    o.metrics = &metrics_;
    o.discovery = kube_->discovery();
    o.lazy = lazy;
    auto server = KubeApiServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_TRUE(server_->WaitForSync(absl::Seconds(30)));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (registry_) registry_->Stop();
    if (emulator_) emulator_->Stop();
  }

  int64_t Create(const std::string& resource, const std::string& ns,
                 const std::string& json) {
    auto obj =
        emulator_->store().Create(emulator_->Resource(resource), ns, json);
    EXPECT_TRUE(obj.ok()) << obj.status();
    return obj.ok() ? (*obj)->rv : -1;
  }

  SimpleResponse Get(const std::string& target) {
    absl::StatusOr<SimpleResponse> r = HttpGet(server_->port(), target);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SimpleResponse{};
  }

  absl::Duration lazy_idle_timeout_ = absl::Minutes(5);
  std::unique_ptr<emulator::EmulatorWithFaults> emulator_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  std::unique_ptr<DiscoveryResolver> resolver_;
  std::unique_ptr<InformerRegistry> registry_;
  metrics::Registry metrics_;
  std::unique_ptr<KubeApiServer> server_;
};

// Reads watch events until one containing `needle` (or the stream's end).
std::vector<std::string> ReadUntil(
    RawHttpClient* c, const std::string& needle,
    const std::function<bool(const std::string&)>& done = nullptr) {
  std::vector<std::string> out;
  while (true) {
    absl::StatusOr<std::string> chunk = c->ReadChunk();
    if (!chunk.ok()) {
      ADD_FAILURE() << chunk.status();
      return out;
    }
    out.push_back(*chunk);
    if (chunk->empty()) return out;
    if (chunk->find(needle) != std::string::npos && (!done || done(*chunk))) {
      return out;
    }
  }
}

TEST_F(KubeApiEmulatorTest, UpstreamBookmarksMoveTheFacadesResourceVersion) {
  KubeApiServer::Options o;
  // Long enough that a 504 means the bookmark was not taken into account.
  o.not_older_than_wait = absl::Seconds(20);
  o.bookmark_interval = absl::Milliseconds(100);
  StartAll(o);
  // The informer's watch is open before anything changes. One opened later
  // from the empty store's resourceVersion 0 would start at the current
  // state, and with nothing changing after it, get no bookmark to move it
  // from cm1's version to the pods' (as the API server's watch cache).
  ASSERT_TRUE(emulator_->store().AwaitWatchers(
      &emulator_->Resource("configmaps"), 1, absl::Seconds(60)));
  const int64_t cm_rv = Create("configmaps", "a", ConfigMapJson("a", "cm1"));
  // Pods change; the configmaps informer hears only bookmarks of them.
  Create("pods", "a", PodJson("a", "p0"));
  auto watch = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(watch
                  ->Send("GET", absl::StrCat("/api/v1/configmaps?watch=1&"
                                             "allowWatchBookmarks=true&"
                                             "resourceVersion=",
                                             cm_rv))
                  .ok());
  ASSERT_EQ(watch->ReadHead()->code, 200);
  const int64_t target = Create("pods", "a", PodJson("a", "p1"));
  // The upstream's ConfigMap watch cache is at cm1's version until etcd's
  // progress notification (every 100 ms here) moves it to the pods': its
  // bookmarks carry that from then on.
  SimpleResponse r = Get(absl::StrCat(
      "/api/v1/configmaps?resourceVersionMatch=NotOlderThan&resourceVersion=",
      target));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_GE(RvIn(r.body), target);
  EXPECT_NE(r.body.find(R"("name":"cm1")"), std::string::npos);
  // The state at the bookmarked version is exact too (no change since).
  SimpleResponse exact = Get(absl::StrCat(
      "/api/v1/configmaps?resourceVersionMatch=Exact&resourceVersion=",
      target));
  ASSERT_EQ(exact.code, 200) << exact.body;
  EXPECT_EQ(RvIn(exact.body), target);
  // The facade's own watchers get bookmarks at that version.
  std::vector<std::string> events = ReadUntil(
      &*watch, "BOOKMARK",
      [target](const std::string& line) { return RvIn(line) >= target; });
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(
      events.back(),
      absl::StrCat(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")",
          RvIn(events.back()), R"(","creationTimestamp":null}}})", "\n"));
  for (const std::string& e : events) {
    EXPECT_EQ(e.find(R"("type":"ADDED")"), std::string::npos) << e;
  }
  // A watch from the bookmarked version resumes with the next change.
  auto from = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(from->Send("GET", absl::StrCat("/api/v1/configmaps?watch=1&"
                                             "resourceVersion=",
                                             target))
                  .ok());
  ASSERT_EQ(from->ReadHead()->code, 200);
  const int64_t next = Create("configmaps", "a", ConfigMapJson("a", "cm2"));
  events = ReadUntil(&*from, "cm2");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rfind(R"({"type":"ADDED")", 0), 0u);
  EXPECT_EQ(RvIn(events[0]), next);
}

// A client that stops reading its watch while large objects churn: the
// facade pauses it, then terminates it; what it queued stays bounded; the
// client's re-watch from the last version it read resumes while that is in
// the history and is the API server's 410 once it is not.
class SlowWatcherTest : public KubeApiEmulatorTest,
                        public ::testing::WithParamInterface<bool> {};

TEST_P(SlowWatcherTest, AStalledWatchIsTerminatedAndItsQueueStaysBounded) {
  const bool short_history = GetParam();
  KubeApiServer::Options o;
  o.watch_buffer_limit = 256 << 10;
  o.slow_watcher_grace = absl::Milliseconds(300);
  o.history_limit = short_history ? 20 : 10000;
  StartAll(o);
  const int64_t rv0 = emulator_->store().CurrentRv();
  // A small receive window, so the kernel absorbs little of the stream.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request =
      absl::StrCat("GET /api/v1/configmaps?watch=1&resourceVersion=", rv0,
                   " HTTP/1.1\r\nHost: facade\r\nUser-Agent: stalled\r\n\r\n");
  ASSERT_EQ(send(fd, request.data(), request.size(), 0),
            static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(server_->WaitForOpenWatches(1, absl::Seconds(60)));
  // Churn: 160 objects of 64 KiB (10 MiB), far more than the socket
  // buffers and the facade's queue hold.
  constexpr size_t kObject = 64 << 10;
  int64_t last = 0;
  for (int i = 0; i < 160; ++i) {
    last = Create("configmaps", "a",
                  ConfigMapJson("a", absl::StrCat("big-", i), kObject));
  }
  // The watch is closed (waiting on the facade's own count).
  ASSERT_TRUE(server_->WaitForOpenWatches(0, absl::Seconds(60)));
  EXPECT_EQ(server_->slow_watchers_terminated(), 1);
  EXPECT_LE(server_->peak_watch_queued_bytes(),
            o.watch_buffer_limit + kObject + 4096);
  EXPECT_NE(
      metrics_.Render().find(
          R"(informer_sidecar_kube_api_slow_watches_terminated_total{resource="configmaps"} 1)"),
      std::string::npos);
  // The client reads what reached it: a cut stream (no final chunk).
  std::string received;
  char buf[65536];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    received.append(buf, n);
  }
  close(fd);
  EXPECT_EQ(received.find("\r\n0\r\n\r\n"), std::string::npos);
  int64_t seen = rv0;
  for (size_t at = received.find(R"({"type":"ADDED")"); at != std::string::npos;
       at = received.find(R"({"type":"ADDED")", at + 1)) {
    // Only whole events count (the last may be cut).
    size_t end = received.find("}\n", at);
    if (end == std::string::npos) break;
    seen = std::max(seen, RvIn(received, at));
  }
  ASSERT_LT(seen, last);
  // Wait until the facade has every change (on its own semantics).
  ASSERT_EQ(
      Get(absl::StrCat("/api/v1/configmaps?limit=1&resourceVersion=", last))
          .code,
      200);
  auto again = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(again
                  ->Send("GET", absl::StrCat("/api/v1/configmaps?watch=1&"
                                             "resourceVersion=",
                                             seen))
                  .ok());
  ASSERT_EQ(again->ReadHead()->code, 200);
  auto first = again->ReadChunk();
  ASSERT_TRUE(first.ok());
  if (short_history) {
    // The API server's ERROR event, byte for byte as captured, with this
    // watch's numbers.
    const int64_t floor = last - 20;
    std::string want = ReadCapture("watch-too-old-rv-410.jsonl");
    want = absl::StrReplaceAll(
        want,
        {{"too old resource version: 5 (145247)",
          absl::StrCat("too old resource version: ", seen, " (", floor, ")")}});
    EXPECT_EQ(*first, want);
    EXPECT_EQ(*again->ReadChunk(), "");
  } else {
    EXPECT_EQ(first->rfind(R"({"type":"ADDED")", 0), 0u);
    EXPECT_GT(RvIn(*first), seen);
  }
}

INSTANTIATE_TEST_SUITE_P(History, SlowWatcherTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "BeyondTheHistory"
                                          : "WithinTheHistory";
                         });

// Lazy mode (no resource configured): discovery lists what the upstream
// serves; a first request starts the informer and is answered once it has
// synced; an open watch keeps it running; idle, it is retired and the next
// request starts it again.
TEST_F(KubeApiEmulatorTest, LazyResourcesAreServedOnFirstRequest) {
  lazy_idle_timeout_ = absl::Milliseconds(400);
  StartAll({}, {}, /*lazy=*/true);
  Create("configmaps", "a", ConfigMapJson("a", "cm1"));
  SimpleResponse list = Get("/api/v1/namespaces/a/configmaps");
  ASSERT_EQ(list.code, 200) << list.body;
  EXPECT_NE(list.body.find(R"("name":"cm1")"), std::string::npos);
  EXPECT_EQ(list.body.rfind(R"({"kind":"ConfigMapList","apiVersion":"v1",)", 0),
            0u);
  EXPECT_EQ(registry_->lazy_starts(), 1);
  SimpleResponse v1 = Get("/api/v1");
  EXPECT_NE(
      v1.body.find(
          R"({"name":"configmaps","singularName":"","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"],"shortNames":["cm"]})"),
      std::string::npos)
      << v1.body;
  EXPECT_NE(v1.body.find(R"("name":"pods")"), std::string::npos);
  EXPECT_EQ(v1.body.find("bindings"), std::string::npos);  // not readable
  EXPECT_NE(Get("/apis").body.find(R"("name":"apps")"), std::string::npos);
  EXPECT_EQ(Get("/api/v1/nonsense").code, 404);
  EXPECT_EQ(Get("/api/v1/namespaces/a/configmaps/cm1").code, 200);
  // An open watch keeps the informer alive past several idle timeouts.
  auto watch = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(watch
                  ->Send("GET", absl::StrCat("/api/v1/namespaces/a/"
                                             "configmaps?watch=1&"
                                             "resourceVersion=",
                                             RvIn(list.body)))
                  .ok());
  ASSERT_EQ(watch->ReadHead()->code, 200);
  registry_->WaitForIdleCheck(absl::Now() + absl::Milliseconds(1200));
  EXPECT_EQ(registry_->lazy_stops(), 0);
  Create("configmaps", "a", ConfigMapJson("a", "cm2"));
  std::vector<std::string> events = ReadUntil(&*watch, "cm2");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rfind(R"({"type":"ADDED")", 0), 0u);
  // Closed, the watch no longer holds it: it is retired when idle, and
  // the facade forgets its cache.
  { RawHttpClient gone = *std::move(watch); }
  ASSERT_TRUE(server_->WaitForOpenWatches(0, absl::Seconds(60)));
  ASSERT_TRUE(registry_->WaitForLazyStops(1, absl::Seconds(60)));
  // The next request starts it again, with the current state.
  list = Get("/api/v1/namespaces/a/configmaps");
  ASSERT_EQ(list.code, 200) << list.body;
  EXPECT_NE(list.body.find(R"("name":"cm2")"), std::string::npos);
  EXPECT_EQ(registry_->lazy_starts(), 2);
}

TEST_F(KubeApiEmulatorTest, ALazyResourceThatCannotSyncIsTheApiServersTimeout) {
  StartAll({}, {}, /*lazy=*/true);
  emulator_->faults().FailRequests("list", "services", 500, -1);
  SimpleResponse r = Get("/api/v1/services?timeoutSeconds=1");
  EXPECT_EQ(r.code, 504);
  EXPECT_EQ(
      r.body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504})");
  EXPECT_EQ(r.body, RequestTimeoutStatus().Render());
  // Once the upstream answers, the same request is served.
  emulator_->faults().Clear();
  SimpleResponse ok = Get("/api/v1/services?timeoutSeconds=30");
  EXPECT_EQ(ok.code, 200) << ok.body;
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

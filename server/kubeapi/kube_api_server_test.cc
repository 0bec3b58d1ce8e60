#include "server/kubeapi/kube_api_server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/testing/fake_source.h"
#include "server/kubeapi/api_status.h"
#include "server/kubeapi/kube_api_test_client.h"
#include "server/kubeapi/list_options.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"
#include "server/security/authz.h"

namespace server {
namespace kubeapi {
namespace {

using informer::FakeSource;

informer::client::ApiResource PodsResource() {
  informer::client::ApiResource r;
  r.version = "v1";
  r.resource = "pods";
  r.singular = "pod";
  r.kind = "Pod";
  r.namespaced = true;
  r.short_names = {"po"};
  return r;
}

// The list item form of a cached object: its JSON without kind/apiVersion.
std::string Item(const informer::ObjectPtr& obj) {
  return absl::StrCat("{", BodyAfterTypeMeta(obj->json().str()));
}
// The get/watch form: kind and apiVersion first.
std::string Whole(const informer::ObjectPtr& obj) {
  return absl::StrCat(R"({"kind":"Pod","apiVersion":"v1",)",
                      BodyAfterTypeMeta(obj->json().str()));
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class KubeApiServerTest : public ::testing::Test {
 protected:
  void StartAll(KubeApiServer::Options options = {},
                std::vector<ResourceConfig> configs = {{.resource = "pods"}}) {
    auto registry = InformerRegistry::Create(
        std::move(configs),
        [this](const ResourceConfig&)
            -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
          auto s = std::make_unique<FakeSource>(1000);
          source_ = s.get();
          for (auto& [ns, name, node] : seed_) {
            (void)s->Add(ns, name, {{"app", name.substr(0, 1)}}, node);
          }
          if (fail_lists_ > 0) {
            s->FailLists(fail_lists_, absl::UnavailableError("upstream down"));
          }
          return s;
        });
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    options.listen = "127.0.0.1:0";
    options.registry = registry_.get();
    options.resources = {PodsResource()};
    if (options.metrics == nullptr) options.metrics = &metrics_;
    auto server = KubeApiServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_TRUE(registry_->Start().ok());
    if (fail_lists_ == 0) ASSERT_TRUE(server_->WaitForSync(absl::Seconds(30)));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (registry_) registry_->Stop();
  }

  SimpleResponse Get(const std::string& target,
                     const std::map<std::string, std::string>& headers = {},
                     const std::string& method = "GET") {
    absl::StatusOr<SimpleResponse> r =
        HttpGet(server_->port(), target, headers, method);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SimpleResponse{};
  }

  // Waits (on the facade's own NotOlderThan semantics) until the cache has
  // reached the source's current resourceVersion.
  void WaitForCache() {
    SimpleResponse r = Get(
        absl::StrCat("/api/v1/pods?limit=1&resourceVersionMatch=NotOlderThan"
                     "&resourceVersion=",
                     source_->CurrentResourceVersion()));
    ASSERT_EQ(r.code, 200) << r.body;
  }

  std::vector<std::tuple<std::string, std::string, std::string>> seed_ = {
      {"a", "a1", "n1"}, {"a", "a2", "n2"}, {"a", "b3", "n1"}, {"b", "a4", ""}};
  int fail_lists_ = 0;
  metrics::Registry metrics_;
  FakeSource* source_ = nullptr;
  std::unique_ptr<InformerRegistry> registry_;
  std::unique_ptr<KubeApiServer> server_;
};

TEST(KubeApiServerListenTest, OnlyLoopbackLiteralsAndLocalhostAreLoopback) {
  for (const char* listen :
       {"127.0.0.1:8001", "127.1.2.3:0", "localhost:8001", "[::1]:8001"}) {
    EXPECT_TRUE(KubeApiServer::IsLoopbackListen(listen)) << listen;
  }
  // A name is never loopback by its spelling: it may resolve anywhere.
  for (const char* listen :
       {"127.evil.example:8001", "127.0.0.1.example.com:8001", "0.0.0.0:8001",
        ":8001", "10.0.0.1:8001", "127.0.0.1"}) {
    EXPECT_FALSE(KubeApiServer::IsLoopbackListen(listen)) << listen;
  }
}

TEST_F(KubeApiServerTest, DiscoveryListsOnlyWhatIsServed) {
  StartAll();
  SimpleResponse v1 = Get("/api/v1");
  EXPECT_EQ(v1.code, 200);
  EXPECT_EQ(
      v1.body,
      R"({"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list","watch"],"shortNames":["po"]}]})");
  EXPECT_EQ(v1.headers["content-type"], "application/json");
  EXPECT_EQ(Get("/apis").body,
            R"({"kind":"APIGroupList","apiVersion":"v1","groups":[]})");
  SimpleResponse api = Get("/api");
  EXPECT_NE(api.body.find(absl::StrCat("127.0.0.1:", server_->port())),
            std::string::npos);
  SimpleResponse apps = Get("/apis/apps/v1");
  EXPECT_EQ(apps.code, 404);
  EXPECT_EQ(apps.body, UnknownPathStatus().Render());
  EXPECT_EQ(Get("/api/v1/configmaps").code, 404);
  EXPECT_EQ(Get("/healthz").body, "ok");
  EXPECT_EQ(Get("/readyz").code, 200);
  EXPECT_NE(Get("/version").body.find(R"("minor":"24")"), std::string::npos);
}

TEST_F(KubeApiServerTest, ListEnvelopeIsTheApiServersWithItemsAsCached) {
  StartAll();
  SimpleResponse r = Get("/api/v1/pods");
  ASSERT_EQ(r.code, 200) << r.body;
  std::map<std::string, informer::ObjectPtr> snap = source_->Snapshot();
  std::string items;
  for (const auto& [key, obj] : snap) {
    absl::StrAppend(&items, items.empty() ? "" : ",", Item(obj));
  }
  EXPECT_EQ(
      r.body,
      absl::StrCat(
          R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")",
          source_->CurrentResourceVersion(), R"("},"items":[)", items, "]}"));
  SimpleResponse ns = Get("/api/v1/namespaces/b/pods");
  EXPECT_EQ(
      ns.body,
      absl::StrCat(
          R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")",
          source_->CurrentResourceVersion(), R"("},"items":[)",
          Item(snap["b/a4"]), "]}"));
  SimpleResponse none = Get("/api/v1/namespaces/zzz/pods");
  EXPECT_NE(none.body.find(R"("items":[]})"), std::string::npos);
}

TEST_F(KubeApiServerTest, GetAndNotFound) {
  StartAll();
  SimpleResponse r = Get("/api/v1/namespaces/a/pods/a1");
  ASSERT_EQ(r.code, 200);
  EXPECT_EQ(r.body, Whole(source_->Snapshot()["a/a1"]));
  SimpleResponse missing = Get("/api/v1/namespaces/a/pods/nope");
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(missing.body, NotFoundStatus("pods", "", "nope").Render());
  EXPECT_EQ(
      missing.body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404})");
}

// The server's end of the client socket `client_fd` (the facade runs in
// this process), found among our descriptors by its address pair; -1 if
// none.
int ServerEndOf(int client_fd) {
  sockaddr_in client_local{}, client_peer{};
  socklen_t len = sizeof(client_local);
  getsockname(client_fd, reinterpret_cast<sockaddr*>(&client_local), &len);
  len = sizeof(client_peer);
  getpeername(client_fd, reinterpret_cast<sockaddr*>(&client_peer), &len);
  DIR* d = opendir("/proc/self/fd");
  int found = -1;
  while (dirent* e = readdir(d)) {
    int fd = 0;
    if (e->d_name[0] == '.' || !absl::SimpleAtoi(e->d_name, &fd)) continue;
    sockaddr_in local{}, peer{};
    socklen_t l1 = sizeof(local), l2 = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l1) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &l2) != 0 ||
        local.sin_family != AF_INET) {
      continue;
    }
    if (local.sin_port == client_peer.sin_port &&
        peer.sin_port == client_local.sin_port) {
      found = fd;
    }
  }
  closedir(d);
  return found;
}

TEST_F(KubeApiServerTest, ResponsesAreNotHeldForDelayedAcks) {
  // kubectl and client-go page lists and watch on kept-alive connections;
  // with Nagle's algorithm on, every response after the first would wait
  // for the client's delayed ACK.
  StartAll();
  auto c = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(c.ok()) << c.status();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c->Send("GET", "/api/v1/pods?limit=1").ok());
    absl::StatusOr<RawHttpClient::Head> head = c->ReadHead();
    ASSERT_TRUE(head.ok()) << head.status();
    ASSERT_EQ(head->code, 200);
    ASSERT_TRUE(c->ReadBody(*head).ok());
  }
  const int server_fd = ServerEndOf(c->fd());
  ASSERT_GE(server_fd, 0);
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(getsockopt(server_fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
}

TEST_F(KubeApiServerTest, Selectors) {
  StartAll();
  auto names = [this](const std::string& q) {
    SimpleResponse r = Get("/api/v1/pods?" + q);
    EXPECT_EQ(r.code, 200) << r.body;
    std::vector<std::string> out;
    std::vector<absl::string_view> parts =
        absl::StrSplit(r.body, R"("name":")");
    // parts[0] is the envelope before the first item's name.
    for (size_t i = 1; i < parts.size(); ++i) {
      out.emplace_back(parts[i].substr(0, parts[i].find('"')));
    }
    return out;
  };
  EXPECT_EQ(names("labelSelector=app%3Da"),
            (std::vector<std::string>{"a1", "a2", "a4"}));
  EXPECT_EQ(names("labelSelector=app%20notin%20(a)"),
            (std::vector<std::string>{"b3"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dn1"),
            (std::vector<std::string>{"a1", "b3"}));
  EXPECT_EQ(names("fieldSelector=metadata.namespace%3Db"),
            (std::vector<std::string>{"a4"}));
  EXPECT_EQ(names("fieldSelector=metadata.name!%3Da1,spec.nodeName%3Dn1"),
            (std::vector<std::string>{"b3"}));
  SimpleResponse bad = Get("/api/v1/pods?fieldSelector=spec.host%3Dx");
  EXPECT_EQ(bad.code, 400);
  EXPECT_EQ(
      bad.body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"field label not supported: spec.host","reason":"BadRequest","code":400})");
  EXPECT_EQ(Get("/api/v1/pods?labelSelector=a%20in%20((").code, 400);
}

TEST_F(KubeApiServerTest, PagingIsOneConsistentSnapshot) {
  StartAll();
  const std::string rv0 = source_->CurrentResourceVersion();
  std::map<std::string, informer::ObjectPtr> before = source_->Snapshot();
  SimpleResponse p1 = Get("/api/v1/pods?limit=2");
  ASSERT_EQ(p1.code, 200);
  std::string token = EncodeContinue({std::stoll(rv0), "a/a2"});
  EXPECT_EQ(
      p1.body,
      absl::StrCat(
          R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")",
          rv0, R"(","continue":")", token,
          R"(","remainingItemCount":2},"items":[)", Item(before["a/a1"]), ",",
          Item(before["a/a2"]), "]}"));
  // Changes between pages do not show in the rest of the list.
  ASSERT_TRUE(source_->Modify("a", "b3", {{"app", "changed"}}).ok());
  ASSERT_TRUE(source_->Delete("b", "a4").ok());
  ASSERT_TRUE(source_->Add("a", "zz").ok());
  WaitForCache();
  SimpleResponse p2 = Get("/api/v1/pods?limit=2&continue=" + token);
  ASSERT_EQ(p2.code, 200) << p2.body;
  EXPECT_EQ(
      p2.body,
      absl::StrCat(
          R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")",
          rv0, R"("},"items":[)", Item(before["a/b3"]), ",",
          Item(before["b/a4"]), "]}"));
  // A namespaced list's token names the object without its namespace.
  SimpleResponse n1 = Get("/api/v1/namespaces/a/pods?limit=1");
  EXPECT_NE(n1.body.find(EncodeContinue(
                {std::stoll(source_->CurrentResourceVersion()), "a1"})),
            std::string::npos);
}

TEST_F(KubeApiServerTest, ExpiredContinueIs410WithAnInconsistentToken) {
  KubeApiServer::Options o;
  o.history_limit = 2;
  StartAll(o);
  const std::string rv0 = source_->CurrentResourceVersion();
  std::string token = EncodeContinue({std::stoll(rv0), "a/a1"});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(source_->Add("c", absl::StrCat("x", i)).ok());
  }
  WaitForCache();
  SimpleResponse r = Get("/api/v1/pods?limit=2&continue=" + token);
  EXPECT_EQ(r.code, 410);
  std::string inconsistent = EncodeContinue({-1, "a/a1"});
  EXPECT_EQ(r.body, ContinueExpiredStatus(inconsistent).Render());
  // The inconsistent token continues at the current state.
  SimpleResponse next = Get("/api/v1/pods?limit=2&continue=" + inconsistent);
  ASSERT_EQ(next.code, 200) << next.body;
  EXPECT_NE(next.body.find(R"("name":"a2")"), std::string::npos);
  EXPECT_NE(
      next.body.find(absl::StrCat(R"("resourceVersion":")",
                                  source_->CurrentResourceVersion(), "\"")),
      std::string::npos);
}

TEST_F(KubeApiServerTest, ResourceVersionSemantics) {
  KubeApiServer::Options o;
  o.not_older_than_wait = absl::Milliseconds(300);
  StartAll(o);
  const int64_t rv0 = std::stoll(source_->CurrentResourceVersion());
  std::map<std::string, informer::ObjectPtr> before = source_->Snapshot();
  ASSERT_TRUE(source_->Modify("a", "a1", {{"app", "z"}}).ok());
  WaitForCache();
  const std::string now = source_->CurrentResourceVersion();
  // "0": the cache, limit ignored.
  SimpleResponse zero = Get("/api/v1/pods?resourceVersion=0&limit=1");
  EXPECT_EQ(zero.body.find("continue"), std::string::npos);
  EXPECT_NE(zero.body.find(R"("name":"a4")"), std::string::npos);
  // An older N without a limit: the current state (NotOlderThan).
  SimpleResponse newer =
      Get(absl::StrCat("/api/v1/pods?resourceVersion=", rv0));
  EXPECT_NE(newer.body.find(absl::StrCat(R"({"resourceVersion":")", now)),
            std::string::npos);
  // Exact N, and N with a limit: the state at N, from the history.
  for (const std::string q : {"resourceVersionMatch=Exact", "limit=10"}) {
    SimpleResponse exact = Get(absl::StrCat("/api/v1/namespaces/a/pods?", q,
                                            "&resourceVersion=", rv0));
    ASSERT_EQ(exact.code, 200) << exact.body;
    EXPECT_NE(exact.body.find(absl::StrCat(R"({"resourceVersion":")", rv0)),
              std::string::npos);
    EXPECT_NE(exact.body.find(Item(before["a/a1"])), std::string::npos) << q;
  }
  // Older than the history: 410.
  SimpleResponse old =
      Get("/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact");
  EXPECT_EQ(old.code, 410);
  EXPECT_EQ(old.body, ListTooOldStatus().Render());
  // A future N: waits, then 504 as the watch cache answers.
  const int64_t future = std::stoll(now) + 5;
  SimpleResponse tl = Get(absl::StrCat(
      "/api/v1/pods?resourceVersionMatch=NotOlderThan&resourceVersion=",
      future));
  EXPECT_EQ(tl.code, 504);
  EXPECT_EQ(tl.body,
            TooLargeResourceVersionStatus(future, std::stoll(now)).Render());
  // A client that leaves while its list waits costs nothing afterwards.
  {
    auto gone = RawHttpClient::Connect(server_->port());
    ASSERT_TRUE(gone.ok());
    ASSERT_TRUE(
        gone->Send("GET", absl::StrCat("/api/v1/pods?resourceVersion=", future))
            .ok());
  }
  // ... and answers as soon as the cache gets there.
  auto c = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(c.ok());
  const int64_t next = std::stoll(now) + 1;
  ASSERT_TRUE(
      c->Send("GET", absl::StrCat("/api/v1/pods?resourceVersion=", next)).ok());
  ASSERT_TRUE(source_->Add("a", "later").ok());
  auto head = c->ReadHead();
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->code, 200);
  auto body = c->ReadBody(*head);
  EXPECT_NE(body->find(R"("name":"later")"), std::string::npos);
  // Invalid combinations are the API server's 422.
  SimpleResponse invalid = Get("/api/v1/pods?resourceVersionMatch=Exact");
  EXPECT_EQ(invalid.code, 422);
}

TEST_F(KubeApiServerTest, RequestsWaitForTheFirstSync) {
  fail_lists_ = 1;  // the informer's first list fails; it retries
  StartAll();
  SimpleResponse r = Get("/api/v1/namespaces/b/pods");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_NE(r.body.find(R"("name":"a4")"), std::string::npos);
  EXPECT_EQ(Get("/readyz").code, 200);
}

TEST_F(KubeApiServerTest, ACacheThatNeverSyncsIs503) {
  fail_lists_ = 1000000;
  KubeApiServer::Options o;
  o.sync_wait = absl::Milliseconds(200);
  StartAll(o);
  SimpleResponse r = Get("/api/v1/pods?watch=1");
  EXPECT_EQ(r.code, 503);
  EXPECT_EQ(r.body, NotReadyStatus("pods").Render());
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(Get("/readyz").code, 500);
  EXPECT_EQ(Get("/healthz").code, 200);
}

TEST_F(KubeApiServerTest, WritesAre405) {
  StartAll();
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    SimpleResponse r = Get("/api/v1/namespaces/a/pods/a1", {}, method);
    EXPECT_EQ(r.code, 405) << method;
    EXPECT_NE(r.body.find("read-only"), std::string::npos);
    EXPECT_NE(r.body.find(R"("reason":"MethodNotAllowed")"), std::string::npos);
  }
  EXPECT_NE(Get("/api/v1/namespaces/a/pods", {}, "POST")
                .body.find(R"("message":"create is not supported)"),
            std::string::npos);
  // Also where nothing is served: a sidecar reading through this one that
  // records Events gets the read-only answer, not a 404.
  SimpleResponse events = Get("/api/v1/namespaces/a/events", {}, "POST");
  EXPECT_EQ(events.code, 405);
  EXPECT_NE(events.body.find("read-only"), std::string::npos);
  EXPECT_EQ(Get("/apis/apps/v1/namespaces/a/deployments/d", {}, "PATCH").code,
            405);
  // Reads of what is not served stay 404.
  EXPECT_EQ(Get("/api/v1/namespaces/a/events").code, 404);
}

// Reads watch events until one whose line contains `needle`.
std::vector<std::string> ReadEventsUntil(RawHttpClient* c,
                                         const std::string& needle) {
  std::vector<std::string> out;
  while (true) {
    absl::StatusOr<std::string> chunk = c->ReadChunk();
    if (!chunk.ok()) {
      ADD_FAILURE() << chunk.status();
      return out;
    }
    out.push_back(*chunk);
    if (chunk->empty() || chunk->find(needle) != std::string::npos) return out;
  }
}

TEST_F(KubeApiServerTest, WatchFramingAndEventsAreTheApiServers) {
  StartAll();
  const std::string rv0 = source_->CurrentResourceVersion();
  auto c = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Send("GET", absl::StrCat("/api/v1/namespaces/a/pods?watch=1&"
                                          "resourceVersion=",
                                          rv0,
                                          "&allowWatchBookmarks=true&"
                                          "timeoutSeconds=2"))
                  .ok());
  auto head = c->ReadHead();
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(head->headers["content-type"], "application/json");
  EXPECT_EQ(head->headers["cache-control"], "no-cache, private");
  EXPECT_EQ(head->headers["transfer-encoding"], "chunked");
  EXPECT_EQ(head->headers.count("date"), 1u);
  auto added = source_->Add("a", "new", {{"app", "n"}});
  auto modified = source_->Modify("a", "new", {{"app", "m"}});
  ASSERT_TRUE(source_->Add("b", "elsewhere").ok());  // another namespace
  auto deleted = source_->Delete("a", "new");
  std::vector<std::string> events = ReadEventsUntil(&*c, "DELETED");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0],
            absl::StrCat(R"({"type":"ADDED","object":)", Whole(*added), "}\n"));
  EXPECT_EQ(events[1], absl::StrCat(R"({"type":"MODIFIED","object":)",
                                    Whole(*modified), "}\n"));
  EXPECT_EQ(events[2], absl::StrCat(R"({"type":"DELETED","object":)",
                                    Whole(*deleted), "}\n"));
  // timeoutSeconds: a bookmark at the last resourceVersion, then the end.
  events = ReadEventsUntil(&*c, "\x01");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(
      events[0],
      absl::StrCat(
          R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")",
          source_->CurrentResourceVersion(),
          R"(","creationTimestamp":null},"spec":{"containers":null},"status":{}}})",
          "\n"));
  EXPECT_EQ(events[1], "");
}

TEST_F(KubeApiServerTest, WatchFromNothingSendsTheStateFirst) {
  StartAll();
  auto c = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(
      c->Send("GET", "/api/v1/pods?watch=true&labelSelector=app%3Da").ok());
  ASSERT_EQ(c->ReadHead()->code, 200);
  std::map<std::string, informer::ObjectPtr> snap = source_->Snapshot();
  std::vector<std::string> events = ReadEventsUntil(&*c, R"("name":"a4")");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], absl::StrCat(R"({"type":"ADDED","object":)",
                                    Whole(snap["a/a1"]), "}\n"));
  // Leaving the selection is a DELETED of the previous state at the
  // change's resourceVersion.
  ASSERT_TRUE(source_->Modify("a", "a2", {{"app", "gone"}}).ok());
  events = ReadEventsUntil(&*c, "DELETED");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(
      events[0].find(absl::StrCat(R"("resourceVersion":")",
                                  source_->CurrentResourceVersion(), "\"")),
      std::string::npos);
  EXPECT_NE(events[0].find(R"("labels":{"app":"a"})"), std::string::npos);
  // Entering it is an ADDED.
  ASSERT_TRUE(source_->Modify("a", "b3", {{"app", "a"}}).ok());
  events = ReadEventsUntil(&*c, "b3");
  EXPECT_EQ(events[0].rfind(R"({"type":"ADDED")", 0), 0u);
}

TEST_F(KubeApiServerTest, WatchBeyondTheHistoryIsAn410ErrorEvent) {
  KubeApiServer::Options o;
  o.history_limit = 2;
  StartAll(o);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(source_->Add("c", absl::StrCat(i)).ok());
  WaitForCache();
  auto c = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(c->Send("GET", "/api/v1/pods?watch=1&resourceVersion=2").ok());
  ASSERT_EQ(c->ReadHead()->code, 200);
  auto chunk = c->ReadChunk();
  ASSERT_TRUE(chunk.ok());
  int64_t floor = std::stoll(source_->CurrentResourceVersion()) - 2;
  EXPECT_EQ(*chunk, absl::StrCat(R"({"type":"ERROR","object":)",
                                 WatchTooOldStatus(2, floor).Render(), "}\n"));
  EXPECT_EQ(*c->ReadChunk(), "");
}

TEST_F(KubeApiServerTest, ThousandWatchesCostNoThreads) {
  StartAll();
  const int threads_before = ThreadCount();
  const std::string rv = source_->CurrentResourceVersion();
  std::vector<RawHttpClient> clients;
  for (int i = 0; i < 1000; ++i) {
    auto c = RawHttpClient::Connect(server_->port());
    ASSERT_TRUE(c.ok()) << i << ": " << c.status();
    ASSERT_TRUE(c->Send("GET", absl::StrCat(
                                   "/api/v1/pods?watch=1&resourceVersion=", rv))
                    .ok());
    clients.push_back(*std::move(c));
  }
  for (auto& c : clients) ASSERT_EQ(c.ReadHead()->code, 200);
  EXPECT_EQ(server_->open_watches(), 1000);
  EXPECT_LE(ThreadCount(), threads_before);
  ASSERT_TRUE(source_->Add("a", "fanout").ok());
  for (auto& c : clients) {
    auto chunk = c.ReadChunk();
    ASSERT_TRUE(chunk.ok());
    EXPECT_NE(chunk->find(R"("name":"fanout")"), std::string::npos);
  }
  EXPECT_NE(metrics_.Render().find(
                R"(informer_sidecar_kube_api_watches{resource="pods"} 1000)"),
            std::string::npos);
  clients.clear();
  // Closed connections are noticed (the event loop runs the close
  // callbacks); a request after them is answered after them.
  SimpleResponse r = Get("/healthz");
  EXPECT_EQ(r.code, 200);
}

TEST_F(KubeApiServerTest, MetricsCountRequestsByVerbCodeAndResource) {
  StartAll();
  Get("/api/v1/pods");
  Get("/api/v1/namespaces/a/pods/nope");
  Get("/api/v1");
  std::string text = metrics_.Render();
  EXPECT_NE(
      text.find(
          R"(informer_sidecar_kube_api_requests_total{verb="list",code="200",resource="pods"} 1)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(informer_sidecar_kube_api_requests_total{verb="get",code="404",resource="pods"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(informer_sidecar_kube_api_response_bytes_total{resource="pods"})"),
      std::string::npos);
}

TEST_F(KubeApiServerTest, TokensAndNamespaces) {
  auto authz = Authorizer::FromTokensYaml(
      "tokens:\n"
      "- name: app\n"
      "  token: app-token-0123456789\n"
      "  resources: [pods]\n"
      "  namespaces: [a]\n",
      "test", "/", {});
  ASSERT_TRUE(authz.ok()) << authz.status();
  KubeApiServer::Options o;
  o.authorizer = authz->get();
  StartAll(o);
  SimpleResponse none = Get("/api/v1/namespaces/a/pods");
  EXPECT_EQ(none.code, 401);
  EXPECT_EQ(none.body, UnauthorizedStatus().Render());
  EXPECT_EQ(
      Get("/api/v1/namespaces/a/pods", {{"Authorization", "Bearer wrong"}})
          .code,
      401);
  std::map<std::string, std::string> ok = {
      {"Authorization", "Bearer app-token-0123456789"}};
  EXPECT_EQ(Get("/api/v1/namespaces/a/pods", ok).code, 200);
  SimpleResponse other = Get("/api/v1/namespaces/b/pods", ok);
  EXPECT_EQ(other.code, 403);
  EXPECT_EQ(other.body,
            ForbiddenStatus("app", "list", "pods", "", "b", "").Render());
  SimpleResponse all = Get("/api/v1/pods?watch=1", ok);
  EXPECT_EQ(all.code, 403);
  EXPECT_NE(all.body.find("cannot watch resource \\\"pods\\\" in API group "
                          "\\\"\\\" at the cluster scope"),
            std::string::npos);
  // Discovery needs no token, as the API server's system:discovery.
  EXPECT_EQ(Get("/api/v1").code, 200);
}

TEST_F(KubeApiServerTest, ANamespacedInformerServesItsNamespaceOnly) {
  StartAll({}, {{.resource = "pods", .namespace_ = "a"}});
  EXPECT_EQ(Get("/api/v1/namespaces/a/pods").code, 200);
  SimpleResponse b = Get("/api/v1/namespaces/b/pods");
  EXPECT_EQ(b.code, 403);
  EXPECT_NE(b.body.find("caches pods of namespace \\\"a\\\" only"),
            std::string::npos);
  EXPECT_EQ(Get("/api/v1/pods").code, 403);
}

TEST_F(KubeApiServerTest, MetadataOnly) {
  StartAll();
  SimpleResponse r = Get(
      "/api/v1/namespaces/b/pods?limit=5",
      {{"Accept",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}});
  ASSERT_EQ(r.code, 200);
  informer::ObjectPtr a4 = source_->Snapshot()["b/a4"];
  const std::string a4_json = a4->json().str();
  std::string metadata =
      a4_json.substr(a4_json.find(R"("metadata":)"),
                     a4_json.rfind('}') - a4_json.find(R"("metadata":)"));
  EXPECT_EQ(
      r.body,
      absl::StrCat(
          R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":")",
          source_->CurrentResourceVersion(),
          R"("},"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",)",
          metadata, "}]}"));
  EXPECT_EQ(
      Get("/api/v1/pods", {{"Accept", "application/vnd.kubernetes.protobuf"}})
          .code,
      406);
}

// kubectl's Accept: a meta.k8s.io/v1 Table for lists and gets; watches
// fall back to JSON events, as the Accept allows.
TEST_F(KubeApiServerTest, KubectlGetsServerSideTables) {
  StartAll();
  const std::map<std::string, std::string> kubectl = {
      {"Accept",
       "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as="
       "Table;v=v1beta1;g=meta.k8s.io,application/json"}};
  SimpleResponse list = Get("/api/v1/namespaces/a/pods?limit=500", kubectl);
  ASSERT_EQ(list.code, 200) << list.body;
  EXPECT_EQ(list.headers["content-type"], "application/json");
  EXPECT_EQ(
      list.body.rfind(
          absl::StrCat(
              R"({"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":")",
              source_->CurrentResourceVersion(),
              R"("},"columnDefinitions":[{"name":"Name","type":"string","format":"name",)"),
          0),
      0u)
      << list.body;
  for (const char* name : {"a1", "a2", "b3"}) {
    EXPECT_NE(list.body.find(absl::StrCat(R"({"cells":[")", name, R"(",)")),
              std::string::npos)
        << name;
  }
  EXPECT_NE(
      list.body.find(
          R"("object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a1",)"),
      std::string::npos);
  informer::ObjectPtr a1 = source_->Snapshot()["a/a1"];
  SimpleResponse get =
      Get("/api/v1/namespaces/a/pods/a1?includeObject=None", kubectl);
  ASSERT_EQ(get.code, 200);
  EXPECT_NE(get.body.find(absl::StrCat(R"("metadata":{"resourceVersion":")",
                                       a1->resource_version(), "\"}")),
            std::string::npos);
  EXPECT_NE(get.body.find(R"("object":null}]})"), std::string::npos);
  EXPECT_EQ(Get("/api/v1/pods?includeObject=All", kubectl).code, 400);
  // Only the v1beta1 Table offered: not served.
  EXPECT_EQ(
      Get("/api/v1/pods",
          {{"Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"}})
          .code,
      406);
  auto watch = RawHttpClient::Connect(server_->port());
  ASSERT_TRUE(
      watch->Send("GET", "/api/v1/namespaces/b/pods?watch=1", kubectl).ok());
  ASSERT_EQ(watch->ReadHead()->code, 200);
  auto event = watch->ReadChunk();
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(event->rfind(R"({"type":"ADDED","object":{"kind":"Pod",)", 0), 0u);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

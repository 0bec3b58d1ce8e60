#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "emulator/api_status.h"
#include "emulator/emulator_with_faults.h"
#include "emulator/test_util.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "informer/util/clock.h"
#include "rapidjson/document.h"

namespace emulator {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

// A watch request running on its own thread, collecting the stream.
class WatchClient {
 public:
  WatchClient(int port, std::string path, httplib::Headers headers = {})
      : thread_([this, port, path, headers] {
          httplib::Client cli("127.0.0.1", port);
          cli.set_read_timeout(120);
          auto res = cli.Get(path.c_str(), headers,
                             [this](const char* data, size_t len) {
                               absl::MutexLock lock(&mu_);
                               data_.append(data, len);
                               ++chunks_;
                               return true;
                             });
          absl::MutexLock lock(&mu_);
          done_ = true;
          ok_ = static_cast<bool>(res);
          status_ = res ? res->status : 0;
        }) {}
  ~WatchClient() { thread_.join(); }

  bool AwaitLines(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<size_t>(
                 std::count(data_.begin(), data_.end(), '\n')) >= n ||
             done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return static_cast<size_t>(std::count(data_.begin(), data_.end(), '\n')) >=
           n;
  }
  bool AwaitDone() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), kWait);
  }
  bool AwaitBytes(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return data_.size() >= n || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return data_.size() >= n;
  }
  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out =
        absl::StrSplit(data_, '\n', absl::SkipEmpty());
    if (!data_.empty() && data_.back() != '\n' && !out.empty()) out.pop_back();
    return out;
  }
  std::string data() {
    absl::MutexLock lock(&mu_);
    return data_;
  }
  // Whether the response completed cleanly (terminating chunk seen).
  bool ok() {
    absl::MutexLock lock(&mu_);
    return ok_;
  }
  int status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
  int chunks_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool ok_ ABSL_GUARDED_BY(mu_) = false;
  int status_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

std::string EventType(const std::string& line) {
  rapidjson::Document d = Json(line);
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("type")) return "?";
  return d["type"].GetString();
}

class EmulatorTest : public ::testing::Test {
 protected:
  void Start(EmulatorOptions options = {}) {
    if (options.clock == informer::RealClock()) options.clock = &clock_;
    emu_ = std::make_unique<EmulatorWithFaults>(options);
    ASSERT_TRUE(emu_->Start().ok());
  }
  void TearDown() override {
    if (emu_ != nullptr) emu_->Stop();
    watches_.clear();
  }
  httplib::Client Client() {
    httplib::Client cli("127.0.0.1", emu_->port());
    cli.set_read_timeout(60);
    return cli;
  }
  WatchClient& Watch(const std::string& path, httplib::Headers headers = {}) {
    watches_.push_back(
        std::make_unique<WatchClient>(emu_->port(), path, std::move(headers)));
    return *watches_.back();
  }
  const ResourceInfo& R(absl::string_view name) { return emu_->Resource(name); }
  void CreateConfigMap(const std::string& ns, const std::string& name,
                       const std::string& labels = "{}") {
    auto res = Client().Post(
        absl::StrCat("/api/v1/namespaces/", ns, "/configmaps").c_str(),
        absl::StrCat(
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
            name, R"(","labels":)", labels, R"(},"data":{"k":"v"}})"),
        "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 201) << res->body;
  }
  std::string WatchPath(int64_t rv, const std::string& extra = "") {
    return absl::StrCat(
        "/api/v1/namespaces/demo/configmaps?watch=1&resourceVersion=", rv,
        extra);
  }
  void AwaitWatchers(int n) {
    ASSERT_TRUE(emu_->store().AwaitWatchers(nullptr, n, kWait));
  }

  informer::FakeClock clock_;
  std::unique_ptr<EmulatorWithFaults> emu_;
  std::vector<std::unique_ptr<WatchClient>> watches_;
};

// Stop right after Start must not race ahead of the accept loop (it used to
// hang the join now and then: the sidecar's error exits right after
// starting its demo cluster hit it).
TEST(EmulatorLifecycleTest, StopRightAfterStartNeverHangs) {
  for (int i = 0; i < 200; ++i) {
    Emulator emu{EmulatorOptions()};
    ASSERT_TRUE(emu.Start().ok());
    emu.Stop();
  }
}

TEST_F(EmulatorTest, DiscoveryServesTheCapturedShapes) {
  Start();
  auto cli = Client();
  auto api = cli.Get("/api");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  std::string want = CaptureBody("discovery-api.json");
  absl::StrReplaceAll(
      {{"127.0.0.1:6443", absl::StrCat("127.0.0.1:", emu_->port())}}, &want);
  EXPECT_EQ(api->body, want);
  EXPECT_EQ(api->get_header_value("Content-Type"), "application/json");
  for (const char* path :
       {"/apis", "/api/v1", "/apis/apps/v1", "/apis/apps", "/version"}) {
    auto res = cli.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_FALSE(Json(res->body).HasParseError()) << path;
  }
  auto core = Json(cli.Get("/api/v1")->body);
  EXPECT_STREQ(core["kind"].GetString(), "APIResourceList");
  EXPECT_FALSE(core.HasMember("apiVersion"));
  // An unknown group has no handler: the mux's plain-text 404 (as v1.37.2
  // answers, emulator_v137_captures_test); an unknown resource of a known
  // group version is the NotFound Status.
  auto missing = cli.Get("/apis/nope/v1");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "404 page not found\n");
  auto no_resource = cli.Get("/apis/apps/v1/nope");
  ASSERT_TRUE(no_resource);
  EXPECT_EQ(no_resource->status, 404);
  EXPECT_EQ(no_resource->body, CaptureBody("error-404-resource.txt"));
}

TEST_F(EmulatorTest, CrudRoundTripWithMonotonicResourceVersions) {
  Start();
  auto cli = Client();
  auto created = cli.Post("/api/v1/namespaces/demo/configmaps",
                          R"({"metadata":{"name":"c1"},"data":{"k":"v"}})",
                          "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  auto obj = Json(created->body);
  EXPECT_STREQ(obj["kind"].GetString(), "ConfigMap");
  EXPECT_STREQ(obj["apiVersion"].GetString(), "v1");
  std::string rv1 = obj["metadata"]["resourceVersion"].GetString();

  auto dup = cli.Post("/api/v1/namespaces/demo/configmaps",
                      R"({"metadata":{"name":"c1"}})", "application/json");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 409);
  EXPECT_EQ(Json(dup->body)["reason"].GetString(),
            std::string("AlreadyExists"));

  auto stale = cli.Put(
      "/api/v1/namespaces/demo/configmaps/c1",
      R"({"metadata":{"name":"c1","resourceVersion":"12345"},"data":{}})",
      "application/json");
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 409);
  EXPECT_EQ(Json(stale->body)["reason"].GetString(), std::string("Conflict"));

  auto put =
      cli.Put("/api/v1/namespaces/demo/configmaps/c1",
              absl::StrCat(R"({"metadata":{"name":"c1","resourceVersion":")",
                           rv1, R"("},"data":{"k":"v2"}})"),
              "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  std::string rv2 = Json(put->body)["metadata"]["resourceVersion"].GetString();
  EXPECT_GT(std::stoll(rv2), std::stoll(rv1));

  auto patched = cli.Patch("/api/v1/namespaces/demo/configmaps/c1",
                           R"({"metadata":{"labels":{"tier":"web"}}})",
                           "application/strategic-merge-patch+json");
  ASSERT_TRUE(patched);
  ASSERT_EQ(patched->status, 200) << patched->body;
  auto p = Json(patched->body);
  EXPECT_STREQ(p["metadata"]["labels"]["tier"].GetString(), "web");
  EXPECT_STREQ(p["data"]["k"].GetString(), "v2");
  EXPECT_GT(std::stoll(p["metadata"]["resourceVersion"].GetString()),
            std::stoll(rv2));

  auto apply = cli.Patch("/api/v1/namespaces/demo/configmaps/c1", "{}",
                         "application/apply-patch+yaml");
  ASSERT_TRUE(apply);
  EXPECT_EQ(apply->status, 415);

  auto got = cli.Get("/api/v1/namespaces/demo/configmaps/c1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, patched->body);

  auto del = cli.Delete("/api/v1/namespaces/demo/configmaps/c1");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  EXPECT_STREQ(Json(del->body)["status"].GetString(), "Success");
  auto gone = cli.Get("/api/v1/namespaces/demo/configmaps/does-not-exist");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(gone->body, CaptureBody("error-404.txt"));
}

TEST_F(EmulatorTest, ClusterScopedAndGroupResources) {
  Start();
  auto cli = Client();
  auto node = cli.Post("/api/v1/nodes", R"({"metadata":{"name":"n1"}})",
                       "application/json");
  ASSERT_TRUE(node);
  EXPECT_EQ(node->status, 201);
  EXPECT_EQ(cli.Get("/api/v1/nodes/n1")->status, 200);
  auto dep = cli.Post("/apis/apps/v1/namespaces/demo/deployments",
                      R"({"metadata":{"name":"d"},"spec":{"replicas":1}})",
                      "application/json");
  ASSERT_TRUE(dep);
  ASSERT_EQ(dep->status, 201);
  auto d = Json(dep->body);
  EXPECT_STREQ(d["apiVersion"].GetString(), "apps/v1");
  EXPECT_EQ(d["metadata"]["generation"].GetInt(), 1);
  auto list = cli.Get("/apis/apps/v1/deployments");
  ASSERT_TRUE(list);
  auto l = Json(list->body);
  EXPECT_STREQ(l["kind"].GetString(), "DeploymentList");
  EXPECT_EQ(l["items"].Size(), 1u);
  auto missing = cli.Get("/apis/apps/v1/namespaces/demo/deployments/zz");
  EXPECT_EQ(Json(missing->body)["message"].GetString(),
            std::string("deployments.apps \"zz\" not found"));
  // Events (core) are created and patched like anything else.
  auto ev = cli.Post(
      "/api/v1/namespaces/demo/events",
      R"({"metadata":{"name":"e1"},"involvedObject":{"kind":"Pod","name":"p"},"count":1})",
      "application/json");
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->status, 201);
  auto evp = cli.Patch("/api/v1/namespaces/demo/events/e1", R"({"count":2})",
                       "application/strategic-merge-patch+json");
  ASSERT_TRUE(evp);
  EXPECT_EQ(Json(evp->body)["count"].GetInt(), 2);
  auto by_involved = cli.Get(
      "/api/v1/namespaces/demo/events?fieldSelector=involvedObject.name%3Dp");
  EXPECT_EQ(Json(by_involved->body)["items"].Size(), 1u);
}

TEST_F(EmulatorTest, ListPagingFollowsContinueAndExpires) {
  Start();
  for (int i = 0; i < 5; ++i) CreateConfigMap("demo", absl::StrCat("cm-", i));
  auto cli = Client();
  auto page1 = cli.Get("/api/v1/namespaces/demo/configmaps?limit=2");
  ASSERT_TRUE(page1);
  auto p1 = Json(page1->body);
  EXPECT_STREQ(p1["kind"].GetString(), "ConfigMapList");
  EXPECT_EQ(p1["items"].Size(), 2u);
  EXPECT_EQ(p1["metadata"]["remainingItemCount"].GetInt(), 3);
  EXPECT_FALSE(p1["items"][0].HasMember("kind")) << "list items are bare";
  // Same envelope keys as the capture.
  auto cap = Json(ReadCapture("list-configmaps-limit2.json"));
  std::vector<std::string> ours, theirs;
  for (auto it = p1["metadata"].MemberBegin(); it != p1["metadata"].MemberEnd();
       ++it)
    ours.push_back(it->name.GetString());
  for (auto it = cap["metadata"].MemberBegin();
       it != cap["metadata"].MemberEnd(); ++it)
    theirs.push_back(it->name.GetString());
  EXPECT_EQ(ours, theirs);

  std::string token = p1["metadata"]["continue"].GetString();
  auto page2 =
      cli.Get(absl::StrCat(
                  "/api/v1/namespaces/demo/configmaps?limit=2&continue=", token)
                  .c_str());
  auto p2 = Json(page2->body);
  EXPECT_STREQ(p2["items"][0]["metadata"]["name"].GetString(), "cm-2");
  EXPECT_STREQ(p2["metadata"]["resourceVersion"].GetString(),
               p1["metadata"]["resourceVersion"].GetString());

  CreateConfigMap("demo", "later");
  emu_->store().Compact();
  auto expired =
      cli.Get(absl::StrCat(
                  "/api/v1/namespaces/demo/configmaps?limit=2&continue=", token)
                  .c_str());
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 410);
  auto e = Json(expired->body);
  EXPECT_STREQ(e["reason"].GetString(), "Expired");
  auto fresh = DecodeContinueToken(e["metadata"]["continue"].GetString());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->first, -1);
  EXPECT_EQ(fresh->second, std::string("cm-1\0", 5));
}

TEST_F(EmulatorTest, SelectorsFilterLists) {
  Start();
  CreateConfigMap("demo", "a", R"({"app":"web","tier":"1"})");
  CreateConfigMap("demo", "b", R"({"app":"api"})");
  CreateConfigMap("other", "c", R"({"app":"web"})");
  auto cli = Client();
  auto count = [&](const std::string& path) {
    auto res = cli.Get(path.c_str());
    return res && res->status == 200
               ? static_cast<int>(Json(res->body)["items"].Size())
               : -res->status;
  };
  EXPECT_EQ(count("/api/v1/configmaps?labelSelector=app%3Dweb"), 2);
  EXPECT_EQ(
      count("/api/v1/configmaps?labelSelector=app%20in%20(web,api),!tier"), 2);
  EXPECT_EQ(count("/api/v1/configmaps?labelSelector=tier"), 1);
  EXPECT_EQ(count("/api/v1/configmaps?fieldSelector=metadata.name%3Db"), 1);
  EXPECT_EQ(
      count("/api/v1/configmaps?fieldSelector=metadata.namespace%3Dother"), 1);
  EXPECT_EQ(
      count("/api/v1/namespaces/demo/configmaps?labelSelector=app!%3Dweb"), 1);
  EXPECT_EQ(count("/api/v1/configmaps?fieldSelector=spec.x%3D1"), -400);
}

TEST_F(EmulatorTest, MetadataOnlyListHasTheCapturedShape) {
  Start();
  CreateConfigMap("demo", "a");
  CreateConfigMap("demo", "b");
  auto res = Client().Get(
      "/api/v1/namespaces/demo/configmaps?limit=1",
      {{"Accept",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}});
  ASSERT_TRUE(res);
  auto ours = Json(res->body);
  auto cap = Json(ReadCapture("list-configmaps-metadata-only.json"));
  EXPECT_STREQ(ours["kind"].GetString(), cap["kind"].GetString());
  EXPECT_STREQ(ours["apiVersion"].GetString(), cap["apiVersion"].GetString());
  EXPECT_EQ(ours["metadata"].MemberCount(), cap["metadata"].MemberCount());
  const auto& item = ours["items"][0];
  EXPECT_STREQ(item["kind"].GetString(), "PartialObjectMetadata");
  EXPECT_EQ(item.MemberCount(), 3u) << "kind, apiVersion, metadata only";
  EXPECT_FALSE(item.HasMember("data"));
}

TEST_F(EmulatorTest, LoadEndpointCreatesStampedObjectsAndReports) {
  Start();
  auto res = Client().Post(
      "/_emulator/load?namespace=bench&objects=3&bytes=1024&millis=0", "",
      "text/plain");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  auto report = Json(res->body);
  EXPECT_EQ(report["updates"].GetInt(), 0);
  auto list = Client().Get("/api/v1/namespaces/bench/configmaps");
  ASSERT_TRUE(list);
  auto items = Json(list->body);
  ASSERT_EQ(items["items"].Size(), 3u);
  EXPECT_TRUE(items["items"][0]["data"].HasMember("sent"));
  auto bad = Client().Post("/_emulator/load?objects=0", "", "text/plain");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
}

TEST_F(EmulatorTest, LargeListIsStreamedIntact) {
  EmulatorOptions o;
  o.seed_pods = 300;  // ~1.8 MB: above the inline limit
  Start(o);
  auto res = Client().Get("/api/v1/namespaces/benchpods/pods");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked");
  auto list = Json(res->body);
  ASSERT_FALSE(list.HasParseError());
  ASSERT_EQ(list["items"].Size(), 300u);
  EXPECT_STREQ(list["items"][299]["metadata"]["name"].GetString(),
               "pod-000299");
}

TEST_F(EmulatorTest, WatchDeliversEventsInOrderOneChunkPerLine) {
  Start();
  int64_t rv = emu_->store().CurrentRv();
  WatchClient& w = Watch(WatchPath(rv));
  AwaitWatchers(1);
  CreateConfigMap("demo", "w1");
  auto cli = Client();
  ASSERT_EQ(cli.Patch("/api/v1/namespaces/demo/configmaps/w1",
                      R"({"data":{"k":"2"}})", "application/merge-patch+json")
                ->status,
            200);
  ASSERT_EQ(cli.Delete("/api/v1/namespaces/demo/configmaps/w1")->status, 200);
  CreateConfigMap("elsewhere", "ignored");
  ASSERT_TRUE(w.AwaitLines(3));
  std::vector<std::string> lines = w.Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(EventType(lines[0]), "ADDED");
  EXPECT_EQ(EventType(lines[1]), "MODIFIED");
  EXPECT_EQ(EventType(lines[2]), "DELETED");
  int64_t last = rv;
  for (const auto& line : lines) {
    auto ev = Json(line);
    EXPECT_STREQ(ev["object"]["kind"].GetString(), "ConfigMap");
    int64_t erv =
        std::stoll(ev["object"]["metadata"]["resourceVersion"].GetString());
    EXPECT_GT(erv, last);
    last = erv;
  }
}

TEST_F(EmulatorTest, BookmarksArriveAtTheInterval) {
  EmulatorOptions o;
  o.bookmark_interval = absl::Seconds(10);
  Start(o);
  CreateConfigMap("demo", "a");
  WatchClient& w =
      Watch(WatchPath(emu_->store().CurrentRv(), "&allowWatchBookmarks=true"));
  AwaitWatchers(1);
  // A change the watch does not see moves the RV a bookmark carries (with
  // nothing after the watch's RV, the watch cache sends none).
  CreateConfigMap("other", "b");
  int64_t rv = emu_->store().CurrentRv();
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(w.AwaitLines(1));
  EXPECT_EQ(
      w.Lines()[0],
      absl::StrCat(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")",
          rv, R"("}}})"));
}

TEST_F(EmulatorTest, TimeoutEndsTheStreamCleanly) {
  Start();
  WatchClient& w = Watch(WatchPath(0, "&timeoutSeconds=5"));
  AwaitWatchers(1);
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(w.AwaitDone());
  EXPECT_TRUE(w.ok()) << "terminating chunk received";
  EXPECT_EQ(w.status(), 200);
  EXPECT_TRUE(emu_->store().AwaitWatchers(nullptr, 0, kWait));
}

TEST_F(EmulatorTest, TooOldResourceVersionGetsAnErrorEvent) {
  EmulatorOptions o;
  o.history_length = 2;
  Start(o);
  for (int i = 0; i < 5; ++i) CreateConfigMap("demo", absl::StrCat("c", i));
  WatchClient& w = Watch(WatchPath(1));
  ASSERT_TRUE(w.AwaitDone());
  EXPECT_EQ(w.status(), 200);
  std::vector<std::string> lines = w.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(
      lines[0],
      R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (3)","reason":"Expired","code":410}})json");
}

TEST_F(EmulatorTest, WatchListSendsInitialEventsThenMarkedBookmark) {
  Start();
  CreateConfigMap("demo", "a");
  CreateConfigMap("demo", "b");
  int64_t rv = emu_->store().CurrentRv();
  WatchClient& w = Watch(
      "/api/v1/namespaces/demo/configmaps?watch=1&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  ASSERT_TRUE(w.AwaitLines(3));
  std::vector<std::string> lines = w.Lines();
  EXPECT_EQ(EventType(lines[0]), "ADDED");
  EXPECT_EQ(EventType(lines[1]), "ADDED");
  EXPECT_EQ(
      lines[2],
      absl::StrCat(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")",
          rv, R"(","annotations":{"k8s.io/initial-events-end":"true"}}}})"));
}

TEST_F(EmulatorTest, V124ModeRejectsWatchListLikeTheCapture) {
  EmulatorOptions o;
  o.v1_24 = true;
  Start(o);
  auto res = Client().Get(
      "/api/v1/namespaces/demo/configmaps?watch=1&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(res->body, CaptureBody("watchlist-unsupported-v1.24.txt"));
}

TEST_F(EmulatorTest, BearerTokensAuthenticateAndAuthorize) {
  EmulatorOptions o;
  o.tokens = {{"admin-token", "admin", true},
              {"nobody-token", "nobody", false}};
  Start(o);
  auto cli = Client();
  auto none = cli.Get("/api/v1/namespaces/demo/configmaps");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->body, CaptureBody("error-401.txt"));
  auto bad = cli.Get("/api/v1/namespaces/demo/configmaps",
                     {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(bad->status, 401);
  auto denied = cli.Get("/api/v1/namespaces/demo/configmaps",
                        {{"Authorization", "Bearer nobody-token"}});
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(denied->body, CaptureBody("error-403.txt"));
  auto ok = cli.Get("/api/v1/namespaces/demo/configmaps",
                    {{"Authorization", "Bearer admin-token"}});
  EXPECT_EQ(ok->status, 200);
}

TEST_F(EmulatorTest, ThrottleAnswers429WithRetryAfter) {
  Start();
  auto cli = Client();
  ASSERT_EQ(cli.Post("/_emulator/throttle?count=2&retry_after=3")->status, 200);
  for (int i = 0; i < 2; ++i) {
    auto res = cli.Get("/api/v1/configmaps");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 429);
    EXPECT_EQ(res->get_header_value("Retry-After"), "3");
    EXPECT_STREQ(Json(res->body)["reason"].GetString(), "TooManyRequests");
  }
  EXPECT_EQ(cli.Get("/api/v1/configmaps")->status, 200);
}

TEST_F(EmulatorTest, InjectedErrorHitsOnlyItsVerbAndResource) {
  Start();
  emu_->faults().FailRequests("list", "pods", 500, 1);
  auto cli = Client();
  EXPECT_EQ(cli.Get("/api/v1/configmaps")->status, 200);
  auto failed = cli.Get("/api/v1/pods");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 500);
  EXPECT_STREQ(Json(failed->body)["reason"].GetString(), "InternalError");
  EXPECT_EQ(cli.Get("/api/v1/pods")->status, 200);
}

TEST_F(EmulatorTest, ExpiredWatchAndContinueFaults) {
  Start();
  for (int i = 0; i < 3; ++i) CreateConfigMap("demo", absl::StrCat("c", i));
  emu_->faults().ExpireNextWatch("configmaps");
  WatchClient& w = Watch(WatchPath(1));
  ASSERT_TRUE(w.AwaitDone());
  ASSERT_EQ(w.Lines().size(), 1u);
  auto ev = Json(w.Lines()[0]);
  EXPECT_STREQ(ev["type"].GetString(), "ERROR");
  EXPECT_EQ(ev["object"]["code"].GetInt(), 410);

  auto cli = Client();
  auto page = Json(cli.Get("/api/v1/configmaps?limit=1")->body);
  std::string token = page["metadata"]["continue"].GetString();
  ASSERT_EQ(cli.Post("/_emulator/expire_continue")->status, 200);
  auto expired = cli.Get(
      absl::StrCat("/api/v1/configmaps?limit=1&continue=", token).c_str());
  EXPECT_EQ(expired->status, 410);
  EXPECT_EQ(cli.Get(absl::StrCat("/api/v1/configmaps?limit=1&continue=", token)
                        .c_str())
                ->status,
            200);
}

TEST_F(EmulatorTest, CutWatchSendsHalfAnEventThenDrops) {
  Start();
  WatchClient& w = Watch(WatchPath(0));
  AwaitWatchers(1);
  emu_->CutWatches(&R("configmaps"));
  CreateConfigMap("demo", "cut");
  ASSERT_TRUE(w.AwaitDone());
  std::string data = w.data();
  EXPECT_FALSE(data.empty());
  EXPECT_EQ(data.find('\n'), std::string::npos) << "no complete line";
  EXPECT_TRUE(Json(data).HasParseError());
  EXPECT_FALSE(w.ok()) << "no terminating chunk";
}

TEST_F(EmulatorTest, StalledWatchHoldsEventsUntilResumed) {
  Start();
  WatchClient& w = Watch(WatchPath(0));
  AwaitWatchers(1);
  emu_->StallWatches(nullptr);
  CreateConfigMap("demo", "s1");
  size_t queued = 0;
  emu_->store().ForEachWatcher(nullptr,
                               [&](Watcher& wt) { queued += wt.QueueSize(); });
  EXPECT_EQ(queued, 1u) << "the stream took nothing while stalled";
  EXPECT_TRUE(w.data().empty());
  emu_->ResumeWatches(nullptr);
  ASSERT_TRUE(w.AwaitLines(1));
  EXPECT_EQ(EventType(w.Lines()[0]), "ADDED");
}

TEST_F(EmulatorTest, MalformedEventLineThenNormalEvents) {
  Start();
  WatchClient& w = Watch(WatchPath(0));
  AwaitWatchers(1);
  emu_->InjectMalformedEvent(nullptr);
  ASSERT_TRUE(w.AwaitLines(1));
  CreateConfigMap("demo", "m1");
  ASSERT_TRUE(w.AwaitLines(2));
  std::vector<std::string> lines = w.Lines();
  EXPECT_TRUE(Json(lines[0]).HasParseError());
  EXPECT_EQ(EventType(lines[1]), "ADDED");
}

TEST_F(EmulatorTest, LargeObjectIsServedWhole) {
  Start();
  WatchClient& w =
      Watch("/api/v1/namespaces/big/configmaps?watch=1&resourceVersion=0");
  AwaitWatchers(1);
  auto created = emu_->CreateLargeObject("big", "huge", (1 << 20) + 512 * 1024);
  ASSERT_TRUE(created.ok());
  auto res = Client().Get("/api/v1/namespaces/big/configmaps/huge");
  ASSERT_TRUE(res);
  EXPECT_GT(res->body.size(), size_t{1} << 20);
  EXPECT_FALSE(Json(res->body).HasParseError());
  ASSERT_TRUE(w.AwaitLines(1));
  EXPECT_GT(w.Lines()[0].size(), size_t{1} << 20);
  EXPECT_EQ(EventType(w.Lines()[0]), "ADDED");
}

TEST_F(EmulatorTest, RestartDropsWatchesAndExpiresOldResourceVersions) {
  Start();
  CreateConfigMap("demo", "r1");
  int64_t rv = emu_->store().CurrentRv();
  WatchClient& w = Watch(WatchPath(rv));
  AwaitWatchers(1);
  CreateConfigMap("demo", "r1b");
  ASSERT_TRUE(w.AwaitLines(1));
  ASSERT_EQ(Client().Post("/_emulator/restart")->status, 200);
  ASSERT_TRUE(w.AwaitDone());
  EXPECT_FALSE(w.ok()) << "dropped, not ended";
  CreateConfigMap("demo", "r2");
  WatchClient& again = Watch(WatchPath(rv));
  ASSERT_TRUE(again.AwaitDone());
  ASSERT_EQ(again.Lines().size(), 1u);
  EXPECT_EQ(Json(again.Lines()[0])["object"]["code"].GetInt(), 410);
}

TEST_F(EmulatorTest, ExactListAtAnOldRvServesHistoryUntilCompacted) {
  Start();
  CreateConfigMap("demo", "a");
  const int64_t rv = emu_->store().CurrentRv();
  CreateConfigMap("demo", "b");
  auto cli = Client();
  ASSERT_EQ(cli.Post("/_emulator/restart")->status, 200);
  const std::string exact_path = absl::StrCat(
      "/api/v1/namespaces/demo/configmaps?resourceVersion=", rv, "&limit=500");
  auto exact = cli.Get(exact_path.c_str());
  ASSERT_TRUE(exact);
  ASSERT_EQ(exact->status, 200);
  auto e = Json(exact->body);
  EXPECT_EQ(e["items"].Size(), 1u);
  EXPECT_EQ(e["metadata"]["resourceVersion"].GetString(), absl::StrCat(rv));
  ASSERT_EQ(cli.Post("/_emulator/compact")->status, 200);
  auto expired = cli.Get(exact_path.c_str());
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 410);
  EXPECT_EQ(expired->body,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
            "\"status\":\"Failure\",\"message\":\"The resourceVersion for "
            "the provided list is too old.\",\"reason\":\"Expired\","
            "\"code\":410}");
}

TEST_F(EmulatorTest, ControlEndpointsReportState) {
  Start();
  CreateConfigMap("demo", "a");
  auto cli = Client();
  auto state = cli.Get("/_emulator/state?resource=configmaps");
  ASSERT_TRUE(state);
  auto s = Json(state->body);
  ASSERT_EQ(s["objects"].Size(), 1u);
  EXPECT_STREQ(s["objects"][0]["key"].GetString(), "demo/a");
  Watch(WatchPath(0));
  auto watchers =
      cli.Get("/_emulator/watchers?resource=configmaps&min=1&timeout_ms=30000");
  EXPECT_EQ(Json(watchers->body)["watchers"].GetInt(), 1);
  EXPECT_EQ(cli.Post("/_emulator/nope")->status, 404);
}

TEST_F(EmulatorTest, CountsApiRequestsByKind) {
  Start();
  auto cli = Client();
  auto counts = [&] {
    auto r = cli.Get("/_emulator/requests");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    return Json(r->body);
  };
  auto before = counts();
  EXPECT_EQ(before["list"].GetInt64(), 0);
  EXPECT_EQ(before["watch"].GetInt64(), 0);
  EXPECT_EQ(before["other"].GetInt64(), 0);
  CreateConfigMap("demo", "a");                // other
  ASSERT_EQ(cli.Get("/api/v1")->status, 200);  // other
  ASSERT_EQ(cli.Get("/api/v1/namespaces/demo/configmaps")->status, 200);
  ASSERT_EQ(cli.Get("/api/v1/configmaps?limit=1")->status, 200);  // list
  ASSERT_EQ(cli.Get("/api/v1/namespaces/demo/configmaps/a")->status, 200);
  ASSERT_EQ(cli.Get("/api/v1/nothing")->status, 404);  // other
  ASSERT_EQ(cli.Get("/healthz")->status, 200);         // not an API request
  Watch(WatchPath(0));
  cli.Get("/_emulator/watchers?resource=configmaps&min=1&timeout_ms=30000");
  auto after = counts();
  EXPECT_EQ(after["list"].GetInt64(), 2);
  EXPECT_EQ(after["watch"].GetInt64(), 1);
  EXPECT_EQ(after["other"].GetInt64(), 4);
  EXPECT_EQ(emu_->request_counts().list, 2);
}

TEST_F(EmulatorTest, ServesHttpsWithTheGeneratedCa) {
  EmulatorOptions o;
  o.tls = true;
  Start(o);
  ASSERT_FALSE(emu_->ca_cert_pem().empty());
  EXPECT_EQ(emu_->url().rfind("https://", 0), 0u);

  BIO* bio = BIO_new_mem_buf(emu_->ca_cert_pem().data(),
                             static_cast<int>(emu_->ca_cert_pem().size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(ca, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_free(ca);
  {
    httplib::SSLClient cli("127.0.0.1", emu_->port());
    cli.set_ca_cert_store(store);  // the client owns it from here
    cli.enable_server_certificate_verification(true);
    auto res = cli.Get("/api");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
  }
  {
    httplib::SSLClient untrusting("127.0.0.1", emu_->port());
    untrusting.enable_server_certificate_verification(true);
    auto res = untrusting.Get("/api");
    EXPECT_FALSE(res) << "unknown CA must fail verification";
  }
}

}  // namespace
}  // namespace emulator

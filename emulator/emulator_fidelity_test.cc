// The emulator's answers where the differential test against a real
// kube-apiserver v1.37.2 (integration_tests/real_emulator_differential_test)
// found them different: list and watch parameter validation, continue
// tokens, /version, bookmarks, resourceVersions ahead of the store, and
// object names. The expected texts are the real server's.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "emulator/emulator.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "informer/util/clock.h"
#include "rapidjson/document.h"

namespace emulator {
namespace {

constexpr char kCm[] = "/api/v1/namespaces/demo/configmaps";

rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

std::string Message(const std::string& body) {
  rapidjson::Document d = Json(body);
  return d.IsObject() && d.HasMember("message") ? d["message"].GetString() : "";
}

class EmulatorFidelityTest : public ::testing::Test {
 protected:
  void Start(EmulatorOptions options = {}) {
    if (options.clock == informer::RealClock()) options.clock = &clock_;
    emu_ = std::make_unique<Emulator>(options);
    ASSERT_TRUE(emu_->Start().ok());
  }
  void TearDown() override {
    if (emu_ != nullptr) emu_->Stop();
  }
  httplib::Client Client() {
    httplib::Client cli("127.0.0.1", emu_->port());
    cli.set_read_timeout(60);
    return cli;
  }
  httplib::Result Get(const std::string& query) {
    return Client().Get(absl::StrCat(kCm, query).c_str());
  }
  httplib::Result Create(const std::string& name) {
    return Client().Post(
        kCm, absl::StrCat(R"({"metadata":{"name":")", name, R"("}})"),
        "application/json");
  }
  void CreateN(int n) {
    for (int i = 0; i < n; ++i) {
      auto res = Create(absl::StrCat("cm-", i));
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 201);
    }
  }
  // The decoded JSON of a list's continue token.
  std::string TokenJson(const std::string& body) {
    rapidjson::Document d = Json(body);
    std::string json;
    absl::WebSafeBase64Unescape(d["metadata"]["continue"].GetString(), &json);
    return json;
  }
  informer::FakeClock clock_;
  std::unique_ptr<Emulator> emu_;
};

TEST_F(EmulatorFidelityTest, VersionFollowsTheEmulatedServer) {
  Start();
  auto v137 = Client().Get("/version");
  ASSERT_TRUE(v137);
  EXPECT_STREQ(Json(v137->body)["minor"].GetString(), "37");
  emu_->Stop();
  EmulatorOptions o;
  o.v1_24 = true;
  Start(o);
  auto v124 = Client().Get("/version");
  ASSERT_TRUE(v124);
  EXPECT_STREQ(Json(v124->body)["minor"].GetString(), "24");
}

TEST_F(EmulatorFidelityTest, ListParametersAreValidatedFirst) {
  Start();
  CreateN(1);
  auto exact0 = Get("?resourceVersion=0&resourceVersionMatch=Exact");
  ASSERT_TRUE(exact0);
  EXPECT_EQ(exact0->status, 422);
  EXPECT_EQ(Message(exact0->body),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
            "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
            "resourceVersion \"0\"");
  auto sie = Get("?sendInitialEvents=true");
  EXPECT_EQ(sie->status, 422);
  auto limit = Get("?limit=abc");
  EXPECT_EQ(limit->status, 400);
  EXPECT_EQ(Message(limit->body),
            "strconv.ParseInt: parsing \"abc\": invalid syntax");
  EXPECT_EQ(Get("?timeoutSeconds=abc")->status, 400);
}

TEST_F(EmulatorFidelityTest, ContinueTokensAsV137WritesThem) {
  Start();
  CreateN(3);
  auto page = Get("?limit=1");
  ASSERT_TRUE(page);
  std::string json = TokenJson(page->body);
  EXPECT_TRUE(absl::StrContains(json, R"("start":"/cm-0\u0000")")) << json;
  std::string token = Json(page->body)["metadata"]["continue"].GetString();
  auto next = Get("?limit=1&continue=" + token);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
  EXPECT_TRUE(absl::StrContains(next->body, "\"cm-1\""));
  auto with_rv = Get("?limit=1&resourceVersion=2&continue=" + token);
  EXPECT_EQ(with_rv->status, 400);
  EXPECT_EQ(Message(with_rv->body),
            "specifying resource version is not allowed when using continue");
  auto garbage = Get("?limit=1&continue=garbage");
  EXPECT_EQ(garbage->status, 400);
  EXPECT_EQ(Message(garbage->body),
            "invalid continue token: continue key is not valid: invalid "
            "character '\\u0081' looking for beginning of value");
}

TEST_F(EmulatorFidelityTest, V124TokensHaveRelativeKeys) {
  EmulatorOptions o;
  o.v1_24 = true;
  Start(o);
  CreateN(2);
  auto page = Get("?limit=1");
  ASSERT_TRUE(page);
  EXPECT_TRUE(
      absl::StrContains(TokenJson(page->body), R"("start":"cm-0\u0000")"));
}

TEST_F(EmulatorFidelityTest, InvalidNamesGet422WithTheServersText) {
  Start();
  auto bad = Create("Not_Valid");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422);
  rapidjson::Document d = Json(bad->body);
  EXPECT_STREQ(d["reason"].GetString(), "Invalid");
  EXPECT_STREQ(d["details"]["name"].GetString(), "Not_Valid");
  EXPECT_STREQ(d["details"]["kind"].GetString(), "ConfigMap");
  EXPECT_STREQ(d["details"]["causes"][0]["field"].GetString(), "metadata.name");
  EXPECT_TRUE(absl::StartsWith(
      d["message"].GetString(),
      "ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: "
      "\"Not_Valid\": a lowercase RFC 1123 subdomain"));
  auto nameless = Client().Post(kCm, R"({"metadata":{}})", "application/json");
  EXPECT_EQ(nameless->status, 422);
  EXPECT_EQ(Message(nameless->body),
            "ConfigMap \"\" is invalid: metadata.name: Required value: name "
            "or generateName is required");
}

TEST_F(EmulatorFidelityTest, ListAheadOfTheStoreWaitsForIt) {
  EmulatorOptions o;
  o.too_large_rv_wait = absl::Seconds(30);
  Start(o);
  CreateN(1);
  const int64_t ahead = emu_->store().CurrentRv() + 1;
  int status = 0;
  std::string body;
  std::thread lister([&] {
    auto res = Get(absl::StrCat("?resourceVersion=", ahead));
    if (res) {
      status = res->status;
      body = res->body;
    }
  });
  // The list is parked until the RV exists; this write makes it.
  ASSERT_EQ(Create("cm-late")->status, 201);
  lister.join();
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(absl::StrContains(body, "cm-late"));
}

TEST_F(EmulatorFidelityTest, ListTooFarAheadTimesOutWith504) {
  EmulatorOptions o;
  o.too_large_rv_wait = absl::Milliseconds(50);
  Start(o);
  auto res = Get("?resourceVersion=99");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 504);
  EXPECT_EQ(Message(res->body),
            "Timeout: Too large resource version: 99, current: 0");
}

TEST_F(EmulatorFidelityTest, WatchListAheadOfTheStoreEndsWithAnErrorEvent) {
  EmulatorOptions o;
  o.too_large_rv_wait = absl::Milliseconds(50);
  Start(o);
  auto res =
      Get("?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
          "allowWatchBookmarks=true&resourceVersion=99");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  rapidjson::Document ev = Json(res->body);
  EXPECT_STREQ(ev["type"].GetString(), "ERROR");
  EXPECT_EQ(ev["object"]["code"].GetInt(), 504);
}

TEST_F(EmulatorFidelityTest, WatchFromAFutureRvWaitsForItsEvents) {
  Start();
  CreateN(1);
  const int64_t future = emu_->store().CurrentRv() + 2;
  std::string body;
  std::thread watcher([&] {
    Client().Get(absl::StrCat(kCm,
                              "?watch=1&timeoutSeconds=30&"
                              "resourceVersion=",
                              future)
                     .c_str(),
                 [&](const char* data, size_t len) {
                   body.append(data, len);
                   return false;  // one chunk is enough
                 });
  });
  ASSERT_TRUE(emu_->store().AwaitWatchers(nullptr, 1, absl::Seconds(30)));
  ASSERT_EQ(Create("cm-at-future-minus-1")->status, 201);
  ASSERT_EQ(Create("cm-at-future")->status, 201);
  ASSERT_EQ(Create("cm-after-future")->status, 201);
  watcher.join();
  // Events at or before the watch's RV are not sent.
  EXPECT_TRUE(absl::StrContains(body, "cm-after-future")) << body;
  EXPECT_FALSE(absl::StrContains(body, "cm-at-future\"")) << body;
}

TEST_F(EmulatorFidelityTest, NoBookmarkWhileNothingHappenedAfterTheRv) {
  Start();
  CreateN(1);
  const int64_t rv = emu_->store().CurrentRv();
  std::string body = "unset";
  std::thread watcher([&] {
    body = Client()
               .Get(absl::StrCat(kCm,
                                 "?watch=1&allowWatchBookmarks=true&"
                                 "timeoutSeconds=8&resourceVersion=",
                                 rv)
                        .c_str())
               ->body;
  });
  ASSERT_TRUE(emu_->store().AwaitWatchers(nullptr, 1, absl::Seconds(30)));
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(6));
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(2));
  watcher.join();
  EXPECT_EQ(body, "");
}

TEST_F(EmulatorFidelityTest, BookmarkComesTwoSecondsBeforeTheTimeout) {
  Start();
  CreateN(1);
  const int64_t start = emu_->store().CurrentRv();
  std::string body;
  std::thread watcher([&] {
    body = Client()
               .Get(absl::StrCat(kCm,
                                 "?watch=1&allowWatchBookmarks=true&"
                                 "timeoutSeconds=8&resourceVersion=",
                                 start)
                        .c_str())
               ->body;
  });
  ASSERT_TRUE(emu_->store().AwaitWatchers(nullptr, 1, absl::Seconds(30)));
  // A write the watch does not see: the bookmark has an RV to carry.
  ASSERT_TRUE(emu_->store()
                  .Create(emu_->Resource("configmaps"), "other",
                          R"({"metadata":{"name":"x","namespace":"other"}})")
                  .ok());
  const int64_t rv = emu_->store().CurrentRv();
  // Waiting for the bookmark at 6 s, then for the end at 8 s.
  EXPECT_EQ(clock_.WaitForWaiters(1), clock_.Now() + absl::Seconds(6));
  clock_.Advance(absl::Seconds(6));
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(2));
  watcher.join();
  EXPECT_EQ(body, absl::StrCat(R"({"type":"BOOKMARK","object":{"kind":)",
                               R"("ConfigMap","apiVersion":"v1","metadata":)",
                               R"({"resourceVersion":")", rv, "\"}}}\n"));
}

TEST_F(EmulatorFidelityTest, WatchListWithoutBookmarksHasNoEndMarker) {
  Start();
  CreateN(2);
  std::string body;
  std::thread watcher([&] {
    body = Client()
               .Get(absl::StrCat(kCm,
                                 "?watch=1&sendInitialEvents=true&"
                                 "resourceVersionMatch=NotOlderThan&"
                                 "timeoutSeconds=5")
                        .c_str())
               ->body;
  });
  ASSERT_TRUE(emu_->store().AwaitWatchers(nullptr, 1, absl::Seconds(30)));
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(5));
  watcher.join();
  std::vector<std::string> lines =
      absl::StrSplit(body, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << body;
  EXPECT_FALSE(absl::StrContains(body, "BOOKMARK"));
}

TEST_F(EmulatorFidelityTest, UnknownGroupsAreTheMuxsPlainNotFound) {
  Start();
  auto res = Client().Get("/apis/nosuch.io/v1/things");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->body, "404 page not found\n");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  // A known group's unknown version or resource: a NotFound Status.
  auto version = Client().Get("/apis/apps/v2/deployments");
  EXPECT_EQ(version->status, 404);
  EXPECT_STREQ(Json(version->body)["reason"].GetString(), "NotFound");
}

TEST_F(EmulatorFidelityTest, RbacDeniesByThePathBeforeLookingItUp) {
  EmulatorOptions o;
  o.tokens = {{"admin-token", "admin", true},
              {"user-token", "realkube-user", false}};
  Start(o);
  httplib::Headers user = {{"Authorization", "Bearer user-token"}};
  auto unknown = Client().Get("/api/v1/namespaces/demo/nosuch", user);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 403);
  EXPECT_EQ(Message(unknown->body),
            "nosuch is forbidden: User \"realkube-user\" cannot list resource "
            "\"nosuch\" in API group \"\" in the namespace \"demo\"");
  auto apps = Client().Get("/apis/apps/v1/deployments/x", user);
  EXPECT_EQ(apps->status, 403);
  EXPECT_EQ(Message(apps->body),
            "deployments.apps \"x\" is forbidden: User \"realkube-user\" "
            "cannot get resource \"deployments\" in API group \"apps\" at "
            "the cluster scope");
  // Discovery stays open.
  EXPECT_EQ(Client().Get("/api/v1", user)->status, 200);
}

}  // namespace
}  // namespace emulator

#include "informer/client/resource_client.h"

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/test_server.h"
#include "informer/object/api_error.h"

namespace informer {
namespace client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Recorded(const std::string& name) {
  std::ifstream in("testdata/kube-apiserver-v1.24/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ApiResource ConfigMaps() {
  ApiResource r;
  r.version = "v1";
  r.resource = "configmaps";
  r.kind = "ConfigMap";
  r.namespaced = true;
  return r;
}

// Records the last request's target and Accept header.
struct Seen {
  absl::Mutex mu;
  std::string target ABSL_GUARDED_BY(mu);
  std::string accept ABSL_GUARDED_BY(mu);
  void Record(const httplib::Request& req) {
    absl::MutexLock lock(&mu);
    target = req.target;
    accept = req.get_header_value("Accept");
  }
};

class ResourceClientTest : public ::testing::Test {
 protected:
  void StartAndConnect() {
    srv_.Start();
    RestConfig rc;
    rc.server = srv_.url();
    auto t = HttpTransport::Create(
        rc, std::make_unique<StaticCredentialProvider>(Credentials()),
        RealClock());
    ASSERT_TRUE(t.ok());
    transport_ = *std::move(t);
  }
  // Serves `body` as a chunked stream cut into `piece`-byte chunks.
  void ServeStream(const std::string& path, std::string body, size_t piece) {
    srv_.server().Get(path, [this, body, piece](const httplib::Request& req,
                                                httplib::Response& res) {
      seen_.Record(req);
      res.set_chunked_content_provider(
          "application/octet-stream",
          [body, piece](size_t, httplib::DataSink& sink) {
            for (size_t i = 0; i < body.size(); i += piece) {
              std::string p = body.substr(i, piece);
              sink.write(p.data(), p.size());
            }
            sink.done();
            return true;
          });
    });
  }

  // Outlives srv_: the server runs handlers, which record here, until it
  // is stopped (a request may still be in flight when the test body ends).
  Seen seen_;
  testing::TestServer srv_;
  // Destroyed first: closing its idle keep-alive connections lets the
  // server stop at once instead of after its keep-alive timeout.
  std::unique_ptr<HttpTransport> transport_;
};

TEST_F(ResourceClientTest, ListSendsEveryOptionAndDecodesPage) {
  srv_.server().Get(
      "/api/v1/namespaces/demo/configmaps",
      [this](const httplib::Request& req, httplib::Response& res) {
        seen_.Record(req);
        res.set_content(Recorded("list-configmaps-limit2.json"),
                        "application/json");
      });
  StartAndConnect();
  // This test reads the one request List sent: no prefetch of the next
  // page (the recorded page has a continue token), which would be recorded
  // after it.
  ResourceClientOptions options;
  options.prefetch_list_pages = false;
  ResourceClient client(transport_.get(), ConfigMaps(), "demo", options);
  ListOptions o;
  o.limit = 2;
  o.continue_token = "tok=en";
  o.resource_version = "0";
  o.resource_version_match = "NotOlderThan";
  o.label_selector = "app in (a,b)";
  o.field_selector = "metadata.name!=x";
  auto list = client.List(o);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 2u);
  EXPECT_FALSE(list->continue_token.empty());
  absl::MutexLock lock(&seen_.mu);
  EXPECT_EQ(seen_.target,
            "/api/v1/namespaces/demo/configmaps?limit=2&continue=tok%3Den&"
            "resourceVersion=0&resourceVersionMatch=NotOlderThan&"
            "labelSelector=app%20in%20%28a%2Cb%29&"
            "fieldSelector=metadata.name%21%3Dx");
  EXPECT_EQ(seen_.accept, "application/json");
}

// A ConfigMapList of `n` items; item `bad` (if >= 0) has no name.
std::string BigList(int n, int bad = -1) {
  std::string body =
      R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"77"},"items":[)";
  for (int i = 0; i < n; ++i) {
    if (i > 0) body += ",";
    const std::string name =
        i == bad ? std::string() : absl::StrCat(R"("name":"cm-)", i, R"(",)");
    absl::StrAppend(
        &body, R"({"metadata":{)", name,
        R"("namespace":"demo","resourceVersion":")", i,
        R"(","managedFields":[{"manager":"m","fieldsV1":{"f:data":{"k:{\"a\":1}":{}}}}]},)",
        R"("data":{"payload":")", std::string(200 + i % 50, 'x'),
        R"(","braces":"{[\"}]"}})");
  }
  return body + "]}";
}

TEST_F(ResourceClientTest, LargeListIsDecodedWhileItStreamsIn) {
  const std::string body = BigList(3000);
  ServeStream("/api/v1/namespaces/demo/configmaps", body, 7777);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  auto list = client.List(ListOptions());
  ASSERT_TRUE(list.ok()) << list.status();
  auto want = DecodeList(body);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(list->resource_version, "77");
  ASSERT_EQ(list->items.size(), 3000u);
  for (size_t i = 0; i < list->items.size(); ++i) {
    ASSERT_EQ(list->items[i]->json(), want->items[i]->json()) << i;
    EXPECT_EQ(list->items[i]->Key(), absl::StrCat("demo/cm-", i));
  }
  EXPECT_EQ(client.bytes_received(), body.size());
  // Inline decoding gives the same list.
  ResourceClientOptions inline_decode;
  inline_decode.list_decode_threads = 0;
  ResourceClient inline_client(transport_.get(), ConfigMaps(), "demo",
                               inline_decode);
  auto again = inline_client.List(ListOptions());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->items.size(), 3000u);
  EXPECT_EQ(again->items[2999]->json(), want->items[2999]->json());
}

TEST_F(ResourceClientTest, BadItemFailsTheListNamingRequestAndItem) {
  ServeStream("/api/v1/namespaces/demo/configmaps", BigList(3000, 1234), 7777);
  StartAndConnect();
  for (int threads : {0, 1, 2}) {
    ResourceClientOptions options;
    options.list_decode_threads = threads;
    ResourceClient client(transport_.get(), ConfigMaps(), "demo", options);
    auto list = client.List(ListOptions());
    ASSERT_FALSE(list.ok()) << threads;
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(list.status().message()),
                HasSubstr("GET /api/v1/namespaces/demo/configmaps: list: "
                          "items[1234]: missing metadata.name"))
        << threads;
  }
}

// Serves a list of three pages chained by continue tokens "c2" and "c3";
// page 3 ("c3") answers 410 after ExpireLast(), and the request for "c2"
// waits for ReleaseC2() after StallC2() (both before the server starts).
//
// The handler owns the state (a shared_ptr), not this object: a request
// can still be in the server when the test body ends (a prefetch the
// client cancelled after sending it, a stalled page released at the end)
// and the server runs its handler until the fixture stops it, after this
// object is gone. A handler writing into a destroyed PagedServer (its
// requests map) corrupted the heap on a loaded CI machine.
class PagedServer {
 public:
  explicit PagedServer(httplib::Server& srv)
      : state_(std::make_shared<State>()) {
    srv.Get(
        "/api/v1/namespaces/demo/configmaps",
        [state = state_](const httplib::Request& req, httplib::Response& res) {
          state->Handle(req, res);
        });
  }

  void StallC2() { state_->stall_c2 = true; }
  void ReleaseC2() { state_->release_c2.Notify(); }
  void ExpireLast() { state_->expire_last = true; }
  int Requests(const std::string& token) {
    absl::MutexLock lock(&state_->mu);
    return state_->requests[token];
  }
  // Waits (bounded) until the server saw a request for `token`.
  bool AwaitRequest(const std::string& token) {
    State* const st = state_.get();
    absl::MutexLock lock(&st->mu);
    auto seen = [st, &token]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(st->mu) {
      return st->requests[token] > 0;
    };
    return st->mu.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(30));
  }
  bool SawResourceVersionWithContinue() {
    absl::MutexLock lock(&state_->mu);
    return state_->with_rv;
  }

 private:
  struct State {
    void Handle(const httplib::Request& req, httplib::Response& res) {
      const std::string token = req.get_param_value("continue");
      {
        absl::MutexLock lock(&mu);
        ++requests[token];
        if (!token.empty() && !req.get_param_value("resourceVersion").empty()) {
          with_rv = true;
        }
      }
      if (token == "c2" && stall_c2) {
        release_c2.WaitForNotificationWithTimeout(absl::Seconds(60));
      }
      if (token == "c3" && expire_last) {
        res.status = 410;
        const std::string body = Recorded("list-expired-continue-410.txt");
        res.set_content(body.substr(0, body.find('\n')), "application/json");
        return;
      }
      const std::string next = token.empty() ? "c2" : token == "c2" ? "c3" : "";
      const int page = token.empty() ? 1 : token == "c2" ? 2 : 3;
      std::string body = absl::StrCat(
          R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9")",
          next.empty() ? "" : absl::StrCat(R"(,"continue":")", next, "\""),
          R"(},"items":[)");
      for (int i = 0; i < 2; ++i) {
        absl::StrAppend(&body, i > 0 ? "," : "",
                        R"({"metadata":{"namespace":"demo","name":"p)", page,
                        "-", i, R"("}})");
      }
      res.set_content(body + "]}", "application/json");
    }

    // Set before the server starts, read-only afterwards.
    bool stall_c2 = false;
    bool expire_last = false;
    absl::Notification release_c2;
    absl::Mutex mu;
    std::map<std::string, int> requests ABSL_GUARDED_BY(mu);
    bool with_rv ABSL_GUARDED_BY(mu) = false;
  };

  const std::shared_ptr<State> state_;
};

ListOptions Page(const std::string& token) {
  ListOptions o;
  o.limit = 2;
  if (token.empty()) {
    o.resource_version = "0";  // the first page, as a reflector asks
  } else {
    o.continue_token = token;
  }
  return o;
}

TEST_F(ResourceClientTest, PagerGetsEachNextPagePrefetchedOnce) {
  PagedServer pages(srv_.server());
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  auto p1 = client.List(Page(""));
  ASSERT_TRUE(p1.ok()) << p1.status();
  EXPECT_EQ(p1->continue_token, "c2");
  // Page 2 is requested without being asked for.
  ASSERT_TRUE(pages.AwaitRequest("c2"));
  auto p2 = client.List(Page("c2"));
  ASSERT_TRUE(p2.ok()) << p2.status();
  ASSERT_EQ(p2->items.size(), 2u);
  EXPECT_EQ(p2->items[1]->Key(), "demo/p2-1");
  EXPECT_EQ(p2->continue_token, "c3");
  auto p3 = client.List(Page("c3"));
  ASSERT_TRUE(p3.ok()) << p3.status();
  EXPECT_EQ(p3->items[0]->Key(), "demo/p3-0");
  EXPECT_EQ(p3->continue_token, "");
  // Each page was requested exactly once, never with a resourceVersion
  // next to the continue token.
  EXPECT_EQ(pages.Requests(""), 1);
  EXPECT_EQ(pages.Requests("c2"), 1);
  EXPECT_EQ(pages.Requests("c3"), 1);
  EXPECT_FALSE(pages.SawResourceVersionWithContinue());
}

TEST_F(ResourceClientTest, ListWithItemsHandsOverItemsWhileTheBodyArrives) {
  // The server sends the first half of the list, then waits until the
  // client has handed over an item before it sends the rest: only a client
  // that hands items over during the download gets the whole list.
  const std::string body = BigList(2000);
  const size_t half = body.size() / 2;
  absl::Notification item_seen;
  std::atomic<bool> waited_for_client{false};
  srv_.server().Get(
      "/api/v1/namespaces/demo/configmaps",
      [&](const httplib::Request&, httplib::Response& res) {
        res.set_chunked_content_provider(
            "application/json", [&](size_t, httplib::DataSink& sink) {
              sink.write(body.data(), half);
              waited_for_client.store(
                  item_seen.WaitForNotificationWithTimeout(absl::Seconds(30)));
              sink.write(body.data() + half, body.size() - half);
              sink.done();
              return true;
            });
      });
  StartAndConnect();
  // Inline decoding, where an item is handed over as its last byte is in.
  // (With decoding threads, items are handed over with the next chunk
  // after their batch is decoded: see the decoder's tests.)
  ResourceClientOptions options;
  options.list_decode_threads = 0;
  ResourceClient client(transport_.get(), ConfigMaps(), "demo", options);
  std::vector<ObjectPtr> seen;
  auto list = client.ListWithItems(ListOptions(), [&](const ObjectPtr& obj) {
    seen.push_back(obj);
    if (!item_seen.HasBeenNotified()) item_seen.Notify();
    return absl::OkStatus();
  });
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(waited_for_client.load()) << "no item before the body ended";
  ASSERT_EQ(seen.size(), 2000u);
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], list->items[i]) << i;
  }
}

TEST_F(ResourceClientTest, ListWithItemsCoversPrefetchedPagesInOrder) {
  PagedServer pages(srv_.server());
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  std::vector<std::string> seen;
  const ListerWatcher::ItemFn on_item = [&seen](const ObjectPtr& obj) {
    seen.push_back(obj->Key());
    return absl::OkStatus();
  };
  std::string token;
  do {
    auto page = client.ListWithItems(Page(token), on_item);
    ASSERT_TRUE(page.ok()) << page.status();
    token = page->continue_token;
    // The next page was requested (prefetched) before the pager asks.
    if (!token.empty()) ASSERT_TRUE(pages.AwaitRequest(token));
  } while (!token.empty());
  EXPECT_THAT(seen, ElementsAre("demo/p1-0", "demo/p1-1", "demo/p2-0",
                                "demo/p2-1", "demo/p3-0", "demo/p3-1"));
  EXPECT_EQ(pages.Requests("c2"), 1);
  EXPECT_EQ(pages.Requests("c3"), 1);
}

TEST_F(ResourceClientTest, AnItemCallbackErrorFailsTheList) {
  ServeStream("/api/v1/namespaces/demo/configmaps", BigList(3000), 7777);
  StartAndConnect();
  for (int threads : {0, 2}) {
    ResourceClientOptions options;
    options.list_decode_threads = threads;
    ResourceClient client(transport_.get(), ConfigMaps(), "demo", options);
    int calls = 0;
    auto list =
        client.ListWithItems(ListOptions(), [&calls](const ObjectPtr& obj) {
          ++calls;
          return obj->name() == "cm-1500"
                     ? absl::AbortedError("cannot stage cm-1500")
                     : absl::OkStatus();
        });
    ASSERT_FALSE(list.ok()) << threads;
    EXPECT_EQ(list.status().code(), absl::StatusCode::kAborted);
    EXPECT_THAT(std::string(list.status().message()),
                HasSubstr("GET /api/v1/namespaces/demo/configmaps: cannot "
                          "stage cm-1500"));
    EXPECT_EQ(calls, 1501) << threads;
  }
}

// Every page is prefetched, not every other one: the page after a
// prefetched one goes out when the pager takes the prefetched one (or
// earlier), before the pager asks for it.
TEST_F(ResourceClientTest, EveryNextPageIsRequestedBeforeThePagerAsks) {
  PagedServer pages(srv_.server());
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  ASSERT_TRUE(client.List(Page("")).ok());
  ASSERT_TRUE(pages.AwaitRequest("c2"));
  auto p2 = client.List(Page("c2"));
  ASSERT_TRUE(p2.ok()) << p2.status();
  EXPECT_TRUE(pages.AwaitRequest("c3"))
      << "page 3 was not requested ahead of the pager";
  auto p3 = client.List(Page("c3"));
  ASSERT_TRUE(p3.ok()) << p3.status();
  EXPECT_EQ(p3->items[1]->Key(), "demo/p3-1");
  EXPECT_EQ(pages.Requests("c2"), 1);
  EXPECT_EQ(pages.Requests("c3"), 1);
}

TEST_F(ResourceClientTest, PrefetchedErrorIsReturnedAsIs) {
  PagedServer pages(srv_.server());
  pages.ExpireLast();
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  ASSERT_TRUE(client.List(Page("")).ok());
  ASSERT_TRUE(client.List(Page("c2")).ok());
  auto p3 = client.List(Page("c3"));
  EXPECT_TRUE(IsExpired(p3.status())) << p3.status();
  EXPECT_EQ(pages.Requests("c3"), 1);
}

TEST_F(ResourceClientTest, OtherRequestDiscardsThePrefetchedPage) {
  PagedServer pages(srv_.server());
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  ASSERT_TRUE(client.List(Page("")).ok());
  // The pager restarts (a relist) instead of asking for "c2".
  auto again = client.List(Page(""));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->items[0]->Key(), "demo/p1-0");
  EXPECT_EQ(pages.Requests(""), 2);
  // Asking for page 2 now still works (prefetched again or fetched).
  auto p2 = client.List(Page("c2"));
  ASSERT_TRUE(p2.ok()) << p2.status();
  EXPECT_EQ(p2->items[0]->Key(), "demo/p2-0");
}

TEST_F(ResourceClientTest, DestroyingTheClientCancelsAStalledPrefetch) {
  PagedServer pages(srv_.server());
  pages.StallC2();
  StartAndConnect();
  {
    ResourceClient client(transport_.get(), ConfigMaps(), "demo");
    ASSERT_TRUE(client.List(Page("")).ok());
    ASSERT_TRUE(pages.AwaitRequest("c2"));
    // The server holds "c2" until after the client is gone: without the
    // cancellation, this destructor would wait for it forever.
  }
  pages.ReleaseC2();
}

TEST_F(ResourceClientTest, NoPrefetchWhenDisabled) {
  PagedServer pages(srv_.server());
  StartAndConnect();
  ResourceClientOptions options;
  options.prefetch_list_pages = false;
  {
    ResourceClient client(transport_.get(), ConfigMaps(), "demo", options);
    ASSERT_TRUE(client.List(Page("")).ok());
  }
  // The client is gone, so nothing can request page 2 any more.
  EXPECT_EQ(pages.Requests("c2"), 0);
}

TEST(ResourceClientPathTest, OptionSelectorsApplyUnlessTheRequestSetsItsOwn) {
  ResourceClientOptions opts;
  opts.label_selector = "app=web";
  opts.field_selector = "spec.nodeName=n1";
  // No transport is used: only the paths are built.
  ResourceClient client(nullptr, ConfigMaps(), "demo", opts);
  EXPECT_EQ(client.ListPath(ListOptions()),
            "/api/v1/namespaces/demo/configmaps?labelSelector=app%3Dweb&"
            "fieldSelector=spec.nodeName%3Dn1");
  WatchOptions w;
  w.resource_version = "7";
  EXPECT_EQ(client.WatchPath(w),
            "/api/v1/namespaces/demo/configmaps?watch=1&resourceVersion=7&"
            "allowWatchBookmarks=true&labelSelector=app%3Dweb&"
            "fieldSelector=spec.nodeName%3Dn1");
  ListOptions own;
  own.label_selector = "tier=db";
  own.field_selector = "metadata.name=x";
  EXPECT_EQ(client.ListPath(own),
            "/api/v1/namespaces/demo/configmaps?labelSelector=tier%3Ddb&"
            "fieldSelector=metadata.name%3Dx");
}

TEST_F(ResourceClientTest, MetadataOnlyAsksForPartialObjectMetadata) {
  srv_.server().Get(
      "/apis/apps/v1/deployments",
      [this](const httplib::Request& req, httplib::Response& res) {
        seen_.Record(req);
        res.set_content(Recorded("list-configmaps-metadata-only.json"),
                        "application/json");
      });
  StartAndConnect();
  ApiResource deployments;
  deployments.group = "apps";
  deployments.version = "v1";
  deployments.resource = "deployments";
  deployments.namespaced = true;
  ResourceClientOptions opts;
  opts.metadata_only = true;
  ResourceClient client(transport_.get(), deployments, "", opts);
  auto list = client.List(ListOptions());
  ASSERT_TRUE(list.ok()) << list.status();
  absl::MutexLock lock(&seen_.mu);
  EXPECT_EQ(seen_.accept, kAcceptMetadataList);
  EXPECT_EQ(seen_.target, "/apis/apps/v1/deployments");
}

TEST_F(ResourceClientTest, ExpiredContinueIsExpired) {
  srv_.server().Get("/api/v1/configmaps", [](const httplib::Request&,
                                             httplib::Response& res) {
    res.status = 410;
    std::string body = Recorded("list-expired-continue-410.txt");
    res.set_content(body.substr(0, body.find('\n')), "application/json");
  });
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "");
  ListOptions o;
  o.continue_token = "old";
  auto list = client.List(o);
  EXPECT_TRUE(IsExpired(list.status())) << list.status();
}

TEST_F(ResourceClientTest, ForbiddenListReadsLikeKubectl) {
  srv_.server().Get("/api/v1/namespaces/demo/configmaps",
                    [](const httplib::Request&, httplib::Response& res) {
                      std::string body = Recorded("error-403.txt");
                      res.status = 403;
                      res.set_content(body.substr(0, body.find('\n')),
                                      "application/json");
                    });
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  auto list = client.List(ListOptions());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(HttpCode(list.status()), 403);
  // kubectl: Error from server (Forbidden): configmaps is forbidden: ...
  EXPECT_THAT(
      std::string(list.status().message()),
      HasSubstr("Error from server (Forbidden): configmaps is forbidden: User "
                "\"nobody\" cannot list resource \"configmaps\" in API group "
                "\"\" in the namespace \"demo\""));
  EXPECT_TRUE(absl::StartsWith(list.status().message(),
                               "403 GET /api/v1/namespaces/demo/configmaps"))
      << list.status();
}

TEST_F(ResourceClientTest, WatchDecodesRecordedStreamThenEnds) {
  ServeStream("/api/v1/namespaces/demo/configmaps",
              Recorded("watch-configmaps.jsonl"), 61);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  WatchOptions o;
  o.resource_version = "158256";
  o.timeout = absl::Seconds(6);
  auto watch = client.Watch(o);
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::vector<WatchEventType> types;
  WatchEvent ev;
  absl::Status s;
  while ((s = (*watch)->Next(&ev)).ok()) types.push_back(ev.type);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ(types, (std::vector<WatchEventType>{
                       WatchEventType::kAdded, WatchEventType::kModified,
                       WatchEventType::kModified, WatchEventType::kDeleted,
                       WatchEventType::kBookmark}));
  absl::MutexLock lock(&seen_.mu);
  EXPECT_EQ(seen_.target,
            "/api/v1/namespaces/demo/configmaps?watch=1&resourceVersion=158256&"
            "allowWatchBookmarks=true&timeoutSeconds=6");
}

TEST_F(ResourceClientTest, BytesReceivedCountsListAndWatchBodiesOnly) {
  const std::string list_body = Recorded("list-configmaps-limit2.json");
  const std::string watch_body = Recorded("watch-configmaps.jsonl");
  srv_.server().Get("/api/v1/namespaces/demo/configmaps",
                    [&](const httplib::Request& req, httplib::Response& res) {
                      if (req.has_param("watch")) {
                        res.set_content(watch_body, "application/json");
                      } else {
                        res.set_content(list_body, "application/json");
                      }
                    });
  srv_.server().Get("/api/v1/namespaces/other/configmaps",
                    [&](const httplib::Request&, httplib::Response& res) {
                      res.set_content(list_body, "application/json");
                    });
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  ResourceClient other(transport_.get(), ConfigMaps(), "other");
  EXPECT_EQ(client.bytes_received(), 0u);
  ASSERT_TRUE(client.List(ListOptions()).ok());
  EXPECT_EQ(client.bytes_received(), list_body.size());
  {
    auto watch = client.Watch(WatchOptions());
    ASSERT_TRUE(watch.ok()) << watch.status();
    WatchEvent ev;
    while ((*watch)->Next(&ev).ok()) {
    }
  }
  EXPECT_EQ(client.bytes_received(), list_body.size() + watch_body.size());
  // Each client counts its own traffic; the transport counts everyone's.
  ASSERT_TRUE(other.List(ListOptions()).ok());
  EXPECT_EQ(other.bytes_received(), list_body.size());
  EXPECT_EQ(client.bytes_received(), list_body.size() + watch_body.size());
  EXPECT_EQ(transport_->bytes_received(),
            2 * list_body.size() + watch_body.size());
}

TEST_F(ResourceClientTest, WatchErrorEventBecomesExpiredStatus) {
  ServeStream("/api/v1/configmaps", Recorded("watch-too-old-rv-410.jsonl"),
              1000);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "");
  WatchOptions o;
  o.resource_version = "5";
  o.send_initial_events = true;
  auto watch = client.Watch(o);
  ASSERT_TRUE(watch.ok()) << watch.status();
  WatchEvent ev;
  ASSERT_TRUE((*watch)->Next(&ev).ok());
  ASSERT_EQ(ev.type, WatchEventType::kError);
  absl::Status s = StatusFromApiStatus(ev.status, "GET", "/api/v1/configmaps");
  EXPECT_TRUE(IsExpired(s)) << s;
  absl::MutexLock lock(&seen_.mu);
  EXPECT_THAT(seen_.target, HasSubstr("sendInitialEvents=true"));
}

TEST_F(ResourceClientTest, WatchListInitialEventsComeInOrderOverHttp) {
  // Enough initial events for many batches on the list decoder's workers,
  // then the end bookmark and live events, over real HTTP in odd chunks.
  std::string body;
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&body, R"({"type":"ADDED","object":{"apiVersion":"v1",)",
                    R"("kind":"ConfigMap","metadata":{"name":"cm-)", i,
                    R"(","namespace":"demo","resourceVersion":")", 10 + i,
                    R"("},"data":{"k":"a value of some length"}}})", "\n");
  }
  absl::StrAppend(
      &body, R"({"type":"BOOKMARK","object":{"kind":"ConfigMap",)",
      R"("apiVersion":"v1","metadata":{"resourceVersion":"4000",)",
      R"("annotations":{"k8s.io/initial-events-end":"true"}}}})", "\n",
      R"({"type":"DELETED","object":{"apiVersion":"v1","kind":"ConfigMap",)",
      R"("metadata":{"name":"cm-7","namespace":"demo",)",
      R"("resourceVersion":"4001"}}})", "\n");
  ServeStream("/api/v1/configmaps", body, 4093);
  StartAndConnect();
  ResourceClientOptions options;
  options.list_decode_threads = 2;
  ResourceClient client(transport_.get(), ConfigMaps(), "", options);
  WatchOptions o;
  o.send_initial_events = true;
  auto watch = client.Watch(o);
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::vector<std::string> got;
  WatchEvent ev;
  absl::Status s;
  while ((s = (*watch)->Next(&ev)).ok()) {
    got.push_back(absl::StrCat(
        WatchEventTypeName(ev.type), " ", ev.object ? ev.object->name() : "",
        " rv=", ev.resource_version, ev.initial_events_end ? " end" : ""));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  ASSERT_EQ(got.size(), 3002u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(got[i], absl::StrCat("ADDED cm-", i, " rv=", 10 + i));
  }
  EXPECT_EQ(got[3000], "BOOKMARK  rv=4000 end");
  EXPECT_EQ(got[3001], "DELETED cm-7 rv=4001");
  EXPECT_EQ(client.bytes_received(), body.size());
}

TEST_F(ResourceClientTest, PartialLastLineIsDataLoss) {
  std::string body = Recorded("watch-configmaps.jsonl");
  body.resize(body.size() - 20);  // cut inside the BOOKMARK
  ServeStream("/api/v1/configmaps", body, 100);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "");
  auto watch = client.Watch(WatchOptions());
  ASSERT_TRUE(watch.ok());
  WatchEvent ev;
  int events = 0;
  absl::Status s;
  while ((s = (*watch)->Next(&ev)).ok()) ++events;
  EXPECT_EQ(events, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST_F(ResourceClientTest, CompleteLineThatDoesNotDecodeIsAnUndecodableEvent) {
  std::string body = Recorded("watch-configmaps.jsonl");
  const size_t first_end = body.find('\n') + 1;
  // After the first event, a complete line that is not a watch event: the
  // reflector must relist (a re-watch would replay it), not re-watch.
  body.insert(first_end, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":\n");
  ServeStream("/api/v1/configmaps", body, 100);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "");
  auto watch = client.Watch(WatchOptions());
  ASSERT_TRUE(watch.ok());
  WatchEvent ev;
  int events = 0;
  absl::Status s;
  while ((s = (*watch)->Next(&ev)).ok()) ++events;
  EXPECT_EQ(events, 1);
  EXPECT_TRUE(IsUndecodableEvent(s)) << s;
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST_F(ResourceClientTest, PartialLastLineIsNotAnUndecodableEvent) {
  std::string body = Recorded("watch-configmaps.jsonl");
  body.resize(body.size() - 20);  // a cut connection, not a bad event
  ServeStream("/api/v1/configmaps", body, 100);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "");
  auto watch = client.Watch(WatchOptions());
  ASSERT_TRUE(watch.ok());
  WatchEvent ev;
  absl::Status s;
  while ((s = (*watch)->Next(&ev)).ok()) {
  }
  EXPECT_FALSE(IsUndecodableEvent(s)) << s;
}

TEST_F(ResourceClientTest, CreateAndPatch) {
  std::vector<std::string> got;
  absl::Mutex mu;
  auto record = [&](const httplib::Request& req, httplib::Response& res) {
    absl::MutexLock lock(&mu);
    got.push_back(req.method + " " + req.path + " " +
                  req.get_header_value("Content-Type") + " " + req.body);
    res.set_content("{\"kind\":\"Event\"}", "application/json");
  };
  srv_.server().Post("/api/v1/namespaces/demo/configmaps", record);
  srv_.server().Patch("/api/v1/namespaces/demo/configmaps/cm-1", record);
  StartAndConnect();
  ResourceClient client(transport_.get(), ConfigMaps(), "demo");
  auto created = client.Create("{\"a\":1}");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, "{\"kind\":\"Event\"}");
  ASSERT_TRUE(
      client.Patch("cm-1", PatchType::kStrategicMerge, "{\"b\":2}").ok());
  ASSERT_TRUE(client.Patch("cm-1", PatchType::kMerge, "{\"c\":3}").ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(got, (std::vector<std::string>{
                     "POST /api/v1/namespaces/demo/configmaps "
                     "application/json {\"a\":1}",
                     "PATCH /api/v1/namespaces/demo/configmaps/cm-1 "
                     "application/strategic-merge-patch+json {\"b\":2}",
                     "PATCH /api/v1/namespaces/demo/configmaps/cm-1 "
                     "application/merge-patch+json {\"c\":3}"}));
}

TEST(ResourceClientPathTest, ClusterScopedIgnoresNamespace) {
  ApiResource nodes;
  nodes.version = "v1";
  nodes.resource = "nodes";
  nodes.namespaced = false;
  ResourceClient client(nullptr, nodes, "demo");
  EXPECT_EQ(client.CollectionPath(), "/api/v1/nodes");
}

}  // namespace
}  // namespace client
}  // namespace informer

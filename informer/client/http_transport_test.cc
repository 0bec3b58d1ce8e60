#include "informer/client/http_transport.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/exec_credential.h"
#include "informer/client/test_server.h"
#include "informer/object/api_error.h"

namespace informer {
namespace client {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::unique_ptr<HttpTransport> MakeTransport(
    const RestConfig& rc, Clock* clock = RealClock(),
    std::unique_ptr<CredentialProvider> creds = nullptr) {
  if (creds == nullptr) {
    creds = std::make_unique<StaticCredentialProvider>(
        Credentials{rc.bearer_token, rc.client_cert_data, rc.client_key_data});
  }
  auto t = HttpTransport::Create(rc, std::move(creds), clock);
  CHECK(t.ok()) << t.status();
  return *std::move(t);
}

RestConfig Config(const std::string& server) {
  RestConfig rc;
  rc.server = server;
  rc.request_timeout = absl::Seconds(30);
  return rc;
}

TEST(HttpTransportTest, GetSendsHeadersAndReusesConnection) {
  TestServer srv;
  std::atomic<int> calls{0};
  std::string user_agent, auth, accept;
  bool any_encoding = false;
  absl::Mutex mu;
  srv.server().Get(
      "/api", [&](const httplib::Request& req, httplib::Response& res) {
        absl::MutexLock lock(&mu);
        user_agent = req.get_header_value("User-Agent");
        auth = req.get_header_value("Authorization");
        accept = req.get_header_value("Accept");
        any_encoding = any_encoding || req.has_header("Accept-Encoding");
        ++calls;
        res.set_content(
            ReadFile("testdata/kube-apiserver-v1.24/discovery-api.json"),
            "application/json");
      });
  srv.Start();
  RestConfig rc = Config(srv.url());
  rc.bearer_token = "secret-token";
  auto t = MakeTransport(rc);
  for (int i = 0; i < 3; ++i) {
    HttpRequest req;
    req.path = "/api";
    auto resp = t->Do(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->status, 200);
    EXPECT_THAT(resp->body, HasSubstr("APIVersions"));
  }
  absl::MutexLock lock(&mu);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(user_agent, "informer-sidecar/0.1.0");
  EXPECT_EQ(auth, "Bearer secret-token");
  EXPECT_EQ(accept, "application/json");
  // Compression is opt-in: by default no Accept-Encoding at all.
  EXPECT_FALSE(any_encoding);
  EXPECT_EQ(t->connections_opened(), 1);  // keep-alive
}

// What each compression setting puts on the wire, for unary requests and
// watches alike: nothing by default, exactly "gzip" when opted in.
TEST(HttpTransportTest, AcceptEncodingFollowsTheCompressionOption) {
  TestServer srv;
  absl::Mutex mu;
  std::vector<std::string> seen;  // "<path> <Accept-Encoding or (none)>"
  auto record = [&](const httplib::Request& req) {
    absl::MutexLock lock(&mu);
    seen.push_back(absl::StrCat(req.path, " ",
                                req.has_header("Accept-Encoding")
                                    ? req.get_header_value("Accept-Encoding")
                                    : "(none)"));
  };
  srv.server().Get("/api/v1/pods",
                   [&](const httplib::Request& req, httplib::Response& res) {
                     record(req);
                     res.set_content("{}", "text/plain");
                   });
  srv.server().Get("/api/v1/watch",
                   [&](const httplib::Request& req, httplib::Response& res) {
                     record(req);
                     res.set_content("{}\n", "text/plain");
                   });
  srv.Start();
  for (ApiCompression c : {ApiCompression::kNone, ApiCompression::kGzip}) {
    RestConfig rc = Config(srv.url());
    rc.compression = c;
    auto t = MakeTransport(rc);
    HttpRequest req;
    req.path = "/api/v1/pods";
    ASSERT_TRUE(t->Do(req).ok());
    req.path = "/api/v1/watch";
    auto stream = t->Stream(req, absl::Seconds(30));
    ASSERT_TRUE(stream.ok()) << stream.status();
    std::string got;
    absl::Status s;
    while ((s = (*stream)->Read(&got)).ok()) {
    }
    EXPECT_EQ(got, "{}\n");
  }
  absl::MutexLock lock(&mu);
  EXPECT_THAT(seen, ::testing::ElementsAre(
                        "/api/v1/pods (none)", "/api/v1/watch (none)",
                        "/api/v1/pods gzip", "/api/v1/watch gzip"));
}

TEST(HttpTransportTest, AStreamBuffersAboutOneMebibyteWhateverTheServerSent) {
  // 8 MiB of watch lines sent at once: the stream hands them over in
  // pieces of about 1 MiB (pausing the transfer in between, TCP holding the
  // rest), never all that libcurl could read in one go.
  std::string body;
  for (int i = 0; body.size() < (8 << 20); ++i) {
    body += absl::StrCat("{\"n\":", i, ",\"pad\":\"", std::string(900, 'x'),
                         "\"}\n");
  }
  TestServer srv;
  srv.server().Get("/api/v1/watch",
                   [&](const httplib::Request&, httplib::Response& res) {
                     res.set_content(body, "text/plain");
                   });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/api/v1/watch";
  auto stream = t->Stream(req, absl::Seconds(30));
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::string got;
  size_t largest = 0;
  absl::Status s;
  while (true) {
    std::string piece;
    s = (*stream)->Read(&piece);
    if (!s.ok()) break;
    largest = std::max(largest, piece.size());
    got += piece;
  }
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(got.size(), body.size());
  EXPECT_TRUE(got == body);
  // 1 MiB plus at most one receive buffer (512 KiB).
  EXPECT_LE(largest, size_t{3} << 19);
}

TEST(HttpTransportTest, ServerPathPrefixIsPrepended) {
  TestServer srv;
  srv.server().Get("/prefix/api/v1",
                   [](const httplib::Request&, httplib::Response& res) {
                     res.set_content("{}", "application/json");
                   });
  srv.Start();
  auto t = MakeTransport(Config(srv.url() + "/prefix/"));
  HttpRequest req;
  req.path = "/api/v1";
  EXPECT_TRUE(t->Do(req).ok());
}

// Bodies past the huge-page growth threshold, with and without a
// Content-Length, arrive byte for byte and are counted per request and in
// the transport's total, also from concurrent requests.
TEST(HttpTransportTest, LargeBodiesArriveIntactAndBytesAreCounted) {
  TestServer srv;
  std::string big(9 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>('a' + i % 23);
  srv.server().Get("/sized",
                   [&](const httplib::Request&, httplib::Response& res) {
                     res.set_content(big, "application/json");
                   });
  srv.server().Get(
      "/chunked", [&](const httplib::Request&, httplib::Response& res) {
        res.set_chunked_content_provider(
            "application/json", [&](size_t, httplib::DataSink& sink) {
              for (size_t i = 0; i < big.size(); i += 300001) {
                sink.write(big.data() + i,
                           std::min<size_t>(300001, big.size() - i));
              }
              sink.done();
              return true;
            });
      });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  EXPECT_EQ(t->bytes_received(), 0u);
  for (const char* path : {"/sized", "/chunked"}) {
    HttpRequest req;
    req.path = path;
    auto resp = t->Do(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_TRUE(resp->body == big) << path;
    EXPECT_EQ(resp->bytes_received, big.size()) << path;
  }
  EXPECT_EQ(t->bytes_received(), 2 * big.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&t] {
      HttpRequest req;
      req.path = "/chunked";
      EXPECT_TRUE(t->Do(req).ok());
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t->bytes_received(), 6 * big.size());
}

TEST(HttpTransportTest, BodySinkReceivesA2xxBodyInChunks) {
  TestServer srv;
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>('a' + i % 23);
  }
  srv.server().Get("/sized",
                   [&](const httplib::Request&, httplib::Response& res) {
                     res.set_content(big, "application/json");
                   });
  srv.server().Get(
      "/chunked", [&](const httplib::Request&, httplib::Response& res) {
        res.set_chunked_content_provider(
            "application/json", [&](size_t, httplib::DataSink& sink) {
              for (size_t i = 0; i < big.size(); i += 100003) {
                sink.write(big.data() + i,
                           std::min<size_t>(100003, big.size() - i));
              }
              sink.done();
              return true;
            });
      });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  for (const char* path : {"/sized", "/chunked"}) {
    std::string got;
    int chunks = 0;
    HttpRequest req;
    req.path = path;
    req.body_sink = [&](absl::string_view chunk) {
      EXPECT_FALSE(chunk.empty());
      got.append(chunk.data(), chunk.size());
      ++chunks;
      return absl::OkStatus();
    };
    auto resp = t->Do(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->status, 200);
    EXPECT_TRUE(resp->body.empty()) << path;
    EXPECT_EQ(resp->bytes_received, big.size()) << path;
    EXPECT_TRUE(got == big) << path;
    EXPECT_GT(chunks, 1) << path;
  }
  EXPECT_EQ(t->bytes_received(), 2 * big.size());
}

TEST(HttpTransportTest, BodySinkErrorAbortsTheTransferAndIsReturned) {
  TestServer srv;
  const std::string big(4 << 20, 'x');
  srv.server().Get("/big",
                   [&](const httplib::Request&, httplib::Response& res) {
                     res.set_content(big, "application/json");
                   });
  srv.Start();
  std::vector<int> codes;
  absl::Mutex mu;
  RestConfig rc = Config(srv.url());
  TransportOptions options;
  options.observer = [&](const RequestObservation& o) {
    absl::MutexLock lock(&mu);
    codes.push_back(o.code);
  };
  auto t = HttpTransport::Create(
      rc, std::make_unique<StaticCredentialProvider>(Credentials{}),
      RealClock(), options);
  ASSERT_TRUE(t.ok());
  size_t fed = 0;
  HttpRequest req;
  req.path = "/big";
  req.body_sink = [&](absl::string_view chunk) {
    fed += chunk.size();
    return absl::InvalidArgumentError("list: items[3]: malformed JSON");
  };
  auto resp = (*t)->Do(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resp.status().message(), "list: items[3]: malformed JSON");
  EXPECT_GT(fed, 0u);
  EXPECT_LT(fed, big.size());  // aborted at the first chunk
  absl::MutexLock lock(&mu);
  EXPECT_EQ(codes, std::vector<int>({200}));  // the server did answer
}

TEST(HttpTransportTest, CancelAbandonsARequestTheServerSitsOn) {
  TestServer srv;
  absl::Notification arrived, release;
  srv.server().Get("/slow",
                   [&](const httplib::Request&, httplib::Response& res) {
                     arrived.Notify();
                     release.WaitForNotificationWithTimeout(absl::Seconds(60));
                     res.set_content("{}", "application/json");
                   });
  srv.server().Get("/fast",
                   [](const httplib::Request&, httplib::Response& res) {
                     res.set_content("{\"a\":1}", "application/json");
                   });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    arrived.WaitForNotification();
    cancel.store(true);
  });
  HttpRequest req;
  req.path = "/slow";
  req.cancel = &cancel;
  // Without the cancellation this would wait for `release`, which only
  // comes after Do returned.
  auto resp = t->Do(req);
  canceller.join();
  release.Notify();
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(resp.status().message()), HasSubstr("GET /slow"));
  // An uncancelled request with a cancel flag works as usual.
  std::atomic<bool> never{false};
  req.path = "/fast";
  req.cancel = &never;
  resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->body, "{\"a\":1}");
}

TEST(HttpTransportTest, BodySinkNeverSeesErrorBodies) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get("/api", [&](const httplib::Request& req,
                               httplib::Response& res) {
    ++calls;
    if (req.get_header_value("Authorization") != "Bearer good") {
      res.status = 401;
      res.set_content(
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})",
          "application/json");
      return;
    }
    res.status = calls.load() < 3 ? 404 : 200;
    res.set_content(
        calls.load() < 3
            ? R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404})"
            : "{\"ok\":true}",
        "application/json");
  });
  srv.Start();
  // First attempt 401 (retried with fresh credentials), then a 404: the
  // sink sees neither body, and the 404 reads as usual.
  class RotatingCredentials : public CredentialProvider {
   public:
    absl::StatusOr<Credentials> Get() override {
      return Credentials{invalidated_ ? "good" : "stale", "", ""};
    }
    void Invalidate(const Credentials&) override { invalidated_ = true; }

   private:
    bool invalidated_ = false;
  };
  auto t = MakeTransport(Config(srv.url()), RealClock(),
                         std::make_unique<RotatingCredentials>());
  std::string sunk;
  HttpRequest req;
  req.path = "/api";
  req.body_sink = [&](absl::string_view chunk) {
    sunk.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  };
  auto resp = t->Do(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(resp.status().message()), HasSubstr("not found"));
  EXPECT_EQ(sunk, "");
  resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(sunk, "{\"ok\":true}");
  EXPECT_EQ(calls.load(), 3);
}

TEST(HttpTransportTest, ErrorsReadLikeKubectl) {
  TestServer srv;
  srv.server().Get(
      "/api/v1/namespaces/demo/configmaps/does-not-exist",
      [](const httplib::Request&, httplib::Response& res) {
        res.status = 404;
        std::string body =
            ReadFile("testdata/kube-apiserver-v1.24/error-404.txt");
        res.set_content(body.substr(0, body.find('\n')), "application/json");
      });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/api/v1/namespaces/demo/configmaps/does-not-exist";
  auto resp = t->Do(req);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(resp.status().message(),
            "404 GET /api/v1/namespaces/demo/configmaps/does-not-exist: Error "
            "from server (NotFound): configmaps \"does-not-exist\" not found");
  EXPECT_EQ(HttpCode(resp.status()), 404);
}

int UnusedPort() {
  TestServer srv;
  srv.Start();
  return srv.port();  // closed when srv goes away
}

TEST(HttpTransportTest, ConnectionRefusedReadsLikeKubectl) {
  const int port = UnusedPort();
  auto t = MakeTransport(Config(absl::StrCat("http://127.0.0.1:", port)));
  HttpRequest req;
  req.path = "/api";
  auto resp = t->Do(req);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable);
  const std::string msg(resp.status().message());
  EXPECT_TRUE(absl::StartsWith(
      msg, absl::StrCat("The connection to the server 127.0.0.1:", port,
                        " was refused - did you specify the right host or "
                        "port?")))
      << msg;
  EXPECT_THAT(msg, HasSubstr("GET /api"));
  EXPECT_EQ(HttpCode(resp.status()), 0);

  // A watch is refused the same way.
  auto stream = t->Stream(req, absl::Seconds(30));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(stream.status().message()),
              HasSubstr("was refused - did you specify the right host"));
}

// A minimal HTTP forward proxy: it accepts absolute-form request lines
// ("GET http://127.0.0.1:<port>/path HTTP/1.1"), records them and forwards
// the request to the origin with httplib::Client.
class ForwardProxy {
 public:
  ForwardProxy() {
    srv_.server().Get(
        ".*", [this](const httplib::Request& req, httplib::Response& res) {
          absl::string_view target = req.target;
          {
            absl::MutexLock lock(&mu_);
            targets_.emplace_back(target);
          }
          if (!absl::ConsumePrefix(&target, "http://")) {
            res.status = 400;  // not a proxy request
            return;
          }
          size_t slash = target.find('/');
          std::string authority(target.substr(0, slash));
          std::string path(target.substr(slash));
          size_t colon = authority.rfind(':');
          httplib::Client origin(authority.substr(0, colon),
                                 std::stoi(authority.substr(colon + 1)));
          httplib::Headers headers;
          for (const char* h : {"Authorization", "Accept", "User-Agent"}) {
            if (req.has_header(h)) headers.emplace(h, req.get_header_value(h));
          }
          auto answer = origin.Get(path.c_str(), headers);
          if (!answer) {
            res.status = 502;
            return;
          }
          res.status = answer->status;
          res.set_content(answer->body,
                          answer->get_header_value("Content-Type").c_str());
        });
    srv_.Start();
  }
  std::string url() const { return srv_.url(); }
  std::vector<std::string> targets() {
    absl::MutexLock lock(&mu_);
    return targets_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  TestServer srv_;
};

TEST(HttpTransportTest, ProxyUrlRoutesRequestsThroughTheProxy) {
  TestServer origin;
  std::atomic<int> origin_calls{0};
  std::string auth;
  absl::Mutex mu;
  origin.server().Get("/api/v1/namespaces/demo/pods",
                      [&](const httplib::Request& req, httplib::Response& res) {
                        ++origin_calls;
                        absl::MutexLock lock(&mu);
                        auth = req.get_header_value("Authorization");
                        res.set_content("{\"kind\":\"PodList\"}",
                                        "application/json");
                      });
  origin.Start();
  ForwardProxy proxy;
  RestConfig rc = Config(origin.url());
  rc.proxy_url = proxy.url();
  rc.bearer_token = "via-proxy";
  auto t = MakeTransport(rc);
  HttpRequest req;
  req.path = "/api/v1/namespaces/demo/pods?limit=5";
  auto resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->body, "{\"kind\":\"PodList\"}");
  EXPECT_EQ(origin_calls.load(), 1);
  EXPECT_EQ(proxy.targets(),
            std::vector<std::string>{origin.url() +
                                     "/api/v1/namespaces/demo/pods?limit=5"});
  absl::MutexLock lock(&mu);
  EXPECT_EQ(auth, "Bearer via-proxy");
}

TEST(HttpTransportTest, WithoutProxyUrlRequestsGoDirect) {
  TestServer origin;
  origin.server().Get("/api",
                      [](const httplib::Request&, httplib::Response& res) {
                        res.set_content("{}", "application/json");
                      });
  origin.Start();
  ForwardProxy proxy;
  auto t = MakeTransport(Config(origin.url()));
  HttpRequest req;
  req.path = "/api";
  ASSERT_TRUE(t->Do(req).ok());
  EXPECT_TRUE(proxy.targets().empty());
}

TEST(HttpTransportTest, Http2OptionFallsBackToHttp11OverCleartext) {
  TestServer srv;
  srv.server().Get("/api",
                   [](const httplib::Request& req, httplib::Response& res) {
                     // No h2c upgrade attempt: libcurl offers h2 only through
                     // TLS ALPN.
                     if (req.has_header("Upgrade")) {
                       res.status = 400;
                       return;
                     }
                     res.set_content(req.version, "text/plain");
                   });
  srv.Start();
  for (bool http2 : {false, true}) {
    RestConfig rc = Config(srv.url());
    rc.http2 = http2;
    auto t = MakeTransport(rc);
    HttpRequest req;
    req.path = "/api";
    auto resp = t->Do(req);
    ASSERT_TRUE(resp.ok()) << "http2=" << http2 << ": " << resp.status();
    EXPECT_EQ(resp->body, "HTTP/1.1") << "http2=" << http2;
    EXPECT_EQ(resp->protocol, "HTTP/1.1") << "http2=" << http2;
  }
}

// A plugin that returns "tok-<run number>".
std::string WriteCountingPlugin() {
  std::string counter = TempDir() + "/http-plugin.count";
  std::string path = TempDir() + "/http-plugin.sh";
  std::remove(counter.c_str());
  std::ofstream(path)
      << "#!/bin/sh\nn=$(cat " << counter << " 2>/dev/null || echo 0)\n"
      << "n=$((n+1))\necho $n > " << counter << "\n"
      << "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
         "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-'$n'\"}}'\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(HttpTransportTest, UnauthorizedReRunsExecPluginOnce) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get("/api", [&](const httplib::Request& req,
                               httplib::Response& res) {
    ++calls;
    if (req.get_header_value("Authorization") != "Bearer tok-2") {
      res.status = 401;
      res.set_content(
          R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})",
          "application/json");
      return;
    }
    res.set_content("{}", "application/json");
  });
  srv.Start();
  FakeClock clock;
  ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.command = WriteCountingPlugin();
  RestConfig rc = Config(srv.url());
  auto plugin = std::make_unique<ExecCredentialProvider>(exec, rc, &clock);
  ExecCredentialProvider* plugin_ptr = plugin.get();
  auto t = MakeTransport(rc, &clock, std::move(plugin));
  HttpRequest req;
  req.path = "/api";
  auto resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(plugin_ptr->runs(), 2);
  EXPECT_EQ(calls.load(), 2);
  // Cached afterwards: no further runs.
  ASSERT_TRUE(t->Do(req).ok());
  EXPECT_EQ(plugin_ptr->runs(), 2);
}

TEST(HttpTransportTest, PersistentUnauthorizedIsUnauthenticated) {
  TestServer srv;
  srv.server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(
        ReadFile("testdata/kube-apiserver-v1.24/error-401.txt").substr(0, 129),
        "application/json");
  });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/api";
  EXPECT_EQ(t->Do(req).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(HttpTransportTest, TooManyRequestsGetWaitsRetryAfterOnClock) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get(
      "/api", [&](const httplib::Request&, httplib::Response& res) {
        if (++calls == 1) {
          res.status = 429;
          res.set_header("Retry-After", "2");
          res.set_content(R"({"kind":"Status","reason":"TooManyRequests",)"
                          R"("message":"slow down","code":429})",
                          "application/json");
          return;
        }
        res.set_content("{}", "application/json");
      });
  srv.Start();
  FakeClock clock;
  auto t = MakeTransport(Config(srv.url()), &clock);
  absl::StatusOr<HttpResponse> resp;
  std::thread caller([&] {
    HttpRequest req;
    req.path = "/api";
    resp = t->Do(req);
  });
  const absl::Time start = clock.Now();
  // Retry-After plus up to 20% jitter (TransportOptions::retry_jitter).
  const absl::Time retry_at = clock.WaitForWaiters(1);
  EXPECT_GE(retry_at, start + absl::Seconds(2));
  EXPECT_LE(retry_at, start + absl::Seconds(2.4));
  clock.Advance(retry_at - start);
  caller.join();
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(calls.load(), 2);
}

// The observer sees every attempt (a retried GET twice) with its verb,
// code and latency on the transport's clock, and streams as WATCH.
TEST(HttpTransportTest, ObserverSeesEveryAttempt) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get("/api",
                   [&](const httplib::Request&, httplib::Response& res) {
                     if (++calls == 1) {
                       res.status = 429;
                       res.set_header("Retry-After", "2");
                       res.set_content("{}", "application/json");
                       return;
                     }
                     res.set_content("{}", "application/json");
                   });
  srv.server().Get("/watch",
                   [](const httplib::Request&, httplib::Response& res) {
                     res.set_content("{}", "application/json");
                   });
  srv.Start();
  FakeClock clock;
  absl::Mutex mu;
  std::vector<RequestObservation> seen;
  TransportOptions options;
  options.observer = [&](const RequestObservation& o) {
    absl::MutexLock lock(&mu);
    seen.push_back(o);
  };
  options.retry_jitter = 0;  // waits of exactly Retry-After here
  RestConfig rc = Config(srv.url());
  auto created = HttpTransport::Create(
      rc, std::make_unique<StaticCredentialProvider>(Credentials{}), &clock,
      options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<HttpTransport> t = *std::move(created);
  std::thread caller([&] {
    HttpRequest req;
    req.path = "/api";
    EXPECT_TRUE(t->Do(req).ok());
  });
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.WaitForWaiters(1), start + absl::Seconds(2));
  clock.Advance(absl::Seconds(2));
  caller.join();
  HttpRequest watch;
  watch.path = "/watch";
  EXPECT_TRUE(t->Stream(watch, absl::Seconds(30)).ok());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].verb, "GET");
  EXPECT_EQ(seen[0].code, 429);
  EXPECT_EQ(seen[0].latency, absl::ZeroDuration());  // the fake clock
  EXPECT_EQ(seen[1].verb, "GET");
  EXPECT_EQ(seen[1].code, 200);
  EXPECT_EQ(seen[2].verb, "WATCH");
  EXPECT_EQ(seen[2].code, 200);
}

TEST(HttpTransportTest, ObserverSeesRefusedConnectionsAsCodeZero) {
  int code = -1;
  std::string verb;
  TransportOptions options;
  options.observer = [&](const RequestObservation& o) {
    code = o.code;
    verb = o.verb;
  };
  auto t = HttpTransport::Create(
      Config(absl::StrCat("http://127.0.0.1:", UnusedPort())),
      std::make_unique<StaticCredentialProvider>(Credentials{}), RealClock(),
      options);
  ASSERT_TRUE(t.ok()) << t.status();
  HttpRequest req;
  req.method = "POST";
  req.path = "/api";
  EXPECT_FALSE((*t)->Do(req).ok());
  EXPECT_EQ(code, 0);
  EXPECT_EQ(verb, "POST");
}

TEST(HttpTransportTest, ServiceUnavailableGetWaitsRetryAfterOnClock) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get(
      "/api", [&](const httplib::Request&, httplib::Response& res) {
        if (++calls == 1) {
          res.status = 503;
          res.set_header("Retry-After", "5");
          res.set_content(R"({"kind":"Status","reason":"ServiceUnavailable",)"
                          R"("message":"etcd leader changed","code":503})",
                          "application/json");
          return;
        }
        res.set_content("{}", "application/json");
      });
  srv.Start();
  FakeClock clock;
  auto t = MakeTransport(Config(srv.url()), &clock);
  absl::StatusOr<HttpResponse> resp;
  std::thread caller([&] {
    HttpRequest req;
    req.path = "/api";
    resp = t->Do(req);
  });
  const absl::Time start = clock.Now();
  // Retry-After plus up to 20% jitter.
  const absl::Time retry_at = clock.WaitForWaiters(1);
  EXPECT_GE(retry_at, start + absl::Seconds(5));
  EXPECT_LE(retry_at, start + absl::Seconds(6));
  EXPECT_EQ(calls.load(), 1);  // not retried before the delay
  clock.Advance(retry_at - start);
  caller.join();
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(calls.load(), 2);
}

TEST(HttpTransportTest, ServiceUnavailablePostSurfacesRetryAfter) {
  TestServer srv;
  srv.server().Post("/api/v1/namespaces/d/events", [&](const httplib::Request&,
                                                       httplib::Response& res) {
    res.status = 503;
    res.set_header("Retry-After", "7");
    res.set_content(R"({"kind":"Status","reason":"ServiceUnavailable",)"
                    R"("message":"try later","code":503})",
                    "application/json");
  });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.method = "POST";
  req.path = "/api/v1/namespaces/d/events";
  req.body = "{}";
  req.content_type = "application/json";
  auto resp = t->Do(req);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCode(resp.status()), 503);
  EXPECT_EQ(RetryAfter(resp.status()), absl::Seconds(7));
  EXPECT_THAT(std::string(resp.status().message()),
              HasSubstr("Error from server (ServiceUnavailable): try later"));
}

TEST(HttpTransportTest, ServiceUnavailableBeyondRetriesIsReturned) {
  TestServer srv;
  std::atomic<int> calls{0};
  srv.server().Get(
      "/api", [&](const httplib::Request&, httplib::Response& res) {
        ++calls;
        res.status = 503;
        res.set_header("Retry-After", "60");  // longer than max_retry_wait
        res.set_content("unavailable", "text/plain");
      });
  srv.Start();
  FakeClock clock;
  auto t = MakeTransport(Config(srv.url()), &clock);
  HttpRequest req;
  req.path = "/api";
  auto resp = t->Do(req);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RetryAfter(resp.status()), absl::Seconds(60));
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpTransportTest, TooManyRequestsPostSurfacesRetryAfter) {
  TestServer srv;
  srv.server().Post("/api/v1/namespaces/d/events",
                    [&](const httplib::Request&, httplib::Response& res) {
                      res.status = 429;
                      res.set_header("Retry-After", "3");
                      res.set_content("too many", "text/plain");
                    });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.method = "POST";
  req.path = "/api/v1/namespaces/d/events";
  req.body = "{}";
  req.content_type = "application/json";
  auto resp = t->Do(req);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(IsTooManyRequests(resp.status()));
  EXPECT_EQ(RetryAfter(resp.status()), absl::Seconds(3));
}

TEST(HttpTransportTest, PostAndPatchSendBodyAndContentType) {
  TestServer srv;
  std::string got;
  srv.server().Patch("/apis/x/v1/things/a", [&](const httplib::Request& req,
                                                httplib::Response& res) {
    got = req.get_header_value("Content-Type") + " " + req.body;
    res.set_content("{\"ok\":true}", "application/json");
  });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.method = "PATCH";
  req.path = "/apis/x/v1/things/a";
  req.content_type = "application/merge-patch+json";
  req.body = R"({"metadata":{"labels":{"a":"b"}}})";
  auto resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(
      got, R"(application/merge-patch+json {"metadata":{"labels":{"a":"b"}}})");
}

TEST(HttpTransportTest, GzipBodyIsDecoded) {
  TestServer srv;
  const std::string gz =
      ReadFile("testdata/kube-apiserver-v1.24/pods-1000.list.json.gz");
  srv.server().Get("/api/v1/pods", [&](const httplib::Request& req,
                                       httplib::Response& res) {
    if (!absl::StrContains(req.get_header_value("Accept-Encoding"), "gzip")) {
      res.status = 406;
      return;
    }
    res.set_header("Content-Encoding", "gzip");
    // A type httplib does not compress again.
    res.set_content(gz, "application/octet-stream");
  });
  srv.Start();
  RestConfig rc = Config(srv.url());
  rc.compression = ApiCompression::kGzip;
  auto t = MakeTransport(rc);
  HttpRequest req;
  req.path = "/api/v1/pods";
  auto resp = t->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_GT(resp->body.size(), gz.size() * 5);
  EXPECT_TRUE(absl::StartsWith(resp->body, "{\"kind\":\"PodList\""));
}

TEST(HttpTransportTest, BasicAuth) {
  TestServer srv;
  std::string auth;
  srv.server().Get("/api",
                   [&](const httplib::Request& req, httplib::Response& res) {
                     auth = req.get_header_value("Authorization");
                     res.set_content("{}", "application/json");
                   });
  srv.Start();
  RestConfig rc = Config(srv.url());
  rc.username = "admin";
  rc.password = "pw";
  auto t = MakeTransport(rc);
  HttpRequest req;
  req.path = "/api";
  ASSERT_TRUE(t->Do(req).ok());
  EXPECT_EQ(auth, "Basic " + absl::Base64Escape("admin:pw"));
}

class TlsTest : public ::testing::Test {
 protected:
  TlsTest() : cert_(testing::MakeSelfSignedCert("test-apiserver")) {}
  testing::TestCert cert_;
};

TEST_F(TlsTest, VerifiesAgainstCaDataAndRejectsUnknownCa) {
  TestServer srv(cert_);
  srv.server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  srv.Start();
  HttpRequest req;
  req.path = "/api";
  RestConfig rc = Config(srv.url());
  rc.ca_data = cert_.cert_pem;
  auto resp = MakeTransport(rc)->Do(req);
  EXPECT_TRUE(resp.ok()) << resp.status();

  RestConfig untrusted = Config(srv.url());
  untrusted.ca_data = testing::MakeSelfSignedCert("other").cert_pem;
  EXPECT_EQ(MakeTransport(untrusted)->Do(req).status().code(),
            absl::StatusCode::kUnavailable);

  RestConfig insecure = untrusted;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_TRUE(MakeTransport(insecure)->Do(req).ok());
}

TEST_F(TlsTest, Http2OptionWorksAgainstAnHttp11OnlyTlsServer) {
  // The server does not offer h2 in ALPN, so libcurl settles on HTTP/1.1.
  TestServer srv(cert_);
  srv.server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  srv.Start();
  RestConfig rc = Config(srv.url());
  rc.ca_data = cert_.cert_pem;
  rc.http2 = true;
  HttpRequest req;
  req.path = "/api";
  auto resp = MakeTransport(rc)->Do(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->protocol, "HTTP/1.1");
}

TEST_F(TlsTest, CaFileAndTlsServerName) {
  TestServer srv(cert_);
  srv.server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  srv.Start();
  std::string ca_file = TempDir() + "/ca.pem";
  std::ofstream(ca_file) << cert_.cert_pem;
  HttpRequest req;
  req.path = "/api";
  // The certificate names kubernetes.test; connect by IP, verify by name.
  RestConfig rc = Config(srv.url());
  rc.ca_file = ca_file;
  rc.tls_server_name = "kubernetes.test";
  auto resp = MakeTransport(rc)->Do(req);
  EXPECT_TRUE(resp.ok()) << resp.status();
  rc.tls_server_name = "wrong.test";
  EXPECT_EQ(MakeTransport(rc)->Do(req).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, ClientCertificateFromMemory) {
  testing::TestCert client = testing::MakeSelfSignedCert("alice");
  TestServer srv(cert_, /*client_ca_pem=*/client.cert_pem);
  srv.server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  srv.Start();
  HttpRequest req;
  req.path = "/api";
  RestConfig rc = Config(srv.url());
  rc.ca_data = cert_.cert_pem;
  EXPECT_FALSE(MakeTransport(rc)->Do(req).ok());  // no client certificate
  rc.client_cert_data = client.cert_pem;
  rc.client_key_data = client.key_pem;
  auto resp = MakeTransport(rc)->Do(req);
  EXPECT_TRUE(resp.ok()) << resp.status();
}

TEST(HttpTransportStreamTest, ChunkedBodyArrivesIncrementallyThenEnds) {
  TestServer srv;
  const std::string body =
      ReadFile("testdata/kube-apiserver-v1.24/watch-configmaps.jsonl");
  srv.server().Get("/api/v1/configmaps", [&](const httplib::Request&,
                                             httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [&](size_t, httplib::DataSink& sink) {
          // Odd-sized chunks that cut events anywhere.
          for (size_t i = 0; i < body.size(); i += 97) {
            std::string piece = body.substr(i, 97);
            sink.write(piece.data(), piece.size());
          }
          sink.done();
          return true;
        });
  });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/api/v1/configmaps";
  auto stream = t->Stream(req, absl::Seconds(30));
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::string got;
  absl::Status s;
  while ((s = (*stream)->Read(&got)).ok()) {
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ(got, body);
  EXPECT_EQ(t->bytes_received(), body.size());
}

TEST(HttpTransportStreamTest, ErrorStatusIsReturnedFromStream) {
  TestServer srv;
  srv.server().Get("/api/v1/configmaps", [](const httplib::Request&,
                                            httplib::Response& res) {
    res.status = 422;
    std::string body = ReadFile(
        "testdata/kube-apiserver-v1.24/watchlist-unsupported-v1.24.txt");
    res.set_content(body.substr(0, body.find('\n')), "application/json");
  });
  srv.Start();
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/api/v1/configmaps";
  auto stream = t->Stream(req, absl::Seconds(30));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reason(stream.status()), "Invalid");
}

// Serves one line, then stalls until released (or the client goes away).
class StallingServer {
 public:
  StallingServer() {
    srv_.server().Get(
        "/watch", [this](const httplib::Request&, httplib::Response& res) {
          // Not a type httplib gzips: its compressor would hold the first line
          // back (the API server does not compress watches either).
          res.set_chunked_content_provider(
              "application/octet-stream",
              [this](size_t offset, httplib::DataSink& sink) {
                if (offset == 0) {
                  sink.write("{\"first\":1}\n", 12);
                  return true;
                }
                // Stall: no bytes until the test ends.
                release_.WaitForNotificationWithTimeout(absl::Seconds(30));
                sink.done();
                return true;
              });
        });
    srv_.Start();
  }
  ~StallingServer() { release_.Notify(); }
  std::string url() const { return srv_.url(); }

 private:
  absl::Notification release_;
  TestServer srv_;
};

TEST(HttpTransportStreamTest, StalledStreamFailsAfterIdleTimeout) {
  StallingServer srv;
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/watch";
  auto stream = t->Stream(req, absl::Milliseconds(200));
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::string got;
  while (got.size() < 12) {
    absl::Status first = (*stream)->Read(&got);
    ASSERT_TRUE(first.ok()) << first;
  }
  EXPECT_EQ(got, "{\"first\":1}\n");
  absl::Status s = (*stream)->Read(&got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("hung"));
}

TEST(HttpTransportStreamTest, StopFromAnotherThreadUnblocksRead) {
  StallingServer srv;
  auto t = MakeTransport(Config(srv.url()));
  HttpRequest req;
  req.path = "/watch";
  auto stream = t->Stream(req, absl::Minutes(10));
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::Notification got_first;
  absl::Status final_status;
  std::thread reader([&] {
    std::string got;
    absl::Status s;
    while ((s = (*stream)->Read(&got)).ok()) {
      if (got.size() >= 12 && !got_first.HasBeenNotified()) got_first.Notify();
    }
    final_status = s;
  });
  got_first.WaitForNotification();
  (*stream)->Stop();
  reader.join();
  EXPECT_EQ(final_status.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace client
}  // namespace informer

#include "server/ops/http_server.h"

#include <httplib.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ops/metrics.h"

namespace server {
namespace {

using ::testing::HasSubstr;

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer() {
    HttpServer::Options options;
    options.listen = "127.0.0.1:0";
    options.registry = &registry_;
    options.not_ready = [this] {
      absl::MutexLock lock(&mu_);
      return not_ready_;
    };
    absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ASSERT_GT(server_->port(), 0);
  }
  httplib::Result Get(const std::string& path) {
    httplib::Client cli("127.0.0.1", server_->port());
    return cli.Get(path.c_str());
  }

  metrics::Registry registry_;
  absl::Mutex mu_;
  std::vector<std::string> not_ready_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, MetricsServesTheRegistry) {
  metrics::CounterFamily* c =
      registry_.AddCounter("t_events_total", "Events.", {"type"}).value();
  c->With({"ADDED"}).Increment(3);
  StartServer();
  httplib::Result res = Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), metrics::kContentType);
  EXPECT_THAT(res->body, HasSubstr("# TYPE t_events_total counter\n"));
  EXPECT_THAT(res->body, HasSubstr("t_events_total{type=\"ADDED\"} 3\n"));
  c->With({"ADDED"}).Increment();
  res = Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("t_events_total{type=\"ADDED\"} 4\n"));
}

TEST_F(HttpServerTest, HealthzAlwaysOk) {
  StartServer();
  httplib::Result res = Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\n");
}

TEST_F(HttpServerTest, ReadyzNamesWhatIsNotReadyThenOk) {
  {
    absl::MutexLock lock(&mu_);
    not_ready_ = {"pods", "configmaps"};
  }
  StartServer();
  httplib::Result res = Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "not ready: pods,configmaps\n");
  {
    absl::MutexLock lock(&mu_);
    not_ready_.clear();
  }
  res = Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\n");
  server_->SetShuttingDown();
  res = Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "shutting down\n");
  // Liveness is unaffected.
  res = Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(HttpServerTest, UnknownPathIs404AndStopIsIdempotent) {
  StartServer();
  httplib::Result res = Get("/api/v1/pods");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  server_->Stop();
  server_->Stop();
  EXPECT_FALSE(Get("/healthz"));
}

TEST(HttpServerOptionsTest, RejectsBadAddressesNamingThem) {
  metrics::Registry registry;
  HttpServer::Options options;
  options.registry = &registry;
  options.listen = "localhost";
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("\"localhost\""));
  options.listen = "127.0.0.1:99999";
  EXPECT_FALSE(HttpServer::Start(options).ok());
  options.listen = "127.0.0.1:0";
  options.registry = nullptr;
  EXPECT_FALSE(HttpServer::Start(options).ok());
}

TEST(HttpServerOptionsTest, BindConflictIsUnavailable) {
  metrics::Registry registry;
  HttpServer::Options options;
  options.registry = &registry;
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<HttpServer>> first =
      HttpServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.listen = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpServerStartTest, MalformedListenAddressIsRefusedNamingIt) {
  metrics::Registry registry;
  for (const char* listen : {"::1:0", "localhost", "h:port"}) {
    HttpServer::Options options;
    options.listen = listen;
    options.registry = &registry;
    absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(options);
    ASSERT_FALSE(s.ok()) << listen;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr(std::string("\"") + listen + "\""));
  }
}

}  // namespace
}  // namespace server

#include "integration_tests/side_by_side.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace integration {
namespace {

TEST(SideBySideTest, ParsesKubeInformerBenchLine) {
  // A line as kube-informer-bench prints it (report.go's field names).
  absl::StatusOr<SyncResult> r = ParseClientGoLine(
      R"({"resource":"v1/pods","namespace":"","label_selector":"",)"
      R"("client":"typed","strip_managed_fields":true,"sync_seconds":1.25,)"
      R"("objects":1500,"rss_bytes_after_sync":52428800,)"
      R"("rss_peak_bytes":73400320,"updates":0,"writers":1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->sync_seconds, 1.25);
  EXPECT_DOUBLE_EQ(r->objects, 1500);
  EXPECT_DOUBLE_EQ(r->rss_bytes, 52428800);
  EXPECT_DOUBLE_EQ(r->peak_bytes, 73400320);
}

TEST(SideBySideTest, RejectsALineWithoutTheFigures) {
  EXPECT_FALSE(ParseClientGoLine(R"({"sync_seconds":1})").ok());
  EXPECT_FALSE(ParseClientGoLine(R"({"sync_seconds":x,"objects":1})").ok());
}

TEST(SideBySideTest, ReadsThisProcessMemory) {
  ProcMemory m = ReadProcMemory(getpid());
  EXPECT_GT(m.rss, 0);
  EXPECT_GE(m.hwm, m.rss);
  EXPECT_GT(m.anon, 0);
}

TEST(SideBySideTest, ClientGoFailureIsAnError) {
  // A binary that exits non-zero: the error carries the command.
  absl::StatusOr<SyncResult> r =
      RunClientGo("/bin/false", "/nonexistent", "v1/pods", "", false,
                  /*watch_list=*/false, absl::Seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/bin/false"), std::string::npos);
  // The LIST mode turns client-go's WatchListClient gate off.
  EXPECT_NE(r.status().message().find("KUBE_FEATURE_WatchListClient=false"),
            std::string::npos);
}

// One HTTP/1.1 connection on a loopback port: answers the first request
// with `chunks` (each written on its own), then, when `hold`, keeps the
// connection open until the client closes it, as a watch does.
class OneShotServer {
 public:
  OneShotServer(std::vector<std::string> chunks, bool hold) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen";
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, chunks = std::move(chunks), hold] {
      const int c = accept(listener_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      ssize_t got;
      while (request_.find("\r\n\r\n") == std::string::npos &&
             (got = recv(c, buf, sizeof(buf), 0)) > 0) {
        request_.append(buf, static_cast<size_t>(got));
      }
      Send(c,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n");
      for (const std::string& chunk : chunks) {
        Send(c, absl::StrCat(absl::Hex(chunk.size()), "\r\n", chunk, "\r\n"));
      }
      if (hold) {
        // Until curl is stopped: recv returns 0 (or fails) then.
        while (recv(c, buf, sizeof(buf), 0) > 0) {
        }
      } else {
        Send(c, "0\r\n\r\n");
      }
      close(c);
    });
  }
  ~OneShotServer() {
    Finish();
    close(listener_);
  }
  // Waits for the connection to end; the request as received.
  std::string Finish() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }
  std::string url() const {
    return absl::StrCat("http://127.0.0.1:", port_, "/api/v1/pods");
  }

 private:
  static void Send(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

TEST(SideBySideTest, WatchListFloorStopsAtTheEndBookmark) {
  const std::string added =
      R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
      "\n";
  const std::string bookmark =
      R"({"type":"BOOKMARK","object":{"metadata":{"annotations":)"
      R"({"k8s.io/initial-events-end":"true"}}}})"
      "\n";
  // The marker split across two writes; the connection then stays open.
  const size_t split = bookmark.find("initial-events") + 4;
  OneShotServer server(
      {added, added, bookmark.substr(0, split), bookmark.substr(split)},
      /*hold=*/true);
  absl::StatusOr<SyncResult> r =
      RunCurlWatchList(server.url(), "", absl::Seconds(60));
  // The connection ends once curl is stopped.
  server.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->objects, 2.0 * added.size() + bookmark.size());
  EXPECT_GT(r->sync_seconds, 0);
}

TEST(SideBySideTest, WatchListFloorAsksAsTheReflectorDoes) {
  OneShotServer server({R"({"metadata":{"annotations":)"
                        R"({"k8s.io/initial-events-end":"true"}}})"
                        "\n"},
                       /*hold=*/true);
  ASSERT_TRUE(RunCurlWatchList(server.url(), "", absl::Seconds(60)).ok());
  const std::string request = server.Finish();
  EXPECT_EQ(request.find("GET /api/v1/pods?watch=1&sendInitialEvents=true"
                         "&resourceVersionMatch=NotOlderThan"
                         "&allowWatchBookmarks=true&timeoutSeconds=61 "
                         "HTTP/1.1\r\n"),
            0u)
      << request;
  // Not curl's User-Agent: kube-apiserver pretty-prints JSON for curl.
  EXPECT_EQ(request.find("User-Agent: curl"), std::string::npos) << request;
}

TEST(SideBySideTest, WatchListFloorWithoutTheBookmarkIsAnError) {
  OneShotServer server({R"({"type":"ADDED","object":{}})"
                        "\n"},
                       /*hold=*/false);
  absl::StatusOr<SyncResult> r =
      RunCurlWatchList(server.url(), "", absl::Seconds(60));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sendInitialEvents=true"),
            std::string::npos);
}

TEST(SideBySideTest, FindsTheTimeOfALogLine) {
  const std::string path = ::testing::TempDir() + "/side_by_side.log";
  std::ofstream(path) << "I20261203 15:08:23.000000 1 main.cc:1] start\n"
                      << "not a log line: cache synced\n"
                      << "I20261203 15:08:24.250000 1 x.cc:9] pods: cache "
                         "synced\n";
  absl::StatusOr<absl::Time> t = LogLineTime(path, ": cache synced");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<absl::Time> t0 = LogLineTime(path, "] start");
  ASSERT_TRUE(t0.ok()) << t0.status();
  EXPECT_EQ(*t - *t0, absl::Milliseconds(1250));
  EXPECT_EQ(LogLineTime(path, "missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace integration

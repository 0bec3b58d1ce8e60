#include "informer/client/watch_decoder.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"
#include "informer/client/http_transport.h"
#include "informer/client/test_server.h"
#include "informer/util/clock.h"

// Partial last lines and events larger than one chunk are covered end to
// end in resource_client_test; this file covers how a watch ends when the
// connection goes quiet: Stop() from another thread and the idle timeout.

namespace informer {
namespace client {
namespace {

using ::testing::HasSubstr;

constexpr char kEvent[] =
    R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap",)"
    R"("metadata":{"name":"a","namespace":"demo","resourceVersion":"7"}}})"
    "\n";

// Serves one watch event, then sends nothing until the test ends.
class QuietWatchServer {
 public:
  QuietWatchServer() {
    srv_.server().Get("/api/v1/configmaps", [this](const httplib::Request&,
                                                   httplib::Response& res) {
      // Not a type httplib compresses (it would hold the event back).
      res.set_chunked_content_provider(
          "application/octet-stream",
          [this](size_t offset, httplib::DataSink& sink) {
            if (offset == 0) {
              sink.write(kEvent, sizeof(kEvent) - 1);
              return true;
            }
            release_.WaitForNotificationWithTimeout(absl::Seconds(60));
            sink.done();
            return true;
          });
    });
    srv_.Start();
  }
  ~QuietWatchServer() { release_.Notify(); }
  std::string url() const { return srv_.url(); }

 private:
  absl::Notification release_;
  testing::TestServer srv_;
};

class WatchStreamTest : public ::testing::Test {
 protected:
  // Opens the watch with `idle_timeout` on `clock` and reads its first
  // event.
  std::unique_ptr<WatchDecoder> OpenAndReadFirst(Clock* clock,
                                                 absl::Duration idle_timeout) {
    RestConfig rc;
    rc.server = server_.url();
    auto t = HttpTransport::Create(
        rc, std::make_unique<StaticCredentialProvider>(Credentials()), clock);
    EXPECT_TRUE(t.ok()) << t.status();
    transport_ = *std::move(t);
    HttpRequest req;
    req.path = "/api/v1/configmaps";
    auto body = transport_->Stream(req, idle_timeout);
    EXPECT_TRUE(body.ok()) << body.status();
    auto watch = std::make_unique<WatchDecoder>(*std::move(body),
                                                TransformOptions(), req.path);
    WatchEvent ev;
    absl::Status s = watch->Next(&ev);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(ev.type, WatchEventType::kAdded);
    EXPECT_EQ(ev.resource_version, "7");
    return watch;
  }

  QuietWatchServer server_;
  std::unique_ptr<HttpTransport> transport_;
};

TEST_F(WatchStreamTest, StopFromAnotherThreadEndsAWaitingNext) {
  auto watch = OpenAndReadFirst(RealClock(), absl::Minutes(10));
  absl::Status result;
  absl::Notification waiting;
  std::thread reader([&] {
    WatchEvent ev;
    waiting.Notify();
    // Waits: the server sends nothing more and the idle timeout is far.
    // Stop() may land before or during the wait; both must end it.
    result = watch->Next(&ev);
  });
  waiting.WaitForNotification();
  watch->Stop();
  reader.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled) << result;
  // Stop is idempotent and the stream stays ended.
  watch->Stop();
  WatchEvent ev;
  EXPECT_EQ(watch->Next(&ev).code(), absl::StatusCode::kCancelled);
}

TEST_F(WatchStreamTest, NoByteForTheIdleTimeoutIsDeadlineExceeded) {
  FakeClock clock;
  auto watch = OpenAndReadFirst(&clock, absl::Seconds(150));
  // The connection is open but silent; once the clock passes the idle
  // timeout the next Next() reports the watch as hung instead of blocking.
  clock.Advance(absl::Seconds(150));
  WatchEvent ev;
  absl::Status s = watch->Next(&ev);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("/api/v1/configmaps"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("treating it as hung"));
  // Sticky: the reflector must restart the watch, not read on.
  EXPECT_EQ(watch->Next(&ev).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace client
}  // namespace informer

// How the emulator answers list requests, as kube-apiserver v1.24 does:
// which combinations of resourceVersion, limit, continue and
// resourceVersionMatch its watch cache serves (whole, ignoring limit) and
// which go to etcd (paged, exact when asked), and the pacing of a list body
// and of a WatchList's initial events.
// The rules are the v1.24 cacher's (a list goes to etcd when it has no
// resourceVersion, a continue token, a limit with a resourceVersion other
// than "0", or resourceVersionMatch=Exact) and the captures in
// testdata/kube-apiserver-v1.24/list-resourceversion-semantics.txt.

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "emulator/emulator.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "informer/util/clock.h"
#include "rapidjson/document.h"

namespace emulator {
namespace {

struct Page {
  int status = 0;
  size_t items = 0;
  std::string rv;
  bool has_continue = false;
  bool has_remaining = false;
};

class EmulatorListServingTest : public ::testing::Test {
 protected:
  void Start(EmulatorOptions options) {
    options.clock = &clock_;
    emu_ = std::make_unique<Emulator>(options);
    ASSERT_TRUE(emu_->Start().ok());
    for (int i = 0; i < 5; ++i) {
      auto res = Client().Post(
          "/api/v1/namespaces/demo/configmaps",
          absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                       R"("metadata":{"name":"cm-)", i, R"("}})"),
          "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 201);
      if (i == 3) rv_before_last_ = emu_->store().CurrentRv();
    }
  }
  void TearDown() override {
    if (emu_ != nullptr) emu_->Stop();
  }
  httplib::Client Client() {
    httplib::Client cli("127.0.0.1", emu_->port());
    cli.set_read_timeout(60);
    return cli;
  }
  Page List(const std::string& query) {
    Page p;
    auto res = Client().Get(
        absl::StrCat("/api/v1/namespaces/demo/configmaps?", query).c_str());
    if (!res) return p;
    p.status = res->status;
    rapidjson::Document d;
    d.Parse(res->body.data(), res->body.size());
    if (p.status != 200 || d.HasParseError()) return p;
    p.items = d["items"].Size();
    p.rv = d["metadata"]["resourceVersion"].GetString();
    p.has_continue = d["metadata"].HasMember("continue");
    p.has_remaining = d["metadata"].HasMember("remainingItemCount");
    return p;
  }
  std::string Current() { return absl::StrCat(emu_->store().CurrentRv()); }
  // Paced responses advance only as the (fake) clock does: each time one
  // waiter (the pacer) waits, moves time to its deadline, until the only
  // deadline left is `until` (a test thread parked there once done).
  // Returns how many waits were served.
  int AdvanceWhilePaced(absl::Time until) {
    int waits = 0;
    for (absl::Time next = clock_.WaitForWaiters(1); next < until;
         next = clock_.WaitForWaiters(1)) {
      clock_.SetTime(next);
      ++waits;
    }
    return waits;
  }

  informer::FakeClock clock_;
  std::unique_ptr<Emulator> emu_;
  int64_t rv_before_last_ = 0;
};

TEST_F(EmulatorListServingTest, WatchCacheServesResourceVersionZeroWhole) {
  Start({});  // the API server's default: --watch-cache=true
  // resourceVersion=0: the watch cache, whatever the limit: one response,
  // no continue token, no remainingItemCount, at the current RV.
  for (const char* q :
       {"resourceVersion=0&limit=2",
        "resourceVersion=0&limit=2&resourceVersionMatch=NotOlderThan",
        "resourceVersion=0&limit=1&labelSelector=", "resourceVersion=0"}) {
    Page p = List(q);
    EXPECT_EQ(p.status, 200) << q;
    EXPECT_EQ(p.items, 5u) << q;
    EXPECT_FALSE(p.has_continue) << q;
    EXPECT_FALSE(p.has_remaining) << q;
    EXPECT_EQ(p.rv, Current()) << q;
  }
}

TEST_F(EmulatorListServingTest,
       WatchCacheServesAnRvWithoutALimitAtTheCurrentState) {
  Start({});
  // An RV without a limit (or NotOlderThan without a limit): the cache,
  // not older than the RV, i.e. the current state, whole.
  for (const std::string& q :
       {absl::StrCat("resourceVersion=", rv_before_last_),
        absl::StrCat("resourceVersion=", rv_before_last_,
                     "&resourceVersionMatch=NotOlderThan")}) {
    Page p = List(q);
    EXPECT_EQ(p.status, 200) << q;
    EXPECT_EQ(p.items, 5u) << q;
    EXPECT_FALSE(p.has_continue) << q;
    EXPECT_EQ(p.rv, Current()) << q;
  }
}

TEST_F(EmulatorListServingTest, EtcdServesNoRvContinueAndLimitWithAnRv) {
  Start({});
  // No resourceVersion: a consistent read from etcd, paged.
  Page fresh = List("limit=2");
  EXPECT_EQ(fresh.items, 2u);
  EXPECT_TRUE(fresh.has_continue);
  EXPECT_TRUE(fresh.has_remaining);
  EXPECT_EQ(fresh.rv, Current());
  // An RV other than "0" with a limit: an exact read at that RV (the last
  // ConfigMap was created later, so 4 objects: 2 + 2 remaining).
  for (const std::string& q :
       {absl::StrCat("resourceVersion=", rv_before_last_, "&limit=2"),
        absl::StrCat("resourceVersion=", rv_before_last_,
                     "&limit=2&resourceVersionMatch=Exact")}) {
    Page p = List(q);
    EXPECT_EQ(p.items, 2u) << q;
    EXPECT_TRUE(p.has_continue) << q;
    EXPECT_EQ(p.rv, absl::StrCat(rv_before_last_)) << q;
  }
  // NotOlderThan with a limit: etcd, paged, at the current revision.
  Page newer = List(absl::StrCat("resourceVersion=", rv_before_last_,
                                 "&limit=2&resourceVersionMatch=NotOlderThan"));
  EXPECT_EQ(newer.items, 2u);
  EXPECT_TRUE(newer.has_continue);
  EXPECT_EQ(newer.rv, Current());
}

TEST_F(EmulatorListServingTest, WithoutTheWatchCacheResourceVersionZeroPages) {
  EmulatorOptions options;
  options.watch_cache = false;  // kube-apiserver --watch-cache=false
  Start(options);
  Page p = List("resourceVersion=0&limit=2");
  EXPECT_EQ(p.items, 2u);
  EXPECT_TRUE(p.has_continue);
  EXPECT_EQ(List("resourceVersion=0").items, 5u);
}

TEST_F(EmulatorListServingTest, PacingHoldsTheListBodyToTheRate) {
  EmulatorOptions options;
  options.seed_configmaps = 2000;  // ~3 MB: streamed in chunks
  options.serve_bytes_per_sec = 1e6;
  Start(options);
  const absl::Time t0 = clock_.Now();
  // Once the response is complete the client parks on the clock until this
  // far-off time: a waiter that tells the loop below the list is done.
  const absl::Time finished = t0 + absl::Hours(24 * 365);
  size_t body_bytes = 0;
  int status = 0;
  std::thread client([&] {
    auto res = Client().Get("/api/v1/namespaces/benchcms/configmaps");
    if (res) {
      status = res->status;
      body_bytes = res->body.size();
    }
    clock_.SleepUntil(finished);
  });
  const int waits = AdvanceWhilePaced(finished);
  const absl::Duration paced = clock_.Now() - t0;
  clock_.SetTime(finished);
  client.join();
  ASSERT_EQ(status, 200);
  ASSERT_GT(body_bytes, 2900000u);
  // The bucket holds 1 MiB (to make up for late wake-ups); the rest is
  // paid at 1 MB/s.
  const double want = (static_cast<double>(body_bytes) - (1 << 20)) / 1e6;
  EXPECT_NEAR(absl::ToDoubleSeconds(paced), want, 0.001);
  EXPECT_GT(waits, 30) << "paced chunk by chunk, not all at the end";
}

TEST_F(EmulatorListServingTest,
       PacingHoldsAWatchListsInitialEventsButNotTheLiveOnes) {
  EmulatorOptions options;
  options.seed_configmaps = 2000;  // ~3 MB of ADDED events
  options.serve_bytes_per_sec = 1e9;
  options.serve_watch_list_bytes_per_sec = 1e6;
  // No bookmark or timeout due: the watch's own waits for events have no
  // deadline, so the pacer's are the only ones WaitForWaiters sees.
  options.bookmark_interval = absl::InfiniteDuration();
  options.default_watch_timeout = absl::InfiniteDuration();
  Start(options);
  const absl::Time t0 = clock_.Now();
  const absl::Time finished = t0 + absl::Hours(24 * 365);
  absl::Notification initial_end, live_seen;
  size_t initial_bytes = 0;  // through the end bookmark's line
  std::thread client([&] {
    std::string got;
    Client().Get(
        "/api/v1/namespaces/benchcms/configmaps?watch=1&sendInitialEvents="
        "true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        [&](const char* data, size_t len) {
          got.append(data, len);
          if (!initial_end.HasBeenNotified()) {
            const size_t end = got.find("k8s.io/initial-events-end");
            const size_t eol = got.find('\n', end);
            if (end != std::string::npos && eol != std::string::npos) {
              initial_bytes = eol + 1;
              initial_end.Notify();
            }
          }
          if (got.find("\"name\":\"live\"", initial_bytes) !=
              std::string::npos) {
            live_seen.Notify();
            return false;
          }
          return true;
        });
  });
  // Once the client has the end bookmark this thread parks on the clock
  // until a far-off time: a waiter that tells the loop below so.
  std::thread marker([&] {
    initial_end.WaitForNotification();
    clock_.SleepUntil(finished);
  });
  const int waits = AdvanceWhilePaced(finished);
  const absl::Time paced_until = clock_.Now();
  const double paced = absl::ToDoubleSeconds(paced_until - t0);
  EXPECT_GT(initial_bytes, 2900000u);
  // The bucket holds 1 MiB (to make up for late wake-ups); the rest is paid
  // at 1 MB/s, batch by batch.
  const double want = (static_cast<double>(initial_bytes) - (1 << 20)) / 1e6;
  EXPECT_GE(paced, want - 1e-6);
  EXPECT_NEAR(paced, want, 0.001);
  EXPECT_GT(waits, 3) << "paced batch by batch, not all at the end";

  // A live event right after the bookmark goes out without the clock
  // moving: the pacing, whose budget the initial events used up, no longer
  // applies.
  auto created = Client().Post(
      "/api/v1/namespaces/benchcms/configmaps",
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"live"}})",
      "application/json");
  EXPECT_TRUE(created && created->status == 201);
  const bool live = live_seen.WaitForNotificationWithTimeout(absl::Seconds(20));
  EXPECT_TRUE(live) << "the live event waited for the fake clock";
  EXPECT_EQ(clock_.Now(), paced_until);
  // Frees the marker (and, on failure, a live event held by the pacer).
  clock_.SetTime(finished);
  marker.join();
  client.join();
}

}  // namespace
}  // namespace emulator

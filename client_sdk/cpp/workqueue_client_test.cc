// WorkQueueClient against the real informer_sidecar binary in --demo mode:
// declaring a queue (idempotent, a conflicting declaration refused), keys
// added now and later, Forget resetting a failed key's count as the next
// lease shows, Stats of one and of every queue, and deleting the queue.

#include "client_sdk/cpp/workqueue_client.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/workqueue_worker.h"
#include "gtest/gtest.h"
#include "integration_tests/sidecar_process.h"

namespace client_sdk {
namespace {

namespace v1 = ::informer::v1;
using integration::SidecarProcess;

// Failsafe for waits: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(60);
constexpr char kQueue[] = "wq-client";

std::unique_ptr<SidecarProcess> StartSidecar(const std::string& socket) {
  absl::StatusOr<std::string> binary =
      integration::FindRunfile("server/informer_sidecar");
  EXPECT_TRUE(binary.ok()) << binary.status();
  SidecarProcess::Options options;
  options.flags = {"--demo", "--grpc_listen=unix:" + socket,
                   "--http_listen=127.0.0.1:0", "--print_events=false"};
  options.quiet = true;
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  EXPECT_TRUE(sidecar.ok()) << sidecar.status();
  return sidecar.ok() ? *std::move(sidecar) : nullptr;
}

// Polls Stats(kQueue) until `pred` holds or kWait passes.
bool WaitForStats(WorkQueueClient& client,
                  const std::function<bool(const v1::QueueStats&)>& pred) {
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<v1::QueueStats>> stats = client.Stats(kQueue);
    if (stats.ok() && stats->size() == 1 && pred(stats->front())) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// The leases a worker saw, in order: (key, failures).
class LeaseLog {
 public:
  void Add(const v1::Lease& lease) {
    absl::MutexLock lock(&mu_);
    leases_.emplace_back(lease.key(), lease.failures());
  }
  // Waits until `n` leases arrived; returns them.
  std::vector<std::pair<std::string, int>> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return leases_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return leases_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, int>> leases_ ABSL_GUARDED_BY(mu_);
};

TEST(WorkQueueClientTest, DeclaresAddsForgetsReportsAndDeletes) {
  char tmpl[] = "/tmp/wqcXXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::unique_ptr<SidecarProcess> sidecar = StartSidecar(dir + "/grpc.sock");
  ASSERT_NE(sidecar, nullptr);
  std::shared_ptr<grpc::Channel> channel = sidecar->NewChannel();
  WorkQueueClient client(channel);

  // No object matches the selector: only the keys added here are leased.
  // A failed key is retried after an hour, so the test sees it only when
  // added again.
  QueueSpec spec;
  spec.name = kQueue;
  spec.resource = "configmaps";
  spec.label_selector = "wq-client-test=none";
  spec.base_delay = absl::Hours(1);
  spec.max_delay = absl::Hours(1);
  spec.lease_timeout = absl::Seconds(30);
  absl::StatusOr<bool> created = client.CreateQueue(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  created = client.CreateQueue(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(*created);  // identical: idempotent
  QueueSpec other = spec;
  other.resource = "pods";
  EXPECT_EQ(client.CreateQueue(other).status().code(),
            absl::StatusCode::kAlreadyExists);

  absl::StatusOr<std::vector<v1::QueueStats>> stats = client.Stats(kQueue);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ(stats->front().name(), kQueue);
  EXPECT_EQ(stats->front().resource(), "configmaps");
  EXPECT_EQ(stats->front().adds(), 0);

  LeaseLog log;
  WorkQueueWorker worker(channel, kQueue, "wq-client-worker");
  std::thread runner([&] {
    absl::Status st = worker.Run([&](const v1::Lease& lease) {
      log.Add(lease);
      // The first lease of "a/k" fails; every other one succeeds.
      return lease.key() == "a/k" && lease.failures() == 0
                 ? absl::InternalError("fails once")
                 : absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
  });

  ASSERT_TRUE(client.AddAfter(kQueue, "a/k").ok());
  EXPECT_EQ(log.WaitFor(1).front(), std::make_pair(std::string("a/k"), 0));
  ASSERT_TRUE(WaitForStats(client, [](const v1::QueueStats& s) {
    return s.failures() == 1 && s.waiting() == 1;
  }));
  // Forget resets its failure count: added again, it is leased as new.
  ASSERT_TRUE(client.Forget(kQueue, "a/k").ok());
  ASSERT_TRUE(client.AddAfter(kQueue, "a/k").ok());
  std::vector<std::pair<std::string, int>> leases = log.WaitFor(2);
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[1], std::make_pair(std::string("a/k"), 0));

  // A key added for later waits.
  ASSERT_TRUE(client.AddAfter(kQueue, "b/later", absl::Hours(1)).ok());
  ASSERT_TRUE(WaitForStats(client, [](const v1::QueueStats& s) {
    return s.waiting() == 2 && s.completed() == 2;
  }));

  absl::StatusOr<std::vector<v1::QueueStats>> all = client.Stats();
  ASSERT_TRUE(all.ok()) << all.status();
  bool listed = false;
  for (const v1::QueueStats& s : *all) listed |= s.name() == kQueue;
  EXPECT_TRUE(listed);

  // Once deleted, every call on the queue is NOT_FOUND.
  worker.Stop();
  runner.join();
  ASSERT_TRUE(client.DeleteQueue(kQueue).ok());
  EXPECT_EQ(client.Stats(kQueue).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.DeleteQueue(kQueue).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.AddAfter(kQueue, "a/k").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.Forget(kQueue, "a/k").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.AddAfter("", "a/k").code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace client_sdk

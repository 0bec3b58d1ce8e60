// informer.v1.WorkQueue end to end: the real informer_sidecar binary against
// the real kube_emulator (demo cluster with churn), worked on by real
// workqueue_worker processes over a unix socket.
//
//   - two worker processes on one queue never hold the same key at once,
//     under the emulator's churn plus a stream of AddAfter on hot keys;
//   - a worker killed (SIGKILL) mid-lease loses nothing: its keys are leased
//     to the other worker;
//   - a failing key is retried with the configured exponential back-off.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

extern "C" char** environ;

namespace integration {
namespace {

namespace v1 = ::informer::v1;

// Failsafe for waits on a worker's output: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(60);

std::string Runfile(const std::string& path) {
  absl::StatusOr<std::string> p = FindRunfile(path);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.value_or("");
}

// One workqueue_worker child; a reader thread collects its stdout lines.
class WorkerChild {
 public:
  WorkerChild(const std::string& address, const std::string& queue,
              const std::string& name, std::vector<std::string> flags) {
    std::vector<std::string> args = {
        Runfile("integration_tests/workqueue_worker"), "--address=" + address,
        "--queue=" + queue, "--name=" + name};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    EXPECT_EQ(posix_spawn(&pid_, args[0].c_str(), &actions, nullptr,
                          argv.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    reader_ = std::thread([this, out] {
      char buf[4096];
      while (std::fgets(buf, sizeof(buf), out) != nullptr) {
        std::string line(buf);
        if (!line.empty() && line.back() == '\n') line.pop_back();
        absl::MutexLock lock(&mu_);
        lines_.push_back(std::move(line));
      }
      std::fclose(out);
      absl::MutexLock lock(&mu_);
      eof_ = true;
    });
  }
  ~WorkerChild() {
    Kill();
    reader_.join();
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  // Waits for the exit; returns the exit code (-1 if killed).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The next line that starts with `prefix` (earlier others are skipped),
  // split at spaces; nullopt at EOF or after the failsafe.
  std::optional<std::vector<std::string>> Next(const std::string& prefix) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + kWait;
    while (true) {
      while (next_ < lines_.size()) {
        const std::string& line = lines_[next_++];
        if (line.rfind(prefix + " ", 0) == 0) {
          return std::vector<std::string>(absl::StrSplit(line, ' '));
        }
      }
      auto more = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return next_ < lines_.size() || eof_;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&more), deadline)) {
        return std::nullopt;
      }
      if (next_ >= lines_.size() && eof_) return std::nullopt;
    }
  }
  // Every line, once the child's stdout is closed.
  std::vector<std::string> AllLines() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&eof_), kWait);
    return lines_;
  }

 private:
  pid_t pid_ = 0;
  std::thread reader_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

google::protobuf::Duration Millis(int64_t ms) {
  google::protobuf::Duration d;
  d.set_seconds(ms / 1000);
  d.set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
  return d;
}

class WorkQueueE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto emulator = EmulatorProcess::Start(Runfile("emulator/kube_emulator"),
                                           {"--demo", "--churn_interval=50ms"},
                                           /*quiet=*/true);
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = *std::move(emulator);
    char tmpl[] = "/tmp/wqe2e.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto kubeconfig = WriteKubeconfig(dir_, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    SidecarProcess::Options options;
    options.flags = {"--kubeconfig=" + *kubeconfig, "--resources=pods",
                     "--print_events=false"};
    options.quiet = true;
    auto sidecar =
        SidecarProcess::Start(Runfile("server/informer_sidecar"), options);
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    stub_ = v1::WorkQueue::NewStub(sidecar_->NewChannel());
  }

  void TearDown() override {
    sidecar_.reset();
    emulator_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  grpc::Status Create(const v1::CreateQueueRequest& req) {
    grpc::ClientContext ctx;
    v1::CreateQueueResponse resp;
    return stub_->CreateQueue(&ctx, req, &resp);
  }
  grpc::Status AddKey(const std::string& queue, const std::string& key) {
    grpc::ClientContext ctx;
    v1::AddAfterRequest req;
    req.set_queue(queue);
    req.set_key(key);
    v1::AddAfterResponse resp;
    return stub_->AddAfter(&ctx, req, &resp);
  }
  v1::QueueStats Stats(const std::string& queue) {
    grpc::ClientContext ctx;
    v1::StatsRequest req;
    req.set_queue(queue);
    v1::StatsResponse resp;
    grpc::Status st = stub_->Stats(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.queues_size() == 1 ? resp.queues(0) : v1::QueueStats();
  }

  std::unique_ptr<EmulatorProcess> emulator_;
  std::string dir_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::unique_ptr<v1::WorkQueue::Stub> stub_;
};

struct Held {
  int64_t start;
  int64_t end;
  std::string worker;
  std::string lease_id;
};

std::string History(const std::vector<Held>& held) {
  std::string out;
  for (const Held& h : held) {
    absl::StrAppend(&out, "\n  ", h.worker, " lease ", h.lease_id, " [",
                    h.start, ", ", h.end, "]");
  }
  return out;
}

TEST_F(WorkQueueE2eTest, TwoWorkerProcessesNeverHoldTheSameKeyAtOnce) {
  v1::CreateQueueRequest req;
  req.set_name("churn");
  req.set_resource("pods");
  ASSERT_TRUE(Create(req).ok());
  std::vector<std::string> flags = {"--credit=4", "--hold=2ms",
                                    "--duration=6s"};
  WorkerChild a(sidecar_->address(), "churn", "a", flags);
  WorkerChild b(sidecar_->address(), "churn", "b", flags);
  // Hot keys added over and over while the workers hold them, on top of
  // the emulator's churn (a demo pod replaced every 50ms).
  std::atomic<bool> stop{false};
  std::thread adder([&] {
    int i = 0;
    while (!stop.load()) {
      AddKey("churn", absl::StrCat("hot/k", i++ % 6)).IgnoreError();
    }
  });
  const int code_a = a.Wait();
  const int code_b = b.Wait();
  stop = true;
  adder.join();
  EXPECT_EQ(code_a, 0);
  EXPECT_EQ(code_b, 0);

  std::map<std::string, std::vector<Held>> by_key;
  std::map<std::string, int> per_worker;
  for (const auto& [w, name] :
       std::vector<std::pair<WorkerChild*, std::string>>{{&a, "a"},
                                                         {&b, "b"}}) {
    for (const std::string& line : w->AllLines()) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      if (f[0] != "HELD") continue;
      ASSERT_EQ(f.size(), 6u) << line;
      Held h;
      ASSERT_TRUE(absl::SimpleAtoi(f[3], &h.start));
      ASSERT_TRUE(absl::SimpleAtoi(f[4], &h.end));
      h.worker = name;
      h.lease_id = f[2];
      by_key[f[1]].push_back(h);
      ++per_worker[name];
    }
  }
  EXPECT_GT(per_worker["a"], 50);
  EXPECT_GT(per_worker["b"], 50);
  int churn_keys = 0;
  int shared_keys = 0;
  int checked = 0;
  for (auto& [key, held] : by_key) {
    if (key.rfind("demo/", 0) == 0) ++churn_keys;
    std::sort(held.begin(), held.end(),
              [](const Held& x, const Held& y) { return x.start < y.start; });
    std::set<std::string> workers;
    for (size_t i = 0; i < held.size(); ++i) {
      workers.insert(held[i].worker);
      if (i == 0) continue;
      ++checked;
      // The next holder got the key only after the previous one sent its
      // result.
      EXPECT_GE(held[i].start, held[i - 1].end)
          << key << " held by " << held[i - 1].worker << " until "
          << held[i - 1].end << " and by " << held[i].worker << " from "
          << held[i].start << History(held);
    }
    if (workers.size() == 2) ++shared_keys;
  }
  EXPECT_GT(churn_keys, 5) << "the informer's churn reached the queue";
  EXPECT_GT(shared_keys, 3) << "keys moved between the two workers";
  EXPECT_GT(checked, 100);
  const v1::QueueStats stats = Stats("churn");
  EXPECT_EQ(stats.workers(), 0);
  EXPECT_EQ(stats.in_flight(), 0);
}

TEST_F(WorkQueueE2eTest, AWorkerKilledMidLeaseLosesNothing) {
  v1::CreateQueueRequest req;
  req.set_name("kill");
  req.set_resource("pods");
  req.set_label_selector("e2e=none");  // only the keys added below
  ASSERT_TRUE(Create(req).ok());
  std::set<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    keys.insert(absl::StrCat("ns/k", i));
    ASSERT_TRUE(AddKey("kill", absl::StrCat("ns/k", i)).ok());
  }
  WorkerChild a(sidecar_->address(), "kill", "a",
                {"--credit=4", "--hold_forever"});
  std::set<std::string> held_by_a;
  for (int i = 0; i < 4; ++i) {
    auto lease = a.Next("LEASE");
    ASSERT_TRUE(lease);
    held_by_a.insert((*lease)[1]);
  }
  EXPECT_EQ(held_by_a.size(), 4u);
  EXPECT_EQ(Stats("kill").in_flight(), 4);
  a.Kill();

  WorkerChild b(sidecar_->address(), "kill", "b", {"--credit=3", "--hold=1ms"});
  std::set<std::string> done_by_b;
  while (done_by_b.size() < keys.size()) {
    auto held = b.Next("HELD");
    ASSERT_TRUE(held) << "only " << done_by_b.size() << " keys came back";
    done_by_b.insert((*held)[1]);
  }
  EXPECT_EQ(done_by_b, keys);
  for (const std::string& k : held_by_a) EXPECT_TRUE(done_by_b.count(k)) << k;
  const v1::QueueStats stats = Stats("kill");
  EXPECT_EQ(stats.returned(), 4);
  EXPECT_EQ(stats.workers(), 1);
}

TEST_F(WorkQueueE2eTest, FailureBackOffGrowsAsConfigured) {
  v1::CreateQueueRequest req;
  req.set_name("backoff");
  req.set_resource("pods");
  req.set_label_selector("e2e=none");
  *req.mutable_rate_limiter()->mutable_base_delay() = Millis(100);
  *req.mutable_rate_limiter()->mutable_max_delay() = Millis(10000);
  ASSERT_TRUE(Create(req).ok());
  ASSERT_TRUE(AddKey("backoff", "ns/flaky").ok());
  WorkerChild w(sidecar_->address(), "backoff", "w",
                {"--credit=1", "--hold=0s", "--fail_times=4"});
  // LEASE t0, HELD(fail) e0, LEASE t1 (>= e0 + 100ms), ... 4 failures.
  std::vector<int64_t> gaps_ms;
  int64_t last_fail_end = 0;
  for (int attempt = 0; attempt <= 4; ++attempt) {
    auto lease = w.Next("LEASE");
    ASSERT_TRUE(lease) << "attempt " << attempt;
    EXPECT_EQ((*lease)[1], "ns/flaky");
    EXPECT_EQ((*lease)[3], std::to_string(attempt)) << "failures so far";
    int64_t t = 0;
    ASSERT_TRUE(absl::SimpleAtoi((*lease)[4], &t));
    if (attempt > 0) gaps_ms.push_back((t - last_fail_end) / 1000000);
    auto held = w.Next("HELD");
    ASSERT_TRUE(held);
    EXPECT_EQ((*held)[5], attempt < 4 ? "FAIL" : "FORGET");
    ASSERT_TRUE(absl::SimpleAtoi((*held)[4], &last_fail_end));
  }
  ASSERT_EQ(gaps_ms.size(), 4u);
  const int64_t expected[] = {100, 200, 400, 800};
  for (size_t i = 0; i < gaps_ms.size(); ++i) {
    // Never early; late only by scheduling noise (a loose bound).
    EXPECT_GE(gaps_ms[i], expected[i] - 5) << "retry " << i;
    EXPECT_LT(gaps_ms[i], expected[i] + 1000) << "retry " << i;
  }
  EXPECT_GT(gaps_ms[3], gaps_ms[2]);
  EXPECT_GT(gaps_ms[2], gaps_ms[1]);
  EXPECT_GT(gaps_ms[1], gaps_ms[0]);
  const v1::QueueStats stats = Stats("backoff");
  EXPECT_EQ(stats.failures(), 4);
  EXPECT_EQ(stats.retries(), 4);
}

}  // namespace
}  // namespace integration

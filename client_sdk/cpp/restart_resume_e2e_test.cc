// Apps' Watch resume tokens across restarts of the real informer_sidecar
// binary (with --cache_dir) in front of the kube_emulator binary over HTTP:
// a C++ SDK RemoteInformer, connected through a fixed Unix socket, keeps
// its mirror across orderly restarts under churn with no RESET, no missed
// event and no repeated one, also when the catching up is a relist (the
// API server's window passed); a token older than the persisted history, or
// one a crashed run issued after its last snapshot, gets RESET and the
// mirror converges all the same.

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/remote_informer.h"
#include "gtest/gtest.h"
#include "informer/cache/event_handler.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;

constexpr int kObjects = 300;
constexpr absl::Duration kConverge = absl::Seconds(90);

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

uint64_t RvOf(const informer::ObjectPtr& obj) {
  uint64_t rv = 0;
  return absl::SimpleAtoi(obj->resource_version(), &rv) ? rv : 0;
}

// Checks the story a RemoteInformer's handlers tell: an add only of a key
// not held, an update or delete only of one held, and every update newer
// than what was held (a repeated event would go backwards or stand still).
class StoryChecker : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr& obj, bool) override {
    absl::MutexLock lock(&mu_);
    if (!held_.emplace(obj->Key(), RvOf(obj)).second) {
      errors_.push_back(absl::StrCat("add of held ", obj->Key()));
    }
    ++events_;
  }
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr& obj) override {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(obj->Key());
    if (it == held_.end()) {
      errors_.push_back(absl::StrCat("update of absent ", obj->Key()));
    } else if (RvOf(obj) <= it->second) {
      errors_.push_back(absl::StrCat("update of ", obj->Key(), " to ",
                                     RvOf(obj), " over ", it->second));
    }
    held_[obj->Key()] = RvOf(obj);
    ++events_;
  }
  void OnDelete(const informer::ObjectPtr& obj, bool) override {
    absl::MutexLock lock(&mu_);
    if (held_.erase(obj->Key()) == 0) {
      errors_.push_back(absl::StrCat("delete of absent ", obj->Key()));
    }
    ++events_;
  }
  int64_t events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // Waits until the handlers were called `n` times in all, or `timeout`
  // passes (a failsafe: reached only when the test fails).
  bool AwaitEvents(int64_t n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  // Waits until the story holds exactly `want`'s keys at its
  // resourceVersions, or `timeout` passes. The mirror is updated before
  // its handlers are called, so it holds them too then.
  bool AwaitHolds(const ObjectVersions& want, absl::Duration timeout) const {
    std::map<std::string, uint64_t> rvs;
    for (const auto& [key, rv] : want) {
      if (!absl::SimpleAtoi(rv, &rvs[key])) return false;
    }
    absl::MutexLock lock(&mu_);
    auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return held_ == rvs;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
  }
  size_t held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  std::vector<std::string> errors() const {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  int64_t events_ ABSL_GUARDED_BY(mu_) = 0;
};

// Changes ConfigMaps until stopped: patches of the seeded ones, and a
// created one deleted a few operations later.
class Churn {
 public:
  explicit Churn(int port) : port_(port) {}
  ~Churn() { Stop(); }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  // Waits until `n` rounds of changes were made, or `timeout` passes.
  bool AwaitDone(int64_t n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  void Run() {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(30, 0);
    for (int64_t n = 0; !stop_; ++n) {
      const int i = static_cast<int>((n * 37) % kObjects);
      cli.Patch(
          absl::StrFormat("/api/v1/namespaces/benchcms/configmaps/cm-%06d", i)
              .c_str(),
          absl::StrCat(R"({"data":{"churn":")", n, R"("}})"),
          "application/merge-patch+json");
      if (n % 5 == 0) {
        cli.Post("/api/v1/namespaces/benchcms/configmaps",
                 absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                              R"("metadata":{"name":"churn-)", n, R"("}})"),
                 "application/json");
      }
      if (n % 5 == 0 && n >= 15) {
        cli.Delete(absl::StrCat("/api/v1/namespaces/benchcms/configmaps/churn-",
                                n - 15)
                       .c_str());
      }
      {
        absl::MutexLock lock(&mu_);
        ++done_;
      }
      // Paces the load (about 200 changes a second, not a wait for a
      // condition): a faster churn outruns the 10000 events the history
      // keeps within a run, and a mirror's token inside a coalesced batch
      // (the position before it) may then fall out of it: a RESET, which
      // is right, but not what this churn means to test.
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  const int port_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

class WatchResumeRestartE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> sidecar =
        FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_bin_ = *sidecar;
    absl::StatusOr<std::string> emulator =
        FindRunfile("emulator/kube_emulator");
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    absl::StatusOr<std::unique_ptr<EmulatorProcess>> emu =
        EmulatorProcess::Start(*emulator,
                               {absl::StrCat("--seed_configmaps=", kObjects)},
                               /*quiet=*/true);
    ASSERT_TRUE(emu.ok()) << emu.status();
    emulator_ = *std::move(emu);
    const char* tmp = std::getenv("TEST_TMPDIR");
    work_ = absl::StrCat(
        tmp == nullptr ? "/tmp" : tmp, "/",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(work_);
    // A Unix socket path must stay short: its own directory under /tmp.
    char sock_dir[] = "/tmp/wrsXXXXXX";
    ASSERT_NE(mkdtemp(sock_dir), nullptr);
    sock_dir_ = sock_dir;
    socket_ = absl::StrCat("unix:", sock_dir_, "/grpc.sock");
    absl::StatusOr<std::string> kubeconfig =
        WriteKubeconfig(work_, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    kubeconfig_ = *kubeconfig;
    httplib::Client cli("127.0.0.1", emulator_->port());
    httplib::Result r =
        cli.Post("/api/v1/namespaces",
                 absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)",
                              R"("metadata":{"name":"kube-system"}})"),
                 "application/json");
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->status == 201 || r->status == 409) << r->body;
  }

  void TearDown() override { std::filesystem::remove_all(sock_dir_); }

  // How Restart stops the running sidecar.
  enum class Exit {
    kOrderly,  // SIGTERM: the snapshot, with the history, is written
    kCrash,    // SIGKILL: no snapshot of this run
  };

  // One restart: stops `from` as `how` says, runs `while_down` while no
  // sidecar runs, then starts `to` on the same socket and cache directory
  // (flags `extra`, log `log`). Call it under ASSERT_NO_FATAL_FAILURE.
  void Restart(PortedSidecar* from, Exit how,
               const std::function<void()>& while_down, const std::string& log,
               PortedSidecar* to, std::vector<std::string> extra = {}) {
    if (how == Exit::kCrash) {
      from->process->Kill();
    } else {
      EXPECT_EQ(from->process->Terminate(), 0);
    }
    from->process.reset();
    if (while_down) while_down();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(Start(log, to, std::move(extra)));
  }

  // Starts a sidecar on the fixed socket (waits for SERVING).
  void Start(const std::string& log, PortedSidecar* out,
             std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {
        "--kubeconfig=" + kubeconfig_,     "--resources=configmaps",
        "--cache_dir=" + work_ + "/cache", "--cache_snapshot_interval=0",
        "--http_listen=127.0.0.1:0",       "--grpc_listen=" + socket_};
    flags.insert(flags.end(), extra.begin(), extra.end());
    absl::StatusOr<PortedSidecar> s =
        StartPortedSidecar(sidecar_bin_, std::move(flags), work_ + "/" + log,
                           /*quiet=*/false, absl::Seconds(90));
    ASSERT_TRUE(s.ok()) << s.status() << "\n" << Log(log);
    *out = *std::move(s);
  }

  std::string Log(const std::string& log) {
    return ReadWholeFile(work_ + "/" + log);
  }

  std::unique_ptr<client_sdk::RemoteInformer> NewInformer(
      StoryChecker* checker) {
    client_sdk::RemoteInformer::Options o;
    o.resource = "configmaps";
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Seconds(1);
    auto informer = std::make_unique<client_sdk::RemoteInformer>(
        grpc::CreateChannel(socket_, grpc::InsecureChannelCredentials()), o);
    informer->AddEventHandler(checker);
    return informer;
  }

  // The emulator's state, the sidecar's cache converged to it, and the
  // mirror (whose handler `checker` is) equal to both (keys and
  // resourceVersions). The sidecar is another process, seen over RPC:
  // WaitForConvergence polls it; the mirror's story is awaited.
  void ExpectMirrorConverged(const PortedSidecar& s,
                             const client_sdk::RemoteInformer& mirror,
                             const StoryChecker& checker) {
    absl::StatusOr<ObjectVersions> want =
        GetEmulatorState(emulator_->port(), "configmaps");
    ASSERT_TRUE(want.ok()) << want.status();
    absl::Status st = WaitForConvergence(s.process->NewChannel(), "configmaps",
                                         *want, kConverge);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(checker.AwaitHolds(*want, kConverge))
        << "the handlers hold " << checker.held() << " objects, the cache "
        << want->size();
    ObjectVersions got;
    for (const informer::ObjectPtr& o : mirror.List()) {
      got[o->Key()] = std::string(o->resource_version());
    }
    EXPECT_TRUE(got == *want) << "mirror holds " << got.size()
                              << " objects, the cache " << want->size();
  }

  // Runs the churn until the checker has seen `n` more events.
  void ChurnEvents(StoryChecker* checker, int64_t n) {
    EXPECT_TRUE(checker->AwaitEvents(checker->events() + n, kConverge))
        << checker->events() << " events";
  }

  // A raw Watch resuming from `token`: the first event's type.
  v1::EventType FirstEventType(const PortedSidecar& s,
                               const std::string& token) {
    auto stub = v1::Informer::NewStub(s.process->NewChannel());
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::WatchRequest req;
    req.set_resource("configmaps");
    req.set_resume_token(token);
    auto reader = stub->Watch(&ctx, req);
    v1::WatchResponse resp;
    v1::EventType type = v1::EVENT_TYPE_UNSPECIFIED;
    while (reader->Read(&resp)) {
      if (resp.events_size() > 0) {
        type = resp.events(0).type();
        break;
      }
    }
    ctx.TryCancel();
    reader->Finish().IgnoreError();
    return type;
  }

  std::string sidecar_bin_;
  std::unique_ptr<EmulatorProcess> emulator_;
  std::string work_;
  std::string sock_dir_;
  std::string socket_;
  std::string kubeconfig_;
};

TEST_F(WatchResumeRestartE2eTest, OrderlyRestartsUnderChurnNeverReset) {
  PortedSidecar a;
  ASSERT_NO_FATAL_FAILURE(Start("a.log", &a));
  StoryChecker checker;
  auto mirror = NewInformer(&checker);
  ASSERT_TRUE(mirror->Start().ok());
  ASSERT_TRUE(mirror->WaitForSync(kConverge));
  Churn churn(emulator_->port());
  churn.Start();
  ChurnEvents(&checker, 30);
  PortedSidecar* current = &a;
  PortedSidecar b, c;
  int round = 0;
  for (PortedSidecar* next : {&b, &c}) {
    ++round;
    const std::string log = absl::StrCat("run", round, ".log");
    // Changes while no sidecar runs reach the mirror as ordinary events
    // after the restart (the informer catches up from the snapshot).
    ASSERT_NO_FATAL_FAILURE(Restart(
        current, Exit::kOrderly,
        [&] { ASSERT_TRUE(churn.AwaitDone(churn.done() + 20, kConverge)); },
        log, next));
    ChurnEvents(&checker, 30);
    EXPECT_TRUE(absl::StrContains(Log(log), "Watch history loaded"))
        << Log(log);
    current = next;
  }
  churn.Stop();
  ASSERT_NO_FATAL_FAILURE(ExpectMirrorConverged(*current, *mirror, checker));
  EXPECT_EQ(mirror->resets(), 0) << "after " << churn.done() << " changes";
  EXPECT_EQ(mirror->sync_generation(), 1) << "no reconciliation";
  EXPECT_GE(mirror->connects(), 3);
  EXPECT_TRUE(checker.errors().empty())
      << checker.errors().size()
      << " errors, first: " << checker.errors().front();
  mirror->Stop();
}

// Outside the API server's watch window (it restarted while the sidecar
// was down): the informer relists once, diffed against the snapshot, and
// those differences continue the history like any event: still no RESET.
TEST_F(WatchResumeRestartE2eTest, ARelistAfterTheRestartContinuesTheHistory) {
  PortedSidecar a;
  ASSERT_NO_FATAL_FAILURE(Start("a.log", &a));
  StoryChecker checker;
  auto mirror = NewInformer(&checker);
  ASSERT_TRUE(mirror->Start().ok());
  ASSERT_TRUE(mirror->WaitForSync(kConverge));
  PortedSidecar b;
  ASSERT_NO_FATAL_FAILURE(Restart(
      &a, Exit::kOrderly,
      [&] {
        httplib::Client cli("127.0.0.1", emulator_->port());
        for (int i : {4, 40, 140}) {
          ASSERT_TRUE(cli.Patch(
              absl::StrFormat("/api/v1/namespaces/benchcms/configmaps/cm-%06d",
                              i)
                  .c_str(),
              R"({"data":{"while":"down"}})", "application/merge-patch+json"));
        }
        ASSERT_TRUE(
            cli.Delete("/api/v1/namespaces/benchcms/configmaps/cm-000009"));
        // The watch from the snapshot's resourceVersion now gets 410.
        httplib::Result r = cli.Post("/_emulator/restart?resource=configmaps",
                                     "", "application/json");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
      },
      "b.log", &b));
  ASSERT_NO_FATAL_FAILURE(ExpectMirrorConverged(b, *mirror, checker));
  EXPECT_TRUE(absl::StrContains(Log("b.log"), "Watch history loaded"))
      << Log("b.log");
  // The premise: the catching up was one relist.
  absl::StatusOr<double> lists =
      GetMetricSum(b.ports.at("http"), "informer_sidecar_informer_lists_total");
  ASSERT_TRUE(lists.ok()) << lists.status();
  EXPECT_EQ(*lists, 1) << Log("b.log");
  EXPECT_EQ(mirror->resets(), 0);
  EXPECT_EQ(mirror->sync_generation(), 1);
  EXPECT_TRUE(checker.errors().empty()) << checker.errors().front();
  mirror->Stop();
}

TEST_F(WatchResumeRestartE2eTest, TokensOutsideThePersistedHistoryGetReset) {
  PortedSidecar a;
  ASSERT_NO_FATAL_FAILURE(Start("a.log", &a, {"--watch_history=50"}));
  StoryChecker checker;
  auto mirror = NewInformer(&checker);
  ASSERT_TRUE(mirror->Start().ok());
  ASSERT_TRUE(mirror->WaitForSync(kConverge));
  const std::string synced_token = mirror->resume_token();
  Churn churn(emulator_->port());
  churn.Start();
  // Past the 50 events the history keeps.
  ChurnEvents(&checker, 120);
  churn.Stop();
  ASSERT_NO_FATAL_FAILURE(ExpectMirrorConverged(a, *mirror, checker));
  const std::string last_token = mirror->resume_token();
  mirror->Stop();

  PortedSidecar b;
  ASSERT_NO_FATAL_FAILURE(Restart(&a, Exit::kOrderly, nullptr, "b.log", &b,
                                  {"--watch_history=50"}));
  // Older than the persisted history: RESET.
  EXPECT_EQ(FirstEventType(b, synced_token), v1::EVENT_TYPE_RESET);
  // The last position before the restart: resumed; the next event is the
  // next change.
  httplib::Client cli("127.0.0.1", emulator_->port());
  ASSERT_TRUE(cli.Patch("/api/v1/namespaces/benchcms/configmaps/cm-000001",
                        R"({"data":{"after":"restart"}})",
                        "application/merge-patch+json"));
  EXPECT_EQ(FirstEventType(b, last_token), v1::EVENT_TYPE_MODIFIED);

  // A run that crashed: b issued positions past a's snapshot and was
  // killed before writing its own; c starts from a's snapshot, and a
  // mirror that followed b gets RESET, then converges.
  StoryChecker checker2;
  auto mirror2 = NewInformer(&checker2);
  ASSERT_TRUE(mirror2->Start().ok());
  ASSERT_TRUE(mirror2->WaitForSync(kConverge));
  Churn churn2(emulator_->port());
  churn2.Start();
  ChurnEvents(&checker2, 30);
  churn2.Stop();
  ASSERT_NO_FATAL_FAILURE(ExpectMirrorConverged(b, *mirror2, checker2));
  PortedSidecar c;
  ASSERT_NO_FATAL_FAILURE(
      Restart(&b, Exit::kCrash, nullptr, "c.log", &c, {"--watch_history=50"}));
  // The RESET's fresh initial state, reconciled: the second generation.
  EXPECT_TRUE(mirror2->WaitForSyncGeneration(2, kConverge))
      << "no RESET: " << Log("c.log");
  ASSERT_NO_FATAL_FAILURE(ExpectMirrorConverged(c, *mirror2, checker2));
  EXPECT_EQ(mirror2->resets(), 1);
  EXPECT_TRUE(checker2.errors().empty()) << checker2.errors().front();
  mirror2->Stop();
}

}  // namespace
}  // namespace integration

// A scale test, not a benchmark (tagged manual: it needs about 3 GB and a
// few minutes): SCALE_TEST_PODS Pods (default 150,000, the Kubernetes
// scalability envelope; 100 namespaces of 1,500 on 5,000 node names) in
// the emulator, a node sidecar caching them and serving its Kubernetes API
// facade, and a pod sidecar chained to that facade (--cache_upstream),
// both started while a writer changes Pods (label patches, deletes,
// creates). Once the writer stops, both caches equal the emulator's state
// object by object (keys and resourceVersions, seen through a gRPC Watch
// and a paged List), and no watch was cut for being slow: the facade's
// slow-watch terminations and the gRPC Watch streams ended for being too
// far behind are 0 on both sidecars.
//
//   bazel build -c opt //integration_tests:scale_pods_test
//   bazel-bin/integration_tests/scale_pods_test   # SCALE_TEST_PODS=N

#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

constexpr absl::Duration kStart = absl::Minutes(10);
constexpr absl::Duration kConverge = absl::Minutes(10);
constexpr int kNamespaces = 100;
// Writes after the pod sidecar serves, so that both sidecars see changes
// on their watches, not only in their initial lists.
constexpr int kWritesAfterServing = 3000;
constexpr int kMaxWrites = 200000;  // the writer's bound, whatever happens

int PodCount() {
  const char* v = std::getenv("SCALE_TEST_PODS");
  int n = 150000;
  if (v != nullptr && !absl::SimpleAtoi(v, &n)) n = 150000;
  return n;
}

// Changes Pods through the emulator's API until stopped: of every three
// writes, a label patch of a random Pod, and a delete of one followed by
// the create of a copy under a new name.
class PodWriter {
 public:
  PodWriter(int port, std::vector<std::string> keys)
      : port_(port), keys_(std::move(keys)) {}
  ~PodWriter() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int writes() const {
    absl::MutexLock lock(&mu_);
    return writes_;
  }
  int failures() const { return failures_.load(); }
  // True once `n` writes were made (or the writer ended: false then).
  bool AwaitWrites(int n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return writes_ >= n || ended_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
    return writes_ >= n;
  }

 private:
  void Run() {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_keep_alive(true);
    cli.set_tcp_nodelay(true);
    std::mt19937 rng(7);
    for (int i = 0; i < kMaxWrites && !stop_.load(); ++i) {
      const size_t pick =
          std::uniform_int_distribution<size_t>(0, keys_.size() - 1)(rng);
      const std::string key = keys_[pick];
      const size_t slash = key.find('/');
      const std::string ns = key.substr(0, slash);
      const std::string path = absl::StrCat("/api/v1/namespaces/", ns, "/pods/",
                                            key.substr(slash + 1));
      bool ok = false;
      if (i % 3 != 2) {
        auto r = cli.Patch(
            path.c_str(),
            absl::StrCat(R"({"metadata":{"labels":{"churn":"w)", i, R"("}}})"),
            "application/merge-patch+json");
        ok = r && r->status == 200;
      } else {
        auto got = cli.Get(path.c_str());
        auto del = cli.Delete(path.c_str());
        ok = got && got->status == 200 && del && del->status == 200;
        if (ok) {
          const std::string name = absl::StrCat("churn-", i);
          std::string body = got->body;
          EraseField(&body, "resourceVersion");
          EraseField(&body, "uid");
          ReplaceFirst(
              &body, absl::StrCat(R"("name":")", key.substr(slash + 1), R"(")"),
              absl::StrCat(R"("name":")", name, R"(")"));
          auto created =
              cli.Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods").c_str(),
                       body, "application/json");
          ok = created && created->status == 201;
          keys_[pick] = absl::StrCat(ns, "/", name);
        }
      }
      if (!ok) failures_.fetch_add(1);
      absl::MutexLock lock(&mu_);
      ++writes_;
    }
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

  // Removes the first "key":"value", (a string field and its comma).
  static void EraseField(std::string* s, const std::string& key) {
    const std::string k = absl::StrCat("\"", key, "\":\"");
    const size_t at = s->find(k);
    if (at == std::string::npos) return;
    size_t end = s->find('"', at + k.size()) + 1;
    if (end < s->size() && (*s)[end] == ',') ++end;
    s->erase(at, end - at);
  }

  static void ReplaceFirst(std::string* s, const std::string& from,
                           const std::string& to) {
    const size_t at = s->find(from);
    if (at != std::string::npos) s->replace(at, from.size(), to);
  }

  const int port_;
  std::vector<std::string> keys_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> failures_{0};
  std::thread thread_;
};

double MetricOrFail(const PortedSidecar& s, const std::string& name) {
  absl::StatusOr<double> v =
      GetMetricSum(static_cast<int>(s.ports.at("http")), name);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : -1;
}

TEST(ScalePodsTest, NodeAndChainedSidecarEqualTheEmulatorUnderChurn) {
  const int pods = PodCount();
  absl::StatusOr<std::string> sidecar_bin =
      FindRunfile("server/informer_sidecar");
  absl::StatusOr<std::string> emulator_bin =
      FindRunfile("emulator/kube_emulator");
  ASSERT_TRUE(sidecar_bin.ok() && emulator_bin.ok());
  auto emu = EmulatorProcess::Start(
      *emulator_bin,
      {absl::StrCat("--seed_pods=", pods),
       absl::StrCat("--seed_pod_namespaces=", kNamespaces),
       "--seed_pod_nodes=5000", "--serve_bytes_per_sec=7.5e7",
       "--history=100000"},
      /*quiet=*/true);
  ASSERT_TRUE(emu.ok()) << emu.status();
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::string> kubeconfig =
      WriteKubeconfig(tmp == nullptr ? "/tmp" : tmp, (*emu)->url());
  ASSERT_TRUE(kubeconfig.ok());
  absl::StatusOr<ObjectVersions> seeded =
      GetEmulatorState((*emu)->port(), "pods");
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  ASSERT_EQ(seeded->size(), static_cast<size_t>(pods));
  std::vector<std::string> keys;
  for (const auto& [key, rv] : *seeded) keys.push_back(key);

  PodWriter writer((*emu)->port(), std::move(keys));
  writer.Start();
  absl::StatusOr<PortedSidecar> node =
      StartPortedSidecar(*sidecar_bin,
                         {"--kubeconfig=" + *kubeconfig, "--resources=pods",
                          "--kube_api_listen=127.0.0.1:0"},
                         "", true, kStart);
  ASSERT_TRUE(node.ok()) << node.status();
  const std::string facade =
      absl::StrCat("http://127.0.0.1:", node->ports.at("kube_api"));
  absl::StatusOr<PortedSidecar> chained =
      StartPortedSidecar(*sidecar_bin,
                         {"--kubeconfig=" + *kubeconfig,
                          "--cache_upstream=" + facade, "--resources=pods"},
                         "", true, kStart);
  ASSERT_TRUE(chained.ok()) << chained.status();
  const int at_serving = writer.writes();
  EXPECT_TRUE(
      writer.AwaitWrites(at_serving + kWritesAfterServing, absl::Minutes(10)));
  writer.Stop();
  EXPECT_EQ(writer.failures(), 0);
  std::printf("%d Pods, %d writes (%d before both sidecars served)\n", pods,
              writer.writes(), at_serving);

  absl::StatusOr<ObjectVersions> want =
      GetEmulatorState((*emu)->port(), "pods");
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), static_cast<size_t>(pods));
  for (const PortedSidecar* s : {&*node, &*chained}) {
    const absl::Time t0 = absl::Now();
    absl::Status st =
        WaitForConvergence(s->process->NewChannel(), "pods", *want, kConverge);
    EXPECT_TRUE(st.ok()) << (s == &*node ? "node" : "chained") << ": " << st;
    std::printf("%s sidecar equals the emulator (%zu Pods) after %s\n",
                s == &*node ? "node" : "chained", want->size(),
                absl::FormatDuration(absl::Now() - t0).c_str());
  }
  EXPECT_EQ(MetricOrFail(*node,
                         "informer_sidecar_kube_api_slow_watches_terminated_"
                         "total"),
            0);
  for (const PortedSidecar* s : {&*node, &*chained}) {
    EXPECT_EQ(
        MetricOrFail(*s, "informer_sidecar_watch_streams_exhausted_total"), 0);
    std::printf("relists: %.0f\n",
                MetricOrFail(*s, "informer_sidecar_informer_relists_total"));
  }
}

}  // namespace
}  // namespace integration

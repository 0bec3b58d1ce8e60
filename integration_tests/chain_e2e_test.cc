// Chained sidecars end to end, all real processes over real sockets on
// ports chosen by the kernel: the API server emulator (kube_emulator), a
// node sidecar serving its caches through the Kubernetes API facade
// (--kube_api_listen), and pod sidecars whose reflectors list and watch
// that facade (--cache_upstream) while their discovery and Event writes go
// to the emulator (--kubeconfig). Under churn from the emulator's load
// generator, and through a cut watch, an API server restart and a restart
// of the node sidecar, the pod sidecars' caches converge to the emulator's
// state, and adding a pod sidecar costs the emulator no list and no watch.
//
// Also: a sidecar whose kubeconfig points at a facade directly syncs, its
// Event writes are refused with 405 (logged once per reason), and it
// stays ready.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "emulator/tls_certs.h"
#include "gtest/gtest.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulated_cluster.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/events.grpc.pb.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;

constexpr absl::Duration kConverge = absl::Seconds(90);
const char* const kResources[] = {"configmaps", "pods"};

std::string TestTmpDir() {
  const char* v = std::getenv("TEST_TMPDIR");
  return v == nullptr ? "/tmp" : v;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class ChainE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<EmulatedCluster> cluster = StartEmulatedCluster(
        {.emulator_flags = {"--seed_pods=30"}, .dir = TestTmpDir()});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sidecar_bin_ = cluster->sidecar_bin;
    kubeconfig_ = cluster->kubeconfig;
    emulator_ = std::move(cluster->emulator);
    for (int i = 0; i < 5; ++i) {
      ASSERT_NO_FATAL_FAILURE(CreateConfigMap("seed", absl::StrCat("s-", i)));
    }
  }

  // The node sidecar: informers on the emulator, the facade on `listen`.
  // `extra` flags: TLS and tokens of the facade.
  void StartNode(const std::string& listen = "127.0.0.1:0",
                 const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--kubeconfig=" + kubeconfig_,
                                      "--resources=configmaps,pods",
                                      "--kube_api_listen=" + listen};
    flags.insert(flags.end(), extra.begin(), extra.end());
    absl::StatusOr<PortedSidecar> node =
        StartPortedSidecar(sidecar_bin_, std::move(flags));
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    facade_url_ = absl::StrCat(extra.empty() ? "http" : "https",
                               "://127.0.0.1:", node_.ports.at("kube_api"));
  }

  // A pod sidecar reading through the node's facade; `extra` flags: the
  // upstream's credentials.
  void StartPod(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--kubeconfig=" + kubeconfig_,
                                      "--cache_upstream=" + facade_url_,
                                      "--resources=configmaps,pods"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    absl::StatusOr<PortedSidecar> pod =
        StartPortedSidecar(sidecar_bin_, std::move(flags));
    ASSERT_TRUE(pod.ok()) << pod.status();
    pods_.push_back(std::move(*pod));
  }

  EmulatorRequests Requests() {
    absl::StatusOr<EmulatorRequests> r = GetEmulatorRequests(emulator_->port());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : EmulatorRequests{};
  }

  // Every pod sidecar's caches equal the emulator's state (which the
  // caller stopped changing).
  void ExpectPodsConverge(const std::string& when) {
    for (const char* resource : kResources) {
      absl::StatusOr<ObjectVersions> want =
          GetEmulatorState(emulator_->port(), resource);
      ASSERT_TRUE(want.ok()) << want.status();
      for (size_t i = 0; i < pods_.size(); ++i) {
        absl::Status st = WaitForConvergence(pods_[i].process->NewChannel(),
                                             resource, *want, kConverge);
        EXPECT_TRUE(st.ok()) << when << ": pod sidecar " << i << ": " << st;
      }
    }
  }

  // The sum of a metric family over the sidecars given.
  double Metric(const std::vector<const PortedSidecar*>& sidecars,
                const std::string& name) {
    double sum = 0;
    for (const PortedSidecar* s : sidecars) {
      absl::StatusOr<double> v =
          GetMetricSum(static_cast<int>(s->ports.at("http")), name);
      EXPECT_TRUE(v.ok()) << v.status();
      if (v.ok()) sum += *v;
    }
    return sum;
  }
  double PodRelists() {
    std::vector<const PortedSidecar*> pods;
    for (const PortedSidecar& p : pods_) pods.push_back(&p);
    return Metric(pods, "informer_sidecar_informer_relists_total");
  }
  double Node(const std::string& name) { return Metric({&node_}, name); }

  httplib::Client Emulator() {
    httplib::Client cli("127.0.0.1", emulator_->port());
    cli.set_read_timeout(60, 0);
    return cli;
  }

  void CreateConfigMap(const std::string& ns, const std::string& name) {
    httplib::Result r = Emulator().Post(
        absl::StrCat("/api/v1/namespaces/", ns, "/configmaps").c_str(),
        absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":)",
                     R"({"name":")", name, R"("},"data":{"k":"v"}})"),
        "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
  }

  void DeleteConfigMap(const std::string& ns, const std::string& name) {
    httplib::Result r = Emulator().Delete(
        absl::StrCat("/api/v1/namespaces/", ns, "/configmaps/", name).c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  // Creates `n` ConfigMaps named prefix-i in "churn" and deletes every
  // third one.
  void CreateAndDelete(const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      CreateConfigMap("churn", absl::StrCat(prefix, "-", i));
    }
    for (int i = 0; i < n; i += 3) {
      DeleteConfigMap("churn", absl::StrCat(prefix, "-", i));
    }
  }

  // The load generator: paced updates of `objects` ConfigMaps in "bench"
  // for `millis` (blocks until done).
  void Load(int objects, int rate, int millis) {
    httplib::Result r = Emulator().Post(
        absl::StrCat("/_emulator/load?namespace=bench&objects=", objects,
                     "&bytes=512&rate=", rate, "&millis=", millis)
            .c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void Control(const std::string& op) {
    httplib::Result r = Emulator().Post(("/_emulator/" + op).c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << op << ": " << r->body;
  }

  std::string sidecar_bin_;
  std::string kubeconfig_;
  std::unique_ptr<EmulatorProcess> emulator_;
  PortedSidecar node_;
  std::string facade_url_;
  std::vector<PortedSidecar> pods_;
};

TEST_F(ChainE2eTest, PodSidecarsConvergeWithoutLoadingTheApiServer) {
  ASSERT_NO_FATAL_FAILURE(StartNode());
  const EmulatorRequests node_only = Requests();
  // The node's two informers got their initial state (listed, or streamed
  // by a WatchList watch under the default --watch_list=auto) and watch
  // (the second may be on its way).
  EXPECT_GE(node_only.list + node_only.watch, 2);
  EXPECT_GE(node_only.watch, 1);

  ASSERT_NO_FATAL_FAILURE(StartPod());
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("one pod sidecar"));
  const EmulatorRequests one_pod = Requests();

  // The second pod sidecar starts while the load generator churns.
  std::thread churn([this] { Load(40, 200, 3000); });
  ASSERT_NO_FATAL_FAILURE(CreateAndDelete("a", 12));
  ASSERT_NO_FATAL_FAILURE(StartPod());
  churn.join();
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("two pod sidecars under churn"));
  const EmulatorRequests two_pods = Requests();

  // Every list and watch the emulator served is the node sidecar's own:
  // the pod sidecars read through its facade (their discovery, "other",
  // still goes to the emulator).
  EXPECT_EQ(one_pod.list, node_only.list);
  EXPECT_EQ(two_pods.list, one_pod.list);
  EXPECT_EQ(two_pods.watch, one_pod.watch);
  EXPECT_LE(node_only.watch, one_pod.watch);
  EXPECT_LE(one_pod.watch, 2);
  EXPECT_GT(two_pods.other, node_only.other);

  // The facade served each pod sidecar's lists and watches.
  absl::StatusOr<double> facade_lists =
      GetMetricSum(static_cast<int>(node_.ports.at("http")),
                   "informer_sidecar_kube_api_requests_total");
  ASSERT_TRUE(facade_lists.ok()) << facade_lists.status();
  EXPECT_GE(*facade_lists, 8);  // 2 pod sidecars x 2 resources x list+watch

  // A pod sidecar's Events go to the cluster (the emulator), with its own
  // credentials, not to the read-only facade.
  auto events = v1::Events::NewStub(pods_[0].process->NewChannel());
  grpc::ClientContext ctx;
  v1::RecordEventRequest event;
  event.mutable_object()->set_kind("ConfigMap");
  event.mutable_object()->set_namespace_("churn");
  event.mutable_object()->set_name("a-1");
  event.set_type("Normal");
  event.set_reason("ChainedSidecarWritesToTheCluster");
  v1::RecordEventResponse response;
  grpc::Status recorded = events->Record(&ctx, event, &response);
  ASSERT_TRUE(recorded.ok()) << recorded.error_message();
  // A watch of the emulator's Events (its initial state included) until
  // the event shows up; the read timeout bounds the wait.
  std::string seen;
  httplib::Client watch("127.0.0.1", emulator_->port());
  watch.set_read_timeout(60, 0);
  watch.Get("/api/v1/namespaces/churn/events?watch=1&resourceVersion=0",
            [&seen](const char* data, size_t n) {
              seen.append(data, n);
              return !absl::StrContains(seen,
                                        "ChainedSidecarWritesToTheCluster");
            });
  EXPECT_TRUE(absl::StrContains(seen, "ChainedSidecarWritesToTheCluster"))
      << seen;
}

TEST_F(ChainE2eTest, ConvergeThroughCutWatchesApiServerRestartAndNodeRestart) {
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartPod());
  ASSERT_NO_FATAL_FAILURE(StartPod());
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("start"));

  const double pod_relists = PodRelists();
  const double node_watches =
      Node("informer_sidecar_informer_watch_restarts_total");
  const double node_relists = Node("informer_sidecar_informer_relists_total");

  // The node sidecar's watch on the emulator is cut mid-event: it watches
  // again from its last resourceVersion; the pod sidecars see nothing of it.
  ASSERT_NO_FATAL_FAILURE(Control("cut_watches?resource=configmaps"));
  ASSERT_NO_FATAL_FAILURE(CreateAndDelete("cut", 9));
  ASSERT_NO_FATAL_FAILURE(Load(20, 200, 1000));
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("after a cut watch"));
  EXPECT_GT(Node("informer_sidecar_informer_watch_restarts_total"),
            node_watches);

  // The API server restarts while the node sidecar's watch is behind (it
  // was stalled through some changes): the watch cache starts over at the
  // current resourceVersion, the node's watch from its older one gets 410
  // and it relists. Its facade shows the pod sidecars ordinary changes:
  // they need no relist.
  ASSERT_NO_FATAL_FAILURE(Control("stall_watches?resource=configmaps"));
  ASSERT_NO_FATAL_FAILURE(CreateAndDelete("stalled", 9));
  ASSERT_NO_FATAL_FAILURE(Control("restart"));
  ASSERT_NO_FATAL_FAILURE(CreateAndDelete("restart", 9));
  ASSERT_NO_FATAL_FAILURE(Load(20, 200, 1000));
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("after an API server restart"));
  EXPECT_GT(Node("informer_sidecar_informer_relists_total"), node_relists);
  EXPECT_EQ(PodRelists(), pod_relists);

  // The node sidecar (the pod sidecars' upstream) dies; the cluster moves
  // on; a new node sidecar on the same facade address has none of the old
  // facade's history: the pod sidecars' watches back off while it is gone,
  // then get 410 (or resume) and relist through it.
  const std::string listen =
      absl::StrCat("127.0.0.1:", node_.ports.at("kube_api"));
  node_.process->Kill();
  ASSERT_NO_FATAL_FAILURE(CreateAndDelete("down", 9));
  ASSERT_NO_FATAL_FAILURE(Load(20, 200, 1000));
  ASSERT_NO_FATAL_FAILURE(StartNode(listen));
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("after a node sidecar restart"));
  // The new facade has no history before its own list: each pod sidecar's
  // ConfigMap watch from before got 410 and relisted through it.
  EXPECT_GE(PodRelists(), pod_relists + static_cast<double>(pods_.size()));
}

// An https upstream: the facade serves TLS and wants a bearer token of its
// --tokens_file; the pod sidecar verifies it with --cache_upstream_ca_file
// and authenticates with --cache_upstream_token_file.
TEST_F(ChainE2eTest, HttpsUpstreamWithCaFileAndTokenFile) {
  absl::StatusOr<emulator::TestPki> pki =
      emulator::GenerateTestPki({"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(pki.ok()) << pki.status();
  char dir[] = "/tmp/chain_tls_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto write = [&dir](const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ofstream(path) << text;
    return path;
  };
  const std::string ca = write("ca.crt", pki->ca_cert_pem);
  const std::string cert = write("tls.crt", pki->server_cert_pem);
  const std::string key = write("tls.key", pki->server_key_pem);
  const std::string tokens =
      write("tokens.yaml",
            "tokens:\n- name: pods\n  token: \"chain-token-0123456789\"\n"
            "  resources: [configmaps, pods]\n");
  const std::string token = write("token", "chain-token-0123456789\n");
  ASSERT_NO_FATAL_FAILURE(
      StartNode("127.0.0.1:0",
                {"--kube_api_tls_cert_file=" + cert,
                 "--kube_api_tls_key_file=" + key, "--tokens_file=" + tokens}));
  ASSERT_NO_FATAL_FAILURE(StartPod({"--cache_upstream_ca_file=" + ca,
                                    "--cache_upstream_token_file=" + token}));
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("over https with a token"));
  // The facade served the pod sidecar's lists as the token's grant allowed.
  EXPECT_GE(Node("informer_sidecar_kube_api_requests_total{verb=\"list\","
                 "code=\"200\""),
            2);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// With --cache_upstream and no cluster configured (no kubeconfig anywhere,
// not in a pod) the upstream serves everything: the sidecar syncs from it
// and does not start its demo cluster (whose objects would differ).
TEST_F(ChainE2eTest, UpstreamWithoutAClusterServesEverythingAndNoDemo) {
  ASSERT_NO_FATAL_FAILURE(StartNode());
  char dir[] = "/tmp/chain_nocluster_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string log = absl::StrCat(dir, "/stderr.log");
  absl::StatusOr<PortedSidecar> pod = StartPortedSidecar(
      sidecar_bin_,
      {"--cache_upstream=" + facade_url_, "--resources=configmaps,pods"}, log,
      /*quiet=*/false, absl::Seconds(60),
      {absl::StrCat("HOME=", dir), "KUBECONFIG="});
  ASSERT_TRUE(pod.ok()) << pod.status();
  pods_.push_back(*std::move(pod));
  ASSERT_NO_FATAL_FAILURE(ExpectPodsConverge("upstream only"));
  const std::string text = ReadWholeFile(log);
  EXPECT_TRUE(absl::StrContains(text, "no cluster configured")) << text;
  EXPECT_FALSE(absl::StrContains(text, "DEMO MODE")) << text;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// A sidecar whose kubeconfig points at a facade reads everything through it
// (discovery too). Its Event writes get the facade's 405: the event sink
// drops them as client-go's does (the Record call had already answered OK),
// logging the rejection once per reason, and the sidecar stays ready.
TEST_F(ChainE2eTest, KubeconfigAtAFacadeSyncsAndDropsEventWritesOnce) {
  ASSERT_NO_FATAL_FAILURE(StartNode());
  char dir[] = "/tmp/chain_reader_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  absl::StatusOr<std::string> at_facade = WriteKubeconfig(dir, facade_url_);
  ASSERT_TRUE(at_facade.ok()) << at_facade.status();
  const std::string log = absl::StrCat(dir, "/stderr.log");
  absl::StatusOr<PortedSidecar> reader = StartPortedSidecar(
      sidecar_bin_,
      {"--kubeconfig=" + *at_facade, "--resources=configmaps",
       "--event_flush_timeout=20s"},
      log, /*quiet=*/false);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<ObjectVersions> want =
      GetEmulatorState(emulator_->port(), "configmaps");
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(WaitForConvergence(reader->process->NewChannel(), "configmaps",
                                 *want, kConverge)
                  .ok());

  auto events = v1::Events::NewStub(reader->process->NewChannel());
  constexpr int kEvents = 3;
  for (int i = 0; i < kEvents; ++i) {
    grpc::ClientContext ctx;
    v1::RecordEventRequest event;
    event.mutable_object()->set_kind("ConfigMap");
    event.mutable_object()->set_namespace_("bench");
    event.mutable_object()->set_name(absl::StrCat("cm-", i));
    event.set_type("Warning");
    event.set_reason(absl::StrCat("Reason", i));
    v1::RecordEventResponse response;
    grpc::Status st = events->Record(&ctx, event, &response);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  // The first rejection is logged (woken by the log file growing).
  absl::StatusOr<std::string> logged = WaitForFile(
      log,
      [](const std::string& text) {
        return absl::StrContains(text, "rejected, not retrying");
      },
      absl::Seconds(60));
  ASSERT_TRUE(logged.ok()) << logged.status();
  EXPECT_TRUE(absl::StrContains(*logged, "405")) << *logged;
  EXPECT_TRUE(absl::StrContains(*logged, "read-only")) << *logged;

  // Still ready: /readyz is about the informers, not the event sink.
  httplib::Client http("127.0.0.1", static_cast<int>(reader->ports.at("http")));
  httplib::Result ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  EXPECT_TRUE(
      WaitForHealthServing(reader->process->NewChannel(), "", absl::Seconds(5))
          .ok());

  // An orderly stop writes (tries) whatever is still queued, so by its end
  // every event reached the facade, which refused each with 405...
  EXPECT_EQ(reader->process->Terminate(SIGTERM), 0);
  absl::StatusOr<double> refused = GetMetricSum(
      static_cast<int>(node_.ports.at("http")),
      "informer_sidecar_kube_api_requests_total{verb=\"create\",code=\"405\"");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(*refused, kEvents);
  // ...and the log said so once.
  const std::string text = ReadWholeFile(log);
  EXPECT_EQ(CountOccurrences(text, "rejected, not retrying"), 1) << text;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace integration

// RealControlPlane (a real etcd + kube-apiserver from tools/realkube.sh
// build, found through $REALKUBE_BIN) driven from C++: the pinned version,
// the tokens through the real kubectl, and the real informer_sidecar
// following ConfigMaps while the test compacts etcd and restarts the API
// server with a feature gate off and back on. Waits poll a condition
// against a deadline.

#include "integration_tests/real_control_plane.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "rapidjson/document.h"

namespace integration {
namespace {

constexpr char kVersion[] = "v1.37.2";
constexpr char kNamespace[] = "cxx";
constexpr absl::Duration kTimeout = absl::Seconds(90);

using NameRv = std::map<std::string, std::string>;

// name -> resourceVersion of the items of a List object (JSON).
NameRv ItemsOf(const std::string& json) {
  NameRv out;
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  if (doc.HasParseError() || !doc.HasMember("items")) return out;
  for (const auto& item : doc["items"].GetArray()) {
    out[item["metadata"]["name"].GetString()] =
        item["metadata"]["resourceVersion"].GetString();
  }
  return out;
}

// name -> enabled, for the feature gates of `stage` in the API server's
// kubernetes_feature_enabled metric.
std::map<std::string, bool> Gates(const std::string& metrics,
                                  absl::string_view stage) {
  std::map<std::string, bool> gates;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::ConsumePrefix(&line, "kubernetes_feature_enabled{")) continue;
    if (!absl::StrContains(line, absl::StrCat("stage=\"", stage, "\""))) {
      continue;
    }
    const size_t start = line.find("name=\"");
    if (start == absl::string_view::npos) continue;
    const size_t end = line.find('"', start + 6);
    gates[std::string(line.substr(start + 6, end - start - 6))] =
        absl::EndsWith(line, "} 1");
  }
  return gates;
}

class RealControlPlaneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<RealControlPlane>> cp =
        RealControlPlane::Start({});
    if (cp.ok()) {
      cp_ = std::move(*cp).release();
    } else {
      *start_error_ = cp.status().ToString();
    }
  }
  static void TearDownTestSuite() {
    delete cp_;
    cp_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cp_, nullptr) << *start_error_; }

  static NameRv ServerConfigMaps() {
    absl::StatusOr<std::string> out =
        cp_->Kubectl({"get", "configmaps", "-n", kNamespace, "-o", "json"});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ItemsOf(*out) : NameRv();
  }

  // The sidecar's cached ConfigMaps of the namespace, through gRPC List.
  static NameRv SidecarConfigMaps(informer::v1::Informer::Stub* stub) {
    NameRv out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    informer::v1::ListRequest req;
    req.set_resource("configmaps");
    req.set_namespace_(kNamespace);
    req.set_limit(10000);
    informer::v1::ListResponse resp;
    if (!stub->List(&ctx, req, &resp).ok()) return out;
    for (const auto& o : resp.objects()) {
      rapidjson::Document doc;
      doc.Parse(o.json().c_str());
      out[doc["metadata"]["name"].GetString()] =
          doc["metadata"]["resourceVersion"].GetString();
    }
    return out;
  }

  // Polls until the sidecar's List equals the server's.
  static ::testing::AssertionResult SidecarMatchesServer(
      informer::v1::Informer::Stub* stub) {
    const absl::Time deadline = absl::Now() + kTimeout;
    NameRv server, sidecar;
    while (absl::Now() < deadline) {
      server = ServerConfigMaps();
      sidecar = SidecarConfigMaps(stub);
      if (!server.empty() && server == sidecar) {
        return ::testing::AssertionSuccess();
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return ::testing::AssertionFailure()
           << "server has " << server.size() << " ConfigMaps, the sidecar "
           << sidecar.size();
  }

  static RealControlPlane* cp_;
  static std::string* start_error_;
};

RealControlPlane* RealControlPlaneTest::cp_ = nullptr;
std::string* RealControlPlaneTest::start_error_ = new std::string();

TEST_F(RealControlPlaneTest, ServesThePinnedVersionToTheAdminAndTheUser) {
  EXPECT_EQ(cp_->version(), kVersion);
  EXPECT_TRUE(absl::StartsWith(cp_->server(), "https://127.0.0.1:"));
  absl::StatusOr<std::string> ready = cp_->Kubectl({"get", "--raw", "/readyz"});
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(*ready, "ok");
  absl::StatusOr<std::string> whoami = RunCommand(
      {cp_->bin_dir() + "/kubectl", "--kubeconfig=" + cp_->user_kubeconfig(),
       "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"},
      "", absl::Minutes(1),
      {"KUBECACHEDIR=" + cp_->state_dir() + "/kubectl-cache"});
  ASSERT_TRUE(whoami.ok()) << whoami.status();
  EXPECT_EQ(*whoami, cp_->user());
  // No roles: the unprivileged user may not list ConfigMaps.
  absl::StatusOr<std::string> denied = RunCommand(
      {cp_->bin_dir() + "/kubectl", "--kubeconfig=" + cp_->user_kubeconfig(),
       "get", "configmaps", "-n", "default"},
      "", absl::Minutes(1),
      {"KUBECACHEDIR=" + cp_->state_dir() + "/kubectl-cache"});
  ASSERT_FALSE(denied.ok());
  EXPECT_TRUE(absl::StrContains(denied.status().message(), "Forbidden"))
      << denied.status();
}

TEST_F(RealControlPlaneTest, SidecarFollowsCompactionRestartsAndGates) {
  ASSERT_TRUE(cp_->CreateNamespace(kNamespace).ok());
  std::string list = R"({"apiVersion":"v1","kind":"List","items":[)";
  for (int i = 0; i < 10; ++i) {
    absl::StrAppend(&list, i == 0 ? "" : ",",
                    R"({"apiVersion":"v1","kind":"ConfigMap","metadata":)",
                    R"({"name":"cm-)", i, R"(","namespace":"cxx"},)",
                    R"("data":{"i":")", i, R"("}})");
  }
  list += "]}";
  ASSERT_TRUE(cp_->Kubectl({"create", "-f", "-"}, list).ok());

  absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
  ASSERT_TRUE(binary.ok()) << binary.status();
  SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + cp_->admin_kubeconfig(),
                   "--resources=configmaps"};
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  auto stub = informer::v1::Informer::NewStub((*sidecar)->NewChannel());
  ASSERT_TRUE(SidecarMatchesServer(stub.get()));
  EXPECT_EQ(SidecarConfigMaps(stub.get()).size(), 10u);

  // A beta gate on by default, turned off across a restart on a compacted
  // etcd while objects change.
  absl::StatusOr<std::string> metrics =
      cp_->Kubectl({"get", "--raw", "/metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // WatchList (streaming lists, which informers use) while the server has
  // it as an enabled beta gate, else the first such gate.
  std::string gate;
  for (const auto& [name, on] : Gates(*metrics, "BETA")) {
    if (on && (gate.empty() || name == "WatchList")) gate = name;
  }
  ASSERT_FALSE(gate.empty()) << "no enabled beta feature gate";
  const std::string server = cp_->server();
  absl::StatusOr<int64_t> revision = cp_->CompactEtcd();
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_GT(*revision, 10);
  ASSERT_TRUE(
      cp_->RestartApiServer(std::map<std::string, bool>{{gate, false}}).ok());
  EXPECT_EQ(cp_->server(), server);
  metrics = cp_->Kubectl({"get", "--raw", "/metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_FALSE(Gates(*metrics, "BETA")[gate]) << gate;

  ASSERT_TRUE(
      cp_->Kubectl({"delete", "configmap", "cm-0", "-n", kNamespace}).ok());
  ASSERT_TRUE(cp_->Kubectl({"create", "configmap", "cm-new", "-n", kNamespace,
                            "--from-literal=k=v"})
                  .ok());
  ASSERT_TRUE(cp_->Kubectl({"label", "configmap", "cm-1", "-n", kNamespace,
                            "changed=yes"})
                  .ok());
  ASSERT_TRUE(SidecarMatchesServer(stub.get()));
  const NameRv after = SidecarConfigMaps(stub.get());
  EXPECT_EQ(after.count("cm-0"), 0u);
  EXPECT_EQ(after.count("cm-new"), 1u);

  ASSERT_TRUE(cp_->RestartApiServer(std::map<std::string, bool>{}).ok());
  metrics = cp_->Kubectl({"get", "--raw", "/metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(Gates(*metrics, "BETA")[gate]) << gate;
  ASSERT_TRUE(
      cp_->Kubectl({"delete", "configmap", "cm-2", "-n", kNamespace}).ok());
  ASSERT_TRUE(SidecarMatchesServer(stub.get()));
}

}  // namespace
}  // namespace integration

// The informer against the real //emulator:kube_emulator binary as a
// separate process, reached the way a user reaches a cluster: a kubeconfig
// file (server URL and bearer token) loaded by informer/client. One fault
// is armed through the emulator's HTTP control endpoints; the cache must
// converge to the emulator's /_emulator/state.

#include "integration_tests/emulator_process.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/http_transport.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/util/clock.h"
#include "integration_tests/test_harness.h"
#include "rapidjson/document.h"

namespace integration {
namespace {

using ::informer::client::HttpRequest;
using ::informer::client::HttpResponse;

constexpr char kToken[] = "process-test-token";

std::string TestEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

class EmulatorProcessTest : public ::testing::Test {
 protected:
  ~EmulatorProcessTest() override {
    if (informer_ != nullptr) informer_->Stop();
    informer_.reset();
    pump_.reset();
    pods_.reset();
    kube_.reset();
  }

  absl::StatusOr<HttpResponse> Do(const std::string& method,
                                  const std::string& path,
                                  const std::string& body = "") {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    if (!body.empty()) req.content_type = "application/json";
    return kube_->transport()->Do(req);
  }

  void Control(const std::string& op) {
    absl::StatusOr<HttpResponse> r = Do("POST", "/_emulator/" + op);
    ASSERT_TRUE(r.ok()) << op << ": " << r.status();
  }

  // The emulator's keys and resourceVersions of pods.
  KeyRvMap State() {
    absl::StatusOr<HttpResponse> r =
        Do("GET", "/_emulator/state?resource=pods");
    EXPECT_TRUE(r.ok()) << r.status();
    KeyRvMap out;
    if (!r.ok()) return out;
    rapidjson::Document doc;
    doc.Parse(r->body.data(), r->body.size());
    EXPECT_FALSE(doc.HasParseError());
    if (doc.HasParseError()) return out;
    for (const auto& o : doc["objects"].GetArray()) {
      out[o["key"].GetString()] = o["resourceVersion"].GetString();
    }
    return out;
  }

  void ExpectConverged() {
    const KeyRvMap expected = State();
    ASSERT_FALSE(expected.empty());
    ASSERT_TRUE(handler_.AwaitView(expected))
        << "last error: " << informer_->LastError();
    ASSERT_TRUE(informer_->WaitForSync(absl::InfiniteDuration()));
    KeyRvMap got;
    for (const informer::ObjectPtr& o : informer_->GetIndexer().List()) {
      got[o->Key()] = std::string(o->resource_version());
    }
    EXPECT_EQ(got, expected);
    for (const auto& [uid, n] : handler_.AddsPerUid()) {
      EXPECT_EQ(n, 1) << uid;
    }
  }

  static std::string Pod(const std::string& name) {
    return absl::StrCat(
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
        R"(","namespace":"benchpods"},"spec":{"containers":[{"name":"c",)",
        R"("image":"busybox"}]}})");
  }

  std::unique_ptr<EmulatorProcess> process_;
  informer::FakeClock clock_;
  RecordingHandler handler_;
  ErrorLog errors_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  std::unique_ptr<informer::client::ResourceClient> pods_;
  std::unique_ptr<ClockPump> pump_;
  std::unique_ptr<informer::SharedIndexInformer> informer_;
};

TEST_F(EmulatorProcessTest, InformerThroughKubeconfigSurvivesAnExpiredWatch) {
  const std::string tmp = TestEnv("TEST_TMPDIR");
  absl::StatusOr<std::string> binary = FindEmulatorBinary("");
  ASSERT_TRUE(binary.ok()) << binary.status();
  absl::StatusOr<std::unique_ptr<EmulatorProcess>> process =
      EmulatorProcess::Start(
          *binary, {absl::StrCat("--print_port_file=", tmp, "/port"),
                    "--seed_pods=40", absl::StrCat("--token=", kToken)});
  ASSERT_TRUE(process.ok()) << process.status();
  process_ = *std::move(process);

  const std::string kubeconfig = tmp + "/kubeconfig";
  {
    std::ofstream f(kubeconfig);
    f << "apiVersion: v1\nkind: Config\n"
      << "clusters:\n- name: emu\n  cluster:\n    server: http://127.0.0.1:"
      << process_->port() << "\n"
      << "users:\n- name: tester\n  user:\n    token: " << kToken << "\n"
      << "contexts:\n- name: emu\n  context:\n    cluster: emu\n"
      << "    user: tester\n    namespace: benchpods\n"
      << "current-context: emu\n";
    ASSERT_TRUE(f.good());
  }
  informer::client::ConnectionFlags flags;
  flags.kubeconfig = kubeconfig;
  absl::StatusOr<informer::client::RestConfig> config =
      informer::client::LoadRestConfig(flags);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->namespace_, "benchpods");
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(*config, &clock_);
  ASSERT_TRUE(kube.ok()) << kube.status();
  kube_ = *std::move(kube);
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> pods =
      kube_->ForResource("po", config->namespace_);
  ASSERT_TRUE(pods.ok()) << pods.status();
  pods_ = *std::move(pods);

  informer::SharedIndexInformer::Options options;
  options.name = "process-pods";
  options.reflector.page_size = 16;  // three pages
  options.reflector.random_seed = 7;
  informer_ = std::make_unique<informer::SharedIndexInformer>(pods_.get(),
                                                              options, &clock_);
  ASSERT_TRUE(informer_->AddEventHandler(&handler_).ok());
  ASSERT_TRUE(informer_
                  ->SetWatchErrorHandler(
                      [this](const absl::Status& s) { errors_.Add(s); })
                  .ok());
  pump_ = std::make_unique<ClockPump>(&clock_);
  ASSERT_TRUE(informer_->Start().ok());
  ExpectConverged();
  EXPECT_EQ(handler_.adds(), 40);

  ASSERT_TRUE(
      Do("GET", "/_emulator/watchers?resource=pods&min=1&timeout_ms=60000")
          .ok());
  ASSERT_TRUE(pods_->Create(Pod("live-1")).ok());
  ExpectConverged();

  // The fault, over HTTP: the next watch is told its RV expired; the
  // current one is cut by the next event.
  pump_->Pause();
  Control("expire_watch?resource=pods");
  Control("cut_watches?resource=pods");
  ASSERT_TRUE(pods_->Create(Pod("cut-trigger")).ok());
  clock_.WaitForWaiters(1);  // the reflector is in its back-off
  ASSERT_TRUE(
      Do("DELETE", "/api/v1/namespaces/benchpods/pods/pod-000007").ok());
  pump_->Resume();
  ExpectConverged();

  bool tombstone = false;
  for (const auto& d : handler_.Deletes()) {
    if (d.key == "benchpods/pod-000007") tombstone = d.final_state_unknown;
  }
  EXPECT_TRUE(tombstone);
  const auto c = informer_->GetReflectorCounters();
  EXPECT_EQ(c.lists, 2);
  EXPECT_EQ(c.relists, 1);

  informer_->Stop();
  const int status = process_->Terminate();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace integration

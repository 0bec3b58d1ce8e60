// End-to-end tests of the sidecar's configuration: the real informer_sidecar
// binary against the kube_emulator binary, over real sockets. Bad config
// files stop the process with FILE:LINE:COLUMN and the field; a config's
// label/field selectors, transform and indexes reach the cache; lazy
// informers start on first request and stop when idle; every name of a
// resource reaches one informer.

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/kube_client.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

extern "C" char** environ;

namespace integration {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string SidecarBinary() {
  absl::StatusOr<std::string> path = FindRunfile("server/informer_sidecar");
  EXPECT_TRUE(path.ok()) << path.status();
  return path.value_or("");
}

std::string EmulatorBinary() {
  absl::StatusOr<std::string> path = FindEmulatorBinary("");
  EXPECT_TRUE(path.ok()) << path.status();
  return path.value_or("");
}

struct Exit {
  int code = -1;
  std::string stderr_text;
};

// Runs the sidecar to its exit (it must exit by itself: these are start-up
// failures), collecting stderr through a pipe.
Exit RunToExit(const std::vector<std::string>& flags) {
  // Port 0 for the metrics/probes port (default :9090): tests run in
  // parallel.
  std::vector<std::string> args = {SidecarBinary(),
                                   "--http_listen=127.0.0.1:0"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  pid_t pid = 0;
  Exit exit;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  EXPECT_EQ(rc, 0);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
    exit.stderr_text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  exit.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return exit;
}

// Follows grpc.health.v1.Health/Watch of one service name; each Next()
// returns the next status sent (1 SERVING, 2 NOT_SERVING, 3
// SERVICE_UNKNOWN). Hand-encoded messages: no health proto needed.
class HealthStream {
 public:
  HealthStream(const std::shared_ptr<grpc::Channel>& channel,
               const std::string& service)
      : stub_(channel) {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(120));
    call_ = stub_.PrepareCall(&ctx_, "/grpc.health.v1.Health/Watch", &cq_);
    std::string request(1, '\x0a');
    request.push_back(static_cast<char>(service.size()));
    request += service;
    call_->StartCall(Tag(1));
    ok_ = Wait(1);
    grpc::Slice slice(request);
    call_->Write(grpc::ByteBuffer(&slice, 1), Tag(2));
    ok_ = ok_ && Wait(2);
    call_->WritesDone(Tag(3));
    ok_ = ok_ && Wait(3);
  }
  ~HealthStream() {
    ctx_.TryCancel();
    grpc::Status status;
    call_->Finish(&status, Tag(9));
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // DeadlineExceeded when nothing arrived within `timeout` (the read stays
  // pending for the next call).
  absl::StatusOr<int> Next(absl::Duration timeout) {
    if (!ok_) return absl::UnavailableError("health stream broken");
    if (!reading_) {
      response_.Clear();
      call_->Read(&response_, Tag(4));
      reading_ = true;
    }
    void* tag = nullptr;
    bool ok = false;
    switch (cq_.AsyncNext(&tag, &ok,
                          std::chrono::system_clock::now() +
                              absl::ToChronoMilliseconds(timeout))) {
      case grpc::CompletionQueue::TIMEOUT:
        return absl::DeadlineExceededError("no health status");
      case grpc::CompletionQueue::SHUTDOWN:
        return absl::UnavailableError("shut down");
      case grpc::CompletionQueue::GOT_EVENT:
        break;
    }
    reading_ = false;
    if (!ok) {
      ok_ = false;
      return absl::UnavailableError("health stream ended");
    }
    grpc::Slice got;
    if (!response_.DumpToSingleSlice(&got).ok()) return 0;
    if (got.size() == 2 && got.begin()[0] == 0x08) return got.begin()[1];
    return 0;
  }

  // Reads statuses until `want` arrives.
  absl::Status WaitFor(int want, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      absl::StatusOr<int> s = Next(deadline - absl::Now());
      if (!s.ok()) return s.status();
      if (*s == want) return absl::OkStatus();
    }
  }

 private:
  static void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }
  bool Wait(intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok && tag == Tag(want);
  }

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  grpc::ByteBuffer response_;
  bool ok_ = false;
  bool reading_ = false;
};

constexpr int kServing = 1;
constexpr int kNotServing = 2;

class SidecarConfigE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The demo seed (namespaces, pods...) without its churn.
    auto emu = EmulatorProcess::Start(EmulatorBinary(),
                                      {"--demo", "--churn_interval=1h"},
                                      /*quiet=*/true);
    ASSERT_TRUE(emu.ok()) << emu.status();
    emulator_ = *std::move(emu);
    char dir[] = "/tmp/sidecar_cfg_e2e_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    auto kubeconfig = WriteKubeconfig(dir_, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    kubeconfig_ = *kubeconfig;
    informer::client::RestConfig rest;
    rest.server = emulator_->url();
    auto kube = informer::client::KubeClient::Create(rest);
    ASSERT_TRUE(kube.ok()) << kube.status();
    kube_ = *std::move(kube);
  }
  void TearDown() override {
    sidecar_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  void Create(const std::string& resource, const std::string& ns,
              const std::string& json) {
    auto rc = kube_->ForResource(resource, ns);
    ASSERT_TRUE(rc.ok()) << rc.status();
    auto created = (*rc)->Create(json);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  void CreatePod(const std::string& name, const std::string& app,
                 const std::string& node) {
    Create(
        "pods", "default",
        absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")",
                     name, R"(","namespace":"default","labels":{"app":")", app,
                     R"("}},"spec":{"nodeName":")", node,
                     R"(","containers":[{"name":"c","image":"busybox"}]}})"));
  }

  void StartSidecar(std::vector<std::string> flags) {
    flags.push_back("--kubeconfig=" + kubeconfig_);
    SidecarProcess::Options options;
    options.flags = std::move(flags);
    options.quiet = true;
    auto sidecar = SidecarProcess::Start(SidecarBinary(), options);
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    channel_ = sidecar_->NewChannel();
    stub_ = v1::Informer::NewStub(channel_);
  }

  std::vector<std::string> Names(
      const google::protobuf::RepeatedPtrField<v1::Object>& objects) {
    std::vector<std::string> names;
    for (const v1::Object& o : objects) {
      // Compact JSON: the first "name" is metadata.name.
      const std::string& json = o.json();
      const size_t at = json.find("\"name\":\"");
      if (at == std::string::npos) continue;
      const size_t start = at + 8;
      names.push_back(json.substr(start, json.find('"', start) - start));
    }
    return names;
  }

  v1::ListResourcesResponse Resources() {
    grpc::ClientContext ctx;
    v1::ListResourcesResponse resp;
    grpc::Status st = stub_->ListResources(&ctx, {}, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  std::vector<std::string> ResourceNames() {
    std::vector<std::string> out;
    const v1::ListResourcesResponse resp = Resources();
    for (const auto& r : resp.resources()) out.push_back(r.resource());
    return out;
  }

  std::unique_ptr<EmulatorProcess> emulator_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  std::string dir_;
  std::string kubeconfig_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

TEST_F(SidecarConfigE2eTest, BadConfigExitsNamingFileLineAndField) {
  const std::string bad_duration = WriteFile(
      "bad.yaml", "resources:\n- resource: pods\n  resyncPeriod: 5x\n");
  Exit exit = RunToExit({"--demo", "--config=" + bad_duration});
  EXPECT_EQ(exit.code, 2);
  EXPECT_THAT(exit.stderr_text,
              HasSubstr(bad_duration +
                        ":3:17: resources[0].resyncPeriod: invalid duration "
                        "\"5x\""));

  const std::string unknown_key =
      WriteFile("typo.yaml",
                "resources:\n- resource: pods\n  indexes:\n  - lable: app\n");
  exit = RunToExit({"--demo", "--config=" + unknown_key});
  EXPECT_EQ(exit.code, 2);
  EXPECT_THAT(exit.stderr_text,
              HasSubstr(unknown_key +
                        ":4:5: resources[0].indexes[0].lable: unknown field"));

  // Two names of one resource: found once discovery resolved them.
  const std::string dup =
      WriteFile("dup.yaml", "resources:\n- resource: po\n- resource: pods\n");
  exit = RunToExit({"--kubeconfig=" + kubeconfig_, "--config=" + dup});
  EXPECT_NE(exit.code, 0);
  EXPECT_THAT(exit.stderr_text,
              HasSubstr("resource \"pods\" is listed twice (" + dup +
                        ":2:3) (" + dup + ":3:3)"));

  exit = RunToExit({"--demo", "--lazy_idle_timeout=soon"});
  EXPECT_EQ(exit.code, 2);
  EXPECT_THAT(exit.stderr_text,
              HasSubstr("--lazy_idle_timeout: invalid duration \"soon\""));
}

TEST_F(SidecarConfigE2eTest, SelectorsTransformAndIndexesReachTheCache) {
  CreatePod("e2e-web-1", "e2e-web", "node-a");
  CreatePod("e2e-web-2", "e2e-web", "node-b");
  CreatePod("e2e-web-x", "e2e-web", "node-x");
  CreatePod("e2e-db-1", "e2e-db", "node-a");
  Create("configmaps", "default",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e2e-cm",)"
         R"("namespace":"default","annotations":{"secret-ish":"drop-me"}},)"
         R"("data":{"k":"v"}})");
  const std::string config =
      WriteFile("sidecar.yaml",
                "resources:\n"
                "- resource: pods\n"
                "  namespace: default\n"
                "  labelSelector: app=e2e-web\n"
                "  fieldSelector: spec.nodeName!=node-x\n"
                "  indexes:\n"
                "  - field: spec.nodeName\n"
                "- resource: cm\n"
                "  transform:\n"
                "    dropFields: [metadata.annotations]\n");
  ASSERT_NO_FATAL_FAILURE(
      StartSidecar({"--config=" + config, "--namespace=default"}));

  grpc::ClientContext list_ctx;
  v1::ListRequest list;
  list.set_resource("pods");
  v1::ListResponse listed;
  ASSERT_TRUE(stub_->List(&list_ctx, list, &listed).ok());
  EXPECT_THAT(Names(listed.objects()),
              UnorderedElementsAre("e2e-web-1", "e2e-web-2"));

  grpc::ClientContext index_ctx;
  v1::ByIndexRequest by_index;
  by_index.set_resource("po");
  by_index.set_index_name("field:spec.nodeName");
  by_index.set_index_value("node-a");
  v1::ByIndexResponse indexed;
  grpc::Status st = stub_->ByIndex(&index_ctx, by_index, &indexed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(Names(indexed.objects()), ElementsAre("e2e-web-1"));

  grpc::ClientContext get_ctx;
  v1::GetRequest get;
  get.set_resource("configmaps");
  get.set_namespace_("default");
  get.set_name("e2e-cm");
  v1::GetResponse got;
  st = stub_->Get(&get_ctx, get, &got);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(got.object().json(), HasSubstr("\"k\":\"v\""));
  EXPECT_THAT(got.object().json(), ::testing::Not(HasSubstr("drop-me")));

  // --namespace applied to cm (which set none); names are canonical.
  v1::ListResourcesResponse resources = Resources();
  ASSERT_EQ(resources.resources_size(), 2);
  EXPECT_EQ(resources.resources(0).resource(), "configmaps");
  EXPECT_EQ(resources.resources(0).namespace_(), "default");
  EXPECT_EQ(resources.resources(1).resource(), "pods");
  EXPECT_THAT(resources.resources(1).indexes(),
              testing::Contains("field:spec.nodeName"));

  // Lazy mode is off with a config that does not allow it.
  grpc::ClientContext unknown_ctx;
  get.set_resource("services");
  st = stub_->Get(&unknown_ctx, get, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(),
              HasSubstr("available: configmaps, pods; lazy mode is off"));
}

TEST_F(SidecarConfigE2eTest, EveryNameOfAResourceReachesOneInformer) {
  CreatePod("alias-pod", "alias", "node-a");
  ASSERT_NO_FATAL_FAILURE(StartSidecar({"--resources=po"}));
  for (const char* name : {"po", "pod", "Pod", "pods"}) {
    grpc::ClientContext ctx;
    v1::GetRequest get;
    get.set_resource(name);
    get.set_namespace_("default");
    get.set_name("alias-pod");
    v1::GetResponse got;
    grpc::Status st = stub_->Get(&ctx, get, &got);
    EXPECT_TRUE(st.ok()) << name << ": " << st.error_message();
    EXPECT_THAT(got.object().json(), HasSubstr("\"alias-pod\"")) << name;
  }
  EXPECT_THAT(ResourceNames(), ElementsAre("pods"));
  grpc::ClientContext ctx;
  v1::GetRequest get;
  get.set_resource("no-such-thing");
  get.set_name("x");
  v1::GetResponse got;
  grpc::Status st = stub_->Get(&ctx, get, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(),
              HasSubstr("unknown resource \"no-such-thing\""));
  EXPECT_THAT(st.error_message(), HasSubstr("available: pods"));
}

TEST_F(SidecarConfigE2eTest, LazyInformersStartOnFirstUseAndStopWhenIdle) {
  Create(
      "configmaps", "default",
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lazy-cm",)"
      R"("namespace":"default"},"data":{"k":"v"}})");
  // Neither --resources nor --config: lazy mode.
  ASSERT_NO_FATAL_FAILURE(StartSidecar({"--lazy_idle_timeout=2s"}));
  EXPECT_TRUE(ResourceNames().empty());
  HealthStream health(channel_, "configmaps");

  // The first Get starts the informer and is answered from its cache.
  grpc::ClientContext get_ctx;
  v1::GetRequest get;
  get.set_resource("cm");
  get.set_namespace_("default");
  get.set_name("lazy-cm");
  v1::GetResponse got;
  grpc::Status st = stub_->Get(&get_ctx, get, &got);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(got.object().json(), HasSubstr("\"lazy-cm\""));
  v1::ListResourcesResponse resources = Resources();
  ASSERT_EQ(resources.resources_size(), 1);
  EXPECT_EQ(resources.resources(0).resource(), "configmaps");
  EXPECT_TRUE(resources.resources(0).synced());
  ASSERT_TRUE(health.WaitFor(kServing, absl::Seconds(30)).ok());

  // Idle for 2s: stopped (its health name turns NOT_SERVING).
  ASSERT_TRUE(health.WaitFor(kNotServing, absl::Seconds(30)).ok());
  EXPECT_TRUE(ResourceNames().empty());

  // A Watch (by another name) starts it again and keeps it running.
  grpc::ClientContext watch_ctx;
  v1::WatchRequest watch;
  watch.set_resource("configmap");
  watch.set_namespace_("default");
  auto reader = stub_->Watch(&watch_ctx, watch);
  v1::WatchResponse response;
  bool initial_done = false;
  bool saw_cm = false;
  while (!initial_done && reader->Read(&response)) {
    for (const v1::Event& e : response.events()) {
      if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) initial_done = true;
      if (absl::StrContains(e.object().json(), "\"lazy-cm\"")) saw_cm = true;
    }
  }
  ASSERT_TRUE(initial_done);
  EXPECT_TRUE(saw_cm);
  ASSERT_TRUE(health.WaitFor(kServing, absl::Seconds(30)).ok());
  resources = Resources();
  ASSERT_EQ(resources.resources_size(), 1);
  EXPECT_EQ(resources.resources(0).streams(), 1);
  // Well past the idle timeout with the stream open: still running.
  absl::StatusOr<int> change = health.Next(absl::Seconds(5));
  EXPECT_TRUE(absl::IsDeadlineExceeded(change.status()))
      << "health changed to " << change.value_or(-1);
  EXPECT_THAT(ResourceNames(), ElementsAre("configmaps"));

  // The stream ends: stopped after the idle timeout again.
  watch_ctx.TryCancel();
  while (reader->Read(&response)) {
  }
  reader->Finish();
  ASSERT_TRUE(health.WaitFor(kNotServing, absl::Seconds(30)).ok());
  EXPECT_TRUE(ResourceNames().empty());
}

}  // namespace
}  // namespace integration

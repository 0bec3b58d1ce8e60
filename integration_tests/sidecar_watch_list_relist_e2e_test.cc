// A relist by WatchList (the default --watch_list=auto against a v1.37 API
// server), end to end: the real //server:informer_sidecar binary against
// the real //emulator:kube_emulator binary over HTTP, a gRPC Watch stream
// over loopback. The emulator "restarts" (its watch window starts anew)
// while the sidecar's watch is stalled and a few ConfigMaps change: the
// sidecar's re-watch gets 410 and it relists with a WatchList, whose
// initial events are reconciled with the cache (ListReconciler): the
// stream hears of the changed objects only, and the sidecar logs that the
// unchanged ones were kept.

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "rapidjson/document.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;
constexpr char kNamespace[] = "rl";
constexpr int kObjects = 200;

std::string Name(int i) { return absl::StrCat("cm-", i); }

// metadata.name of a JSON object ("" when it has none).
std::string NameOf(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("metadata") ||
      !doc["metadata"].HasMember("name")) {
    return "";
  }
  return doc["metadata"]["name"].GetString();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The port after "http=" in the sidecar's --ports_file (0: none).
int HttpPort(const std::string& ports_file) {
  for (absl::string_view line : absl::StrSplit(ReadFile(ports_file), '\n')) {
    int port = 0;
    if (absl::ConsumePrefix(&line, "http=") && absl::SimpleAtoi(line, &port)) {
      return port;
    }
  }
  return 0;
}

// The value of the sample `series` (name and labels, as exposed) in the
// sidecar's /metrics; -1 when it is absent.
double Metric(int http_port, const std::string& series) {
  httplib::Client cli("127.0.0.1", http_port);
  cli.set_read_timeout(10, 0);
  httplib::Result res = cli.Get("/metrics");
  if (!res || res->status != 200) return -1;
  for (absl::string_view line : absl::StrSplit(res->body, '\n')) {
    double v = 0;
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ") &&
        absl::SimpleAtod(line, &v)) {
      return v;
    }
  }
  return -1;
}

// One gRPC Watch stream of the ConfigMaps of kNamespace.
class ConfigMapStream {
 public:
  explicit ConfigMapStream(v1::Informer::Stub* stub) {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(120));
    v1::WatchRequest req;
    req.set_resource("configmaps");
    req.set_namespace_(kNamespace);
    reader_ = stub->Watch(&ctx_, req);
  }
  ~ConfigMapStream() {
    ctx_.TryCancel();
    v1::WatchResponse resp;
    while (reader_->Read(&resp)) {
    }
    reader_->Finish();
  }

  // Reads until the initial state is complete; the number of objects in
  // it, or -1 when the stream ended first.
  int ReadInitial() {
    int objects = 0;
    v1::WatchResponse resp;
    while (reader_->Read(&resp)) {
      for (const v1::Event& e : resp.events()) {
        if (e.type() == v1::EVENT_TYPE_INITIAL_STATE_DONE) return objects;
        if (e.has_object()) ++objects;
      }
    }
    return -1;
  }

  using Seen = std::map<std::string, std::vector<std::string>>;

  // Reads object events into `seen` (per name, the types of its events in
  // order, "DELETED(tombstone)" for a tombstone) until `done(*seen)`.
  // False when the stream ended first.
  bool ReadUntil(Seen* seen, const std::function<bool(const Seen&)>& done) {
    v1::WatchResponse resp;
    while (!done(*seen)) {
      if (!reader_->Read(&resp)) return false;
      for (const v1::Event& e : resp.events()) {
        if (!e.has_object()) continue;
        (*seen)[NameOf(e.object().json())].push_back(absl::StrCat(
            v1::EventType_Name(e.type()), e.tombstone() ? "(tombstone)" : ""));
      }
    }
    return true;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader_;
};

class WatchListRelistE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> emulator = FindEmulatorBinary("");
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    absl::StatusOr<std::unique_ptr<EmulatorProcess>> process =
        EmulatorProcess::Start(*emulator, {}, /*quiet=*/true);
    ASSERT_TRUE(process.ok()) << process.status();
    emulator_ = *std::move(process);
    http_ = std::make_unique<httplib::Client>("127.0.0.1", emulator_->port());
    http_->set_keep_alive(true);
    http_->set_tcp_nodelay(true);
    // Bazel's per-test directory (removed with the test's outputs); the
    // sidecar's socket lives in a short directory of its own.
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    dir_ = tmp;
    absl::StatusOr<std::string> kubeconfig =
        WriteKubeconfig(dir_, emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    kubeconfig_ = *kubeconfig;
  }

  void Post(const std::string& path, const std::string& json) {
    httplib::Result r = http_->Post(path.c_str(), json, "application/json");
    ASSERT_TRUE(r) << "POST " << path;
    ASSERT_EQ(r->status, 201) << r->body;
  }

  void Create(const std::string& name) {
    Post(absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps"),
         absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":)",
                      R"({"name":")", name, R"("},"data":{"k":"v"}})"));
  }

  std::string Path(const std::string& name) {
    return absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps/",
                        name);
  }

  void Change(const std::string& name) {
    httplib::Result r =
        http_->Patch(Path(name).c_str(), R"({"data":{"k":"changed"}})",
                     "application/merge-patch+json");
    ASSERT_TRUE(r) << "PATCH " << name;
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void Delete(const std::string& name) {
    httplib::Result r = http_->Delete(Path(name).c_str());
    ASSERT_TRUE(r) << "DELETE " << name;
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void Control(const std::string& op) {
    httplib::Result r =
        http_->Post(absl::StrCat("/_emulator/", op).c_str(), "", "text/plain");
    ASSERT_TRUE(r) << op;
    ASSERT_EQ(r->status, 200) << op << ": " << r->body;
  }

  std::unique_ptr<EmulatorProcess> emulator_;
  std::unique_ptr<httplib::Client> http_;
  std::string dir_;
  std::string kubeconfig_;
};

TEST_F(WatchListRelistE2eTest, AForcedRelistTellsStreamsOnlyWhatChanged) {
  Post("/api/v1/namespaces",
       absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":)",
                    R"({"name":")", kNamespace, R"("}})"));
  for (int i = 0; i < kObjects; ++i) Create(Name(i));

  absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
  ASSERT_TRUE(binary.ok()) << binary.status();
  const std::string log = dir_ + "/sidecar.log";
  const std::string ports = dir_ + "/ports";
  SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + kubeconfig_, "--resources=configmaps",
                   "--watch_list=auto",           "--print_events=false",
                   "--http_listen=127.0.0.1:0",   "--ports_file=" + ports};
  options.stderr_file = log;
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  std::unique_ptr<v1::Informer::Stub> stub =
      v1::Informer::NewStub((*sidecar)->NewChannel());
  const int http_port = HttpPort(ports);
  ASSERT_NE(http_port, 0);
  const std::string relists =
      R"(informer_sidecar_informer_relists_total{resource="configmaps"})";

  ConfigMapStream stream(stub.get());
  ASSERT_EQ(stream.ReadInitial(), kObjects);
  EXPECT_EQ(Metric(http_port, relists), 0);

  // While the sidecar's watch hears nothing: one changed, one deleted, one
  // added, one recreated (a new uid); then the API server's watch window
  // starts anew, so the sidecar's re-watch gets 410 and it relists.
  Control("stall_watches?resource=configmaps");
  Change(Name(5));
  Delete(Name(7));
  Create("added");
  Delete(Name(9));
  Create(Name(9));
  Control("restart");
  Control("clear_faults");
  // What the relist sends, then a live change that marks its end.
  ConfigMapStream::Seen seen;
  ASSERT_TRUE(stream.ReadUntil(&seen, [](const ConfigMapStream::Seen& s) {
    return s.count(Name(5)) + s.count(Name(7)) + s.count("added") == 3 &&
           s.count(Name(9)) == 1 && s.at(Name(9)).size() == 2;
  }));
  Create("marker");
  ASSERT_TRUE(stream.ReadUntil(&seen, [](const ConfigMapStream::Seen& s) {
    return s.count("marker") == 1;
  }));
  EXPECT_EQ(
      seen,
      (std::map<std::string, std::vector<std::string>>{
          {Name(5), {"EVENT_TYPE_MODIFIED"}},
          {Name(7), {"EVENT_TYPE_DELETED(tombstone)"}},
          {Name(9), {"EVENT_TYPE_DELETED(tombstone)", "EVENT_TYPE_ADDED"}},
          {"added", {"EVENT_TYPE_ADDED"}},
          {"marker", {"EVENT_TYPE_ADDED"}}}));
  EXPECT_EQ(Metric(http_port, relists), 1);

  // The relist was a WatchList (no LIST), reconciled with the cache.
  const std::string logged = ReadFile(log);
  std::vector<std::string> relisting;
  for (absl::string_view line : absl::StrSplit(logged, '\n')) {
    if (absl::StrContains(line, "configmaps: relisting")) {
      relisting.emplace_back(line);
    }
  }
  ASSERT_EQ(relisting.size(), 1u) << logged;
  EXPECT_TRUE(absl::StrContains(relisting[0], "relisting (WatchList)"))
      << relisting[0];
  EXPECT_TRUE(absl::StrContains(
      logged, absl::StrCat("configmaps: relist of ", kObjects, " objects: ",
                           kObjects - 3, " unchanged (kept), 3 new or ",
                           "changed (1 recreated), 1 vanished")))
      << logged;
}

}  // namespace
}  // namespace integration

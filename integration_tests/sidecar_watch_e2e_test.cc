// End-to-end tests of Informer.Watch (and the rest of the sidecar's gRPC
// surface): the real //server:informer_sidecar binary against the real
// //emulator:kube_emulator binary, both child processes, over real
// sockets. Objects are written through the emulator's Kubernetes HTTP API;
// faults (stalled watches, API server restarts with compaction) through
// its /_emulator control endpoints.

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
using Labels = std::map<std::string, std::string>;

std::string TestTmpDir() {
  const char* v = std::getenv("TEST_TMPDIR");
  return v == nullptr ? "/tmp" : v;
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

// "namespace/name" and the labels of a JSON object.
struct ObjectInfo {
  std::string key;
  Labels labels;
  bool ok = false;
};

ObjectInfo Info(const std::string& json) {
  ObjectInfo out;
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("metadata")) {
    return out;
  }
  const auto& md = doc["metadata"];
  const std::string ns =
      md.HasMember("namespace") ? md["namespace"].GetString() : "";
  out.key = absl::StrCat(ns, ns.empty() ? "" : "/", md["name"].GetString());
  if (md.HasMember("labels")) {
    for (const auto& m : md["labels"].GetObject()) {
      out.labels[m.name.GetString()] = m.value.GetString();
    }
  }
  out.ok = true;
  return out;
}

// A client of one Watch stream: replays the events into its view of the
// objects, checking that each event makes sense for that view.
struct Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader;
  std::map<std::string, std::string> objects;  // key -> json
  std::vector<v1::Event> events;
  std::vector<std::string> keys;  // per event ("" for markers)
  int messages = 0;

  void Apply(const v1::Event& e) {
    events.push_back(e);
    if (!e.has_object()) {
      keys.emplace_back();
      return;
    }
    const ObjectInfo info = Info(e.object().json());
    ASSERT_TRUE(info.ok) << e.object().json();
    keys.push_back(info.key);
    switch (e.type()) {
      case v1::EVENT_TYPE_ADDED:
        EXPECT_EQ(objects.count(info.key), 0u) << "ADDED twice: " << info.key;
        objects[info.key] = e.object().json();
        break;
      case v1::EVENT_TYPE_MODIFIED:
        EXPECT_EQ(objects.count(info.key), 1u)
            << "MODIFIED unknown " << info.key;
        objects[info.key] = e.object().json();
        break;
      case v1::EVENT_TYPE_DELETED:
        EXPECT_EQ(objects.count(info.key), 1u)
            << "DELETED unknown " << info.key;
        objects.erase(info.key);
        break;
      default:
        break;
    }
  }

  // One message; false when the stream ended.
  bool ReadOne() {
    v1::WatchResponse resp;
    if (!reader->Read(&resp)) return false;
    ++messages;
    for (const v1::Event& e : resp.events()) Apply(e);
    return true;
  }

  // Reads until INITIAL_STATE_DONE.
  void ReadInitial() {
    do {
      ASSERT_TRUE(ReadOne()) << "stream ended: " << Finish().error_message();
    } while (events.back().type() != v1::EVENT_TYPE_INITIAL_STATE_DONE);
  }

  // Reads until `n` more object events (bookmarks are skipped) arrived.
  void ReadObjectEvents(size_t n) {
    size_t want = n;
    for (size_t i = events.size(); want > 0;) {
      if (i == events.size()) {
        ASSERT_TRUE(ReadOne()) << "stream ended: " << Finish().error_message();
        continue;
      }
      if (events[i].type() != v1::EVENT_TYPE_BOOKMARK) --want;
      ++i;
    }
  }

  // The types of the object events from index `from` on (bookmarks
  // skipped).
  std::vector<std::pair<v1::EventType, std::string>> ObjectEvents(
      size_t from) const {
    std::vector<std::pair<v1::EventType, std::string>> out;
    for (size_t i = from; i < events.size(); ++i) {
      if (events[i].type() == v1::EVENT_TYPE_BOOKMARK) continue;
      out.emplace_back(events[i].type(), keys[i]);
    }
    return out;
  }

  grpc::Status Finish() {
    v1::WatchResponse resp;
    while (reader->Read(&resp)) {
    }
    return reader->Finish();
  }

  std::set<std::string> Keys() const {
    std::set<std::string> out;
    for (const auto& [k, v] : objects) out.insert(k);
    return out;
  }
};

std::unique_ptr<Stream> OpenWatch(v1::Informer::Stub* stub,
                                  const v1::WatchRequest& req) {
  auto s = std::make_unique<Stream>();
  s->ctx.set_deadline(In(absl::Seconds(40)));
  s->reader = stub->Watch(&s->ctx, req);
  return s;
}

v1::WatchRequest Pods(const std::string& ns) {
  v1::WatchRequest req;
  req.set_resource("pods");
  req.set_namespace_(ns);
  return req;
}

// A generic call with hand-encoded messages (no generated health or
// reflection code is needed): writes `request`, half-closes, reads up to
// `max_responses` messages. With `keep_open`, returns after the first
// response and leaves the call open (Close ends it).
class GenericCall {
 public:
  GenericCall(const std::shared_ptr<grpc::Channel>& channel,
              const std::string& method, const std::string& request,
              bool half_close = true)
      : stub_(channel) {
    ctx_.set_deadline(In(absl::Seconds(30)));
    call_ = stub_.PrepareCall(&ctx_, method, &cq_);
    call_->StartCall(Tag(1));
    ok_ = Next();
    if (!ok_) return;
    grpc::Slice slice(request);
    call_->Write(grpc::ByteBuffer(&slice, 1), Tag(2));
    ok_ = Next();
    if (ok_ && half_close) {
      call_->WritesDone(Tag(3));
      ok_ = Next();
    }
  }
  ~GenericCall() {
    if (!finished_) {
      ctx_.TryCancel();
      Finish();
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // The next response message; nullopt when the call ended.
  absl::optional<std::string> Read() {
    if (!ok_) return absl::nullopt;
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, Tag(4));
    if (!Next()) {
      ok_ = false;
      return absl::nullopt;
    }
    grpc::Slice slice;
    if (!buffer.DumpToSingleSlice(&slice).ok()) return absl::nullopt;
    return std::string(reinterpret_cast<const char*>(slice.begin()),
                       slice.size());
  }

  grpc::Status Finish() {
    finished_ = true;
    grpc::Status status;
    call_->Finish(&status, Tag(5));
    Next();
    return status;
  }

 private:
  static void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }
  bool Next() {
    void* tag;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool ok_ = false;
  bool finished_ = false;
};

std::string LengthDelimited(int field, const std::string& payload) {
  std::string out;
  google::protobuf::io::StringOutputStream raw(&out);
  {
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteTag((field << 3) | 2);
    coded.WriteVarint32(static_cast<uint32_t>(payload.size()));
    coded.WriteString(payload);
  }
  return out;
}

// Every length-delimited field `field` of a serialized message.
std::vector<std::string> Fields(const std::string& message, int field) {
  std::vector<std::string> out;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(message.data()),
      static_cast<int>(message.size()));
  while (uint32_t tag = in.ReadTag()) {
    if ((tag & 7) == 2) {
      uint32_t len = 0;
      std::string s;
      if (!in.ReadVarint32(&len) || !in.ReadString(&s, len)) break;
      if (static_cast<int>(tag >> 3) == field) out.push_back(std::move(s));
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in,
                                                                      tag)) {
      break;
    }
  }
  return out;
}

// grpc.health.v1.Health/Check of `service`: the status enum (1 SERVING).
int HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                const std::string& service) {
  GenericCall call(channel, "/grpc.health.v1.Health/Check",
                   service.empty() ? "" : LengthDelimited(1, service));
  absl::optional<std::string> resp = call.Read();
  EXPECT_TRUE(call.Finish().ok());
  if (!resp.has_value()) return -1;
  if (resp->empty()) return 0;
  return resp->size() == 2 && (*resp)[0] == 0x08 ? (*resp)[1] : -1;
}

class SidecarWatchE2eTest : public ::testing::Test {
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
    // Headers and body go out in two writes: without TCP_NODELAY each
    // request waits for a delayed ACK (40 ms).
    http_->set_tcp_nodelay(true);
    absl::StatusOr<std::string> kubeconfig =
        WriteKubeconfig(TestTmpDir(), emulator_->url());
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
    kubeconfig_ = *kubeconfig;
  }

  void StartSidecar(std::vector<std::string> flags = {}) {
    absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    SidecarProcess::Options options;
    options.flags = {"--kubeconfig=" + kubeconfig_, "--resources=pods"};
    options.flags.insert(options.flags.end(), flags.begin(), flags.end());
    options.quiet = std::getenv("E2E_VERBOSE") == nullptr;
    absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
        SidecarProcess::Start(*binary, options);
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    channel_ = sidecar_->NewChannel();
    stub_ = v1::Informer::NewStub(channel_);
  }

  static std::string PodJson(const std::string& ns, const std::string& name,
                             const Labels& labels,
                             const std::string& annotation = "") {
    std::string l;
    for (const auto& [k, v] : labels) {
      absl::StrAppend(&l, l.empty() ? "" : ",", "\"", k, "\":\"", v, "\"");
    }
    return absl::StrCat(
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
        R"(","namespace":")", ns, R"(","labels":{)", l, "}",
        annotation.empty()
            ? ""
            : absl::StrCat(R"(,"annotations":{"blob":")", annotation, "\"}"),
        R"(},"spec":{"containers":[{"name":"c","image":"busybox"}]}})");
  }

  void Create(const std::string& ns, const std::string& name,
              const Labels& labels, const std::string& annotation = "") {
    auto r =
        http_->Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods"),
                    PodJson(ns, name, labels, annotation), "application/json");
    ASSERT_TRUE(r) << "POST failed";
    ASSERT_EQ(r->status, 201) << r->body;
  }

  void Patch(const std::string& ns, const std::string& name,
             const std::string& metadata_patch) {
    auto r =
        http_->Patch(absl::StrCat("/api/v1/namespaces/", ns, "/pods/", name),
                     absl::StrCat(R"({"metadata":)", metadata_patch, "}"),
                     "application/merge-patch+json");
    ASSERT_TRUE(r) << "PATCH failed";
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void SetLabel(const std::string& ns, const std::string& name,
                const std::string& key, const std::string& value) {
    Patch(ns, name,
          absl::StrCat(R"({"labels":{")", key, R"(":")", value, R"("}})"));
  }

  void Delete(const std::string& ns, const std::string& name) {
    auto r =
        http_->Delete(absl::StrCat("/api/v1/namespaces/", ns, "/pods/", name));
    ASSERT_TRUE(r) << "DELETE failed";
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void Control(const std::string& op) {
    auto r = http_->Post(absl::StrCat("/_emulator/", op), "", "text/plain");
    ASSERT_TRUE(r) << op;
    ASSERT_EQ(r->status, 200) << op << ": " << r->body;
  }

  std::set<std::string> ListKeys(const std::string& ns) {
    std::set<std::string> out;
    v1::ListRequest req;
    req.set_resource("pods");
    req.set_namespace_(ns);
    while (true) {
      grpc::ClientContext ctx;
      v1::ListResponse resp;
      grpc::Status st = stub_->List(&ctx, req, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok()) break;
      for (const v1::Object& o : resp.objects()) out.insert(Info(o.json()).key);
      if (resp.continue_token().empty()) break;
      req.set_continue_token(resp.continue_token());
    }
    return out;
  }

  std::unique_ptr<EmulatorProcess> emulator_;
  std::unique_ptr<httplib::Client> http_;
  std::string kubeconfig_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Informer::Stub> stub_;
};

using Ev = std::pair<v1::EventType, std::string>;
using PerKeyEvents = std::map<std::string, std::vector<v1::EventType>>;

// Each object's events, in order.
PerKeyEvents PerKey(const std::vector<Ev>& events) {
  PerKeyEvents out;
  for (const auto& [type, key] : events) out[key].push_back(type);
  return out;
}
constexpr v1::EventType kAdded = v1::EVENT_TYPE_ADDED;
constexpr v1::EventType kModified = v1::EVENT_TYPE_MODIFIED;
constexpr v1::EventType kDeleted = v1::EVENT_TYPE_DELETED;

TEST_F(SidecarWatchE2eTest, FiltersLiveEventsResumeRelistErrorsHealth) {
  Create("e2e", "web-1", {{"app", "web"}});
  Create("e2e", "web-2", {{"app", "web"}});
  Create("e2e", "db-1", {{"app", "db"}});
  StartSidecar();

  // Health per resource (the overall status was awaited by StartSidecar),
  // and reflection lists the services.
  EXPECT_EQ(HealthCheck(channel_, ""), 1);
  EXPECT_EQ(HealthCheck(channel_, "pods"), 1);
  {
    // ServerReflectionRequest{list_services (7): "*"}.
    GenericCall call(channel_,
                     "/grpc.reflection.v1alpha.ServerReflection/"
                     "ServerReflectionInfo",
                     LengthDelimited(7, "*"));
    absl::optional<std::string> resp = call.Read();
    ASSERT_TRUE(resp.has_value());
    // ServerReflectionResponse.list_services_response (6) -> service (1)
    // -> name (1).
    std::set<std::string> services;
    for (const std::string& list : Fields(*resp, 6)) {
      for (const std::string& service : Fields(list, 1)) {
        for (const std::string& name : Fields(service, 1)) {
          services.insert(name);
        }
      }
    }
    EXPECT_EQ(services.count("informer.v1.Informer"), 1u);
    EXPECT_EQ(services.count("grpc.health.v1.Health"), 1u);
  }

  // Initial state and its marker, for three filters.
  auto all = OpenWatch(stub_.get(), Pods("e2e"));
  v1::WatchRequest web_req = Pods("e2e");
  web_req.set_label_selector("app in (web),!canary");
  auto web = OpenWatch(stub_.get(), web_req);
  v1::WatchRequest owned_req = Pods("e2e");
  owned_req.set_index_name("ownerUid");
  owned_req.set_index_value("owner-1");
  auto owned = OpenWatch(stub_.get(), owned_req);
  all->ReadInitial();
  web->ReadInitial();
  owned->ReadInitial();
  EXPECT_EQ(all->Keys(),
            (std::set<std::string>{"e2e/db-1", "e2e/web-1", "e2e/web-2"}));
  for (size_t i = 0; i + 1 < all->events.size(); ++i) {
    EXPECT_EQ(all->events[i].type(), kAdded);
    EXPECT_TRUE(all->events[i].initial());
    EXPECT_FALSE(all->events[i].resume_token().empty());
  }
  EXPECT_EQ(all->events.back().type(), v1::EVENT_TYPE_INITIAL_STATE_DONE);
  EXPECT_EQ(web->Keys(), (std::set<std::string>{"e2e/web-1", "e2e/web-2"}));
  EXPECT_TRUE(owned->Keys().empty());
  const size_t all_start = all->events.size();
  const size_t web_start = web->events.size();
  const size_t owned_start = owned->events.size();

  // Live events, in order; objects entering and leaving the filters.
  Create("e2e", "web-3", {{"app", "web"}});
  SetLabel("e2e", "web-1", "app", "db");  // leaves app=web
  Patch("e2e", "db-1",
        R"({"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",)"
        R"("name":"rs","uid":"owner-1","controller":true}]})");  // enters
  Delete("e2e", "web-2");
  Patch("e2e", "db-1", R"({"ownerReferences":null})");  // leaves
  // The informer keeps the order of each object's events; events of
  // different objects queued at the same time may be applied in another
  // order than the API server's (DeltaFIFO groups them per object).
  all->ReadObjectEvents(5);
  EXPECT_EQ(PerKey(all->ObjectEvents(all_start)),
            (PerKeyEvents{{"e2e/web-3", {kAdded}},
                          {"e2e/web-1", {kModified}},
                          {"e2e/db-1", {kModified, kModified}},
                          {"e2e/web-2", {kDeleted}}}));
  web->ReadObjectEvents(3);
  EXPECT_EQ(PerKey(web->ObjectEvents(web_start)),
            (PerKeyEvents{{"e2e/web-3", {kAdded}},
                          {"e2e/web-1", {kDeleted}},
                          {"e2e/web-2", {kDeleted}}}));
  owned->ReadObjectEvents(2);
  EXPECT_EQ(owned->ObjectEvents(owned_start),
            (std::vector<Ev>{{kAdded, "e2e/db-1"}, {kDeleted, "e2e/db-1"}}));
  EXPECT_EQ(all->Keys(), ListKeys("e2e"));

  // Resume within the history, right after the second live event: the
  // resumed stream replays exactly what the first sent after it, then the
  // changes made while no stream was open.
  size_t token_index = all_start;
  for (int seen = 0; token_index < all->events.size(); ++token_index) {
    if (all->events[token_index].type() == v1::EVENT_TYPE_BOOKMARK) continue;
    if (++seen == 2) break;
  }
  ASSERT_LT(token_index, all->events.size());
  const std::string token = all->events[token_index].resume_token();
  const std::vector<Ev> sent_after = all->ObjectEvents(token_index + 1);
  ASSERT_EQ(sent_after.size(), 3u);
  std::map<std::string, std::string> at_token;
  {
    // What the client had then.
    Stream replay;
    for (size_t i = 0; i <= token_index; ++i) replay.Apply(all->events[i]);
    at_token = replay.objects;
  }
  all->ctx.TryCancel();
  all->Finish();
  Create("e2e", "web-4", {{"app", "web"}});
  Delete("e2e", "web-3");
  v1::WatchRequest resume_req = Pods("e2e");
  resume_req.set_resume_token(token);
  auto again = OpenWatch(stub_.get(), resume_req);
  again->objects = at_token;
  again->ReadObjectEvents(5);
  const std::vector<Ev> resumed = again->ObjectEvents(0);
  ASSERT_EQ(resumed.size(), 5u);
  EXPECT_EQ(std::vector<Ev>(resumed.begin(), resumed.begin() + 3), sent_after);
  EXPECT_EQ(PerKey(std::vector<Ev>(resumed.begin() + 3, resumed.end())),
            (PerKeyEvents{{"e2e/web-4", {kAdded}}, {"e2e/web-3", {kDeleted}}}));
  for (const v1::Event& e : again->events) {
    EXPECT_NE(e.type(), v1::EVENT_TYPE_RESET);
    EXPECT_NE(e.type(), v1::EVENT_TYPE_INITIAL_STATE_DONE);
    EXPECT_FALSE(e.initial());
  }
  EXPECT_EQ(again->Keys(), ListKeys("e2e"));

  // Relist differences: the sidecar's watch stalls, web-1 changes and db-1
  // goes meanwhile, then the API server "restarts" (compacting its
  // history): the sidecar relists and streams get exactly those two
  // differences, the delete as a tombstone; web-4 (unchanged) is not sent.
  const size_t before_relist = again->events.size();
  Control("stall_watches?resource=pods");
  SetLabel("e2e", "web-1", "tier", "gold");
  Delete("e2e", "db-1");
  Control("restart");
  Control("clear_faults");
  again->ReadObjectEvents(2);
  Create("e2e", "marker", {{"app", "marker"}});
  while (again->objects.count("e2e/marker") == 0) {
    ASSERT_TRUE(again->ReadOne());
  }
  std::map<std::string, v1::Event> diff;
  for (size_t i = before_relist; i < again->events.size(); ++i) {
    if (again->events[i].type() == v1::EVENT_TYPE_BOOKMARK) continue;
    EXPECT_EQ(diff.count(again->keys[i]), 0u) << again->keys[i];
    diff[again->keys[i]] = again->events[i];
  }
  EXPECT_EQ(diff.size(), 3u);
  EXPECT_EQ(diff["e2e/web-1"].type(), kModified);
  EXPECT_EQ(diff["e2e/db-1"].type(), kDeleted);
  EXPECT_TRUE(diff["e2e/db-1"].tombstone());
  EXPECT_EQ(diff["e2e/marker"].type(), kAdded);
  EXPECT_EQ(diff.count("e2e/web-4"), 0u);
  EXPECT_EQ(again->Keys(), ListKeys("e2e"));

  // Error codes.
  {
    v1::WatchRequest req = Pods("e2e");
    req.set_resource("widgets");
    grpc::Status st = OpenWatch(stub_.get(), req)->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "pods"))
        << st.error_message();
  }
  {
    v1::WatchRequest req = Pods("e2e");
    req.set_label_selector("app in (");
    grpc::Status st = OpenWatch(stub_.get(), req)->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "label_selector"))
        << st.error_message();
  }
  {
    v1::WatchRequest req = Pods("e2e");
    req.set_index_name("nope");
    grpc::Status st = OpenWatch(stub_.get(), req)->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "nope"))
        << st.error_message();
  }
  {
    v1::WatchRequest req = Pods("e2e");
    req.mutable_resync_period()->set_nanos(100000000);
    grpc::Status st = OpenWatch(stub_.get(), req)->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "resync_period"))
        << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::ByIndexRequest req;
    req.set_resource("pods");
    req.set_index_name("nope");
    v1::ByIndexResponse resp;
    EXPECT_EQ(stub_->ByIndex(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_resource("widgets");
    req.set_name("x");
    v1::GetResponse resp;
    grpc::Status st = stub_->Get(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "pods"));
  }
}

// A reader that stops reading: its queue coalesces per object (what it
// finally receives is at most one event per object) and, on a stream with
// more distinct objects pending than --watch_max_pending, the call ends
// with RESOURCE_EXHAUSTED. Also: List pages under the 4 MiB cap, and
// paging over a consistent snapshot while objects are created.
TEST_F(SidecarWatchE2eTest, SlowReadersCoalesceOrHitTheCapAndListPages) {
  constexpr int kA = 24, kB = 16, kRounds = 50, kCap = 30;
  for (int i = 0; i < kA; ++i) {
    Create("slow", absl::StrCat("a-", i), {{"app", "a"}});
  }
  for (int i = 0; i < kB; ++i) {
    Create("slow", absl::StrCat("b-", i), {{"app", "b"}});
  }
  StartSidecar({absl::StrCat("--watch_max_pending=", kCap)});

  // The slow readers' channels grant a small flow-control window, so a
  // large message stays in flight until they read.
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  args.SetInt("grpc.http2.bdp_probe", 0);
  args.SetInt("grpc.http2.lookahead_bytes", 64 * 1024);
  args.SetMaxReceiveMessageSize(16 << 20);
  auto slow_channel = [&] {
    return grpc::CreateCustomChannel(sidecar_->address(),
                                     grpc::InsecureChannelCredentials(), args);
  };
  auto stub_all = v1::Informer::NewStub(slow_channel());
  auto stub_a = v1::Informer::NewStub(slow_channel());
  auto over_cap = OpenWatch(stub_all.get(), Pods("slow"));  // 40 objects
  v1::WatchRequest a_req = Pods("slow");
  a_req.set_label_selector("app=a");
  auto coalescing = OpenWatch(stub_a.get(), a_req);  // 24 objects
  auto fast = OpenWatch(stub_.get(), Pods("slow"));
  over_cap->ReadInitial();
  coalescing->ReadInitial();
  fast->ReadInitial();
  ASSERT_EQ(fast->objects.size(), static_cast<size_t>(kA + kB));

  // A 2 MB object both slow streams match: its write stalls on their
  // windows while they do not read.
  Create("slow", "a-big", {{"app", "a"}}, std::string(2 << 20, 'x'));
  while (fast->objects.count("slow/a-big") == 0) ASSERT_TRUE(fast->ReadOne());
  const std::string last_round = absl::StrCat(kRounds);
  auto all_final = [&](const Stream& s, const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      auto it = s.objects.find(absl::StrCat("slow/", prefix, i));
      if (it == s.objects.end() ||
          Info(it->second).labels["round"] != last_round) {
        return false;
      }
    }
    return true;
  };
  // The fast stream reads all along; once it saw every last round, the
  // sidecar has applied the whole churn.
  bool fast_ok = true;
  std::thread fast_reader([&] {
    while (!all_final(*fast, "a-", kA) || !all_final(*fast, "b-", kB)) {
      if (!fast->ReadOne()) {
        fast_ok = false;
        return;
      }
    }
  });
  // Churn: kRounds updates of every object.
  for (int r = 1; r <= kRounds; ++r) {
    for (int i = 0; i < kA; ++i) {
      SetLabel("slow", absl::StrCat("a-", i), "round", absl::StrCat(r));
    }
    for (int i = 0; i < kB; ++i) {
      SetLabel("slow", absl::StrCat("b-", i), "round", absl::StrCat(r));
    }
  }
  fast_reader.join();
  ASSERT_TRUE(fast_ok) << fast->Finish().error_message();

  // Coalesced: after the big object, at most one event per object.
  const size_t start = coalescing->events.size();
  ASSERT_TRUE(coalescing->ReadOne());
  ASSERT_EQ(coalescing->keys.back(), "slow/a-big");
  const size_t after_big = coalescing->events.size();
  while (!all_final(*coalescing, "a-", kA)) ASSERT_TRUE(coalescing->ReadOne());
  EXPECT_EQ(after_big - start, 1u);
  EXPECT_LE(coalescing->events.size() - after_big, static_cast<size_t>(kA));
  std::set<std::string> distinct(coalescing->keys.begin() + after_big,
                                 coalescing->keys.end());
  EXPECT_EQ(distinct.size(), coalescing->events.size() - after_big);
  EXPECT_LT(coalescing->events.size() - after_big,
            static_cast<size_t>(kA * kRounds) / 10);

  // Past the cap: the stream ends, telling the client to resume.
  grpc::Status st = over_cap->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "resume_token"))
      << st.error_message();

  // List: pages stay under 4 MiB (three 2 MB objects cannot share one),
  // and default clients read them.
  Create("slow", "b-big", {{"app", "b"}}, std::string(2 << 20, 'y'));
  Create("slow", "c-big", {{"app", "c"}}, std::string(2 << 20, 'z'));
  while (fast->objects.count("slow/c-big") == 0) ASSERT_TRUE(fast->ReadOne());
  v1::ListRequest req;
  req.set_resource("pods");
  req.set_namespace_("slow");
  req.set_limit(10);
  std::set<std::string> listed;
  int pages = 0;
  while (true) {
    grpc::ClientContext ctx;
    v1::ListResponse resp;
    grpc::Status list_st = stub_->List(&ctx, req, &resp);
    ASSERT_TRUE(list_st.ok()) << list_st.error_message();
    ++pages;
    EXPECT_LE(resp.ByteSizeLong(), size_t{4} << 20);
    for (const v1::Object& o : resp.objects())
      listed.insert(Info(o.json()).key);
    if (resp.continue_token().empty()) break;
    // Churn between pages: the paged list reads its first page's snapshot.
    Create("slow", absl::StrCat("late-", pages), {{"app", "late"}});
    req.set_continue_token(resp.continue_token());
  }
  EXPECT_EQ(listed.size(), static_cast<size_t>(kA + kB + 3));
  for (const std::string& key : listed) {
    EXPECT_FALSE(absl::StrContains(key, "late-")) << key;
  }
  EXPECT_GE(pages, 5);
}

TEST_F(SidecarWatchE2eTest, ResetPastHistoryAndAcrossRestartPromptShutdown) {
  Create("r", "p-1", {{"app", "web"}});
  Create("r", "p-2", {{"app", "web"}});
  StartSidecar({"--watch_history=3"});
  auto first = OpenWatch(stub_.get(), Pods("r"));
  first->ReadInitial();
  const std::string token = first->events.back().resume_token();
  first->ctx.TryCancel();
  first->Finish();
  for (int i = 1; i <= 5; ++i) SetLabel("r", "p-1", "v", absl::StrCat(i));
  {
    // The sidecar has applied the five changes once a fresh stream shows
    // the last one.
    auto probe = OpenWatch(stub_.get(), Pods("r"));
    probe->ReadInitial();
    while (Info(probe->objects["r/p-1"]).labels["v"] != "5") {
      ASSERT_TRUE(probe->ReadOne());
    }
  }
  // Five events later, a history of three no longer covers the token.
  v1::WatchRequest req = Pods("r");
  req.set_resume_token(token);
  auto reset = OpenWatch(stub_.get(), req);
  reset->ReadInitial();
  EXPECT_EQ(reset->events.front().type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(reset->Keys(), (std::set<std::string>{"r/p-1", "r/p-2"}));
  EXPECT_EQ(Info(reset->objects["r/p-1"]).labels["v"], "5");
  const std::string recent = reset->events.back().resume_token();

  // Shutdown with an Informer.Watch and a health Watch open: both end at
  // once, the Watch with UNAVAILABLE asking to resume.
  GenericCall health(channel_, "/grpc.health.v1.Health/Watch", "",
                     /*half_close=*/true);
  ASSERT_TRUE(health.Read().has_value());
  const absl::Time t0 = absl::Now();
  const int exit_code = sidecar_->Terminate(SIGTERM);
  const absl::Duration took = absl::Now() - t0;
  EXPECT_EQ(exit_code, 0);
  EXPECT_LT(took, absl::Seconds(2)) << "shutdown took " << took;
  grpc::Status st = reset->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "resume with your token"))
      << st.error_message();

  // A new sidecar run does not honour the old run's tokens.
  StartSidecar({"--watch_history=3"});
  req.set_resume_token(recent);
  auto after_restart = OpenWatch(stub_.get(), req);
  after_restart->ReadInitial();
  EXPECT_EQ(after_restart->events.front().type(), v1::EVENT_TYPE_RESET);
  EXPECT_EQ(after_restart->Keys(), (std::set<std::string>{"r/p-1", "r/p-2"}));
}

}  // namespace
}  // namespace integration

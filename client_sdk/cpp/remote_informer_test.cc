// RemoteInformer against a scripted in-process Informer service: each Watch
// call the informer makes consumes the next script (events to send, then
// either end the stream with a status or hold it open until cancelled).

#include "client_sdk/cpp/remote_informer.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/util/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"

namespace client_sdk {
namespace {

namespace v1 = ::informer::v1;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Failsafe for waits: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(30);

std::string PodJson(const std::string& name, const std::string& rv,
                    const std::string& node) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")",
                      name, R"(","namespace":"ns","resourceVersion":")", rv,
                      R"("},"spec":{"nodeName":")", node, R"("}})");
}

int next_token = 0;

v1::Event Ev(v1::EventType type, const std::string& name = "",
             const std::string& rv = "", bool initial = false,
             const std::string& node = "n1") {
  v1::Event e;
  e.set_type(type);
  if (!name.empty()) e.mutable_object()->set_json(PodJson(name, rv, node));
  e.set_resource_version(rv);
  e.set_initial(initial);
  e.set_resume_token(absl::StrCat("t", ++next_token));
  return e;
}

class FakeInformer final : public v1::Informer::Service {
 public:
  struct Script {
    std::vector<v1::Event> events;
    // Hold the stream open until the client cancels; else end with `end`.
    bool hold = true;
    grpc::Status end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "bye");
  };

  void Push(Script s) {
    absl::MutexLock lock(&mu_);
    scripts_.push_back(std::move(s));
  }
  // Waits until `n` Watch calls arrived; returns their resume tokens.
  std::vector<std::string> WaitForCalls(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return tokens_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return tokens_;
  }

  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::WatchResponse>* writer) override {
    Script script;
    {
      absl::MutexLock lock(&mu_);
      tokens_.push_back(request->resume_token());
      if (scripts_.empty()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no script");
      }
      script = std::move(scripts_.front());
      scripts_.pop_front();
    }
    for (const v1::Event& e : script.events) {
      v1::WatchResponse response;
      *response.add_events() = e;
      writer->Write(response);
    }
    if (!script.hold) return script.end;
    // The sync API offers no cancellation callback: check periodically.
    while (!ctx->IsCancelled()) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&never_), absl::Milliseconds(20));
    }
    return grpc::Status::CANCELLED;
  }

 private:
  absl::Mutex mu_;
  bool never_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Script> scripts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> tokens_ ABSL_GUARDED_BY(mu_);
};

// Records handler calls as strings.
class Recorder final : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr& obj, bool initial) override {
    Record(absl::StrCat("add ", obj->name(), " ", obj->resource_version(),
                        initial ? " initial" : ""));
  }
  void OnUpdate(const informer::ObjectPtr& o,
                const informer::ObjectPtr& n) override {
    Record(absl::StrCat("update ", n->name(), " ", o->resource_version(), "->",
                        n->resource_version()));
  }
  void OnDelete(const informer::ObjectPtr& obj, bool unknown) override {
    Record(absl::StrCat("delete ", obj->name(), unknown ? " unknown" : ""));
  }
  // Waits until `n` calls were recorded; returns them all.
  std::vector<std::string> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return calls_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return calls_;
  }

 private:
  void Record(std::string s) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

class RemoteInformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (informer_ != nullptr) informer_->Stop();
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
  }
  RemoteInformer& MakeInformer(StreamErrorHandler* errors = nullptr) {
    RemoteInformer::Options options;
    options.error_handler = errors;
    options.resource = "pods";
    options.indexers[informer::FieldIndexName("spec.nodeName")] =
        informer::FieldIndexFunc("spec.nodeName");
    options.clock = &clock_;
    options.initial_backoff = absl::Seconds(1);
    informer_ = std::make_unique<RemoteInformer>(
        server_->InProcessChannel(grpc::ChannelArguments()), options);
    informer_->AddEventHandler(&recorder_);
    return *informer_;
  }

  FakeInformer service_;
  std::unique_ptr<grpc::Server> server_;
  informer::FakeClock clock_;
  Recorder recorder_;
  std::unique_ptr<RemoteInformer> informer_;
};

TEST_F(RemoteInformerTest, InitialSyncLiveEventsAndIndex) {
  service_.Push(
      {{Ev(v1::EVENT_TYPE_ADDED, "a", "1", true),
        Ev(v1::EVENT_TYPE_ADDED, "b", "1", true, "n2"),
        Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE),
        Ev(v1::EVENT_TYPE_MODIFIED, "a", "2", false, "n2"),
        Ev(v1::EVENT_TYPE_ADDED, "c", "3"), Ev(v1::EVENT_TYPE_BOOKMARK),
        Ev(v1::EVENT_TYPE_DELETED, "b", "1", false, "n2")}});
  RemoteInformer& inf = MakeInformer();
  EXPECT_FALSE(inf.HasSynced());
  ASSERT_TRUE(inf.Start().ok());
  EXPECT_THAT(recorder_.WaitFor(5),
              ElementsAre("add a 1 initial", "add b 1 initial", "update a 1->2",
                          "add c 3", "delete b"));
  EXPECT_TRUE(inf.HasSynced());
  EXPECT_TRUE(inf.WaitForSync(absl::Seconds(1)));
  ASSERT_NE(inf.Get("ns", "a"), nullptr);
  EXPECT_EQ(inf.Get("ns", "a")->resource_version(), "2");
  EXPECT_EQ(inf.Get("ns", "b"), nullptr);
  EXPECT_EQ(inf.List().size(), 2u);
  absl::StatusOr<std::vector<informer::ObjectPtr>> on_n2 =
      inf.ByIndex(informer::FieldIndexName("spec.nodeName"), "n2");
  ASSERT_TRUE(on_n2.ok()) << on_n2.status();
  ASSERT_EQ(on_n2->size(), 1u);
  EXPECT_EQ((*on_n2)[0]->name(), "a");
  EXPECT_FALSE(inf.ByIndex("nope", "x").ok());
  inf.Stop();  // joins the reader thread: the last event is fully applied
  EXPECT_EQ(inf.resume_token(), absl::StrCat("t", next_token));
  EXPECT_EQ(inf.connects(), 1);
}

TEST_F(RemoteInformerTest, ResumesWithTokenAfterBackoff) {
  v1::Event last = Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  service_.Push({{Ev(v1::EVENT_TYPE_ADDED, "a", "1", true), last},
                 /*hold=*/false});
  v1::Event live = Ev(v1::EVENT_TYPE_MODIFIED, "a", "2");
  service_.Push({{live}});
  RemoteInformer& inf = MakeInformer();
  ASSERT_TRUE(inf.Start().ok());
  // The first stream ended: the informer waits its back-off on the clock.
  EXPECT_EQ(clock_.WaitForWaiters(1), clock_.Now() + absl::Seconds(1));
  EXPECT_EQ(service_.WaitForCalls(1).size(), 1u);
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(service_.WaitForCalls(2), ElementsAre("", last.resume_token()));
  EXPECT_THAT(recorder_.WaitFor(2),
              ElementsAre("add a 1 initial", "update a 1->2"));
  EXPECT_EQ(inf.resets(), 0);
  EXPECT_EQ(inf.last_stream_status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RemoteInformerTest, ResetReconcilesAndReportsOnlyDifferences) {
  v1::Event done = Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  service_.Push({{Ev(v1::EVENT_TYPE_ADDED, "a", "1", true),
                  Ev(v1::EVENT_TYPE_ADDED, "b", "1", true),
                  Ev(v1::EVENT_TYPE_ADDED, "c", "1", true), done},
                 /*hold=*/false});
  service_.Push({{Ev(v1::EVENT_TYPE_RESET),
                  Ev(v1::EVENT_TYPE_ADDED, "a", "1", true),  // unchanged
                  Ev(v1::EVENT_TYPE_ADDED, "b", "5", true),  // changed
                  Ev(v1::EVENT_TYPE_ADDED, "d", "6", true),  // new
                  Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE)}});  // c vanished
  RemoteInformer& inf = MakeInformer();
  ASSERT_TRUE(inf.Start().ok());
  clock_.WaitForWaiters(1);
  clock_.Advance(absl::Seconds(1));
  // At INITIAL_STATE_DONE: the vanished first, then changes and new
  // objects in key order (new since the mirror: not initial).
  EXPECT_THAT(
      recorder_.WaitFor(6),
      ElementsAre("add a 1 initial", "add b 1 initial", "add c 1 initial",
                  "delete c unknown", "update b 1->5", "add d 6"));
  EXPECT_EQ(service_.WaitForCalls(2)[1], done.resume_token());
  EXPECT_EQ(inf.resets(), 1);
  EXPECT_EQ(inf.List().size(), 3u);
  EXPECT_EQ(inf.Get("ns", "c"), nullptr);
}

TEST_F(RemoteInformerTest, DisconnectInsideInitialStateResumesWithTheRest) {
  // The token contract: an initial event's token resumes right after it, so
  // the second stream carries the rest of the initial state (not a RESET,
  // not the whole state again).
  v1::Event a = Ev(v1::EVENT_TYPE_ADDED, "a", "1", true);
  service_.Push({{Ev(v1::EVENT_TYPE_ADDED, "c", "1", true), a},
                 /*hold=*/false});
  service_.Push({{Ev(v1::EVENT_TYPE_ADDED, "b", "1", true),
                  Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE)}});
  RemoteInformer& inf = MakeInformer();
  ASSERT_TRUE(inf.Start().ok());
  clock_.WaitForWaiters(1);
  EXPECT_FALSE(inf.HasSynced());
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(inf.WaitForSync(kWait));
  EXPECT_THAT(service_.WaitForCalls(2), ElementsAre("", a.resume_token()));
  // Objects of the first part stay: the initial state is one across the two
  // streams.
  EXPECT_THAT(
      recorder_.WaitFor(3),
      ElementsAre("add c 1 initial", "add a 1 initial", "add b 1 initial"));
  EXPECT_EQ(inf.List().size(), 3u);
  EXPECT_EQ(inf.sync_generation(), 1);
}

// Records StreamErrorHandler calls as strings.
class ErrorRecorder final : public StreamErrorHandler {
 public:
  void OnError(const StreamError& e) override {
    Record(absl::StrCat("error ", absl::StatusCodeToString(e.status.code()),
                        " ", e.failures, " ", absl::FormatDuration(e.retry_in),
                        e.final ? " final" : ""));
  }
  void OnRecovered(int64_t failures) override {
    Record(absl::StrCat("recovered ", failures));
  }
  std::vector<std::string> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return calls_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return calls_;
  }

 private:
  void Record(std::string s) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RemoteInformerTest, OnErrorEveryFailureOnRecoveredOnceBackoffDoubles) {
  // No scripts yet: every call fails at once with UNAVAILABLE.
  ErrorRecorder errors;
  RemoteInformer& inf = MakeInformer(&errors);
  ASSERT_TRUE(inf.Start().ok());
  EXPECT_EQ(clock_.WaitForWaiters(1) - clock_.Now(), absl::Seconds(1));
  EXPECT_THAT(errors.WaitFor(1), ElementsAre("error UNAVAILABLE 1 1s"));
  EXPECT_EQ(inf.failures(), 1);
  clock_.Advance(absl::Seconds(1));
  service_.WaitForCalls(2);
  EXPECT_EQ(clock_.WaitForWaiters(1) - clock_.Now(), absl::Seconds(2));
  clock_.Advance(absl::Seconds(2));
  service_.WaitForCalls(3);
  EXPECT_EQ(clock_.WaitForWaiters(1) - clock_.Now(), absl::Seconds(4));
  EXPECT_EQ(inf.last_stream_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(inf.HasSynced());
  EXPECT_THAT(recorder_.WaitFor(0), IsEmpty());

  // The sidecar answers again: one OnRecovered, and the next failure starts
  // the back-off over.
  service_.Push({{Ev(v1::EVENT_TYPE_ADDED, "a", "1", true),
                  Ev(v1::EVENT_TYPE_INITIAL_STATE_DONE)},
                 /*hold=*/false,
                 grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "slow")});
  clock_.Advance(absl::Seconds(4));
  EXPECT_TRUE(inf.WaitForSync(kWait));
  EXPECT_THAT(errors.WaitFor(5),
              ElementsAre("error UNAVAILABLE 1 1s", "error UNAVAILABLE 2 2s",
                          "error UNAVAILABLE 3 4s", "recovered 3",
                          "error RESOURCE_EXHAUSTED 1 1s"));
  EXPECT_EQ(clock_.WaitForWaiters(1) - clock_.Now(), absl::Seconds(1));
  EXPECT_EQ(inf.failures(), 1);
}

TEST_F(RemoteInformerTest, NotFoundIsReportedOnceAsFinal) {
  service_.Push(
      {{},
       /*hold=*/false,
       grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown resource \"pods\"")});
  ErrorRecorder errors;
  RemoteInformer& inf = MakeInformer(&errors);
  ASSERT_TRUE(inf.Start().ok());
  EXPECT_THAT(errors.WaitFor(1), ElementsAre("error NOT_FOUND 1 0 final"));
  // Given up: no back-off wait, WaitForSync answers at once.
  EXPECT_FALSE(inf.WaitForSync(kWait));
  EXPECT_TRUE(inf.gave_up());
  EXPECT_EQ(inf.last_stream_status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(inf.last_stream_status().message(), "unknown resource \"pods\"");
  inf.Stop();  // joins the reader thread, which had ended
  EXPECT_EQ(service_.WaitForCalls(1).size(), 1u);
  EXPECT_EQ(inf.connects(), 1);
}

TEST_F(RemoteInformerTest, StartNeedsResource) {
  RemoteInformer inf(server_->InProcessChannel(grpc::ChannelArguments()), {});
  EXPECT_EQ(inf.Start().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace client_sdk

#include "server/workqueue_service/workqueue_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// Failsafe for waits on stream reads: only reached when a test fails.
constexpr absl::Duration kWait = absl::Seconds(20);

google::protobuf::Duration Dur(absl::Duration d) {
  google::protobuf::Duration out;
  out.set_seconds(absl::ToInt64Seconds(d));
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(d - absl::Seconds(absl::ToInt64Seconds(d)))));
  return out;
}

// One Lease stream driven from the test: a reader thread queues what the
// sidecar sends; the test waits for it with a (failsafe) deadline.
class Worker {
 public:
  Worker(v1::WorkQueue::Stub* stub, const std::string& queue, int credit,
         const std::string& name = "worker") {
    stream_ = stub->Lease(&ctx_);
    v1::LeaseRequest first;
    first.set_queue(queue);
    first.set_credit(credit);
    first.set_worker(name);
    stream_->Write(first);
    reader_ = std::thread([this] {
      v1::LeaseResponse resp;
      while (stream_->Read(&resp)) {
        absl::MutexLock lock(&mu_);
        for (const v1::Lease& l : resp.leases()) leases_.push_back(l);
        for (const v1::RejectedResult& r : resp.rejected()) {
          rejected_.push_back(r);
        }
        for (uint64_t id : resp.expired_lease_ids()) expired_.push_back(id);
      }
      grpc::Status st = stream_->Finish();
      absl::MutexLock lock(&mu_);
      status_ = st;
    });
  }
  ~Worker() {
    ctx_.TryCancel();
    reader_.join();
  }

  void Send(const v1::LeaseRequest& req) { stream_->Write(req); }
  void Credit(int n) {
    v1::LeaseRequest req;
    req.set_credit(n);
    Send(req);
  }
  void Complete(uint64_t id, v1::LeaseOutcome outcome, int credit = 0) {
    v1::LeaseRequest req;
    v1::LeaseResult* r = req.add_results();
    r->set_lease_id(id);
    r->set_outcome(outcome);
    req.set_credit(credit);
    Send(req);
  }
  void CloseSend() { stream_->WritesDone(); }

  // The next lease, or nullopt after the failsafe deadline / stream end.
  std::optional<v1::Lease> NextLease() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !leases_.empty() || status_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    if (leases_.empty()) return std::nullopt;
    v1::Lease l = leases_.front();
    leases_.pop_front();
    return l;
  }
  std::vector<std::string> NextKeys(int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) {
      std::optional<v1::Lease> l = NextLease();
      if (!l) break;
      keys.push_back(l->key());
    }
    return keys;
  }
  std::optional<v1::RejectedResult> NextRejected() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !rejected_.empty() || status_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    if (rejected_.empty()) return std::nullopt;
    v1::RejectedResult r = rejected_.front();
    rejected_.pop_front();
    return r;
  }
  std::optional<uint64_t> NextExpired() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !expired_.empty() || status_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    if (expired_.empty()) return std::nullopt;
    uint64_t id = expired_.front();
    expired_.pop_front();
    return id;
  }
  // Waits for the end of the call.
  grpc::Status Status() {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return status_.has_value();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), kWait)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "test wait");
    }
    return *status_;
  }
  size_t PendingLeases() {
    absl::MutexLock lock(&mu_);
    return leases_.size();
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::LeaseRequest, v1::LeaseResponse>>
      stream_;
  std::thread reader_;
  absl::Mutex mu_;
  std::deque<v1::Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::RejectedResult> rejected_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> expired_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

class WorkQueueServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ListerWatcherFactory factory = [](const ResourceConfig&)
        -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
      return std::make_unique<informer::FakeSource>();
    };
    auto registry =
        InformerRegistry::Create({{.resource = "pods"}}, std::move(factory));
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    pods_ = static_cast<informer::FakeSource*>(
        (*registry_->Find("pods"))->source.get());
  }

  // Starts the informers, the service (on the fake clock) and the server.
  void StartAll(WorkQueueService::Options options = {}) {
    ASSERT_TRUE(registry_->Start().ok());
    ASSERT_TRUE(
        (*registry_->Find("pods"))->informer->WaitForSync(absl::Seconds(30)));
    service_ =
        std::make_unique<WorkQueueService>(registry_.get(), options, &clock_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::WorkQueue::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    service_.reset();
    registry_->Stop();
  }

  void SeedPods(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(pods_
                      ->Add(absl::StrCat("ns-", i % 2), absl::StrCat("pod-", i),
                            {{"app", i % 3 == 0 ? "web" : "api"}})
                      .ok());
    }
  }

  v1::CreateQueueRequest Decl(const std::string& name) {
    v1::CreateQueueRequest req;
    req.set_name(name);
    req.set_resource("pods");
    return req;
  }

  grpc::Status Create(const v1::CreateQueueRequest& req,
                      v1::CreateQueueResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    v1::CreateQueueResponse local;
    return stub_->CreateQueue(&ctx, req, resp ? resp : &local);
  }
  grpc::Status AddKey(const std::string& queue, const std::string& key,
                      absl::Duration delay = absl::ZeroDuration()) {
    grpc::ClientContext ctx;
    v1::AddAfterRequest req;
    req.set_queue(queue);
    req.set_key(key);
    *req.mutable_delay() = Dur(delay);
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
    EXPECT_EQ(resp.queues_size(), 1);
    return resp.queues_size() == 1 ? resp.queues(0) : v1::QueueStats();
  }
  grpc::Status StatsStatus(const std::string& queue) {
    grpc::ClientContext ctx;
    v1::StatsRequest req;
    req.set_queue(queue);
    v1::StatsResponse resp;
    return stub_->Stats(&ctx, req, &resp);
  }
  // A queue fed by nothing (no pods exist) for keys added by the test.
  void CreateEmptyQueue(const std::string& name,
                        absl::Duration lease_timeout = absl::Minutes(5)) {
    v1::CreateQueueRequest req = Decl(name);
    *req.mutable_lease_timeout() = Dur(lease_timeout);
    grpc::Status st = Create(req);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  informer::FakeClock clock_;
  std::unique_ptr<InformerRegistry> registry_;
  informer::FakeSource* pods_ = nullptr;
  std::unique_ptr<WorkQueueService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::WorkQueue::Stub> stub_;
};

TEST_F(WorkQueueServiceTest, CreateQueueRejectsBadInputNamingTheField) {
  StartAll();
  struct Case {
    std::function<void(v1::CreateQueueRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](auto* r) { r->clear_name(); }, grpc::INVALID_ARGUMENT,
       "name is required"},
      {[](auto* r) { r->set_name("Bad Name"); }, grpc::INVALID_ARGUMENT,
       "name:"},
      {[](auto* r) { r->clear_resource(); }, grpc::INVALID_ARGUMENT,
       "resource is required"},
      {[](auto* r) { r->set_resource("widgets"); }, grpc::NOT_FOUND, "widgets"},
      {[](auto* r) { r->set_label_selector("app in (a"); },
       grpc::INVALID_ARGUMENT, "label_selector:"},
      {[](auto* r) { r->add_events(v1::QUEUE_EVENT_UNSPECIFIED); },
       grpc::INVALID_ARGUMENT, "events[0]"},
      {[](auto* r) {
         r->add_events(v1::QUEUE_EVENT_ADDED);
         r->add_events(v1::QUEUE_EVENT_ADDED);
       },
       grpc::INVALID_ARGUMENT, "events[1]: duplicate"},
      {[](auto* r) {
         r->add_events(v1::QUEUE_EVENT_ADDED);
         *r->mutable_resync_period() = Dur(absl::Minutes(1));
       },
       grpc::INVALID_ARGUMENT, "resync_period"},
      {[](auto* r) {
         *r->mutable_resync_period() = Dur(absl::Milliseconds(5));
       },
       grpc::INVALID_ARGUMENT, "resync_period: the minimum"},
      {[](auto* r) {
         *r->mutable_rate_limiter()->mutable_base_delay() =
             Dur(absl::Seconds(-1));
       },
       grpc::INVALID_ARGUMENT, "rate_limiter.base_delay"},
      {[](auto* r) {
         *r->mutable_rate_limiter()->mutable_base_delay() =
             Dur(absl::Seconds(10));
         *r->mutable_rate_limiter()->mutable_max_delay() =
             Dur(absl::Seconds(1));
       },
       grpc::INVALID_ARGUMENT, "rate_limiter.max_delay"},
      {[](auto* r) { r->mutable_rate_limiter()->set_qps(-1); },
       grpc::INVALID_ARGUMENT, "rate_limiter.qps"},
      {[](auto* r) { r->mutable_rate_limiter()->set_burst(-1); },
       grpc::INVALID_ARGUMENT, "rate_limiter.burst"},
      {[](auto* r) { *r->mutable_lease_timeout() = Dur(absl::Hours(48)); },
       grpc::INVALID_ARGUMENT, "lease_timeout"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    v1::CreateQueueRequest req = Decl("q");
    cases[i].mutate(&req);
    grpc::Status st = Create(req);
    EXPECT_EQ(st.error_code(), cases[i].code) << "case " << i;
    EXPECT_THAT(st.error_message(), HasSubstr(cases[i].message))
        << "case " << i;
  }
  // None of them created anything.
  EXPECT_EQ(StatsStatus("q").error_code(), grpc::NOT_FOUND);
}

TEST_F(WorkQueueServiceTest, CreateQueueIsIdempotentAndConflictsAreRejected) {
  StartAll();
  v1::CreateQueueResponse resp;
  ASSERT_TRUE(Create(Decl("q"), &resp).ok());
  EXPECT_TRUE(resp.created());
  // The same declaration with the defaults spelled out is identical.
  v1::CreateQueueRequest explicit_defaults = Decl("q");
  *explicit_defaults.mutable_rate_limiter()->mutable_base_delay() =
      Dur(absl::Milliseconds(5));
  explicit_defaults.mutable_rate_limiter()->set_burst(100);
  *explicit_defaults.mutable_lease_timeout() = Dur(absl::Minutes(5));
  for (auto e : {v1::QUEUE_EVENT_SYNC, v1::QUEUE_EVENT_DELETED,
                 v1::QUEUE_EVENT_ADDED, v1::QUEUE_EVENT_MODIFIED}) {
    explicit_defaults.add_events(e);
  }
  ASSERT_TRUE(Create(explicit_defaults, &resp).ok());
  EXPECT_FALSE(resp.created());

  v1::CreateQueueRequest other = Decl("q");
  other.set_label_selector("app=web");
  grpc::Status st = Create(other);
  EXPECT_EQ(st.error_code(), grpc::ALREADY_EXISTS);
  EXPECT_THAT(st.error_message(), HasSubstr("label_selector"));
  other = Decl("q");
  other.mutable_rate_limiter()->set_qps(50);
  st = Create(other);
  EXPECT_EQ(st.error_code(), grpc::ALREADY_EXISTS);
  EXPECT_THAT(st.error_message(), HasSubstr("rate_limiter.qps"));
}

TEST_F(WorkQueueServiceTest, EnqueuesMatchingKeysOfTheInitialStateAndEvents) {
  SeedPods(6);  // ns-0: pod-0 (web), pod-2, pod-4; ns-1: pod-1, pod-3 (web)...
  StartAll();
  v1::CreateQueueRequest req = Decl("web");
  req.set_label_selector("app=web");
  req.add_events(v1::QUEUE_EVENT_ADDED);
  req.add_events(v1::QUEUE_EVENT_DELETED);
  ASSERT_TRUE(Create(req).ok());
  Worker w(stub_.get(), "web", 100);
  // app=web: pod-0 and pod-3.
  EXPECT_THAT(w.NextKeys(2), UnorderedElementsAre("ns-0/pod-0", "ns-1/pod-3"));
  std::optional<v1::Lease> l;

  // MODIFIED is not enqueued by this queue; a later ADDED is, so the next
  // lease being the new pod shows the modification did not enqueue.
  ASSERT_TRUE(pods_->Modify("ns-0", "pod-0", {{"app", "web"}}).ok());
  ASSERT_TRUE(pods_->Add("ns-1", "new", {{"app", "web"}}).ok());
  ASSERT_TRUE(pods_->Add("ns-1", "other", {{"app", "api"}}).ok());  // no match
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "ns-1/new");
  EXPECT_EQ(l->namespace_(), "ns-1");
  EXPECT_EQ(l->name(), "new");
  ASSERT_TRUE(pods_->Delete("ns-1", "other").ok());  // no match
  ASSERT_TRUE(pods_->Delete("ns-1", "pod-3").ok());
  // pod-3 is still leased: its delete queues it again for after Done.
  ASSERT_TRUE(pods_->Add("ns-0", "last", {{"app", "web"}}).ok());
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "ns-0/last");
  v1::QueueStats stats = Stats("web");
  EXPECT_EQ(stats.in_flight(), 4);
  EXPECT_EQ(stats.workers(), 1);
}

TEST_F(WorkQueueServiceTest, NamespaceFilterAndModifiedEvents) {
  SeedPods(4);
  StartAll();
  v1::CreateQueueRequest req = Decl("ns1");
  req.set_namespace_("ns-1");
  req.add_events(v1::QUEUE_EVENT_MODIFIED);
  ASSERT_TRUE(Create(req).ok());
  Worker w(stub_.get(), "ns1", 100);
  ASSERT_TRUE(pods_->Modify("ns-0", "pod-0", {{"app", "x"}}).ok());
  ASSERT_TRUE(pods_->Modify("ns-1", "pod-1", {{"app", "x"}}).ok());
  std::optional<v1::Lease> l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "ns-1/pod-1");  // no ADDED for the initial state
  EXPECT_EQ(Stats("ns1").depth(), 0);
}

TEST_F(WorkQueueServiceTest, CreditBoundsTheLeasesOfAStream) {
  StartAll();
  CreateEmptyQueue("q");
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(AddKey("q", k).ok());
  Worker w(stub_.get(), "q", 2);
  EXPECT_EQ(w.NextKeys(2), (std::vector<std::string>{"a", "b"}));
  // The dispatcher waits for credit before it takes the next key.
  v1::QueueStats stats = Stats("q");
  EXPECT_EQ(stats.in_flight(), 2);
  EXPECT_EQ(stats.depth(), 1);
  EXPECT_EQ(w.PendingLeases(), 0u);
  w.Credit(1);
  EXPECT_EQ(w.NextKeys(1), (std::vector<std::string>{"c"}));
}

TEST_F(WorkQueueServiceTest, OneWorkerPerKeyAcrossStreams) {
  StartAll();
  CreateEmptyQueue("q");
  ASSERT_TRUE(AddKey("q", "k").ok());
  Worker a(stub_.get(), "q", 1, "a");
  std::optional<v1::Lease> held = a.NextLease();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->key(), "k");
  // "k" is added again while a holds it, then "other": b, which has credit,
  // gets "other" although "k" was added first: "k" waits for a's result.
  ASSERT_TRUE(AddKey("q", "k").ok());
  ASSERT_TRUE(AddKey("q", "other").ok());
  Worker b(stub_.get(), "q", 1, "b");
  std::optional<v1::Lease> l = b.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "other");
  b.Credit(1);
  a.Complete(held->lease_id(), v1::LEASE_OUTCOME_FORGET);
  // Now "k" comes back, exactly once.
  l = b.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "k");
  EXPECT_NE(l->lease_id(), held->lease_id());
  service_->WaitForResults(1);
  v1::QueueStats stats = Stats("q");
  EXPECT_EQ(stats.depth(), 0);
  EXPECT_EQ(stats.in_flight(), 2);
  EXPECT_EQ(stats.completed(), 1);
}

TEST_F(WorkQueueServiceTest, LeasesOfAnEndedStreamGoBackToTheQueue) {
  StartAll();
  CreateEmptyQueue("q");
  ASSERT_TRUE(AddKey("q", "k1").ok());
  ASSERT_TRUE(AddKey("q", "k2").ok());
  auto a = std::make_unique<Worker>(stub_.get(), "q", 2, "a");
  EXPECT_EQ(a->NextKeys(2), (std::vector<std::string>{"k1", "k2"}));
  Worker b(stub_.get(), "q", 5, "b");
  a.reset();  // cancels the call
  EXPECT_THAT(b.NextKeys(2), UnorderedElementsAre("k1", "k2"));
  v1::QueueStats stats = Stats("q");
  EXPECT_EQ(stats.returned(), 2);
  EXPECT_EQ(stats.workers(), 1);
}

TEST_F(WorkQueueServiceTest, ClosingTheSendSideEndsTheStreamAndReturnsLeases) {
  StartAll();
  CreateEmptyQueue("q");
  ASSERT_TRUE(AddKey("q", "k").ok());
  Worker a(stub_.get(), "q", 1, "a");
  ASSERT_TRUE(a.NextLease());
  a.CloseSend();
  EXPECT_TRUE(a.Status().ok());
  Worker b(stub_.get(), "q", 1, "b");
  std::optional<v1::Lease> l = b.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "k");
}

TEST_F(WorkQueueServiceTest, ExpiredLeaseReturnsAndLateResultsAreRejected) {
  StartAll();
  CreateEmptyQueue("q", absl::Seconds(30));
  ASSERT_TRUE(AddKey("q", "k").ok());
  Worker a(stub_.get(), "q", 1, "a");
  std::optional<v1::Lease> held = a.NextLease();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->timeout().seconds(), 30);
  Worker b(stub_.get(), "q", 1, "b");
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(Stats("q").in_flight(), 1);
  clock_.Advance(absl::Seconds(1));
  std::optional<uint64_t> expired = a.NextExpired();
  ASSERT_TRUE(expired);
  EXPECT_EQ(*expired, held->lease_id());
  std::optional<v1::Lease> l = b.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->key(), "k");
  // a's result comes too late: rejected, and b keeps the key.
  a.Complete(held->lease_id(), v1::LEASE_OUTCOME_DONE);
  std::optional<v1::RejectedResult> rej = a.NextRejected();
  ASSERT_TRUE(rej);
  EXPECT_EQ(rej->lease_id(), held->lease_id());
  EXPECT_EQ(rej->code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(rej->message(), HasSubstr("expired"));
  // An unknown lease, and b's lease completed by a.
  a.Complete(12345, v1::LEASE_OUTCOME_DONE);
  rej = a.NextRejected();
  ASSERT_TRUE(rej);
  EXPECT_EQ(rej->code(), grpc::FAILED_PRECONDITION);
  a.Complete(l->lease_id(), v1::LEASE_OUTCOME_DONE);
  rej = a.NextRejected();
  ASSERT_TRUE(rej);
  EXPECT_EQ(rej->code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(rej->message(), HasSubstr("another Lease stream"));
  v1::QueueStats stats = Stats("q");
  EXPECT_EQ(stats.expired(), 1);
  EXPECT_EQ(stats.in_flight(), 1);
  EXPECT_EQ(stats.completed(), 0);
  // The stream survived the rejections.
  b.Complete(l->lease_id(), v1::LEASE_OUTCOME_DONE);
  service_->WaitForResults(4);
  EXPECT_EQ(Stats("q").completed(), 1);
}

TEST_F(WorkQueueServiceTest, FailBacksOffAsConfiguredAndForgetResets) {
  StartAll();
  v1::CreateQueueRequest req = Decl("q");
  *req.mutable_rate_limiter()->mutable_base_delay() = Dur(absl::Seconds(1));
  *req.mutable_rate_limiter()->mutable_max_delay() = Dur(absl::Seconds(3));
  ASSERT_TRUE(Create(req).ok());
  ASSERT_TRUE(AddKey("q", "k").ok());
  Worker w(stub_.get(), "q", 1);
  std::optional<v1::Lease> l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->failures(), 0);
  uint64_t results = 0;
  // Delays 1s, 2s, then capped at 3s.
  for (absl::Duration delay :
       {absl::Seconds(1), absl::Seconds(2), absl::Seconds(3)}) {
    const int failures = l->failures();
    w.Complete(l->lease_id(), v1::LEASE_OUTCOME_FAIL, 1);
    service_->WaitForResults(++results);
    EXPECT_EQ(Stats("q").waiting(), 1);
    clock_.Advance(delay - absl::Milliseconds(1));
    v1::QueueStats stats = Stats("q");
    EXPECT_EQ(stats.waiting(), 1) << "retried before " << delay;
    EXPECT_EQ(stats.depth(), 0);
    clock_.Advance(absl::Milliseconds(1));
    l = w.NextLease();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->key(), "k");
    EXPECT_EQ(l->failures(), failures + 1);
  }
  EXPECT_EQ(Stats("q").failures(), 3);
  EXPECT_EQ(Stats("q").retries(), 3);
  // FORGET: finished, failure count reset.
  w.Complete(l->lease_id(), v1::LEASE_OUTCOME_FORGET, 1);
  service_->WaitForResults(++results);
  ASSERT_TRUE(AddKey("q", "k").ok());
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->failures(), 0);
  // DONE keeps the count; the Forget RPC resets it.
  w.Complete(l->lease_id(), v1::LEASE_OUTCOME_FAIL, 1);
  service_->WaitForResults(++results);
  clock_.Advance(absl::Seconds(1));
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->failures(), 1);
  w.Complete(l->lease_id(), v1::LEASE_OUTCOME_DONE, 1);
  service_->WaitForResults(++results);
  ASSERT_TRUE(AddKey("q", "k").ok());
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->failures(), 1);
  {
    grpc::ClientContext ctx;
    v1::ForgetRequest freq;
    freq.set_queue("q");
    freq.set_key("k");
    v1::ForgetResponse fresp;
    ASSERT_TRUE(stub_->Forget(&ctx, freq, &fresp).ok());
  }
  w.Complete(l->lease_id(), v1::LEASE_OUTCOME_DONE, 1);
  service_->WaitForResults(++results);
  ASSERT_TRUE(AddKey("q", "k").ok());
  l = w.NextLease();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->failures(), 0);
}

TEST_F(WorkQueueServiceTest, AddAfterDelaysOnTheClock) {
  StartAll();
  CreateEmptyQueue("q");
  ASSERT_TRUE(AddKey("q", "later", absl::Seconds(10)).ok());
  ASSERT_TRUE(AddKey("q", "now").ok());
  Worker w(stub_.get(), "q", 5);
  EXPECT_EQ(w.NextKeys(1), (std::vector<std::string>{"now"}));
  EXPECT_EQ(Stats("q").waiting(), 1);
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(w.NextKeys(1), (std::vector<std::string>{"later"}));
}

TEST_F(WorkQueueServiceTest, UnaryErrors) {
  StartAll();
  CreateEmptyQueue("q");
  grpc::Status st = AddKey("nope", "k");
  EXPECT_EQ(st.error_code(), grpc::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("nope"));
  st = AddKey("q", "");
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("key"));
  st = AddKey("", "k");
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("queue"));
  st = AddKey("q", "k", absl::Hours(25));
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("delay"));
  {
    grpc::ClientContext ctx;
    v1::ForgetRequest req;
    req.set_queue("nope");
    req.set_key("k");
    v1::ForgetResponse resp;
    EXPECT_EQ(stub_->Forget(&ctx, req, &resp).error_code(), grpc::NOT_FOUND);
  }
  EXPECT_EQ(StatsStatus("nope").error_code(), grpc::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    v1::DeleteQueueRequest req;
    req.set_name("nope");
    v1::DeleteQueueResponse resp;
    EXPECT_EQ(stub_->DeleteQueue(&ctx, req, &resp).error_code(),
              grpc::NOT_FOUND);
  }
}

TEST_F(WorkQueueServiceTest, LeaseStreamErrors) {
  StartAll();
  CreateEmptyQueue("q");
  {
    Worker w(stub_.get(), "", 1);
    grpc::Status st = w.Status();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("queue is required"));
  }
  {
    Worker w(stub_.get(), "nope", 1);
    EXPECT_EQ(w.Status().error_code(), grpc::NOT_FOUND);
  }
  {
    Worker w(stub_.get(), "q", 1);
    w.Credit(-1);
    grpc::Status st = w.Status();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("credit"));
  }
  {
    Worker w(stub_.get(), "q", 10000);
    w.Credit(1);
    grpc::Status st = w.Status();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("credit"));
  }
  {
    Worker w(stub_.get(), "q", 1);
    w.Complete(7, v1::LEASE_OUTCOME_UNSPECIFIED);
    grpc::Status st = w.Status();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("results[0].outcome"));
  }
  {
    Worker w(stub_.get(), "q", 1);
    v1::LeaseRequest req;
    req.set_queue("other");
    w.Send(req);
    grpc::Status st = w.Status();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("queue:"));
  }
}

TEST_F(WorkQueueServiceTest, DeleteQueueEndsItsStreams) {
  StartAll();
  CreateEmptyQueue("q");
  ASSERT_TRUE(AddKey("q", "k").ok());
  Worker w(stub_.get(), "q", 1);
  ASSERT_TRUE(w.NextLease());
  grpc::ClientContext ctx;
  v1::DeleteQueueRequest req;
  req.set_name("q");
  v1::DeleteQueueResponse resp;
  ASSERT_TRUE(stub_->DeleteQueue(&ctx, req, &resp).ok());
  grpc::Status st = w.Status();
  EXPECT_EQ(st.error_code(), grpc::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("deleted"));
  EXPECT_EQ(StatsStatus("q").error_code(), grpc::NOT_FOUND);
  // The name can be declared again, differently.
  v1::CreateQueueRequest again = Decl("q");
  again.set_label_selector("app=web");
  v1::CreateQueueResponse created;
  ASSERT_TRUE(Create(again, &created).ok());
  EXPECT_TRUE(created.created());
}

TEST_F(WorkQueueServiceTest, IdleQueueIsRemovedButNotWhileAWorkerIsAttached) {
  WorkQueueService::Options options;
  options.idle_timeout = absl::Minutes(10);
  StartAll(options);
  CreateEmptyQueue("idle");
  CreateEmptyQueue("busy");
  auto w = std::make_unique<Worker>(stub_.get(), "busy", 1);
  // Attached once the sidecar reports the worker.
  ASSERT_TRUE(AddKey("busy", "k").ok());
  ASSERT_TRUE(w->NextLease());
  clock_.Advance(absl::Minutes(10));
  service_->WaitForIdleRemovals(1);
  EXPECT_EQ(StatsStatus("idle").error_code(), grpc::NOT_FOUND);
  EXPECT_TRUE(StatsStatus("busy").ok());
  // The idle time starts when the last worker leaves.
  clock_.Advance(absl::Minutes(20));
  const uint64_t passes = service_->janitor_passes();
  w.reset();
  service_->WaitForJanitorPasses(passes + 1);
  EXPECT_TRUE(StatsStatus("busy").ok());
  clock_.Advance(absl::Minutes(10));
  service_->WaitForIdleRemovals(2);
  EXPECT_EQ(StatsStatus("busy").error_code(), grpc::NOT_FOUND);
}

TEST_F(WorkQueueServiceTest, ResyncEnqueuesEveryMatchingKey) {
  SeedPods(4);
  StartAll();
  v1::CreateQueueRequest req = Decl("q");
  req.set_namespace_("ns-0");
  *req.mutable_resync_period() = Dur(absl::Minutes(1));
  ASSERT_TRUE(Create(req).ok());
  Worker w(stub_.get(), "q", 2);
  std::optional<v1::Lease> l1 = w.NextLease();
  std::optional<v1::Lease> l2 = w.NextLease();
  ASSERT_TRUE(l1 && l2);
  EXPECT_THAT((std::vector<std::string>{l1->key(), l2->key()}),
              UnorderedElementsAre("ns-0/pod-0", "ns-0/pod-2"));
  v1::LeaseRequest done;
  done.set_credit(2);
  for (uint64_t id : {l1->lease_id(), l2->lease_id()}) {
    v1::LeaseResult* r = done.add_results();
    r->set_lease_id(id);
    r->set_outcome(v1::LEASE_OUTCOME_FORGET);
  }
  w.Send(done);
  service_->WaitForResults(2);
  EXPECT_EQ(Stats("q").depth(), 0);
  clock_.Advance(absl::Minutes(1));
  EXPECT_THAT(w.NextKeys(2), UnorderedElementsAre("ns-0/pod-0", "ns-0/pod-2"));
}

TEST_F(WorkQueueServiceTest, StatsListsEveryQueue) {
  StartAll();
  CreateEmptyQueue("b");
  CreateEmptyQueue("a");
  ASSERT_TRUE(AddKey("a", "x").ok());
  ASSERT_TRUE(AddKey("a", "x").ok());  // still waiting: not a second add
  ASSERT_TRUE(AddKey("a", "y").ok());
  grpc::ClientContext ctx;
  v1::StatsRequest req;
  v1::StatsResponse resp;
  ASSERT_TRUE(stub_->Stats(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.queues_size(), 2);
  EXPECT_EQ(resp.queues(0).name(), "a");
  EXPECT_EQ(resp.queues(0).resource(), "pods");
  EXPECT_EQ(resp.queues(0).depth(), 2);
  EXPECT_EQ(resp.queues(0).adds(), 2);
  EXPECT_EQ(resp.queues(1).name(), "b");
  EXPECT_EQ(resp.queues(1).depth(), 0);
}

}  // namespace
}  // namespace server

namespace server {
namespace {

// With a tokens file, a queue is reachable only by callers that may read its
// resource in its namespace.
class WorkQueueAuthzTest : public WorkQueueServiceTest {
 protected:
  void SetUp() override {
    WorkQueueServiceTest::SetUp();
    Authorizer::Options options;
    auto authorizer = Authorizer::FromTokensYaml(
        "tokens:\n"
        "- name: app\n  token: app-token\n  resources: [pods]\n"
        "  namespaces: [ns-0]\n"
        "- name: other\n  token: other-token\n  resources: [configmaps]\n",
        "tokens.yaml", "/", options);
    ASSERT_TRUE(authorizer.ok()) << authorizer.status();
    authorizer_ = *std::move(authorizer);
    WorkQueueService::Options service_options;
    service_options.authorizer = authorizer_.get();
    StartAll(service_options);
  }
  static void WithToken(grpc::ClientContext* ctx, const std::string& token) {
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  }
  grpc::Status CreateAs(const std::string& token,
                        const v1::CreateQueueRequest& req) {
    grpc::ClientContext ctx;
    WithToken(&ctx, token);
    v1::CreateQueueResponse resp;
    return stub_->CreateQueue(&ctx, req, &resp);
  }
  grpc::Status StatsAs(const std::string& token, const std::string& queue,
                       v1::StatsResponse* resp) {
    grpc::ClientContext ctx;
    WithToken(&ctx, token);
    v1::StatsRequest req;
    req.set_queue(queue);
    return stub_->Stats(&ctx, req, resp);
  }
  // Opens a Lease stream naming `queue` and returns how it ended.
  grpc::Status LeaseAs(const std::string& token, const std::string& queue) {
    grpc::ClientContext ctx;
    WithToken(&ctx, token);
    auto stream = stub_->Lease(&ctx);
    v1::LeaseRequest req;
    req.set_queue(queue);
    req.set_credit(1);
    stream->Write(req);
    stream->WritesDone();
    v1::LeaseResponse resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }

  std::unique_ptr<Authorizer> authorizer_;
};

TEST_F(WorkQueueAuthzTest, QueuesNeedATokenThatMayReadTheirResource) {
  v1::CreateQueueRequest decl = Decl("q");
  decl.set_namespace_("ns-0");
  EXPECT_EQ(CreateAs("", decl).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CreateAs("wrong", decl).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CreateAs("other-token", decl).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A namespace-limited token may not declare an all-namespaces queue.
  EXPECT_EQ(CreateAs("app-token", Decl("all")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(CreateAs("app-token", decl).ok());

  v1::StatsResponse stats;
  ASSERT_TRUE(StatsAs("app-token", "q", &stats).ok());
  EXPECT_EQ(stats.queues_size(), 1);
  EXPECT_EQ(StatsAs("other-token", "q", &stats).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::StatsResponse all;
  ASSERT_TRUE(StatsAs("other-token", "", &all).ok());
  EXPECT_EQ(all.queues_size(), 0) << "queues the caller may not use are hidden";

  EXPECT_EQ(LeaseAs("", "q").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(LeaseAs("other-token", "q").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  grpc::ClientContext ctx;
  WithToken(&ctx, "other-token");
  v1::DeleteQueueRequest del;
  del.set_name("q");
  v1::DeleteQueueResponse del_resp;
  EXPECT_EQ(stub_->DeleteQueue(&ctx, del, &del_resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext ok_ctx;
  WithToken(&ok_ctx, "app-token");
  EXPECT_TRUE(stub_->DeleteQueue(&ok_ctx, del, &del_resp).ok());
}

}  // namespace
}  // namespace server

// workqueue_worker: a remote worker of an informer.v1.WorkQueue queue, as a
// separate process for end-to-end tests (and a reference for writing one).
//
// It holds one Lease stream with --credit slots. Each lease is worked on by
// one of --credit threads for --hold, then completed (FORGET, or FAIL for
// the first --fail_times leases of each key); each result grants one credit
// back. With --hold_forever it takes leases and never completes them (a
// worker to kill mid-lease). After --duration it stops taking keys,
// finishes what it holds, closes its side of the stream and exits 0.
//
// Every event is printed on stdout, one line each, flushed at once (times
// are CLOCK_MONOTONIC nanoseconds, comparable between processes):
//   LEASE <key> <lease_id> <failures> <t>
//   HELD <key> <lease_id> <start_t> <end_t> <outcome>   (end_t: just before
//                         the result is sent; printed once it was sent)
//   EXPIRED <lease_id>
//   REJECTED <lease_id> <code>
//   END <grpc status code>

#include <grpcpp/grpcpp.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

ABSL_FLAG(std::string, address, "", "The sidecar (unix:/path or host:port).");
ABSL_FLAG(std::string, queue, "", "The queue to work on.");
ABSL_FLAG(std::string, name, "worker", "This worker's name.");
ABSL_FLAG(int, credit, 4, "Leases held at once (worker threads).");
ABSL_FLAG(absl::Duration, hold, absl::Milliseconds(10),
          "How long each lease is worked on.");
ABSL_FLAG(int, fail_times, 0,
          "Complete the first N leases of each key with FAIL.");
ABSL_FLAG(bool, hold_forever, false, "Never complete a lease.");
ABSL_FLAG(absl::Duration, duration, absl::InfiniteDuration(),
          "Stop taking keys after this long, then exit.");

namespace {

namespace v1 = ::informer::v1;

int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

absl::Mutex out_mu;
void Print(const std::string& line) {
  absl::MutexLock lock(&out_mu);
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

struct Item {
  v1::Lease lease;
  int64_t start = 0;
};

class WorkerProcess {
 public:
  int Run() {
    auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_address),
                                       grpc::InsecureChannelCredentials());
    stub_ = v1::WorkQueue::NewStub(channel);
    stream_ = stub_->Lease(&ctx_);
    const int credit = absl::GetFlag(FLAGS_credit);
    v1::LeaseRequest first;
    first.set_queue(absl::GetFlag(FLAGS_queue));
    first.set_worker(absl::GetFlag(FLAGS_name));
    first.set_credit(credit);
    Write(first);
    std::vector<std::thread> threads;
    if (!absl::GetFlag(FLAGS_hold_forever)) {
      for (int i = 0; i < credit; ++i) threads.emplace_back([this] { Work(); });
    }
    std::thread stopper;
    const absl::Duration duration = absl::GetFlag(FLAGS_duration);
    if (duration != absl::InfiniteDuration()) {
      stopper = std::thread([this, duration] {
        absl::MutexLock lock(&mu_);
        auto ended = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
        // The worker's own lifetime, not a test wait.
        mu_.AwaitWithTimeout(absl::Condition(&ended), duration);
        stopping_ = true;
      });
    }
    v1::LeaseResponse resp;
    while (stream_->Read(&resp)) {
      absl::MutexLock lock(&mu_);
      const int64_t now = MonoNanos();
      for (const v1::Lease& l : resp.leases()) {
        Print("LEASE " + l.key() + " " + std::to_string(l.lease_id()) + " " +
              std::to_string(l.failures()) + " " + std::to_string(now));
        // Sent before the sidecar saw our half-close: it returns them to
        // the queue itself when the stream ends.
        if (!closing_) items_.push_back(Item{l, now});
      }
      for (uint64_t id : resp.expired_lease_ids()) {
        Print("EXPIRED " + std::to_string(id));
      }
      for (const v1::RejectedResult& r : resp.rejected()) {
        Print("REJECTED " + std::to_string(r.lease_id()) + " " +
              std::to_string(r.code()));
      }
    }
    const grpc::Status st = stream_->Finish();
    Print("END " + std::to_string(st.error_code()));
    {
      absl::MutexLock lock(&mu_);
      ended_ = true;
    }
    for (auto& t : threads) t.join();
    if (stopper.joinable()) stopper.join();
    return st.ok() ? 0 : 1;
  }

 private:
  // False when our side is already closed (the result was not sent).
  bool Write(const v1::LeaseRequest& req) {
    absl::MutexLock lock(&write_mu_);
    if (closed_) return false;
    return stream_->Write(req);
  }

  void Work() {
    const absl::Duration hold = absl::GetFlag(FLAGS_hold);
    const int fail_times = absl::GetFlag(FLAGS_fail_times);
    while (true) {
      Item item;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !items_.empty() || ended_ || (stopping_ && in_work_ == 0);
        };
        mu_.Await(absl::Condition(&ready));
        if (items_.empty()) {
          if (ended_) return;
          // Stopping and idle: close our side once; the sidecar ends the
          // call and Read returns false.
          CloseOnce();
          mu_.Await(absl::Condition(&ended_));
          return;
        }
        item = items_.front();
        items_.pop_front();
        ++in_work_;
      }
      absl::SleepFor(hold);  // the "work"
      v1::LeaseOutcome outcome = v1::LEASE_OUTCOME_FORGET;
      bool grant = true;
      {
        absl::MutexLock lock(&mu_);
        if (seen_[item.lease.key()]++ < fail_times) {
          outcome = v1::LEASE_OUTCOME_FAIL;
        }
        grant = !stopping_;
      }
      v1::LeaseRequest req;
      v1::LeaseResult* r = req.add_results();
      r->set_lease_id(item.lease.lease_id());
      r->set_outcome(outcome);
      if (grant) req.set_credit(1);
      const int64_t end = MonoNanos();
      // Only a result that was sent ends a hold the sidecar knows of.
      if (Write(req)) {
        Print("HELD " + item.lease.key() + " " +
              std::to_string(item.lease.lease_id()) + " " +
              std::to_string(item.start) + " " + std::to_string(end) + " " +
              (outcome == v1::LEASE_OUTCOME_FAIL ? "FAIL" : "FORGET"));
      }
      absl::MutexLock lock(&mu_);
      --in_work_;  // only now may an idle, stopping worker close its side
    }
  }

  void CloseOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    closing_ = true;
    absl::MutexLock lock(&write_mu_);
    if (closed_) return;
    closed_ = true;
    stream_->WritesDone();
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<v1::WorkQueue::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::LeaseRequest, v1::LeaseResponse>>
      stream_;
  absl::Mutex write_mu_ ABSL_ACQUIRED_AFTER(mu_);
  bool closed_ ABSL_GUARDED_BY(write_mu_) = false;
  absl::Mutex mu_;
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> seen_ ABSL_GUARDED_BY(mu_);
  int in_work_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Our side is closed: leases arriving now are not worked on.
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_address).empty() ||
      absl::GetFlag(FLAGS_queue).empty() || absl::GetFlag(FLAGS_credit) < 1) {
    std::fprintf(stderr,
                 "usage: workqueue_worker --address=ADDR --queue=NAME "
                 "[--credit=N] [--hold=10ms] [--fail_times=N] "
                 "[--hold_forever] [--duration=D]\n");
    return 2;
  }
  WorkerProcess worker;
  return worker.Run();
}

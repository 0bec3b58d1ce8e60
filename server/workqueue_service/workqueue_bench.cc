// informer.v1.WorkQueue lease throughput over gRPC: keys added in-process
// (WorkQueueService::Add, as the informer handler does) and leased, worked
// on (no work) and completed (FORGET) by 1 or 8 Lease streams, each on its
// own connection, with per-stream credit 1 (one key per round trip) or 64
// (pipelined; results batched per received message). Also the unary
// AddAfter rate from 1 and 8 client threads.
//
//   bazel run -c opt //server/workqueue_service:workqueue_bench -- --keys=50000
//
// Prints a Markdown table. The in-process queue alone is measured by
// //informer/workqueue:workqueue_bench.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "informer/cache/testing/fake_source.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"
#include "server/registry/informer_registry.h"
#include "server/workqueue_service/workqueue_service.h"

ABSL_FLAG(int, keys, 50000, "Keys per run.");
ABSL_FLAG(std::string, listen, "unix:/tmp/workqueue_bench.sock",
          "Where the in-process server listens.");

namespace {

namespace v1 = ::informer::v1;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  // A distinct argument gives every worker its own connection.
  args.SetInt("workqueue_bench.channel", id);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// Keys completed so far, and the wait for all of them.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total) {}
  void Add(int64_t n) {
    absl::MutexLock lock(&mu_);
    done_ += n;
  }
  void WaitAll() {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_ >= total_;
    };
    mu_.Await(absl::Condition(&all));
  }

 private:
  const int64_t total_;
  absl::Mutex mu_;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
};

// One worker: completes every lease it gets until its context is cancelled.
void RunWorker(const std::string& address, int id, const std::string& queue,
               int credit, grpc::ClientContext* ctx, Progress* progress) {
  auto stub = v1::WorkQueue::NewStub(NewChannel(address, id));
  auto stream = stub->Lease(ctx);
  v1::LeaseRequest req;
  req.set_queue(queue);
  req.set_credit(credit);
  stream->Write(req);
  v1::LeaseResponse resp;
  while (stream->Read(&resp)) {
    req.Clear();
    for (const v1::Lease& l : resp.leases()) {
      v1::LeaseResult* r = req.add_results();
      r->set_lease_id(l.lease_id());
      r->set_outcome(v1::LEASE_OUTCOME_FORGET);
    }
    req.set_credit(resp.leases_size());
    stream->Write(req);
    progress->Add(resp.leases_size());
  }
  stream->Finish().IgnoreError();
}

double LeaseRun(server::WorkQueueService* service, const std::string& address,
                int workers, int credit, int64_t keys) {
  const std::string queue = absl::StrCat("bench-", workers, "-", credit);
  v1::CreateQueueRequest create;
  create.set_name(queue);
  create.set_resource("pods");
  create.set_label_selector("bench=none");
  if (!service->Create(create).ok()) return 0;
  Progress progress(keys);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (int i = 0; i < workers; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      RunWorker(address, i, queue, credit, contexts[i].get(), &progress);
    });
  }
  for (int64_t i = 0; i < keys; ++i) {
    service->Add(queue, absl::StrCat("bench/key-", i)).IgnoreError();
  }
  progress.WaitAll();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  for (auto& ctx : contexts) ctx->TryCancel();
  for (auto& t : threads) t.join();
  service->Delete(queue).IgnoreError();
  return static_cast<double>(keys) / secs;
}

double AddAfterRun(const std::string& address,
                   server::WorkQueueService* service, int clients,
                   int64_t keys) {
  const std::string queue = absl::StrCat("adds-", clients);
  v1::CreateQueueRequest create;
  create.set_name(queue);
  create.set_resource("pods");
  create.set_label_selector("bench=none");
  if (!service->Create(create).ok()) return 0;
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = v1::WorkQueue::NewStub(NewChannel(address, 1000 + c));
      for (int64_t i = c; i < keys; i += clients) {
        grpc::ClientContext ctx;
        v1::AddAfterRequest req;
        req.set_queue(queue);
        req.set_key(absl::StrCat("bench/key-", i));
        v1::AddAfterResponse resp;
        stub->AddAfter(&ctx, req, &resp).IgnoreError();
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  service->Delete(queue).IgnoreError();
  return static_cast<double>(keys) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t keys = absl::GetFlag(FLAGS_keys);
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (listen.rfind("unix:", 0) == 0) unlink(listen.substr(5).c_str());
  auto registry = server::InformerRegistry::Create(
      {{.resource = "pods"}},
      [](const server::ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        return std::make_unique<informer::FakeSource>();
      });
  if (!registry.ok() || !(*registry)->Start().ok()) {
    std::fprintf(stderr, "registry: %s\n",
                 registry.status().ToString().c_str());
    return 1;
  }
  auto service = std::make_unique<server::WorkQueueService>(
      registry->get(), server::WorkQueueService::Options{});
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  auto grpc_server = builder.BuildAndStart();
  if (grpc_server == nullptr) {
    std::fprintf(stderr, "cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::printf("| run | workers | credit per stream | keys/s |\n");
  std::printf("| --- | ---: | ---: | ---: |\n");
  for (int workers : {1, 8}) {
    for (int credit : {1, 64}) {
      const double rate =
          LeaseRun(service.get(), listen, workers, credit, keys);
      std::printf(
          "| add (in-process) + lease + done over gRPC | %d | %d | "
          "%.0f |\n",
          workers, credit, rate);
      std::fflush(stdout);
    }
  }
  for (int clients : {1, 8}) {
    const double rate = AddAfterRun(listen, service.get(), clients, keys / 4);
    std::printf("| unary AddAfter | %d clients | - | %.0f |\n", clients, rate);
    std::fflush(stdout);
  }
  grpc_server->Shutdown();
  service.reset();
  (*registry)->Stop();
  return 0;
}

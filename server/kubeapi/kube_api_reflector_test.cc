// The project's own reflector (informer/client + informer/cache) as a real
// Kubernetes client of the facade: discovery, list and watch over HTTP,
// converging with the upstream source under churn, relists and re-watches.

#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/shared_informer.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/client/kube_client.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"

namespace server {
namespace kubeapi {
namespace {

informer::client::ApiResource PodsResource() {
  informer::client::ApiResource r;
  r.version = "v1";
  r.resource = "pods";
  r.singular = "pod";
  r.kind = "Pod";
  r.namespaced = true;
  r.short_names = {"po"};
  return r;
}

// Name -> resourceVersion of every object.
using State = std::map<std::string, std::string>;

State StateOf(const std::vector<informer::ObjectPtr>& objects) {
  State s;
  for (const auto& o : objects)
    s[o->Key()] = std::string(o->resource_version());
  return s;
}

// Wakes waiters on every event of the downstream informer.
class Signal final : public informer::ResourceEventHandler {
 public:
  void OnAdd(const informer::ObjectPtr&, bool) override { Bump(); }
  void OnUpdate(const informer::ObjectPtr&,
                const informer::ObjectPtr&) override {
    Bump();
  }
  void OnDelete(const informer::ObjectPtr&, bool) override { Bump(); }

  // Waits until `done()` holds, re-checking after every event (and at most
  // every 100 ms, for changes that need no event, like a relist that found
  // nothing new); false at the deadline.
  bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
    }
    return true;
  }

 private:
  void Bump() {
    absl::MutexLock lock(&mu_);
    cv_.SignalAll();
  }
  absl::Mutex mu_;
  absl::CondVar cv_;
};

TEST(KubeApiReflectorTest, AnInformerOfTheFacadeConvergesUnderChurn) {
  informer::FakeSource* source = nullptr;
  auto registry = InformerRegistry::Create(
      {{.resource = "pods"}},
      [&source](const ResourceConfig&)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto s = std::make_unique<informer::FakeSource>(100000);
        source = s.get();
        for (int i = 0; i < 50; ++i) {
          (void)s->Add(absl::StrCat("ns", i % 3), absl::StrCat("p", i),
                       {{"app", "x"}});
        }
        return s;
      });
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE((*registry)->Start().ok());
  KubeApiServer::Options options;
  options.listen = "127.0.0.1:0";
  options.registry = registry->get();
  options.resources = {PodsResource()};
  options.bookmark_interval = absl::Milliseconds(200);
  metrics::Registry metrics;
  options.metrics = &metrics;
  auto facade = KubeApiServer::Create(options);
  ASSERT_TRUE(facade.ok()) << facade.status();
  ASSERT_TRUE((*facade)->Start().ok());
  ASSERT_TRUE((*facade)->WaitForSync(absl::Seconds(30)));

  informer::client::RestConfig rest;
  rest.server = absl::StrCat("http://127.0.0.1:", (*facade)->port());
  auto client = informer::client::KubeClient::Create(rest);
  ASSERT_TRUE(client.ok()) << client.status();
  auto pods = (*client)->ForResource("po", "");  // discovery resolves "po"
  ASSERT_TRUE(pods.ok()) << pods.status();
  informer::SharedIndexInformer::Options io;
  io.name = "facade-pods";
  // Short watches: the reflector re-watches from its last resourceVersion
  // several times during the churn.
  io.reflector.min_watch_timeout = absl::Seconds(1);
  io.reflector.page_size = 7;
  informer::SharedIndexInformer downstream(pods->get(), io);
  Signal signal;
  ASSERT_TRUE(downstream.AddEventHandler(&signal).ok());
  ASSERT_TRUE(downstream.Start().ok());
  ASSERT_TRUE(downstream.WaitForSync(absl::Seconds(30)));

  std::mt19937 rng(7);
  for (int i = 0; i < 600; ++i) {
    std::string ns = absl::StrCat("ns", rng() % 3);
    std::string name = absl::StrCat("p", rng() % 80);
    switch (rng() % 3) {
      case 0:
        (void)source->Add(ns, name, {{"app", "x"}});
        break;
      case 1:
        (void)source->Modify(ns, name, {{"app", absl::StrCat(i)}});
        break;
      case 2:
        (void)source->Delete(ns, name);
        break;
    }
    // The sidecar's own upstream watch breaks now and then: its informer
    // relists and the facade turns the differences into events.
    if (i % 150 == 75) source->BreakWatches(absl::UnavailableError("cut"));
  }
  auto want = [&] {
    State s;
    for (const auto& [k, o] : source->Snapshot()) {
      s[k] = std::string(o->resource_version());
    }
    return s;
  };
  const State expected = want();
  EXPECT_TRUE(signal.WaitFor(
      [&] { return StateOf(downstream.GetIndexer().List()) == expected; },
      absl::Seconds(60)))
      << "downstream has " << downstream.GetIndexer().Size() << " objects, "
      << "upstream " << expected.size();
  // And it keeps following.
  ASSERT_TRUE(source->Add("ns9", "last").ok());
  const State final_state = want();
  EXPECT_TRUE(signal.WaitFor(
      [&] { return StateOf(downstream.GetIndexer().List()) == final_state; },
      absl::Seconds(30)));
  // The reflector re-watched (its watches last 1-2 s) from the
  // resourceVersion it had, and was served without relisting.
  auto watches = [&metrics] {
    return metrics.Render().find(
               R"(informer_sidecar_kube_api_requests_total{verb="watch",code="200",resource="pods"} 1)") ==
           std::string::npos;
  };
  EXPECT_TRUE(signal.WaitFor(watches, absl::Seconds(30))) << metrics.Render();
  EXPECT_EQ(downstream.GetReflectorCounters().relists, 0) << metrics.Render();
  downstream.Stop();
  (*facade)->Shutdown();
  (*registry)->Stop();
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

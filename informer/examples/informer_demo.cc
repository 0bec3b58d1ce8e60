// informer_demo: the informer core end to end.
//
// Against a cluster (--kubeconfig, $KUBECONFIG, in-cluster config or
// ~/.kube/config, in kubectl's order) it lists and watches --resource
// through the libcurl API client and prints every notification.
//
// With no cluster configured (or --demo), a SharedIndexInformer lists and
// watches an in-process FakeSource whose
// pods are created, relabelled, moved between nodes and deleted every
// second; once a minute the source "restarts" (compacts its history and
// breaks every watch), so the demo also shows a 410-driven relist. The
// handler prints every notification and, every few seconds, the indexed
// view by node.

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "informer/cache/event_printer.h"
#include "informer/cache/index.h"
#include "informer/cache/shared_informer.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/client/kube_client.h"
#include "informer/util/logging.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "Path to a kubeconfig file (default: $KUBECONFIG, in-cluster "
          "config, then ~/.kube/config).");
ABSL_FLAG(std::string, context, "", "The kubeconfig context to use.");
ABSL_FLAG(std::string, resource, "pods",
          "What to watch on a real cluster: pods, po, deployments.apps, "
          "apps/v1/deployments, a CRD plural or short name...");
ABSL_FLAG(std::string, namespace, "",
          "Namespace to watch on a real cluster (default: all).");
ABSL_FLAG(bool, demo, false,
          "Use the in-process demo source even when a cluster is configured.");
ABSL_FLAG(int, pods, 12, "How many pods the demo source starts with.");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Stop after this long (0 = run until SIGINT/SIGTERM).");
ABSL_FLAG(absl::Duration, tick, absl::Seconds(1),
          "How often the demo source changes something.");

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

absl::Time Deadline() {
  return absl::GetFlag(FLAGS_duration) > absl::ZeroDuration()
             ? absl::Now() + absl::GetFlag(FLAGS_duration)
             : absl::InfiniteFuture();
}

int RunAgainstCluster(const informer::client::RestConfig& config) {
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(config);
  if (!kube.ok()) {
    LOG(ERROR) << "informer_demo: " << kube.status();
    return 1;
  }
  const std::string resource = absl::GetFlag(FLAGS_resource);
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> lw =
      (*kube)->ForResource(resource, absl::GetFlag(FLAGS_namespace));
  if (!lw.ok()) {
    LOG(ERROR) << "informer_demo: " << lw.status();
    return 1;
  }
  LOG(INFO) << "informer_demo: watching " << resource << " on "
            << config.server;
  informer::SharedIndexInformer::Options opts;
  opts.name = resource;
  informer::SharedIndexInformer informer(lw->get(), opts);
  informer::EventPrinter printer(stdout);
  if (!informer.AddEventHandler(&printer).ok() || !informer.Start().ok()) {
    LOG(ERROR) << "cannot start the informer";
    return 1;
  }
  const absl::Time deadline = Deadline();
  bool reported_sync = false;
  while (!g_stop && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    if (!reported_sync && informer.HasSynced()) {
      reported_sync = true;
      std::printf("--- cache synced: %zu objects at resourceVersion %s ---\n",
                  informer.GetIndexer().Size(),
                  informer.LastSyncResourceVersion().c_str());
      std::fflush(stdout);
    }
  }
  informer.Stop();
  return 0;
}

// What the demo source's pods are spread over.
constexpr const char* kNodes[] = {"node-a", "node-b", "node-c"};
constexpr const char* kApps[] = {"web", "api", "cache"};

// Runs against the configured cluster, if any: its exit code, or nullopt
// when no cluster is configured (the demo source runs instead).
std::optional<int> MaybeRunAgainstCluster() {
  informer::client::ConnectionFlags conn;
  conn.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  conn.overrides.context = absl::GetFlag(FLAGS_context);
  absl::StatusOr<informer::client::RestConfig> config =
      informer::client::LoadRestConfig(conn);
  if (config.ok()) return RunAgainstCluster(*config);
  // A kubeconfig or context asked for by flag must load; only the
  // defaults may be missing.
  if (!conn.kubeconfig.empty() || !conn.overrides.context.empty()) {
    LOG(ERROR) << "informer_demo: " << config.status();
    return 1;
  }
  LOG(INFO) << "informer_demo: no cluster configured ("
            << config.status().message() << ")";
  return std::nullopt;
}

// One change on the demo source per tick: a delete, an add or a
// relabel/move, in turn; `next` is the next new pod's number.
void ChangeDemoSource(informer::FakeSource& source, std::mt19937& rng, int tick,
                      int& next) {
  const int victim = static_cast<int>(rng() % std::max(next, 1));
  const std::string name = absl::StrCat("pod-", victim);
  switch (tick % 4) {
    case 0:
      (void)source.Delete("demo", name);
      break;
    case 1: {
      const int id = next++;
      (void)source.Add("demo", absl::StrCat("pod-", id),
                       {{"app", kApps[id % 3]}}, kNodes[id % 3]);
      break;
    }
    default:
      (void)source.Modify("demo", name, {{"app", kApps[rng() % 3]}},
                          kNodes[rng() % 3]);
      break;
  }
}

void PrintPodsByNode(informer::SharedIndexInformer& pods) {
  for (const char* node : kNodes) {
    auto on_node = pods.GetIndexer().ByIndex(
        informer::FieldIndexName("spec.nodeName"), node);
    std::printf("--- index spec.nodeName=%s: %zu pods ---\n", node,
                on_node.ok() ? on_node->size() : 0);
  }
}

// Changes the source every --tick until --duration or a signal; once a
// minute it "restarts" (the 410-driven relist), every ten ticks the
// indexed view is printed.
void DriveDemoSource(informer::FakeSource& source,
                     informer::SharedIndexInformer& pods) {
  std::mt19937 rng(42);
  const absl::Time deadline = Deadline();
  int next = absl::GetFlag(FLAGS_pods);
  for (int tick = 1; !g_stop && absl::Now() < deadline; ++tick) {
    absl::SleepFor(absl::GetFlag(FLAGS_tick));
    ChangeDemoSource(source, rng, tick, next);
    if (tick % 60 == 0) {
      std::printf(
          "--- demo source restarts: history compacted, watches cut "
          "---\n");
      source.CompactHistory();
      source.BreakWatches(absl::UnavailableError("demo restart"));
    }
    if (tick % 10 == 0) PrintPodsByNode(pods);
  }
}

int RunDemo() {
  LOG(INFO) << "informer_demo: running against an in-process demo source "
               "(no cluster needed)";
  informer::FakeSource source(/*history_limit=*/200);
  for (int i = 0; i < absl::GetFlag(FLAGS_pods); ++i) {
    (void)source.Add("demo", absl::StrCat("pod-", i), {{"app", kApps[i % 3]}},
                     kNodes[i % 3]);
  }
  informer::SharedIndexInformer::Options opts;
  opts.name = "pods";
  opts.indexers[informer::FieldIndexName("spec.nodeName")] =
      informer::FieldIndexFunc("spec.nodeName");
  informer::SharedIndexInformer pods(&source, opts);
  informer::EventPrinter printer(stdout);
  informer::HandlerOptions handler_opts;
  handler_opts.resync_period = absl::Seconds(30);
  if (!pods.AddEventHandler(&printer, handler_opts).ok() ||
      !pods.Start().ok()) {
    LOG(ERROR) << "cannot start the informer";
    return 1;
  }
  pods.WaitForSync(absl::Seconds(10));
  std::printf("--- cache synced: %zu pods ---\n", pods.GetIndexer().Size());
  DriveDemoSource(source, pods);
  pods.Stop();
  LOG(INFO) << "informer_demo: stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  informer::InitProgram(
      argc, argv,
      "lists and watches a resource with a shared informer and prints every "
      "notification: on the cluster of --kubeconfig / $KUBECONFIG / "
      "in-cluster config / ~/.kube/config, else on an in-process demo "
      "source that changes every second.");
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  if (!absl::GetFlag(FLAGS_demo)) {
    if (std::optional<int> code = MaybeRunAgainstCluster()) return *code;
  }
  return RunDemo();
}

// informer_sidecar: serves Kubernetes informer caches over gRPC
// (informer.v1.Informer), with server reflection and grpc.health.v1.
//
// With --demo, or when no cluster is configured (no --kubeconfig, no
// $KUBECONFIG or ~/.kube/config, not in a pod), it runs the API server
// emulator in-process as a demo cluster that changes every second.

#include <glog/logging.h>
#include <pthread.h>
#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "informer/client/kube_client.h"
#include "informer/client/kubeconfig.h"
#include "informer/event_printer.h"
#include "informer/logging.h"
#include "server/emulator/emulator.h"
#include "server/informer_registry.h"
#include "server/sidecar_server.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "Path to a kubeconfig file. Default: $KUBECONFIG, then the "
          "in-cluster service account, then ~/.kube/config; with none of "
          "them the sidecar runs its demo cluster.");
ABSL_FLAG(std::string, context, "",
          "The kubeconfig context to use (default: its current-context).");
ABSL_FLAG(bool, in_cluster, false,
          "Use the pod's service account (in-cluster config) and fail if it "
          "is not available.");
ABSL_FLAG(std::string, resources, "pods,configmaps,deployments.apps",
          "Comma-separated resources to run informers for, named as kubectl "
          "does (pods, po, deployments.apps, a CRD plural...). Requests name "
          "them exactly as given here.");
ABSL_FLAG(std::string, namespace, "",
          "Namespace the informers watch (default: all namespaces).");
ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50051",
          "gRPC listen address: host:port, or unix:/path/to/socket.");
ABSL_FLAG(std::string, print_events, "auto",
          "Print one line per informer notification to stdout (type, "
          "resource, namespace/name, resourceVersion; never object "
          "contents): \"true\", \"false\", or \"auto\" = only in demo "
          "mode, so a newcomer sees events stream.");
ABSL_FLAG(bool, demo, false,
          "Run the in-process demo cluster (the API server emulator seeded "
          "with namespaces, pods, deployments and configmaps that change "
          "every second) even when a cluster is configured.");

namespace {

constexpr char kUsage[] =
    "informer_sidecar: Kubernetes informer caches over gRPC "
    "(informer.v1.Informer: List, Get, ByIndex, ListIndexValues, "
    "ListResources; Watch is not yet available).\n"
    "Health (grpc.health.v1): the overall status \"\" and each resource "
    "name are NOT_SERVING until the informers synced.\n"
    "Usage: informer_sidecar [--demo] [--kubeconfig=FILE] "
    "[--resources=pods,...] [--grpc_listen=ADDR]";

std::vector<std::string> ResourceList() {
  std::vector<std::string> out;
  for (absl::string_view r :
       absl::StrSplit(absl::GetFlag(FLAGS_resources), ',')) {
    r = absl::StripAsciiWhitespace(r);
    if (!r.empty()) out.emplace_back(r);
  }
  return out;
}

// The cluster to talk to, or nullopt for the demo cluster (with the reason).
absl::StatusOr<absl::optional<informer::client::RestConfig>> ChooseCluster(
    std::string* demo_reason) {
  if (absl::GetFlag(FLAGS_demo)) {
    *demo_reason = "--demo";
    return absl::nullopt;
  }
  if (absl::GetFlag(FLAGS_in_cluster)) {
    informer::client::InClusterOptions options;
    absl::StatusOr<informer::client::RestConfig> config =
        informer::client::InClusterConfig(options);
    if (!config.ok()) return config.status();
    return absl::optional<informer::client::RestConfig>(*std::move(config));
  }
  informer::client::ConnectionFlags flags;
  flags.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  flags.overrides.context = absl::GetFlag(FLAGS_context);
  absl::StatusOr<informer::client::RestConfig> config =
      informer::client::LoadRestConfig(flags);
  if (config.ok()) {
    return absl::optional<informer::client::RestConfig>(*std::move(config));
  }
  // An explicit choice that fails is an error, not a reason for the demo.
  if (!flags.kubeconfig.empty() || !flags.overrides.context.empty()) {
    return config.status();
  }
  *demo_reason = std::string("no cluster configured (") +
                 std::string(config.status().message()) + ")";
  return absl::nullopt;
}

// Blocks SIGINT/SIGTERM in every thread (call before starting any) so that
// only the waiter thread receives them.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Run() {
  const sigset_t signals = BlockShutdownSignals();
  std::string demo_reason;
  absl::StatusOr<absl::optional<informer::client::RestConfig>> cluster =
      ChooseCluster(&demo_reason);
  if (!cluster.ok()) {
    LOG(ERROR) << "informer_sidecar: cannot load the cluster configuration: "
               << cluster.status();
    return 1;
  }

  std::unique_ptr<emulator::Emulator> demo;
  informer::client::RestConfig rest_config;
  if (!cluster->has_value()) {
    LOG(INFO) << "informer_sidecar: DEMO MODE (" << demo_reason
              << "): serving an in-process demo cluster whose objects change "
                 "every second";
    emulator::EmulatorOptions options;
    options.demo = true;
    options.churn_interval = absl::Seconds(1);
    demo = std::make_unique<emulator::Emulator>(options);
    if (absl::Status st = demo->Start(); !st.ok()) {
      LOG(ERROR) << "informer_sidecar: cannot start the demo cluster: " << st;
      return 1;
    }
    rest_config.server = demo->url();
    LOG(INFO) << "demo cluster API server at " << rest_config.server;
  } else {
    rest_config = **std::move(cluster);
    LOG(INFO) << "informer_sidecar: using the cluster at "
              << rest_config.server;
  }

  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(rest_config);
  if (!kube.ok()) {
    LOG(ERROR) << "informer_sidecar: " << kube.status();
    return 1;
  }
  std::vector<server::ResourceConfig> configs;
  for (std::string& resource : ResourceList()) {
    server::ResourceConfig config;
    config.resource = std::move(resource);
    config.namespace_ = absl::GetFlag(FLAGS_namespace);
    configs.push_back(std::move(config));
  }
  if (configs.empty()) {
    LOG(ERROR) << "informer_sidecar: --resources names no resource";
    return 1;
  }
  informer::client::KubeClient* client = kube->get();
  absl::StatusOr<std::unique_ptr<server::InformerRegistry>> registry =
      server::InformerRegistry::Create(
          std::move(configs),
          [client](const server::ResourceConfig& config)
              -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
            absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>>
                rc = client->ForResource(config.resource, config.namespace_);
            if (!rc.ok()) return rc.status();
            return std::unique_ptr<informer::ListerWatcher>(*std::move(rc));
          });
  if (!registry.ok()) {
    LOG(ERROR) << "informer_sidecar: " << registry.status();
    return 1;
  }

  const std::string listen = absl::GetFlag(FLAGS_grpc_listen);
  absl::StatusOr<std::unique_ptr<server::SidecarServer>> sidecar =
      server::SidecarServer::Start(registry->get(), listen);
  if (!sidecar.ok()) {
    LOG(ERROR) << "informer_sidecar: " << sidecar.status();
    return 1;
  }
  LOG(INFO) << "informer_sidecar: gRPC listening on " << listen
            << ((*sidecar)->port() > 0
                    ? " (port " + std::to_string((*sidecar)->port()) + ")"
                    : "");
  // Demo mode prints the notifications so the run command shows events.
  const std::string print_events = absl::GetFlag(FLAGS_print_events);
  std::vector<std::unique_ptr<informer::EventPrinter>> printers;
  if (print_events == "true" || (print_events == "auto" && demo != nullptr)) {
    for (const auto& entry : (*registry)->entries()) {
      printers.push_back(std::make_unique<informer::EventPrinter>(
          stdout, entry->config.resource));
      if (absl::Status st =
              entry->informer->AddEventHandler(printers.back().get()).status();
          !st.ok()) {
        LOG(ERROR) << "informer_sidecar: " << st;
        return 1;
      }
    }
  } else if (print_events != "false" && print_events != "auto") {
    LOG(ERROR) << "informer_sidecar: --print_events must be true, false or "
                  "auto, not \"" << print_events << "\"";
    return 1;
  }
  if (absl::Status st = (*registry)->Start(); !st.ok()) {
    LOG(ERROR) << "informer_sidecar: " << st;
    return 1;
  }

  // SIGINT/SIGTERM: shut the server down, which returns Wait() below.
  std::thread signal_thread([&signals, s = sidecar->get()] {
    int sig = 0;
    sigwait(&signals, &sig);
    LOG(INFO) << "informer_sidecar: signal " << sig << ", shutting down";
    s->Shutdown(absl::Seconds(5));
  });
  (*sidecar)->Wait();
  signal_thread.join();
  sidecar->reset();
  LOG(INFO) << "informer_sidecar: gRPC server stopped";
  (*registry)->Stop();
  registry->reset();
  LOG(INFO) << "informer_sidecar: informers stopped";
  if (demo != nullptr) demo->Stop();
  LOG(INFO) << "informer_sidecar: stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  informer::InitProgram(argc, argv, kUsage);
  return Run();
}

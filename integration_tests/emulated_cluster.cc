#include "integration_tests/emulated_cluster.h"

#include <httplib.h>

#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

absl::Status CreateKubeSystem(int port) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  httplib::Result r = cli.Post("/api/v1/namespaces",
                               R"({"apiVersion":"v1","kind":"Namespace",)"
                               R"("metadata":{"name":"kube-system"}})",
                               "application/json");
  if (!r) return absl::UnavailableError("POST kube-system: no answer");
  if (r->status != 201 && r->status != 409) {
    return absl::InternalError(
        absl::StrCat("POST kube-system: ", r->status, " ", r->body));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EmulatedCluster> StartEmulatedCluster(
    const EmulatedClusterOptions& options) {
  EmulatedCluster c;
  absl::StatusOr<std::string> sidecar = FindRunfile("server/informer_sidecar");
  if (!sidecar.ok()) return sidecar.status();
  c.sidecar_bin = *sidecar;
  absl::StatusOr<std::string> emulator = FindRunfile("emulator/kube_emulator");
  if (!emulator.ok()) return emulator.status();
  absl::StatusOr<std::unique_ptr<EmulatorProcess>> started =
      EmulatorProcess::Start(*emulator, options.emulator_flags,
                             /*quiet=*/true);
  if (!started.ok()) return started.status();
  c.emulator = *std::move(started);
  std::error_code ignored;
  std::filesystem::create_directories(options.dir, ignored);
  absl::StatusOr<std::string> kubeconfig =
      WriteKubeconfig(options.dir, c.emulator->url());
  if (!kubeconfig.ok()) return kubeconfig.status();
  c.kubeconfig = *kubeconfig;
  if (options.kube_system) {
    if (absl::Status st = CreateKubeSystem(c.emulator->port()); !st.ok()) {
      return st;
    }
  }
  return c;
}

}  // namespace integration

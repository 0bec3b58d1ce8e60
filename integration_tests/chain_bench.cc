// Chained sidecars benchmark: what each added pod sidecar costs the API
// server when it reads through a node sidecar's Kubernetes API facade.
//
//   bazel run -c opt //integration_tests:chain_bench -- --pods=5
//
// Processes: the API server emulator (seeded with --seed_pods Pods and
// --configmaps ConfigMaps), one node sidecar (informers for configmaps and
// pods on the emulator, --kube_api_listen), then pod sidecars added one at
// a time, each with --cache_upstream=<the node's facade> and --kubeconfig=
// <the emulator> (discovery and Event writes go there, as in a cluster).
// After each start the benchmark waits until the new sidecar's caches
// equal the emulator's state (Watch, then List, over gRPC), then reads:
//   - the emulator's API requests (GET /_emulator/requests: list, watch,
//     other = discovery, gets, writes);
//   - the bytes the node sidecar received from the emulator (its
//     informer_sidecar_informer_bytes_received_total) and the bytes its
//     facade served
//     (informer_sidecar_kube_api_response_bytes_total).
// Each row is the difference to the previous one. The goal: 0 API server
// lists, watches and bytes for every pod sidecar (the node's are its own).
// A last row starts one sidecar straight on the emulator, for comparison.

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"

ABSL_FLAG(int, pods, 5, "Pod sidecars to add behind the node sidecar.");
ABSL_FLAG(int, seed_pods, 1000, "Pods (~6 KiB each) the emulator holds.");
ABSL_FLAG(int, configmaps, 1000, "ConfigMaps the emulator holds.");
ABSL_FLAG(int, configmap_bytes, 1024, "Approximate JSON size of each.");
ABSL_FLAG(bool, direct, true,
          "Also start one sidecar straight on the emulator, for comparison.");

namespace integration {
namespace {

constexpr absl::Duration kSync = absl::Seconds(300);
const char* const kResources[] = {"configmaps", "pods"};

struct Sample {
  EmulatorRequests api;
  double upstream_bytes = 0;  // the node sidecar's, from the emulator
  double facade_bytes = 0;    // the node's facade served
};

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "chain_bench: %s\n", std::string(st.message()).c_str());
  return 1;
}

absl::StatusOr<Sample> Take(int emulator_port, int node_http_port) {
  Sample s;
  absl::StatusOr<EmulatorRequests> api = GetEmulatorRequests(emulator_port);
  if (!api.ok()) return api.status();
  s.api = *api;
  if (node_http_port > 0) {
    absl::StatusOr<double> up = GetMetricSum(
        node_http_port, "informer_sidecar_informer_bytes_received_total");
    if (!up.ok()) return up.status();
    absl::StatusOr<double> served = GetMetricSum(
        node_http_port, "informer_sidecar_kube_api_response_bytes_total");
    if (!served.ok()) return served.status();
    s.upstream_bytes = *up;
    s.facade_bytes = *served;
  }
  return s;
}

// Waits until the sidecar's caches equal the emulator's state.
absl::Status AwaitSynced(const PortedSidecar& sidecar, int emulator_port) {
  for (const char* resource : kResources) {
    absl::StatusOr<ObjectVersions> want =
        GetEmulatorState(emulator_port, resource);
    if (!want.ok()) return want.status();
    absl::Status st = WaitForConvergence(sidecar.process->NewChannel(),
                                         resource, *want, kSync);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// A started sidecar whose caches equal the emulator's, and how long that
// took from the start.
struct Synced {
  PortedSidecar sidecar;
  absl::Duration sync;
  double own_bytes = 0;  // what it received (lists and watches)
};

absl::StatusOr<Synced> StartSynced(const std::string& binary,
                                   std::vector<std::string> flags,
                                   int emulator_port) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PortedSidecar> sidecar =
      StartPortedSidecar(binary, std::move(flags));
  if (!sidecar.ok()) return sidecar.status();
  if (absl::Status st = AwaitSynced(*sidecar, emulator_port); !st.ok()) {
    return st;
  }
  Synced out;
  out.sync = absl::Now() - start;
  absl::StatusOr<double> own =
      GetMetricSum(static_cast<int>(sidecar->ports.at("http")),
                   "informer_sidecar_informer_bytes_received_total");
  if (!own.ok()) return own.status();
  out.own_bytes = *own;
  out.sidecar = *std::move(sidecar);
  return out;
}

// `api_bytes`: what the API server sent for this row (for chained rows,
// what the node sidecar received meanwhile).
void Row(const std::string& what, const Sample& before, const Sample& after,
         double api_bytes, double own_bytes, absl::Duration sync) {
  std::printf("| %s | %lld | %lld | %lld | %.0f | %.0f | %.0f | %.2f |\n",
              what.c_str(),
              static_cast<long long>(after.api.list - before.api.list),
              static_cast<long long>(after.api.watch - before.api.watch),
              static_cast<long long>(after.api.other - before.api.other),
              api_bytes, after.facade_bytes - before.facade_bytes, own_bytes,
              absl::ToDoubleSeconds(sync));
  std::fflush(stdout);
}

// Creates the emulator's ConfigMaps (the load generator, no updates).
absl::Status CreateConfigMaps(int emulator_port) {
  httplib::Client cli("127.0.0.1", emulator_port);
  cli.set_read_timeout(300, 0);
  httplib::Result r = cli.Post(
      absl::StrCat("/_emulator/load?namespace=bench&objects=",
                   absl::GetFlag(FLAGS_configmaps),
                   "&bytes=", absl::GetFlag(FLAGS_configmap_bytes), "&millis=0")
          .c_str());
  if (!r || r->status != 200) {
    return absl::UnavailableError("cannot create the ConfigMaps");
  }
  return absl::OkStatus();
}

int Run(const char* argv0) {
  absl::StatusOr<std::string> bin =
      FindRunfile("server/informer_sidecar", argv0);
  if (!bin.ok()) return Fail(bin.status());
  absl::StatusOr<std::string> emulator_bin =
      FindRunfile("emulator/kube_emulator", argv0);
  if (!emulator_bin.ok()) return Fail(emulator_bin.status());
  absl::StatusOr<std::unique_ptr<EmulatorProcess>> emulator =
      EmulatorProcess::Start(
          *emulator_bin,
          {absl::StrCat("--seed_pods=", absl::GetFlag(FLAGS_seed_pods))},
          /*quiet=*/true);
  if (!emulator.ok()) return Fail(emulator.status());
  const int emu = (*emulator)->port();
  if (absl::Status st = CreateConfigMaps(emu); !st.ok()) return Fail(st);
  char dir[] = "/tmp/chain_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return Fail(absl::InternalError("mkdtemp"));
  absl::StatusOr<std::string> kubeconfig =
      WriteKubeconfig(dir, (*emulator)->url());
  if (!kubeconfig.ok()) return Fail(kubeconfig.status());
  const std::string cluster = "--kubeconfig=" + *kubeconfig;
  const std::string resources = "--resources=configmaps,pods";

  std::printf(
      "| sidecar | API server lists | watches | other requests | "
      "API server bytes | facade bytes served | bytes it received | "
      "sync s |\n|---|---|---|---|---|---|---|---|\n");
  absl::StatusOr<Sample> before = Take(emu, 0);
  if (!before.ok()) return Fail(before.status());
  absl::StatusOr<Synced> node = StartSynced(
      *bin, {cluster, resources, "--kube_api_listen=127.0.0.1:0"}, emu);
  if (!node.ok()) return Fail(node.status());
  const int node_http = static_cast<int>(node->sidecar.ports.at("http"));
  absl::StatusOr<Sample> after = Take(emu, node_http);
  if (!after.ok()) return Fail(after.status());
  Row("node (on the API server)", *before, *after, after->upstream_bytes,
      node->own_bytes, node->sync);
  const std::string upstream = absl::StrCat(
      "--cache_upstream=http://127.0.0.1:", node->sidecar.ports.at("kube_api"));

  std::vector<Synced> pods;
  for (int i = 1; i <= absl::GetFlag(FLAGS_pods); ++i) {
    before = after;
    absl::StatusOr<Synced> pod =
        StartSynced(*bin, {cluster, upstream, resources}, emu);
    if (!pod.ok()) return Fail(pod.status());
    after = Take(emu, node_http);
    if (!after.ok()) return Fail(after.status());
    Row(absl::StrCat("pod ", i, " (--cache_upstream)"), *before, *after,
        after->upstream_bytes - before->upstream_bytes, pod->own_bytes,
        pod->sync);
    pods.push_back(*std::move(pod));
  }
  if (!absl::GetFlag(FLAGS_direct)) return 0;
  before = after;
  absl::StatusOr<Synced> direct = StartSynced(*bin, {cluster, resources}, emu);
  if (!direct.ok()) return Fail(direct.status());
  after = Take(emu, node_http);
  if (!after.ok()) return Fail(after.status());
  Row("direct (no chaining), for comparison", *before, *after,
      direct->own_bytes, direct->own_bytes, direct->sync);
  return 0;
}

}  // namespace
}  // namespace integration

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return integration::Run(argv[0]);
}

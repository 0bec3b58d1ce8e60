// gRPC Get and List latency of the real sidecar on a large Pod cache, over
// TCP on loopback, alternating sidecar builds in one run:
//
//   bazel build -c opt //integration_tests:grpc_query_bench
//   bazel-bin/integration_tests/grpc_query_bench --pods=15000 \
//       --namespaces=10 --sidecars=/tmp/bench_base/informer_sidecar,\
//   bazel-bin/server/informer_sidecar
//
// The emulator (its own process) is seeded with --pods realistic Pods
// spread over --namespaces namespaces (--seed_pod_namespaces; 1,500 each by
// default) and 5,000 node names. Each round starts every sidecar in turn
// (--resources=pods, all namespaces), waits for SERVING, and measures, one
// client thread, for --duration each:
//   Get             one random Pod by namespace and name
//   List namespace  every Pod of one random namespace, following the pages
//                   as a client with the defaults does (500 objects or 4 MiB
//                   a page); the latency is the whole namespace's
// Per sidecar, the medians over the rounds of each round's p50 and p99, and
// the ratio to the first sidecar (the baseline). A plain binary.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/informer.grpc.pb.h"

ABSL_FLAG(int, pods, 15000, "Pods seeded in the emulator.");
ABSL_FLAG(int, namespaces, 10, "Namespaces the Pods spread over.");
ABSL_FLAG(std::vector<std::string>, sidecars, {},
          "Sidecar binaries to alternate, the baseline first; default: the "
          "//server:informer_sidecar in the runfiles.");
ABSL_FLAG(int, rounds, 3, "Rounds (a fresh sidecar each); medians reported.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5),
          "How long each measurement runs.");
ABSL_FLAG(bool, quiet, true, "Hide the sidecar's and emulator's logs.");

namespace {

namespace v1 = informer::v1;

// A loopback TCP port free now (the sidecar binds it right after).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("bind");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

struct Key {
  std::string ns, name;
};

// The first "key":"value" string of `json` (metadata's name and namespace
// come before any other of that key in a Pod).
std::string FirstString(const std::string& json, const std::string& key) {
  const std::string k = absl::StrCat("\"", key, "\":\"");
  const size_t at = json.find(k);
  if (at == std::string::npos) return "";
  const size_t from = at + k.size();
  return json.substr(from, json.find('"', from) - from);
}

// Every cached Pod's namespace and name, by paging List.
absl::StatusOr<std::vector<Key>> AllKeys(v1::Informer::Stub& stub) {
  std::vector<Key> keys;
  std::string token;
  do {
    grpc::ClientContext ctx;
    v1::ListRequest req;
    req.set_resource("pods");
    req.set_limit(10000);
    req.set_max_page_bytes(256 << 20);
    req.set_continue_token(token);
    v1::ListResponse resp;
    grpc::Status st = stub.List(&ctx, req, &resp);
    if (!st.ok()) return absl::InternalError(st.error_message());
    for (const v1::Object& o : resp.objects()) {
      keys.push_back(
          {FirstString(o.json(), "namespace"), FirstString(o.json(), "name")});
    }
    token = resp.continue_token();
  } while (!token.empty());
  return keys;
}

// Calls `op` (which returns the objects it got, or -1 on error) back to
// back for --duration; latencies in microseconds.
template <typename Op>
absl::StatusOr<std::vector<int32_t>> Measure(Op op, int want) {
  std::vector<int32_t> lat;
  const absl::Time end = absl::Now() + absl::GetFlag(FLAGS_duration);
  while (absl::Now() < end) {
    const absl::Time t0 = absl::Now();
    const int got = op();
    lat.push_back(
        static_cast<int32_t>(absl::ToInt64Microseconds(absl::Now() - t0)));
    if (got != want) {
      return absl::InternalError(absl::StrCat("got ", got, " want ", want));
    }
  }
  return lat;
}

struct RoundResult {
  double get_p50 = 0, get_p99 = 0, list_p50 = 0, list_p99 = 0;
  double gets = 0, lists = 0;
};

// One fresh sidecar, measured.
absl::StatusOr<RoundResult> RunRound(const std::string& binary,
                                     const std::string& kubeconfig,
                                     std::mt19937& rng) {
  absl::StatusOr<int> port = FreePort();
  if (!port.ok()) return port.status();
  integration::SidecarProcess::Options options;
  options.flags = {"--kubeconfig=" + kubeconfig, "--resources=pods",
                   absl::StrCat("--grpc_listen=127.0.0.1:", *port),
                   "--http_listen=127.0.0.1:0", "--print_events=false"};
  options.quiet = absl::GetFlag(FLAGS_quiet);
  options.start_timeout = absl::Minutes(10);
  auto sidecar = integration::SidecarProcess::Start(binary, options);
  if (!sidecar.ok()) return sidecar.status();
  auto stub = v1::Informer::NewStub((*sidecar)->NewChannel());
  absl::StatusOr<std::vector<Key>> keys = AllKeys(*stub);
  if (!keys.ok()) return keys.status();
  if (static_cast<int>(keys->size()) != absl::GetFlag(FLAGS_pods)) {
    return absl::InternalError(absl::StrCat("cached ", keys->size()));
  }
  std::vector<std::string> nss;
  for (const Key& k : *keys) {
    if (nss.empty() || nss.back() != k.ns) nss.push_back(k.ns);
  }
  std::sort(nss.begin(), nss.end());
  nss.erase(std::unique(nss.begin(), nss.end()), nss.end());
  auto get = [&]() {
    const Key& k = (*keys)[std::uniform_int_distribution<size_t>(
        0, keys->size() - 1)(rng)];
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_resource("pods");
    req.set_namespace_(k.ns);
    req.set_name(k.name);
    v1::GetResponse resp;
    return stub->Get(&ctx, req, &resp).ok() ? 1 : -1;
  };
  auto list = [&]() {
    const std::string& ns =
        nss[std::uniform_int_distribution<size_t>(0, nss.size() - 1)(rng)];
    int got = 0;
    std::string token;
    do {
      grpc::ClientContext ctx;
      v1::ListRequest req;
      req.set_resource("pods");
      req.set_namespace_(ns);
      req.set_continue_token(token);
      v1::ListResponse resp;
      if (!stub->List(&ctx, req, &resp).ok()) return -1;
      got += resp.objects_size();
      token = resp.continue_token();
    } while (!token.empty());
    return got;
  };
  const int per_ns =
      absl::GetFlag(FLAGS_pods) / absl::GetFlag(FLAGS_namespaces);
  auto g = Measure(get, 1);
  if (!g.ok()) return g.status();
  auto l = Measure(list, per_ns);
  if (!l.ok()) return l.status();
  RoundResult r;
  r.gets = static_cast<double>(g->size());
  r.lists = static_cast<double>(l->size());
  r.get_p50 = integration::PercentileMs(*g, 0.5);
  r.get_p99 = integration::PercentileMs(*g, 0.99);
  r.list_p50 = integration::PercentileMs(*l, 0.5);
  r.list_p99 = integration::PercentileMs(*l, 0.99);
  (*sidecar)->Terminate();
  return r;
}

void PrintResults(const std::vector<std::string>& sidecars,
                  const std::vector<std::vector<RoundResult>>& results) {
  auto med = [](const std::vector<RoundResult>& rs, double RoundResult::*f) {
    std::vector<double> v;
    for (const RoundResult& r : rs) v.push_back(r.*f);
    return integration::Median(v);
  };
  const std::vector<RoundResult>& base = results[0];
  std::printf(
      "| sidecar | Get p50 | Get p99 | / base | List ns p50 | List ns p99 | "
      "/ base | calls per round (Get, List) |\n| --- | --- | --- | --- | --- "
      "| --- | --- | --- |\n");
  for (size_t b = 0; b < sidecars.size(); ++b) {
    const std::vector<RoundResult>& rs = results[b];
    std::printf(
        "| %zu %s | %.3f ms | %.3f ms | %.2fx | %.2f ms | %.2f ms | %.2fx | "
        "%.0f, %.0f |\n",
        b, sidecars[b].c_str(), med(rs, &RoundResult::get_p50),
        med(rs, &RoundResult::get_p99),
        med(rs, &RoundResult::get_p99) / med(base, &RoundResult::get_p99),
        med(rs, &RoundResult::list_p50), med(rs, &RoundResult::list_p99),
        med(rs, &RoundResult::list_p99) / med(base, &RoundResult::list_p99),
        med(rs, &RoundResult::gets), med(rs, &RoundResult::lists));
  }
}

int Main(const char* argv0) {
  absl::StatusOr<std::string> emu_bin = integration::FindEmulatorBinary(argv0);
  std::vector<std::string> sidecars = absl::GetFlag(FLAGS_sidecars);
  if (sidecars.empty()) {
    absl::StatusOr<std::string> s =
        integration::FindRunfile("server/informer_sidecar", argv0);
    if (!s.ok()) return 1;
    sidecars.push_back(*s);
  }
  if (!emu_bin.ok()) return 1;
  auto emu = integration::EmulatorProcess::Start(
      *emu_bin,
      {absl::StrCat("--seed_pods=", absl::GetFlag(FLAGS_pods)),
       absl::StrCat("--seed_pod_namespaces=", absl::GetFlag(FLAGS_namespaces))},
      absl::GetFlag(FLAGS_quiet));
  if (!emu.ok()) return 1;
  char dir[] = "/tmp/grpc_query_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  auto kubeconfig = integration::WriteKubeconfig(dir, (*emu)->url());
  if (!kubeconfig.ok()) return 1;
  std::printf("%d Pods in %d namespaces; %d rounds of %s per call\n",
              absl::GetFlag(FLAGS_pods), absl::GetFlag(FLAGS_namespaces),
              absl::GetFlag(FLAGS_rounds),
              absl::FormatDuration(absl::GetFlag(FLAGS_duration)).c_str());
  std::mt19937 rng(42);
  std::vector<std::vector<RoundResult>> results(sidecars.size());
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (size_t b = 0; b < sidecars.size(); ++b) {
      absl::StatusOr<RoundResult> r = RunRound(sidecars[b], *kubeconfig, rng);
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", sidecars[b].c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      results[b].push_back(*r);
    }
  }
  PrintResults(sidecars, results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Main(argv[0]);
}

// kube_emulator: the Kubernetes API server emulator as a process, for
// integration tests and demos.
//
//   kube_emulator --port=0 --print_port_file=/tmp/port --tls
//   --token=admin-token --token=nobody-token:nobody:deny --seed_pods=1000
//   kube_emulator --seed_configmaps=50000 --serve_bytes_per_sec=1.55e8
//   kube_emulator --seed_pods=150000 --seed_pod_namespaces=100
//   --seed_pod_nodes=5000 --serve_bytes_per_sec=7.5e7
//   kube_emulator --seed_configmaps=50000 --serve_bytes_per_sec=1.55e8
//   --serve_watch_list_bytes_per_sec=7.75e7   (WatchList at half the LIST
//   rate, as kube-apiserver v1.37.2 streams JSON)
//
// With --tls the generated CA is written to --ca_file (and served at
// GET /_emulator/ca.crt). Faults are armed over HTTP (no authentication;
// GET works too, and a POST must carry a Content-Length, e.g. curl -d ''):
//   POST /_emulator/throttle?count=N&retry_after=S    429 on the next N
//   requests POST /_emulator/fail?verb=list&resource=pods&code=500&count=N
//   (&retry_after=S adds Retry-After) POST
//   /_emulator/expire_watch?resource=pods         next watch: ERROR 410 POST
//   /_emulator/expire_continue                    next continue: 410 POST
//   /_emulator/cut_watches?resource=pods          half an event, then drop POST
//   /_emulator/stall_watches?resource=pods        stop sending, keep open POST
//   /_emulator/resume_watches?resource=pods POST
//   /_emulator/stall_lists?resource=pods          half a list, then silent POST
//   /_emulator/resume_lists                       end list stalls POST
//   /_emulator/malformed_event?resource=pods      one invalid JSON line POST
//   /_emulator/large_object?namespace=ns&name=n&bytes=B  a >1 MiB object POST
//   /_emulator/restart                            new watch window + drop
//   watches POST
//   /_emulator/compact                            etcd compaction: old
//   RVs/tokens 410 POST
//   /_emulator/load?namespace=bench&objects=100&bytes=1024&rate=1000&millis=10000
//       paced ConfigMap updates stamped with data.sent (monotonic ns); blocks
//       until done and answers {"updates":N,"seconds":S}
//   /_emulator/clear_faults GET
//   /_emulator/watchers?resource=pods&min=N&timeout_ms=T  wait for watches GET
//   /_emulator/state?resource=pods                keys and RVs GET
//   /_emulator/requests                           API requests: list, watch,
//                                                 other
// Objects are created/changed/deleted through the normal API.

#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to bind.");
ABSL_FLAG(int, port, 0, "Port to bind; 0 picks a free one.");
ABSL_FLAG(bool, tls, false, "Serve HTTPS with a generated CA.");
ABSL_FLAG(std::string, ca_file, "", "With --tls: write the CA PEM here.");
ABSL_FLAG(std::string, print_port_file, "",
          "Write the bound port here once serving (atomically, via rename).");
ABSL_FLAG(int, seed_pods, 0, "Seed this many ~6 KiB Pods in 'benchpods'.");
ABSL_FLAG(int, seed_pod_namespaces, 0,
          "With --seed_pods: spread the Pods over this many namespaces "
          "(tenant-000, ...), owned by ReplicaSets, instead of 'benchpods'.");
ABSL_FLAG(int, seed_pod_nodes, 5000,
          "With --seed_pod_namespaces: node names the Pods are spread over.");
ABSL_FLAG(int, seed_configmaps, 0,
          "Seed this many ConfigMaps with 1 KiB of data (~1.5 KB of JSON) "
          "in 'benchcms'.");
ABSL_FLAG(double, serve_bytes_per_sec, 0,
          "Pace each list response's JSON body to this many bytes per second "
          "(0: unpaced). A real kube-apiserver serves a large list at about "
          "75-155 MB/s (7.5e7-1.55e8); unpaced, the emulator serves ~2 GB/s.");
ABSL_FLAG(std::optional<double>, serve_watch_list_bytes_per_sec, std::nullopt,
          "Pace each WatchList's initial events (a watch with "
          "sendInitialEvents=true, up to and including its "
          "initial-events-end bookmark; not the live events after it) to "
          "this many bytes per second (0: unpaced). Default: "
          "--serve_bytes_per_sec. kube-apiserver v1.37.2 streams a JSON "
          "WatchList at about half its JSON LIST rate (50k ConfigMaps, "
          "73 MB: 1.26 s to the end bookmark vs 0.61 s for the LIST), so "
          "half of --serve_bytes_per_sec gives the real server's relation.");
ABSL_FLAG(bool, watch_cache, true,
          "Like kube-apiserver's --watch-cache: serve resourceVersion=0 "
          "lists whole from memory, ignoring limit. false: every list "
          "honours limit.");
ABSL_FLAG(absl::Duration, progress_notify_interval, absl::Minutes(10),
          "Like etcd's --watch-progress-notify-interval (10m by default; "
          "kubeadm sets 5s): how often each resource's watch cache, whose "
          "resourceVersion otherwise moves only with its own events and "
          "consistent reads, hears the store's current one.");
ABSL_FLAG(bool, demo, false,
          "Seed a demo cluster and change it every --churn_interval.");
ABSL_FLAG(absl::Duration, churn_interval, absl::Seconds(1),
          "With --demo: how often objects change (0 disables churn).");
ABSL_FLAG(absl::Duration, bookmark_interval, absl::Seconds(60),
          "Interval of BOOKMARK events on watches that allow them.");
ABSL_FLAG(int, history, 1000, "Watch events kept per resource.");
ABSL_FLAG(absl::Duration, compaction_interval, absl::Minutes(5),
          "How often old versions and continue tokens expire.");
ABSL_FLAG(std::vector<std::string>, token, {},
          "Bearer tokens, comma separated (one flag), each "
          "TOKEN[:USER[:deny]]. None: "
          "authentication off. 'deny' tokens authenticate but get 403.");
ABSL_FLAG(std::string, server_version, "1.37",
          "The kube-apiserver emulated: 1.37, or 1.24 (no WatchList: 422 on "
          "resourceVersionMatch; v1.24's tokens, bookmarks and /version).");

namespace {

int g_signal_pipe[2] = {-1, -1};

// Async-signal-safe: wakes main through the pipe.
void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
}

bool WriteFileAtomically(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << data;
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// With --seed_pod_namespaces: --seed_pods Pods spread over namespaces and
// --seed_pod_nodes nodes (before serving, like Start()'s own seeding).
absl::Status SeedPodsSpreadOut(emulator::EmulatorWithFaults& emu) {
  emulator::PodSpread spread;
  spread.namespaces = absl::GetFlag(FLAGS_seed_pod_namespaces);
  if (spread.namespaces <= 0) return absl::OkStatus();
  spread.nodes = absl::GetFlag(FLAGS_seed_pod_nodes);
  return emulator::SeedSpreadPods(emu.store(), emu.registry(),
                                  absl::GetFlag(FLAGS_seed_pods), spread);
}

// The emulator shares the machine with the sidecar it feeds in the
// benchmarks, where a real API server would run elsewhere; it should cost
// that machine as little as it can. Debian's Abseil records every lock
// acquisition for deadlock detection (the emulator's unit tests keep it),
// and glibc grows a thread's heap a page run at a time and gives it back
// as soon as it can: a paced write load paid an mprotect for most writes.
void TuneForASharedMachine() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

// SIGINT/SIGTERM wake main through a self-pipe, then it stops cleanly.
absl::Status InstallSignalPipe() {
  if (pipe(g_signal_pipe) != 0) return absl::InternalError("pipe failed");
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return absl::OkStatus();
}

// Blocks until SIGINT or SIGTERM; returns the signal.
int WaitForSignal() {
  unsigned char sig = 0;
  while (read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  return sig;
}

// --token: each TOKEN[:USER[:deny]].
std::vector<emulator::EmulatorOptions::Token> TokensFromFlags() {
  std::vector<emulator::EmulatorOptions::Token> tokens;
  for (const std::string& spec : absl::GetFlag(FLAGS_token)) {
    std::vector<std::string> parts = absl::StrSplit(spec, ':');
    emulator::EmulatorOptions::Token t;
    t.token = parts[0];
    t.user = parts.size() > 1 ? parts[1] : "admin";
    t.allowed = !(parts.size() > 2 && parts[2] == "deny");
    tokens.push_back(t);
  }
  return tokens;
}

// The emulator's options from the flags; InvalidArgument for a value out
// of range.
absl::StatusOr<emulator::EmulatorOptions> OptionsFromFlags() {
  emulator::EmulatorOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.tls = absl::GetFlag(FLAGS_tls);
  options.seed_pods = absl::GetFlag(FLAGS_seed_pods);
  // --seed_pod_namespaces: the Pods are seeded spread out, not by Start().
  if (absl::GetFlag(FLAGS_seed_pod_namespaces) > 0) options.seed_pods = 0;
  options.seed_configmaps = absl::GetFlag(FLAGS_seed_configmaps);
  options.serve_bytes_per_sec = absl::GetFlag(FLAGS_serve_bytes_per_sec);
  if (options.serve_bytes_per_sec < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--serve_bytes_per_sec must be >= 0, got ",
                     options.serve_bytes_per_sec));
  }
  const std::optional<double> watch_list_rate =
      absl::GetFlag(FLAGS_serve_watch_list_bytes_per_sec);
  if (watch_list_rate.has_value() && *watch_list_rate < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--serve_watch_list_bytes_per_sec must be >= 0, got ",
                     *watch_list_rate));
  }
  if (watch_list_rate.has_value()) {
    options.serve_watch_list_bytes_per_sec = *watch_list_rate;
  }
  options.watch_cache = absl::GetFlag(FLAGS_watch_cache);
  options.progress_notify_interval =
      absl::GetFlag(FLAGS_progress_notify_interval);
  options.demo = absl::GetFlag(FLAGS_demo);
  options.churn_interval = absl::GetFlag(FLAGS_churn_interval);
  options.bookmark_interval = absl::GetFlag(FLAGS_bookmark_interval);
  options.history_length = static_cast<size_t>(absl::GetFlag(FLAGS_history));
  options.compaction_interval = absl::GetFlag(FLAGS_compaction_interval);
  const std::string version = absl::GetFlag(FLAGS_server_version);
  if (version != "1.37" && version != "1.24") {
    return absl::InvalidArgumentError(
        absl::StrCat("--server_version must be 1.37 or 1.24, got ", version));
  }
  options.v1_24 = version == "1.24";
  options.tokens = TokensFromFlags();
  return options;
}

// Seeds (spread-out Pods first), starts serving and writes --ca_file and
// --print_port_file.
absl::Status SeedAndStart(emulator::EmulatorWithFaults& emu) {
  if (absl::Status seeded = SeedPodsSpreadOut(emu); !seeded.ok()) {
    return absl::Status(seeded.code(),
                        absl::StrCat("cannot seed: ", seeded.message()));
  }
  if (absl::Status started = emu.Start(); !started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("cannot start: ", started.message()));
  }
  const std::string ca_file = absl::GetFlag(FLAGS_ca_file);
  if (absl::GetFlag(FLAGS_tls) && !ca_file.empty() &&
      !WriteFileAtomically(ca_file, emu.ca_cert_pem())) {
    return absl::InternalError("cannot write " + ca_file);
  }
  const std::string port_file = absl::GetFlag(FLAGS_print_port_file);
  if (!port_file.empty() &&
      !WriteFileAtomically(port_file, std::to_string(emu.port()))) {
    return absl::InternalError("cannot write " + port_file);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  TuneForASharedMachine();
  if (absl::Status s = InstallSignalPipe(); !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  absl::StatusOr<emulator::EmulatorOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 1;
  }
  emulator::EmulatorWithFaults emu(*options);
  if (absl::Status s = SeedAndStart(emu); !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  std::printf("%d\n", emu.port());
  std::fflush(stdout);
  LOG(INFO) << "signal " << WaitForSignal() << ", stopping";
  emu.Stop();
  return 0;
}

// Dropped packets: every connection the informer holds to the API server
// stops being delivered in both directions (no FIN, no RST), as when a NAT
// or load balancer forgets the flow, while new connections still work. The
// watch must be replaced within the TCP timeout (keepalive probes and
// TCP_USER_TIMEOUT), from its last resourceVersion, without a relist.
//
// The test makes its own network namespace (unshare) and runs the emulator
// and the informer on that namespace's loopback; an nftables rule there
// drops the established flows. It needs root, CAP_NET_ADMIN, `ip` and
// `nft`: missing any of them skips it with the reason, except under CI=true,
// where it fails (CI runs as root and must run it).

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"
#include "integration_tests/emulated_informer.h"
#include "integration_tests/test_harness.h"

namespace integration {
namespace {

constexpr char kNs[] = "lossy";

// The first executable `name` in the system directories, "" if none.
std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Runs a shell command; true when it exits 0.
bool RunCommand(const std::string& command) {
  return std::system((command + " >&2").c_str()) == 0;
}

// Local ports of the established TCP connections to 127.0.0.1:`port`, from
// /proc/net/tcp (this process's network namespace).
std::set<int> ClientPortsTo(int port) {
  std::set<int> out;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() < 4 || f[3] != "01") continue;  // 01: ESTABLISHED
    std::vector<std::string> local = absl::StrSplit(f[1], ':');
    std::vector<std::string> remote = absl::StrSplit(f[2], ':');
    int lport = 0;
    int rport = 0;
    if (local.size() != 2 || remote.size() != 2 ||
        !absl::SimpleHexAtoi(local[1], &lport) ||
        !absl::SimpleHexAtoi(remote[1], &rport)) {
      continue;
    }
    if (rport == port) out.insert(lport);
  }
  return out;
}

class PacketLossTest : public ::testing::Test {
 protected:
  // Enters a new network namespace with loopback up; the reason when that
  // is impossible here.
  static std::string EnterNetworkNamespace() {
    if (geteuid() != 0) return "not running as root";
    if (FindTool("ip").empty()) return "`ip` (iproute2) is not installed";
    if (FindTool("nft").empty()) return "`nft` (nftables) is not installed";
    // Before any thread of this test starts: everything it creates (the
    // emulator's and the informer's threads and sockets) lives there.
    if (unshare(CLONE_NEWNET) != 0) {
      return absl::StrCat("unshare(CLONE_NEWNET) failed (errno ", errno,
                          "): no CAP_NET_ADMIN");
    }
    if (!RunCommand(FindTool("ip") + " link set lo up")) {
      return "cannot bring up loopback in the new network namespace";
    }
    if (!RunCommand(FindTool("nft") + " list ruleset")) {
      return "nft cannot reach nf_tables (kernel module missing?)";
    }
    return "";
  }

  // Drops, in both directions, every packet of the connections between
  // the emulator's port and `client_ports`.
  static bool DropFlows(int port, const std::set<int>& client_ports) {
    const std::string ports = absl::StrJoin(client_ports, ", ");
    const std::string rules = absl::StrCat(
        "add table inet lossy\n",
        "add chain inet lossy input { type filter hook input priority 0; }\n",
        "add rule inet lossy input tcp sport ", port, " tcp dport { ", ports,
        " } drop\n", "add rule inet lossy input tcp dport ", port,
        " tcp sport { ", ports, " } drop\n");
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string file =
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/lossy.nft");
    std::ofstream(file) << rules;
    return RunCommand(absl::StrCat(FindTool("nft"), " -f ", file));
  }
};

TEST_F(PacketLossTest, WatchWhosePacketsVanishIsReplacedWithinTheTcpTimeout) {
  const std::string why_not = EnterNetworkNamespace();
  if (!why_not.empty()) {
    if (InCi())
      FAIL() << "CI=true and the packet-loss test cannot run: " << why_not;
    GTEST_SKIP() << "packet-loss test skipped: " << why_not
                 << " (it needs root with CAP_NET_ADMIN, iproute2 and "
                    "nftables; tools/test.sh installs them)";
  }
  emulator::EmulatorWithFaults emu{emulator::EmulatorOptions{}};
  ASSERT_TRUE(emu.Start().ok());
  for (int i = 0; i < 5; ++i) CreatePod(&emu, kNs, absl::StrCat("pod-", i));
  informer::FakeClock clock;
  {
    EmulatedInformer::Options options;
    // Short for the test; the idle timeout (on the FakeClock, which only
    // the pump moves) cannot be what notices.
    options.rest.tcp_timeout = absl::Seconds(3);
    options.client.watch_idle_timeout = absl::Hours(1);
    EmulatedInformer inf(&emu, &clock, options);
    ClockPump pump(&clock);
    ASSERT_TRUE(inf.Start().ok());
    ASSERT_TRUE(inf.AwaitConverged());
    ASSERT_TRUE(
        emu.store().AwaitWatchers(&inf.resource(), 1, absl::Seconds(60)));
    CreatePod(&emu, kNs, "before-loss");
    const int64_t resume_rv = emu.store().CurrentRv();
    ASSERT_TRUE(inf.AwaitConverged());

    const std::set<int> ports = ClientPortsTo(emu.port());
    ASSERT_FALSE(ports.empty());
    ASSERT_TRUE(DropFlows(emu.port(), ports));
    const absl::Time dropped = absl::Now();
    CreatePod(&emu, kNs, "after-loss");
    ASSERT_TRUE(inf.AwaitConverged())
        << "the watch over the dropped connection was never replaced";
    const absl::Duration replaced = absl::Now() - dropped;
    std::cerr << "watch replaced " << replaced << " after the drop\n";
    EXPECT_LT(replaced, absl::Seconds(20)) << "tcp_timeout 3 s";

    const auto errors = inf.errors().Errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(absl::IsUnavailable(errors[0])) << errors[0];
    EXPECT_TRUE(absl::StrContains(errors[0].message(), "connection dead"))
        << errors[0];
    const auto c = inf.informer().GetReflectorCounters();
    EXPECT_EQ(c.lists, 1);
    EXPECT_EQ(c.relists, 0);
    EXPECT_EQ(c.watches, 2);
    const std::vector<std::string> requests = inf.requests().Requests();
    ASSERT_EQ(requests.size(), 3u);
    EXPECT_TRUE(absl::StrContains(
        requests[2], absl::StrCat("resourceVersion=", resume_rv, "&")))
        << requests[2];
    // The replacement came over a new connection, which the rule lets
    // through.
    int new_connections = 0;
    for (int p : ClientPortsTo(emu.port())) new_connections += !ports.count(p);
    EXPECT_GE(new_connections, 1);
    inf.informer().Stop();
  }
  emu.Stop();
}

}  // namespace
}  // namespace integration

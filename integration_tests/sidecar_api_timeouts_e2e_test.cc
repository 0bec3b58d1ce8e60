// The API connection timer flags reach the real sidecar's connections: the
// //server:informer_sidecar binary against an in-process emulator over
// loopback HTTP. With --api_watch_idle_timeout=2s, a watch whose server
// stops sending is replaced about 2 s later (the default would take 75 s),
// without a relist, and the sidecar logs the cause. (The other two
// timers are proven at the client level: dead_connection_test and
// packet_loss_test; their flags are parsed in sidecar_options_test.)

#include <stdlib.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "gtest/gtest.h"
#include "integration_tests/emulated_informer.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

TEST(SidecarApiTimeoutsE2eTest, IdleTimeoutFlagBoundsASilentWatch) {
  emulator::EmulatorWithFaults emu{emulator::EmulatorOptions{}};
  ASSERT_TRUE(emu.Start().ok());
  for (int i = 0; i < 3; ++i) CreatePod(&emu, "e2e", absl::StrCat("pod-", i));
  char dir[] = "/tmp/sidecar_timeouts_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  absl::StatusOr<std::string> kubeconfig = WriteKubeconfig(dir, emu.url());
  ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.status();
  absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
  ASSERT_TRUE(binary.ok()) << binary.status();
  const emulator::ResourceInfo& pods = emu.Resource("pods");

  SidecarProcess::Options options;
  options.flags = {
      "--kubeconfig=" + *kubeconfig,
      "--resources=pods",
      "--http_listen=",
      "--api_watch_idle_timeout=2s",
  };
  options.stderr_file = absl::StrCat(dir, "/sidecar.log");
  absl::StatusOr<std::unique_ptr<SidecarProcess>> sidecar =
      SidecarProcess::Start(*binary, options);
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  ASSERT_TRUE(emu.store().AwaitWatchers(&pods, 1, absl::Seconds(60)));

  // The watch goes silent: replaced after --api_watch_idle_timeout.
  const int64_t watches = emu.request_counts().watch;
  const int64_t lists = emu.request_counts().list;
  const absl::Time stalled = absl::Now();
  emu.StallWatches(&pods);
  ASSERT_TRUE(PollUntil([&] { return emu.request_counts().watch > watches; }))
      << "the silent watch was never replaced";
  // No lower bound: the idle timer runs from the watch's last byte, which
  // came before the stall; the log line below shows which timer fired.
  const absl::Duration replaced = absl::Now() - stalled;
  EXPECT_LT(replaced, absl::Seconds(15));
  std::cerr << "silent watch replaced after " << replaced << "\n";
  ASSERT_TRUE(PollUntil([&] {
    return Count(ReadAll(options.stderr_file), "received no data for 2s") >= 1;
  }));
  // Re-watched, not relisted (the initial state may have come by LIST or
  // by WatchList, but nothing was listed again).
  EXPECT_EQ(emu.request_counts().list, lists);
  EXPECT_FALSE(absl::StrContains(ReadAll(options.stderr_file), "relisting"));
  sidecar->reset();
  emu.Stop();
}

}  // namespace
}  // namespace integration

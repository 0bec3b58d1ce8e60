// Warm restarts of the real informer_sidecar binary against the kube_emulator
// binary over HTTP: the cache kept in --cache_dir across a restart, resumed
// from its resourceVersion inside the server's watch window, relisted once
// (as a diff) outside it, and every kind of bad snapshot or directory
// answered with a clear log line and a cold start (or, for a directory in
// use, a clear exit), nothing lost.

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration_tests/chain_util.h"
#include "integration_tests/emulated_cluster.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"

extern char** environ;

namespace integration {
namespace {

constexpr int kObjects = 2000;
constexpr absl::Duration kConverge = absl::Seconds(90);
constexpr char kBytesMetric[] =
    "informer_sidecar_informer_bytes_received_total";
constexpr char kListsMetric[] = "informer_sidecar_informer_lists_total";

std::string TestTmpDir() {
  const char* v = std::getenv("TEST_TMPDIR");
  return v == nullptr ? "/tmp" : v;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteWholeFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Runs `binary` with `args` to its exit (a start that must fail), its
// stderr appended to `stderr_file`; returns the exit code (-signal when
// killed).
int RunToExit(const std::string& binary, const std::vector<std::string>& args,
              const std::string& stderr_file) {
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1000;
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

class WarmRestartE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    work_ = absl::StrCat(TestTmpDir(), "/", info->name());
    cache_dir_ = work_ + "/cache";
    absl::StatusOr<EmulatedCluster> cluster = StartEmulatedCluster(
        {.emulator_flags = {absl::StrCat("--seed_configmaps=", kObjects),
                            "--seed_pods=5"},
         .dir = work_,
         .kube_system = true});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sidecar_bin_ = cluster->sidecar_bin;
    kubeconfig_ = cluster->kubeconfig;
    emulator_ = std::move(cluster->emulator);
  }

  httplib::Client Emulator() {
    httplib::Client cli("127.0.0.1", emulator_->port());
    cli.set_read_timeout(60, 0);
    return cli;
  }

  void CreateKubeSystem() {
    httplib::Result r = Emulator().Post(
        "/api/v1/namespaces",
        R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system"}})",
        "application/json");
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->status == 201 || r->status == 409) << r->body;
  }

  void Patch(int i, const std::string& value) {
    httplib::Result r = Emulator().Patch(
        absl::StrFormat("/api/v1/namespaces/benchcms/configmaps/cm-%06d", i)
            .c_str(),
        absl::StrCat(R"({"data":{"changed":")", value, R"("}})"),
        "application/merge-patch+json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  void Control(const std::string& op) {
    httplib::Result r = Emulator().Post(
        absl::StrCat("/_emulator/", op, "?resource=configmaps").c_str(), "",
        "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  // Changes made while no sidecar runs: patches, a deletion (of the
  // `deleted`th ConfigMap), a creation.
  void ChangeWhileDown(const std::string& round, int deleted) {
    for (int i : {3, 500, 1999}) ASSERT_NO_FATAL_FAILURE(Patch(i, round));
    httplib::Result d = Emulator().Delete(
        absl::StrFormat("/api/v1/namespaces/benchcms/configmaps/cm-%06d",
                        deleted)
            .c_str());
    ASSERT_TRUE(d);
    ASSERT_EQ(d->status, 200) << d->body;
    httplib::Result c = Emulator().Post(
        "/api/v1/namespaces/benchcms/configmaps",
        absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":)",
                     R"({"name":"new-)", round, R"("},"data":{"k":"v"}})"),
        "application/json");
    ASSERT_TRUE(c);
    ASSERT_EQ(c->status, 201) << c->body;
  }

  std::vector<std::string> Flags(const std::string& resources = "configmaps",
                                 const std::string& cache_dir = "") {
    return {"--kubeconfig=" + kubeconfig_, "--resources=" + resources,
            "--cache_dir=" + (cache_dir.empty() ? cache_dir_ : cache_dir),
            "--cache_snapshot_interval=0", "--http_listen=127.0.0.1:0"};
  }

  // Starts a sidecar (waits for SERVING) logging to `log`.
  void Start(const std::string& log, PortedSidecar* out,
             std::vector<std::string> flags = {},
             std::vector<std::string> env = {}) {
    if (flags.empty()) flags = Flags();
    absl::StatusOr<PortedSidecar> s =
        StartPortedSidecar(sidecar_bin_, std::move(flags), work_ + "/" + log,
                           /*quiet=*/false, absl::Seconds(90), std::move(env));
    ASSERT_TRUE(s.ok()) << s.status() << "\n" << Log(log);
    *out = *std::move(s);
  }

  // SIGTERM: the orderly shutdown, which writes the snapshots.
  void Stop(PortedSidecar* s) {
    EXPECT_EQ(s->process->Terminate(), 0);
    s->process.reset();
  }

  std::string Log(const std::string& log) {
    return ReadWholeFile(work_ + "/" + log);
  }

  double Metric(const PortedSidecar& s, const std::string& name) {
    absl::StatusOr<double> v = GetMetricSum(s.ports.at("http"), name);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : -1;
  }

  // The sidecar's cache equals the emulator's state, object by object.
  void ExpectConverged(const PortedSidecar& s,
                       const std::string& resource = "configmaps") {
    absl::StatusOr<ObjectVersions> want =
        GetEmulatorState(emulator_->port(), resource);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::Status st =
        WaitForConvergence(s.process->NewChannel(), resource, *want, kConverge);
    EXPECT_TRUE(st.ok()) << st;
  }

  std::string SnapshotPath(const std::string& resource = "configmaps") {
    return absl::StrCat(cache_dir_, "/", resource, ".snapshot");
  }

  // A first sidecar's run: a full list, then a snapshot at shutdown.
  // Returns the bytes its list received.
  double ColdRunWritingSnapshot(const std::string& resources = "configmaps") {
    PortedSidecar a;
    Start("first.log", &a, Flags(resources));
    ExpectConverged(a);
    const double bytes = Metric(a, kBytesMetric);
    Stop(&a);
    EXPECT_TRUE(std::filesystem::exists(SnapshotPath())) << Log("first.log");
    return bytes;
  }

  // A start that must not use the snapshot: the reason logged, a cold
  // start (a list), the cache equal to the server; then a clean stop,
  // which writes a good snapshot again.
  void ExpectColdStartLogging(const std::string& log,
                              const std::string& reason) {
    PortedSidecar s;
    ASSERT_NO_FATAL_FAILURE(Start(log, &s));
    ExpectConverged(s);
    EXPECT_GE(Metric(s, kListsMetric), 1) << "a cold start lists";
    EXPECT_TRUE(absl::StrContains(Log(log), reason)) << Log(log);
    EXPECT_TRUE(absl::StrContains(Log(log), "cold start")) << Log(log);
    Stop(&s);
  }

  std::string sidecar_bin_;
  std::unique_ptr<EmulatorProcess> emulator_;
  std::string work_;
  std::string cache_dir_;
  std::string kubeconfig_;
};

TEST_F(WarmRestartE2eTest, RestartInsideTheWindowWatchesFromTheSnapshot) {
  const double full_list_bytes = ColdRunWritingSnapshot();
  ASSERT_GT(full_list_bytes, kObjects * 1000.0);
  ASSERT_NO_FATAL_FAILURE(ChangeWhileDown("a", 7));
  absl::StatusOr<EmulatorRequests> before =
      GetEmulatorRequests(emulator_->port());
  ASSERT_TRUE(before.ok()) << before.status();

  PortedSidecar b;
  ASSERT_NO_FATAL_FAILURE(Start("second.log", &b));
  ExpectConverged(b);
  absl::StatusOr<EmulatorRequests> after =
      GetEmulatorRequests(emulator_->port());
  ASSERT_TRUE(after.ok()) << after.status();
  const std::string log = Log("second.log");
  // No list of the state: the one LIST is the probe of the server's
  // current resourceVersion (a consistent read that matches no object).
  EXPECT_EQ(after->list - before->list, 1) << log;
  EXPECT_EQ(Metric(b, kListsMetric), 0) << log;
  const double warm_bytes = Metric(b, kBytesMetric);
  EXPECT_LT(warm_bytes, full_list_bytes * 0.02)
      << warm_bytes << " bytes vs a full list's " << full_list_bytes;
  EXPECT_TRUE(
      absl::StrContains(log, absl::StrCat("loaded ", kObjects, " objects")))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "caught up with the server")) << log;
  EXPECT_EQ(Metric(b, "informer_sidecar_snapshots_loaded_total"), 1);

  // And again: the second run's shutdown wrote a snapshot too.
  Stop(&b);
  ASSERT_NO_FATAL_FAILURE(ChangeWhileDown("b", 8));
  PortedSidecar c;
  ASSERT_NO_FATAL_FAILURE(Start("third.log", &c));
  ExpectConverged(c);
  EXPECT_EQ(Metric(c, kListsMetric), 0) << Log("third.log");
  Stop(&c);
}

TEST_F(WarmRestartE2eTest, RestartOutsideTheWindowRelistsOnceAsADiff) {
  ColdRunWritingSnapshot();
  for (int i : {10, 20, 30}) ASSERT_NO_FATAL_FAILURE(Patch(i, "outside"));
  // The API server restarted: its watch window starts over, and a watch
  // from the snapshot's resourceVersion gets 410 Expired.
  ASSERT_NO_FATAL_FAILURE(Control("restart"));

  PortedSidecar b;
  ASSERT_NO_FATAL_FAILURE(Start("second.log", &b));
  ExpectConverged(b);
  const std::string log = Log("second.log");
  EXPECT_EQ(Metric(b, kListsMetric), 1) << log;
  // Compared with the loaded cache: only the three changed objects became
  // deltas, so handlers and Watch streams hear of those alone.
  EXPECT_TRUE(absl::StrContains(
      log, absl::StrCat("relist of ", kObjects, " objects: ", kObjects - 3,
                        " unchanged (kept), 3 new or changed")))
      << log;
  Stop(&b);
}

TEST_F(WarmRestartE2eTest, TruncatedSnapshotIsAColdStart) {
  ColdRunWritingSnapshot();
  const std::string good = ReadWholeFile(SnapshotPath());
  WriteWholeFile(SnapshotPath(), good.substr(0, good.size() / 2));
  ExpectColdStartLogging("truncated.log", "(truncated)");
}

TEST_F(WarmRestartE2eTest, FlippedBytesAreAColdStart) {
  ColdRunWritingSnapshot();
  std::string bad = ReadWholeFile(SnapshotPath());
  bad[bad.size() / 2] ^= 0x20;
  WriteWholeFile(SnapshotPath(), bad);
  ExpectColdStartLogging("flipped.log", "(checksum)");
}

TEST_F(WarmRestartE2eTest, FutureFormatVersionIsAColdStart) {
  ColdRunWritingSnapshot();
  std::string bad = ReadWholeFile(SnapshotPath());
  ASSERT_GT(bad.size(), 16u);
  // The prologue: magic, u32 version, u32 crc32 of the 12 bytes before.
  bad[8] = 2;
  bad[9] = bad[10] = bad[11] = 0;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(bad.data()), 12);
  for (int i = 0; i < 4; ++i) bad[12 + i] = static_cast<char>(crc >> (8 * i));
  WriteWholeFile(SnapshotPath(), bad);
  ExpectColdStartLogging("future.log", "(unsupported_version)");
}

TEST_F(WarmRestartE2eTest, AnotherResourcesSnapshotIsAColdStart) {
  ColdRunWritingSnapshot("configmaps,pods");
  std::filesystem::copy_file(SnapshotPath("pods"), SnapshotPath(),
                             std::filesystem::copy_options::overwrite_existing);
  ExpectColdStartLogging("other_resource.log", "(identity_mismatch)");
}

TEST_F(WarmRestartE2eTest, AnotherClustersSnapshotIsAColdStart) {
  ColdRunWritingSnapshot();
  // A cluster rebuilt behind the same URL: a new kube-system uid.
  httplib::Result d = Emulator().Delete("/api/v1/namespaces/kube-system");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  ASSERT_NO_FATAL_FAILURE(CreateKubeSystem());
  ExpectColdStartLogging("other_cluster.log", "cluster differs");
}

TEST_F(WarmRestartE2eTest, FullDiskKeepsThePreviousSnapshot) {
  ColdRunWritingSnapshot();
  const std::string good = ReadWholeFile(SnapshotPath());
  for (int i : {1, 2}) ASSERT_NO_FATAL_FAILURE(Patch(i, "full"));
  // The disk fills up after 64 KiB of the next snapshot.
  PortedSidecar b;
  ASSERT_NO_FATAL_FAILURE(
      Start("full.log", &b, Flags(),
            {"INFORMER_SIDECAR_TEST_SNAPSHOT_WRITE_LIMIT=65536"}));
  ExpectConverged(b);
  Stop(&b);
  const std::string log = Log("full.log");
  EXPECT_TRUE(absl::StrContains(log, "snapshot not written")) << log;
  EXPECT_TRUE(absl::StrContains(log, "no space left")) << log;
  EXPECT_EQ(ReadWholeFile(SnapshotPath()), good) << "the previous one stays";
  // Nothing lost: the next start resumes from the previous snapshot.
  PortedSidecar c;
  ASSERT_NO_FATAL_FAILURE(Start("after_full.log", &c));
  ExpectConverged(c);
  EXPECT_EQ(Metric(c, kListsMetric), 0) << Log("after_full.log");
  Stop(&c);
}

TEST_F(WarmRestartE2eTest, UnwritableDirectoryIsAColdStartWithoutSnapshots) {
  // Not even root may create a directory under /proc.
  const std::string dir = "/proc/informer-sidecar-warm-restart-test";
  PortedSidecar s;
  ASSERT_NO_FATAL_FAILURE(
      Start("unwritable.log", &s, Flags("configmaps", dir)));
  ExpectConverged(s);
  Stop(&s);
  const std::string log = Log("unwritable.log");
  EXPECT_TRUE(absl::StrContains(log, dir)) << log;
  EXPECT_TRUE(absl::StrContains(log, "snapshots off")) << log;
}

TEST_F(WarmRestartE2eTest, SecondSidecarOnTheSameDirectoryExits) {
  PortedSidecar a;
  ASSERT_NO_FATAL_FAILURE(Start("first.log", &a));
  std::vector<std::string> flags = Flags();
  flags.push_back("--grpc_listen=127.0.0.1:0");
  const int code = RunToExit(sidecar_bin_, flags, work_ + "/second.log");
  EXPECT_NE(code, 0);
  const std::string log = Log("second.log");
  EXPECT_TRUE(absl::StrContains(log, cache_dir_)) << log;
  EXPECT_TRUE(absl::StrContains(log, "in use by another process")) << log;
  // The first one goes on undisturbed.
  ExpectConverged(a);
  Stop(&a);
}

}  // namespace
}  // namespace integration

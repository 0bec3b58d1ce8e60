#include "integration_tests/side_by_side.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace integration {
namespace {

TEST(SideBySideTest, ParsesKubeInformerBenchLine) {
  // A line as kube-informer-bench prints it (report.go's field names).
  absl::StatusOr<SyncResult> r = ParseClientGoLine(
      R"({"resource":"v1/pods","namespace":"","label_selector":"",)"
      R"("client":"typed","strip_managed_fields":true,"sync_seconds":1.25,)"
      R"("objects":1500,"rss_bytes_after_sync":52428800,)"
      R"("rss_peak_bytes":73400320,"updates":0,"writers":1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->sync_seconds, 1.25);
  EXPECT_DOUBLE_EQ(r->objects, 1500);
  EXPECT_DOUBLE_EQ(r->rss_bytes, 52428800);
  EXPECT_DOUBLE_EQ(r->peak_bytes, 73400320);
}

TEST(SideBySideTest, RejectsALineWithoutTheFigures) {
  EXPECT_FALSE(ParseClientGoLine(R"({"sync_seconds":1})").ok());
  EXPECT_FALSE(ParseClientGoLine(R"({"sync_seconds":x,"objects":1})").ok());
}

TEST(SideBySideTest, ReadsThisProcessMemory) {
  ProcMemory m = ReadProcMemory(getpid());
  EXPECT_GT(m.rss, 0);
  EXPECT_GE(m.hwm, m.rss);
  EXPECT_GT(m.anon, 0);
}

TEST(SideBySideTest, ClientGoFailureIsAnError) {
  // A binary that exits non-zero: the error carries the command.
  absl::StatusOr<SyncResult> r =
      RunClientGo("/bin/false", "/nonexistent", "v1/pods", "", false,
                  /*watch_list=*/false, absl::Seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/bin/false"), std::string::npos);
  // The LIST mode turns client-go's WatchListClient gate off.
  EXPECT_NE(r.status().message().find("KUBE_FEATURE_WatchListClient=false"),
            std::string::npos);
}

TEST(SideBySideTest, FindsTheTimeOfALogLine) {
  const std::string path = ::testing::TempDir() + "/side_by_side.log";
  std::ofstream(path) << "I20261203 15:08:23.000000 1 main.cc:1] start\n"
                      << "not a log line: cache synced\n"
                      << "I20261203 15:08:24.250000 1 x.cc:9] pods: cache "
                         "synced\n";
  absl::StatusOr<absl::Time> t = LogLineTime(path, ": cache synced");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<absl::Time> t0 = LogLineTime(path, "] start");
  ASSERT_TRUE(t0.ok()) << t0.status();
  EXPECT_EQ(*t - *t0, absl::Milliseconds(1250));
  EXPECT_EQ(LogLineTime(path, "missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace integration

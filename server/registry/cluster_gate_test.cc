#include "server/registry/cluster_gate.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "informer/cache/testing/fake_source.h"

namespace server {
namespace {

// Answers the reads from a script: each call takes the next answer.
struct Reads {
  std::vector<absl::StatusOr<std::string>> answers;
  size_t next = 0;
  absl::StatusOr<std::string> Read() {
    if (next >= answers.size()) return absl::InternalError("read again");
    return answers[next++];
  }
};

TEST(ClusterGateTest, ListsAndWatchesWaitForTheClusterToBeConfirmed) {
  Reads reads{{absl::UnavailableError("refused"), std::string("uid:a")}};
  int mismatches = 0;
  ClusterCheck check([&] { return reads.Read(); },
                     [&](const std::string&) { ++mismatches; });
  check.Trust("uid:a");
  auto fake = std::make_unique<informer::FakeSource>();
  ASSERT_TRUE(fake->Add("ns", "x").ok());
  ClusterGatedSource gated(std::move(fake), &check);
  EXPECT_TRUE(
      absl::IsUnavailable(gated.List(informer::ListOptions()).status()));
  absl::StatusOr<informer::ObjectList> list =
      gated.List(informer::ListOptions());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 1u);
  // Confirmed for good: no more reads.
  informer::WatchOptions wo;
  wo.resource_version = list->resource_version;
  EXPECT_TRUE(gated.Watch(wo).ok());
  EXPECT_EQ(reads.next, 2u);
  EXPECT_EQ(mismatches, 0);
}

TEST(ClusterGateTest, AnotherClusterIsRefusedForGoodAndReportedOnce) {
  Reads reads{{std::string("uid:b")}};
  std::vector<std::string> reported;
  ClusterCheck check(
      [&] { return reads.Read(); },
      [&](const std::string& actual) { reported.push_back(actual); });
  check.Trust("uid:a");
  ClusterGatedSource gated(std::make_unique<informer::FakeSource>(), &check);
  for (int i = 0; i < 3; ++i) {
    absl::Status st = gated.Watch(informer::WatchOptions()).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_NE(st.message().find("uid:b"), std::string::npos) << st;
  }
  EXPECT_TRUE(
      absl::IsFailedPrecondition(gated.List(informer::ListOptions()).status()));
  EXPECT_EQ(reported, std::vector<std::string>{"uid:b"});
  EXPECT_EQ(reads.next, 1u);
}

// A restarting API server answers 403 until its RBAC caches filled: the
// uid cannot be read, the URL and CA stand in. That settles nothing.
TEST(ClusterGateTest, AUidTrustedIsNotSettledByTheUrlAndCa) {
  Reads reads{{std::string("server:https://h:6443 ca-sha256:1"),
               std::string("server:https://h:6443 ca-sha256:1"),
               std::string("uid:a")}};
  int mismatches = 0;
  ClusterCheck check([&] { return reads.Read(); },
                     [&](const std::string&) { ++mismatches; });
  check.Trust("uid:a");
  ClusterGatedSource gated(std::make_unique<informer::FakeSource>(), &check);
  for (int i = 0; i < 2; ++i) {
    absl::Status st = gated.List(informer::ListOptions()).status();
    EXPECT_TRUE(absl::IsUnavailable(st)) << st;
    EXPECT_NE(st.message().find("cannot confirm"), std::string::npos) << st;
  }
  EXPECT_TRUE(gated.List(informer::ListOptions()).ok());
  EXPECT_EQ(reads.next, 3u);
  EXPECT_EQ(mismatches, 0);
}

// Snapshots written where the uid could not be read; now it can: the API
// server's URL and CA settle it, as for a start without snapshots.
TEST(ClusterGateTest, TheUrlAndCaTrustedAreComparedAsSuch) {
  const std::string here = "server:https://h:6443 ca-sha256:1";
  Reads reads{{std::string("uid:z")}};
  ClusterCheck same([&] { return reads.Read(); }, nullptr,
                    [&] { return here; });
  same.Trust(here);
  EXPECT_TRUE(same.Verify().ok());

  Reads again{{std::string("uid:z")}};
  std::vector<std::string> reported;
  ClusterCheck moved(
      [&] { return again.Read(); },
      [&](const std::string& actual) { reported.push_back(actual); },
      [] { return std::string("server:https://other:6443 ca-sha256:2"); });
  moved.Trust(here);
  EXPECT_TRUE(absl::IsFailedPrecondition(moved.Verify()));
  EXPECT_EQ(reported,
            std::vector<std::string>{"server:https://other:6443 ca-sha256:2"});
}

TEST(ClusterGateTest, NothingIsGatedUntilAnIdentityIsTrusted) {
  int reads = 0;
  ClusterCheck check(
      [&]() -> absl::StatusOr<std::string> {
        ++reads;
        return std::string("uid:b");
      },
      nullptr);
  ClusterGatedSource gated(std::make_unique<informer::FakeSource>(), &check);
  EXPECT_TRUE(gated.List(informer::ListOptions()).ok());
  EXPECT_EQ(reads, 0);
}

}  // namespace
}  // namespace server

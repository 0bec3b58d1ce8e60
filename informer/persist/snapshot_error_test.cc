#include "informer/persist/snapshot_error.h"

#include <errno.h>

#include <set>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

constexpr SnapshotProblem kProblems[] = {
    SnapshotProblem::kMissing,
    SnapshotProblem::kNotSnapshot,
    SnapshotProblem::kTruncated,
    SnapshotProblem::kChecksum,
    SnapshotProblem::kUnsupportedVersion,
    SnapshotProblem::kIdentityMismatch,
    SnapshotProblem::kMalformed,
    SnapshotProblem::kIo,
    SnapshotProblem::kLocked,
};

TEST(SnapshotErrorTest, EveryProblemSurvivesTheStatusAndHasItsOwnName) {
  std::set<std::string> names;
  for (SnapshotProblem p : kProblems) {
    const absl::Status s = SnapshotError(p, absl::StatusCode::kDataLoss,
                                         "/cache/pods.snapshot", "detail");
    EXPECT_EQ(GetSnapshotProblem(s), p) << SnapshotProblemName(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(s.message(), "snapshot /cache/pods.snapshot: detail");
    names.insert(std::string(SnapshotProblemName(p)));
  }
  EXPECT_EQ(names.size(), sizeof(kProblems) / sizeof(kProblems[0]));
  EXPECT_EQ(names.count("none"), 0u);
}

TEST(SnapshotErrorTest, ForeignAndOkStatusesHaveNoProblem) {
  EXPECT_EQ(GetSnapshotProblem(absl::OkStatus()), SnapshotProblem::kNone);
  EXPECT_EQ(GetSnapshotProblem(absl::DataLossError("x")),
            SnapshotProblem::kNone);
  EXPECT_EQ(SnapshotProblemName(SnapshotProblem::kNone), "none");
}

TEST(SnapshotErrorTest, IoErrorsTakeTheirCodeFromErrno) {
  const absl::Status full = SnapshotIoError("/c/x", "write", ENOSPC);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(GetSnapshotProblem(full), SnapshotProblem::kIo);
  EXPECT_EQ(full.message(),
            "snapshot /c/x: write failed: No space left on device");
  EXPECT_EQ(SnapshotIoError("/c/x", "open", EACCES).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SnapshotIoError("/c/x", "open", ENOENT).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace informer

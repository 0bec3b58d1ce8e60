#include "server/informer_service/watch/resume_token.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/escaping.h"

namespace server {
namespace {

TEST(ResumeTokenTest, RoundTrips) {
  const ResumeToken token{.run_id = "run-1", .epoch = 3, .seq = 1234567};
  const std::string wire = EncodeResumeToken(token);
  absl::StatusOr<ResumeToken> back = DecodeResumeToken(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->run_id, "run-1");
  EXPECT_EQ(back->epoch, 3u);
  EXPECT_EQ(back->seq, 1234567u);
}

TEST(ResumeTokenTest, EncoderMatchesEncodeResumeToken) {
  const ResumeTokenEncoder encoder("r", 9);
  for (uint64_t seq : {0u, 1u, 77u}) {
    EXPECT_EQ(encoder.Encode(seq),
              EncodeResumeToken({.run_id = "r", .epoch = 9, .seq = seq}));
  }
}

TEST(ResumeTokenTest, SnapshotPositionsRoundTripWithSlashesInKeys) {
  const ResumeTokenEncoder encoder("r", 2);
  absl::StatusOr<ResumeToken> got =
      DecodeResumeToken(encoder.EncodeSnapshot(40, "ns/pod-7"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->in_snapshot);
  EXPECT_EQ(got->seq, 40u);
  EXPECT_EQ(got->after_key, "ns/pod-7");
  // Before the first key (a RESET's token): nothing of the snapshot held.
  got = DecodeResumeToken(encoder.EncodeSnapshot(40, ""));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->in_snapshot);
  EXPECT_EQ(got->after_key, "");
  // A plain position is not inside a snapshot.
  got = DecodeResumeToken(encoder.Encode(40));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->in_snapshot);
  const ResumeToken t{.run_id = "r",
                      .epoch = 2,
                      .seq = 40,
                      .in_snapshot = true,
                      .after_key = "a/b"};
  EXPECT_EQ(EncodeResumeToken(t), encoder.EncodeSnapshot(40, "a/b"));
}

TEST(ResumeTokenTest, MalformedTokensAreRejected) {
  const std::string bad[] = {
      "",
      "not base64 !!",
      absl::WebSafeBase64Escape("w2/run/1"),     // too few parts
      absl::WebSafeBase64Escape("w1/run/1/2"),   // unknown version
      absl::WebSafeBase64Escape("w2/run/x/2"),   // epoch not a number
      absl::WebSafeBase64Escape("w2/run/1/-2"),  // negative seq
      absl::WebSafeBase64Escape("w2//1/2"),      // no run
  };
  for (const std::string& t : bad) {
    absl::StatusOr<ResumeToken> got = DecodeResumeToken(t);
    EXPECT_FALSE(got.ok()) << t;
    if (!got.ok()) {
      EXPECT_EQ(got.status().message(), "malformed resume_token") << t;
    }
  }
}

}  // namespace
}  // namespace server

// Every grpcurl line of README.md and docs/*.md run by the real grpcurl
// (v1.9, built by tools/realkube.sh, found through $REALKUBE_BIN) against
// the real sidecar in demo mode, as printed but for the address: the
// sidecar's unix socket (grpcurl -unix) instead of 127.0.0.1:50051. A call
// must exit 0 with an answer; a server stream (Watch) must answer before
// grpcurl's -max-time ends it; a stream fed from stdin by a shell pipeline
// must be a client stream as grpcurl describes it. readme_grpcurl_test
// keeps the reflection-only client for what grpcurl does not check on its
// own: every listed service resolving with all its types.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "integration_tests/grpcurl_client.h"
#include "integration_tests/readme_grpcurl_lines.h"
#include "integration_tests/real_control_plane.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

constexpr char kDocAddress[] = "127.0.0.1:50051";

// Splits a command line as the shell would for the forms the docs use:
// words separated by blanks, single-quoted text kept literally.
std::vector<std::string> ShellWords(absl::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (char c : command) {
    if (quoted) {
      if (c == '\'') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c != '\\') {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

class RealGrpcurlReadmeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("REALKUBE_BIN");
    ASSERT_NE(bin, nullptr) << "REALKUBE_BIN: run in the real-cluster phase";
    grpcurl_ = absl::StrCat(bin, "/grpcurl");
    absl::StatusOr<std::string> binary = FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    SidecarProcess::Options options;
    options.flags = {"--demo", "--print_events=false",
                     "--http_listen=127.0.0.1:0"};
    options.quiet = true;
    auto sidecar = SidecarProcess::Start(*binary, std::move(options));
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = *std::move(sidecar);
    ASSERT_TRUE(absl::StartsWith(sidecar_->address(), "unix:"));
    socket_ = sidecar_->address().substr(strlen("unix:"));
  }

  // The real grpcurl with `words` (the doc's, "grpcurl" dropped), aimed at
  // the sidecar's socket; returns its stdout and stderr and "exit=N".
  std::string Run(std::vector<std::string> words, absl::Duration max_time) {
    std::vector<std::string> argv = {
        "/bin/sh",
        "-c",
        "\"$@\" 2>&1; echo \"exit=$?\"",
        "sh",
        grpcurl_,
        "-unix",
        "-max-time",
        absl::StrCat(absl::ToInt64Seconds(max_time))};
    for (std::string& w : words) {
      argv.push_back(w == kDocAddress ? socket_ : std::move(w));
    }
    absl::StatusOr<std::string> out =
        RunCommand(argv, "", max_time + absl::Seconds(30));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : "";
  }

  std::string grpcurl_;
  std::string socket_;
  std::unique_ptr<SidecarProcess> sidecar_;
};

TEST_F(RealGrpcurlReadmeTest, EveryExampleRunsInTheRealGrpcurl) {
  const ReadmeGrpcurlLines docs = ReadReadmeGrpcurlLines();
  ASSERT_FALSE(docs.paths.empty()) << "README.md not in the runfiles";
  const std::vector<std::string>& commands = docs.commands;
  ASSERT_GE(commands.size(), 10u);
  GrpcurlClient reflection(sidecar_->NewChannel());
  int calls = 0, streams = 0, answered_streams = 0, stdin_streams = 0;
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    std::vector<std::string> words = ShellWords(command);
    ASSERT_GE(words.size(), 3u);
    ASSERT_EQ(words[0], "grpcurl");
    words.erase(words.begin());
    const GrpcurlInvocation inv = ParseGrpcurl(command);
    if (inv.stdin_data) {
      // Fed by a shell pipeline: grpcurl must describe a client stream.
      const std::string out =
          Run({"-plaintext", kDocAddress, "describe",
               absl::StrReplaceAll(inv.target, {{"/", "."}})},
              absl::Seconds(10));
      EXPECT_TRUE(absl::StrContains(out, "( stream ")) << out;
      EXPECT_TRUE(absl::StrContains(out, "exit=0")) << out;
      ++stdin_streams;
      continue;
    }
    bool server_stream = false;
    if (inv.verb.empty()) {
      auto md = reflection.ResolveMethod(inv.target);
      ASSERT_TRUE(md.ok()) << md.status();
      server_stream = (*md)->server_streaming();
    }
    const std::string out =
        Run(words, server_stream ? absl::Seconds(3) : absl::Seconds(20));
    if (server_stream) {
      // Open until -max-time ends it (DeadlineExceeded), with no other
      // error; Events/Watch may have nothing to say in that time.
      EXPECT_TRUE(absl::StrContains(out, "Code: DeadlineExceeded")) << out;
      EXPECT_EQ(std::vector<std::string>(absl::StrSplit(out, "Code:")).size(),
                2u)
          << out;
      if (absl::StartsWith(out, "{")) ++answered_streams;
      ++streams;
    } else {
      EXPECT_TRUE(absl::EndsWith(out, "exit=0\n")) << out;
      EXPECT_FALSE(absl::StrContains(out, "ERROR")) << out;
      ++calls;
    }
  }
  EXPECT_GE(calls, 10);
  EXPECT_GE(streams, 2);
  EXPECT_GE(answered_streams, 1);  // Informer/Watch's initial state
  EXPECT_GE(stdin_streams, 1);
}

}  // namespace
}  // namespace integration

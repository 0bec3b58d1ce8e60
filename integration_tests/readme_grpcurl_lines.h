#ifndef INTEGRATION_TESTS_README_GRPCURL_LINES_H_
#define INTEGRATION_TESTS_README_GRPCURL_LINES_H_

// The grpcurl examples of the documentation, as the tests that run them read
// them: README.md found in the runfiles, then every docs/*.md beside it. One
// place so that readme_grpcurl_test (reflection only) and
// real_grpcurl_readme_test (the real grpcurl) check the same lines.

#include <string>
#include <vector>

namespace integration {

// The documents read and the grpcurl command lines found in them.
struct ReadmeGrpcurlLines {
  // README.md first, then docs/*.md sorted by name; empty when README.md is
  // not in the runfiles.
  std::vector<std::string> paths;
  // GrpcurlCommandsOf each document, in the order of `paths`.
  std::vector<std::string> commands;
};

// Reads the documents afresh on each call; no state is kept.
ReadmeGrpcurlLines ReadReadmeGrpcurlLines();

}  // namespace integration

#endif  // INTEGRATION_TESTS_README_GRPCURL_LINES_H_

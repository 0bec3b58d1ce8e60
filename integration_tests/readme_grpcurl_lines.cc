#include "integration_tests/readme_grpcurl_lines.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "integration_tests/grpcurl_client.h"
#include "integration_tests/sidecar_process.h"

namespace integration {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// README.md and docs/*.md, wherever the examples live.
std::vector<std::string> DocumentPaths() {
  std::vector<std::string> paths;
  absl::StatusOr<std::string> readme = FindRunfile("README.md");
  if (!readme.ok()) return paths;
  paths.push_back(*readme);
  const std::string docs = absl::StrCat(
      readme->substr(0, readme->size() - strlen("README.md")), "docs");
  if (DIR* dir = opendir(docs.c_str())) {
    std::vector<std::string> found;
    while (dirent* e = readdir(dir)) {
      if (absl::EndsWith(e->d_name, ".md")) {
        found.push_back(absl::StrCat(docs, "/", e->d_name));
      }
    }
    closedir(dir);
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

}  // namespace

ReadmeGrpcurlLines ReadReadmeGrpcurlLines() {
  ReadmeGrpcurlLines lines;
  lines.paths = DocumentPaths();
  for (const std::string& path : lines.paths) {
    for (std::string& c : GrpcurlCommandsOf(ReadFile(path))) {
      lines.commands.push_back(std::move(c));
    }
  }
  return lines;
}

}  // namespace integration

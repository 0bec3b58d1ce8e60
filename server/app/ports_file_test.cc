#include "server/app/ports_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace server {
namespace {

std::string Dir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PortsFileTest, WritesThePortsAndReplacesThemLater) {
  const std::string path = Dir() + "/ports";
  ASSERT_TRUE(WritePortsFile(path, 5001, 5002).ok());
  EXPECT_EQ(Read(path), "grpc=5001\nhttp=5002\n");
  ASSERT_TRUE(WritePortsFile(path, 5001, 5002, 5003).ok());
  EXPECT_EQ(Read(path), "grpc=5001\nhttp=5002\nkube_api=5003\n");
  // Renamed into place: no temporary file is left behind.
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(PortsFileTest, AMissingDirectoryIsUnavailableNamingTheFile) {
  const std::string path = Dir() + "/no-such-dir/ports";
  absl::Status st = WritePortsFile(path, 1, 2);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find(path + ".tmp"), std::string::npos) << st;
}

}  // namespace
}  // namespace server

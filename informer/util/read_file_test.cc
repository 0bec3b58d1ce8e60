#include "informer/util/read_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = absl::StrCat(TempDir(), "/", name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(ReadFileTest, ReadsEveryByte) {
  std::string content("a\0b\n", 4);
  content += std::string(100000, 'x');  // more than one read(2)
  const std::string path = WriteTemp("bytes", content);
  absl::StatusOr<std::string> got = ReadFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, content);
  EXPECT_TRUE(CheckReadable(path).ok());
}

TEST(ReadFileTest, EmptyFileIsEmpty) {
  absl::StatusOr<std::string> got = ReadFile(WriteTemp("empty", ""));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
}

TEST(ReadFileTest, MissingFileIsNotFoundAndNamesThePath) {
  const std::string path = TempDir() + "/no/such/file";
  absl::StatusOr<std::string> got = ReadFile(path);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr(absl::StrCat("cannot read \"", path,
                                     "\": No such file or directory")));
  EXPECT_EQ(CheckReadable(path).code(), absl::StatusCode::kNotFound);
}

TEST(ReadFileTest, DirectoryIsRefused) {
  absl::StatusOr<std::string> got = ReadFile(TempDir());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(TempDir()));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("Is a directory"));
  EXPECT_FALSE(CheckReadable(TempDir()).ok());
}

TEST(ReadFileTest, UnreadableFileIsPermissionDenied) {
  if (geteuid() == 0) {
    // root bypasses file modes (CI runs as root): the file reads.
    const std::string path = WriteTemp("root_reads", "x");
    ASSERT_EQ(chmod(path.c_str(), 0), 0);
    EXPECT_TRUE(ReadFile(path).ok());
    return;
  }
  const std::string path = WriteTemp("secret", "x");
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  absl::StatusOr<std::string> got = ReadFile(path);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(path));
}

TEST(ReadFileTest, LargerThanTheLimitIsRefused) {
  const std::string path = WriteTemp("big", std::string(5000, 'y'));
  EXPECT_TRUE(ReadFile(path, 5000).ok());
  absl::StatusOr<std::string> got = ReadFile(path, 4999);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(got.status().message()),
      HasSubstr(absl::StrCat("\"", path, "\" is larger than 4999 bytes")));
}

}  // namespace
}  // namespace informer

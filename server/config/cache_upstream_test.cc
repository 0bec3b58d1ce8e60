#include "server/config/cache_upstream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace server {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(CacheUpstreamTest, NoUpstreamIsDisabled) {
  std::vector<std::string> warnings;
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("", "", "", &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->enabled());
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(CacheUpstreamTest, AcceptsHttpAndHttpsAndTrimsTrailingSlash) {
  std::vector<std::string> warnings;
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("http://127.0.0.1:8001/", "", "", &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->url, "http://127.0.0.1:8001");
  u = ValidateCacheUpstream("https://node-cache.kube-system.svc:6443/prefix",
                            "", "", &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->url, "https://node-cache.kube-system.svc:6443/prefix");
  u = ValidateCacheUpstream("http://[::1]:80", "", "", &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(CacheUpstreamTest, BadUrlsNameTheFlag) {
  std::vector<std::string> warnings;
  for (const char* bad :
       {"ftp://host", "127.0.0.1:8001", "http://", "http://:80",
        "http://host:0", "http://host:99999", "http://host:x",
        "http://host/?a=b", "http://user@host", "unix:/tmp/sock"}) {
    absl::StatusOr<CacheUpstream> u =
        ValidateCacheUpstream(bad, "", "", &warnings);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(u.status().message()),
                HasSubstr("--cache_upstream "))
        << bad;
  }
}

TEST(CacheUpstreamTest, CredentialFlagsNeedAnUpstream) {
  std::vector<std::string> warnings;
  const std::string token = WriteFile("token", "abc\n");
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("", token, "", &warnings);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(std::string(u.status().message()),
              HasSubstr("--cache_upstream_token_file needs --cache_upstream"));
  u = ValidateCacheUpstream("", "", token, &warnings);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(std::string(u.status().message()),
              HasSubstr("--cache_upstream_ca_file needs --cache_upstream"));
}

TEST(CacheUpstreamTest, UnreadableFilesAreNotFoundNamingTheFlag) {
  std::vector<std::string> warnings;
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("https://h:1", "/nonexistent/token", "", &warnings);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(u.status().message()),
              HasSubstr("--cache_upstream_token_file: cannot read "
                        "\"/nonexistent/token\""));
  u = ValidateCacheUpstream("https://h:1", "", "/nonexistent/ca.crt",
                            &warnings);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(u.status().message()),
              HasSubstr("--cache_upstream_ca_file: cannot read"));
}

TEST(CacheUpstreamTest, CaFileNeedsHttps) {
  std::vector<std::string> warnings;
  const std::string ca = WriteFile("ca.crt", "-----BEGIN CERTIFICATE-----\n");
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("http://127.0.0.1:1", "", ca, &warnings);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(std::string(u.status().message()),
              HasSubstr("--cache_upstream_ca_file is for an https://"));
  u = ValidateCacheUpstream("https://node:6443", "", ca, &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->ca_file, ca);
}

TEST(CacheUpstreamTest, ClearTextTokenToAnotherHostWarns) {
  const std::string token = WriteFile("token2", "abc\n");
  std::vector<std::string> warnings;
  ASSERT_TRUE(
      ValidateCacheUpstream("http://localhost:8001", token, "", &warnings)
          .ok());
  ASSERT_TRUE(
      ValidateCacheUpstream("http://127.1.2.3:8001", token, "", &warnings)
          .ok());
  ASSERT_TRUE(
      ValidateCacheUpstream("https://node:6443", token, "", &warnings).ok());
  EXPECT_THAT(warnings, IsEmpty());
  absl::StatusOr<CacheUpstream> u =
      ValidateCacheUpstream("http://node-cache:8001", token, "", &warnings);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->token_file, token);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("--cache_upstream_token_file"));
  EXPECT_THAT(warnings[0], HasSubstr("http://node-cache:8001"));
}

TEST(CacheUpstreamTest, IsLoopbackUrl) {
  EXPECT_TRUE(IsLoopbackUrl("http://127.0.0.1:1"));
  EXPECT_TRUE(IsLoopbackUrl("http://LOCALHOST"));
  EXPECT_TRUE(IsLoopbackUrl("http://[::1]:8080/x"));
  EXPECT_FALSE(IsLoopbackUrl("http://127.0.0.1.example.com"));
  EXPECT_FALSE(IsLoopbackUrl("http://127.evil.example:8001"));
  EXPECT_FALSE(IsLoopbackUrl("http://10.0.0.1"));
  EXPECT_FALSE(IsLoopbackUrl("garbage"));
}

TEST(CacheUpstreamTest, RestConfigTakesTheClusterTransportSettings) {
  CacheUpstream u;
  u.url = "https://node:6443";
  u.token_file = "/t";
  u.ca_file = "/ca";
  informer::client::RestConfig cluster;
  cluster.server = "https://apiserver";
  cluster.bearer_token = "cluster-token";
  cluster.compression = informer::client::ApiCompression::kGzip;
  cluster.request_timeout = absl::Seconds(7);
  informer::client::RestConfig c = UpstreamRestConfig(u, cluster);
  EXPECT_EQ(c.server, "https://node:6443");
  EXPECT_EQ(c.bearer_token_file, "/t");
  EXPECT_EQ(c.ca_file, "/ca");
  EXPECT_TRUE(c.bearer_token.empty());  // never the cluster's credentials
  EXPECT_EQ(c.compression, informer::client::ApiCompression::kGzip);
  EXPECT_EQ(c.request_timeout, absl::Seconds(7));
}

}  // namespace
}  // namespace server

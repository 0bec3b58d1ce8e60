#include "informer/util/host_port.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using ::testing::HasSubstr;

TEST(ParseHostPortTest, Forms) {
  struct Case {
    const char* address;
    const char* host;
    int port;
  } cases[] = {
      {"127.0.0.1:8080", "127.0.0.1", 8080},
      {"example.com:0", "example.com", 0},
      {"[::1]:65535", "::1", 65535},
      {":9090", "", 9090},
  };
  for (const Case& c : cases) {
    absl::StatusOr<HostPort> got = ParseHostPort(c.address);
    ASSERT_TRUE(got.ok()) << c.address << ": " << got.status();
    EXPECT_EQ(got->host, c.host) << c.address;
    EXPECT_EQ(got->port, c.port) << c.address;
    EXPECT_EQ(JoinHostPort(got->host, got->port), c.address);
  }
}

TEST(ParseHostPortTest, ErrorsQuoteTheAddressAndSayWhy) {
  struct Case {
    const char* address;
    const char* why;
  } cases[] = {
      {"localhost", "no port"},
      {"host:", "the port is not a number in 0-65535"},
      {"host:65536", "the port is not a number in 0-65535"},
      {"host:-1", "the port is not a number in 0-65535"},
      {"host:+80", "the port is not a number in 0-65535"},
      {"::1:80", "an IPv6 host must be in brackets"},
      {"[127.0.0.1]:80", "brackets are for an IPv6 host"},
      {"[::1:80", "unclosed '['"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<HostPort> got = ParseHostPort(c.address);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << c.address;
    const std::string message(got.status().message());
    EXPECT_THAT(message, HasSubstr(std::string("\"") + c.address + "\""));
    EXPECT_THAT(message, HasSubstr(c.why)) << c.address;
  }
}

TEST(ParseUrlTest, Parts) {
  absl::StatusOr<Url> u =
      ParseUrl("HTTPS://[fd00::1]:6443/api/prefix?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "fd00::1");
  EXPECT_EQ(u->UrlHost(), "[fd00::1]");
  EXPECT_EQ(u->port, 6443);
  EXPECT_EQ(u->path, "/api/prefix");
  EXPECT_TRUE(u->has_query);
  EXPECT_EQ(u->query, "x=1");
  EXPECT_TRUE(u->has_fragment);
  EXPECT_EQ(u->fragment, "frag");

  u = ParseUrl("http://node-cache.svc");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "node-cache.svc");
  EXPECT_FALSE(u->port.has_value());
  EXPECT_EQ(u->path, "");
  EXPECT_FALSE(u->has_query);
  EXPECT_FALSE(u->has_fragment);

  u = ParseUrl("http://127.0.0.1:8001/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8001);
  EXPECT_EQ(u->path, "/");
}

TEST(ParseUrlTest, ErrorsQuoteTheUrlAndSayWhy) {
  struct Case {
    const char* url;
    const char* why;
  } cases[] = {
      {"127.0.0.1:8001", "no scheme"},
      {"://host", "no scheme"},
      {"ht tp://host", "invalid scheme"},
      {"http://", "no host"},
      {"http://:80/", "no host"},
      {"http://user:pw@host/", "user info (user@host) is not allowed"},
      {"http://[::1/", "unclosed '['"},
      {"http://[::1]x/", "unexpected text after the host"},
      {"http://[host]/", "brackets are for an IPv6 host"},
      {"http://::1:80/", "an IPv6 host must be in brackets"},
      {"http://host:0/", "the port is not a number in 1-65535"},
      {"http://host:99999/", "the port is not a number in 1-65535"},
      {"http://host:/", "the port is not a number in 1-65535"},
      {"http://host:8o/", "the port is not a number in 1-65535"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Url> got = ParseUrl(c.url);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.url;
    const std::string message(got.status().message());
    EXPECT_THAT(message, HasSubstr(std::string("\"") + c.url + "\""));
    EXPECT_THAT(message, HasSubstr(c.why)) << c.url;
  }
}

}  // namespace
}  // namespace informer

#include "informer/util/loopback.h"

#include "gtest/gtest.h"

namespace informer {
namespace {

TEST(IsLoopbackHostTest, LoopbackLiteralsAndLocalhost) {
  for (const char* host :
       {"127.0.0.1", "127.0.0.0", "127.255.255.255", "127.1.2.3", "::1",
        "[::1]", "0:0:0:0:0:0:0:1", "localhost", "LocalHost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
}

TEST(IsLoopbackHostTest, NamesThatLookLoopbackAreNot) {
  for (const char* host :
       {"127.evil.example", "127.0.0.1.evil.example", "localhost.example",
        "evil-localhost", "127.example", "127.0.0.1:80", "[::1]:80"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(IsLoopbackHostTest, OtherAddressesAreNot) {
  for (const char* host :
       {"", "0.0.0.0", "128.0.0.1", "126.255.255.255", "10.0.0.1", "::", "[::]",
        "::2", "::ffff:127.0.0.1", "[::1", "::1]", "127.1", "127.0.0.256",
        "127.0.0.01", " 127.0.0.1", "127.0.0.1 "}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace informer

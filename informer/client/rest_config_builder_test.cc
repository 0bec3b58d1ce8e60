#include "informer/client/rest_config_builder.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace informer {
namespace client {
namespace {

RestConfig TransportSettings() {
  RestConfig t;
  t.server = "https://not-copied";
  t.ca_file = "/not/copied";
  t.bearer_token = "not-copied";
  t.namespace_ = "not-copied";
  t.connect_timeout = absl::Seconds(3);
  t.request_timeout = absl::Seconds(4);
  t.http2 = true;
  t.compression = ApiCompression::kGzip;
  t.exec_timeout = absl::Seconds(5);
  t.user_agent = "agent/1";
  return t;
}

void ExpectTransportSettings(const RestConfig& c) {
  EXPECT_EQ(c.connect_timeout, absl::Seconds(3));
  EXPECT_EQ(c.request_timeout, absl::Seconds(4));
  EXPECT_TRUE(c.http2);
  EXPECT_EQ(c.compression, ApiCompression::kGzip);
  EXPECT_EQ(c.exec_timeout, absl::Seconds(5));
  EXPECT_EQ(c.user_agent, "agent/1");
}

TEST(RestConfigForTest, EndpointAndTransportSettingsOnly) {
  RestConfig c = RestConfigFor(
      {"https://node:8443/prefix//", "/ca.crt", "/token"}, TransportSettings());
  EXPECT_EQ(c.server, "https://node:8443/prefix");
  EXPECT_EQ(c.ca_file, "/ca.crt");
  EXPECT_EQ(c.bearer_token_file, "/token");
  EXPECT_EQ(c.bearer_token, "");
  EXPECT_EQ(c.namespace_, "default");
  ExpectTransportSettings(c);
}

TEST(RestConfigForTest, DefaultTransportSettings) {
  RestConfig c = RestConfigFor({"http://127.0.0.1:1", "", ""});
  const RestConfig defaults;
  EXPECT_EQ(c.connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(c.request_timeout, defaults.request_timeout);
  EXPECT_EQ(c.exec_timeout, defaults.exec_timeout);
  EXPECT_FALSE(c.http2);
}

TEST(CopyTransportSettingsTest, KeepsEndpointAndCredentials) {
  RestConfig c;
  c.server = "https://kept";
  c.ca_data = "kept";
  c.insecure_skip_tls_verify = true;
  c.proxy_url = "http://proxy";
  c.bearer_token = "kept";
  c.client_key_data = "kept";
  c.exec.emplace();
  c.exec->command = "kept";
  c.namespace_ = "kept";
  CopyTransportSettings(TransportSettings(), &c);
  EXPECT_EQ(c.server, "https://kept");
  EXPECT_EQ(c.ca_file, "");
  EXPECT_EQ(c.ca_data, "kept");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.proxy_url, "http://proxy");
  EXPECT_EQ(c.bearer_token, "kept");
  EXPECT_EQ(c.client_key_data, "kept");
  ASSERT_TRUE(c.exec.has_value());
  EXPECT_EQ(c.exec->command, "kept");
  EXPECT_EQ(c.namespace_, "kept");
  ExpectTransportSettings(c);
}

TEST(ApplyOverridesTest, NonEmptyOverridesWin) {
  RestConfig c;
  c.server = "https://a";
  c.bearer_token = "t";
  c.bearer_token_file = "/f";
  c.namespace_ = "ns";
  ApplyOverrides({}, &c);
  EXPECT_EQ(c.server, "https://a");
  EXPECT_EQ(c.bearer_token_file, "/f");
  EXPECT_FALSE(c.insecure_skip_tls_verify);

  ConfigOverrides o;
  o.server = "https://b/";
  o.token = "override";
  o.namespace_ = "other";
  o.insecure_skip_tls_verify = true;
  ApplyOverrides(o, &c);
  EXPECT_EQ(c.server, "https://b");
  EXPECT_EQ(c.bearer_token, "override");
  EXPECT_EQ(c.bearer_token_file, "");
  EXPECT_EQ(c.namespace_, "other");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
}

}  // namespace
}  // namespace client
}  // namespace informer

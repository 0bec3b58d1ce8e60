#include "informer/client/exec_credential.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/client/credentials.h"

namespace informer {
namespace client {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A plugin that counts its runs in a file and prints a token naming the run,
// its first argument and $SUFFIX; the expiry comes from $EXPIRY. It also
// saves KUBERNETES_EXEC_INFO for inspection.
std::string WritePlugin(const std::string& name) {
  std::string dir = TempDir() + "/" + name;
  std::string counter = dir + ".count";
  std::string path = dir + ".sh";
  std::remove(counter.c_str());
  std::ofstream(path) << "#!/bin/sh\n"
                      << "n=$(cat " << counter << " 2>/dev/null || echo 0)\n"
                      << "n=$((n+1))\n"
                      << "echo $n > " << counter << "\n"
                      << "printf '%s' \"$KUBERNETES_EXEC_INFO\" > " << dir
                      << ".info\n"
                      << "cat <<EOF\n"
                      << "{\"apiVersion\":\"$API\",\"kind\":\"ExecCredential\","
                      << "\"status\":{\"token\":\"tok-$n-$1-$SUFFIX\","
                      << "\"expirationTimestamp\":\"$EXPIRY\"}}\n"
                      << "EOF\n";
  chmod(path.c_str(), 0755);
  return path;
}

ExecConfig PluginConfig(const std::string& path, const std::string& api) {
  ExecConfig c;
  c.api_version = api;
  c.command = path;
  c.args = {"arg1"};
  c.env = {{"SUFFIX", "sfx"}, {"API", api}, {"EXPIRY", "2023-11-14T22:20:00Z"}};
  return c;
}

// FakeClock's default start is 2023-11-14T22:13:20Z, 400 s before expiry.
TEST(ExecCredentialProviderTest, CachesTokenUntilExpiry) {
  FakeClock clock;
  RestConfig cluster;
  cluster.server = "https://k";
  ExecCredentialProvider p(
      PluginConfig(WritePlugin("cache"), "client.authentication.k8s.io/v1"),
      cluster, &clock);
  auto c1 = p.Get();
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(c1->bearer_token, "tok-1-arg1-sfx");
  clock.Advance(absl::Seconds(399));
  auto c2 = p.Get();
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->bearer_token, "tok-1-arg1-sfx");
  EXPECT_EQ(p.runs(), 1);
  clock.Advance(absl::Seconds(1));
  auto c3 = p.Get();
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(c3->bearer_token, "tok-2-arg1-sfx");
  EXPECT_EQ(p.runs(), 2);
}

TEST(ExecCredentialProviderTest, V1beta1AndInvalidateReRunsOnlyForCurrent) {
  FakeClock clock;
  ExecCredentialProvider p(
      PluginConfig(WritePlugin("beta"), "client.authentication.k8s.io/v1beta1"),
      RestConfig(), &clock);
  auto c1 = p.Get();
  ASSERT_TRUE(c1.ok()) << c1.status();
  p.Invalidate(*c1);  // the 401 path
  auto c2 = p.Get();
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->bearer_token, "tok-2-arg1-sfx");
  p.Invalidate(*c1);  // stale: another request already refreshed
  auto c3 = p.Get();
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(c3->bearer_token, "tok-2-arg1-sfx");
  EXPECT_EQ(p.runs(), 2);
}

TEST(ExecCredentialProviderTest, PassesClusterInfoWhenAsked) {
  FakeClock clock;
  RestConfig cluster;
  cluster.server = "https://api.example:6443";
  cluster.ca_data = "CA";
  ExecConfig cfg =
      PluginConfig(WritePlugin("info"), "client.authentication.k8s.io/v1");
  cfg.provide_cluster_info = true;
  ExecCredentialProvider p(cfg, cluster, &clock);
  ASSERT_TRUE(p.Get().ok());
  std::string info = ReadAll(TempDir() + "/info.info");
  EXPECT_THAT(info, HasSubstr("\"kind\":\"ExecCredential\""));
  EXPECT_THAT(info, HasSubstr("\"server\":\"https://api.example:6443\""));
  EXPECT_THAT(info, HasSubstr("\"certificate-authority-data\":\"Q0E=\""));
  EXPECT_THAT(info, HasSubstr("\"interactive\":false"));
}

TEST(ExecCredentialProviderTest, FailuresAreUnauthenticatedWithHint) {
  FakeClock clock;
  ExecConfig missing;
  missing.api_version = "client.authentication.k8s.io/v1";
  missing.command = TempDir() + "/no-such-plugin";
  missing.install_hint = "install the plugin from example.com";
  ExecCredentialProvider p1(missing, RestConfig(), &clock);
  auto r1 = p1.Get();
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(r1.status().message()),
              HasSubstr("install the plugin from example.com"));

  std::string failing = TempDir() + "/failing.sh";
  std::ofstream(failing) << "#!/bin/sh\nexit 3\n";
  chmod(failing.c_str(), 0755);
  ExecConfig f = missing;
  f.command = failing;
  ExecCredentialProvider p2(f, RestConfig(), &clock);
  EXPECT_THAT(std::string(p2.Get().status().message()),
              HasSubstr("exit status 3"));

  ExecConfig wrong_api =
      PluginConfig(WritePlugin("wrong"), "client.authentication.k8s.io/v1");
  wrong_api.env[1].second = "client.authentication.k8s.io/v1beta1";
  ExecCredentialProvider p3(wrong_api, RestConfig(), &clock);
  EXPECT_THAT(std::string(p3.Get().status().message()),
              HasSubstr("returned apiVersion"));
}

std::string WriteScript(const std::string& name, const std::string& body) {
  std::string path = TempDir() + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

ExecConfig ScriptConfig(const std::string& path) {
  ExecConfig c;
  c.api_version = "client.authentication.k8s.io/v1";
  c.command = path;
  return c;
}

TEST(ExecCredentialProviderTest, HungPluginIsKilledAfterTimeout) {
  // The plugin (and the sleep it starts, which holds the output pipes too)
  // would run for a minute; the provider kills it when the clock passes
  // the timeout. The FIFO tells the test that the plugin has written its
  // stderr (a blocking open, no polling).
  const std::string fifo = TempDir() + "/hang.ready";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string path =
      WriteScript("hang.sh",
                  "echo 'waiting for the browser login' >&2\n"
                  "echo ready > " +
                      fifo + "\nsleep 60\n");
  FakeClock clock;
  RestConfig cluster;
  cluster.exec_timeout = absl::Seconds(2);
  ExecCredentialProvider p(ScriptConfig(path), cluster, &clock);
  absl::StatusOr<Credentials> got;
  const absl::Time start = clock.Now();
  std::thread caller([&] { got = p.Get(); });
  EXPECT_EQ(ReadAll(fifo), "ready\n");  // returns once the plugin wrote it
  EXPECT_EQ(clock.WaitForWaiters(1), start + absl::Seconds(2));
  clock.Advance(absl::Seconds(2));
  caller.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string msg(got.status().message());
  EXPECT_THAT(msg, HasSubstr("exec plugin " + path +
                             " did not finish within 2s and was killed"));
  EXPECT_THAT(msg, HasSubstr("; stderr: waiting for the browser login"));
  EXPECT_EQ(p.runs(), 1);
}

TEST(ExecCredentialProviderTest, DefaultTimeoutIsThirtySeconds) {
  EXPECT_EQ(RestConfig().exec_timeout, absl::Seconds(30));
  const std::string path = WriteScript("hang-default.sh", "sleep 60\n");
  FakeClock clock;
  ExecCredentialProvider p(ScriptConfig(path), RestConfig(), &clock);
  absl::StatusOr<Credentials> got;
  std::thread caller([&] { got = p.Get(); });
  EXPECT_EQ(clock.WaitForWaiters(1), clock.Now() + absl::Seconds(30));
  clock.Advance(absl::Seconds(30));
  caller.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ExecCredentialProviderTest, FailingPluginStderrIsInTheError) {
  const std::string path = WriteScript(
      "stderr.sh",
      "echo 'error: refresh token expired; run: login --again' >&2\nexit 4\n");
  FakeClock clock;
  ExecCredentialProvider p(ScriptConfig(path), RestConfig(), &clock);
  auto got = p.Get();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(got.status().message(),
            "exec plugin " + path +
                " failed: exit status 4; stderr: error: refresh token "
                "expired; run: login --again");
}

TEST(ExecCredentialProviderTest, CapturedStderrIsBoundedToItsTail) {
  const std::string path =
      WriteScript("stderr-flood.sh",
                  "head -c 200000 /dev/zero | tr '\\0' x >&2\n"
                  "echo LAST-LINE >&2\nexit 1\n");
  FakeClock clock;
  ExecCredentialProvider p(ScriptConfig(path), RestConfig(), &clock);
  auto got = p.Get();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated);
  const std::string msg(got.status().message());
  EXPECT_LE(msg.size(), 4096 + path.size() + 64);
  EXPECT_THAT(msg, HasSubstr("; stderr: ...xxx"));
  EXPECT_TRUE(absl::EndsWith(msg, "xxxLAST-LINE"))
      << msg.substr(msg.size() - 80);
}

TEST(ExecCredentialProviderTest, StderrChatterDoesNotSpoilTheCredential) {
  const std::string path = WriteScript(
      "chatty.sh",
      "echo 'warning: cache dir missing' >&2\n"
      "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'"
      "'\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t0k\"}}'\n");
  FakeClock clock;
  ExecCredentialProvider p(ScriptConfig(path), RestConfig(), &clock);
  auto got = p.Get();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bearer_token, "t0k");
}

TEST(ParseExecCredentialTest, ClientCertificateWithoutExpiry) {
  auto s = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
      R"("status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}})",
      "client.authentication.k8s.io/v1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->credentials.client_cert_pem, "CERT");
  EXPECT_EQ(s->credentials.client_key_pem, "KEY");
  EXPECT_FALSE(s->expiration.has_value());
}

TEST(ParseExecCredentialTest, RejectsBadDocuments) {
  const char* v1 = "client.authentication.k8s.io/v1";
  EXPECT_FALSE(ParseExecCredential("not json", v1).ok());
  EXPECT_FALSE(
      ParseExecCredential(R"({"apiVersion":"client.authentication.k8s.io/v1",)"
                          R"("kind":"ExecCredential","status":{}})",
                          v1)
          .ok());
  EXPECT_FALSE(
      ParseExecCredential(R"({"apiVersion":"client.authentication.k8s.io/v1",)"
                          R"("kind":"ExecCredential","status":{"token":"t",)"
                          R"("expirationTimestamp":"tomorrow"}})",
                          v1)
          .ok());
  EXPECT_FALSE(ParseExecCredential(
                   R"({"apiVersion":"client.authentication.k8s.io/v1",)"
                   R"("kind":"ExecCredential","status":{"clientKeyData":"K"}})",
                   v1)
                   .ok());
}

TEST(TokenFileCredentialProviderTest, RotatedTokenIsPickedUpAfterPeriod) {
  FakeClock clock;
  std::string path = TempDir() + "/rotating-token";
  std::ofstream(path) << "token-1\n";
  TokenFileCredentialProvider p(path, Credentials(), &clock);
  EXPECT_EQ(p.Get()->bearer_token, "token-1");
  std::ofstream(path) << "token-2\n";
  EXPECT_EQ(p.Get()->bearer_token, "token-1");  // cached within the period
  clock.Advance(absl::Minutes(1));
  EXPECT_EQ(p.Get()->bearer_token, "token-2");
  std::ofstream(path) << "token-3\n";
  Credentials rejected;
  rejected.bearer_token = "token-2";
  p.Invalidate(rejected);
  EXPECT_EQ(p.Get()->bearer_token, "token-3");  // a 401 forces a re-read
}

TEST(TokenFileCredentialProviderTest, VanishedFileKeepsLastToken) {
  FakeClock clock;
  std::string path = TempDir() + "/vanishing-token";
  std::ofstream(path) << "keep-me";
  TokenFileCredentialProvider p(path, Credentials(), &clock);
  EXPECT_EQ(p.Get()->bearer_token, "keep-me");
  std::remove(path.c_str());
  clock.Advance(absl::Minutes(2));
  EXPECT_EQ(p.Get()->bearer_token, "keep-me");
  TokenFileCredentialProvider never(path, Credentials(), &clock);
  EXPECT_EQ(never.Get().status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(MakeCredentialProviderTest, PicksExecThenTokenFileThenStatic) {
  FakeClock clock;
  std::string token_path = TempDir() + "/factory-token";
  std::ofstream(token_path) << "from-file";
  RestConfig rc;
  rc.bearer_token = "static";
  auto s = MakeCredentialProvider(rc, &clock);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Get()->bearer_token, "static");
  rc.bearer_token_file = token_path;
  auto f = MakeCredentialProvider(rc, &clock);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->Get()->bearer_token, "from-file");
  rc.exec =
      PluginConfig(WritePlugin("factory"), "client.authentication.k8s.io/v1");
  auto e = MakeCredentialProvider(rc, &clock);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->Get()->bearer_token, "tok-1-arg1-sfx");
}

TEST(MakeCredentialProviderTest, ClientCertFilesAreReadAndChecked) {
  FakeClock clock;
  std::string cert = TempDir() + "/cert.pem";
  std::ofstream(cert) << "CERT-PEM";
  RestConfig rc;
  rc.client_cert_file = cert;
  EXPECT_THAT(
      std::string(MakeCredentialProvider(rc, &clock).status().message()),
      HasSubstr("together"));
  rc.client_key_data = "KEY-PEM";
  auto p = MakeCredentialProvider(rc, &clock);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Get()->client_cert_pem, "CERT-PEM");
  rc.client_cert_file = TempDir() + "/missing.pem";
  EXPECT_THAT(
      std::string(MakeCredentialProvider(rc, &clock).status().message()),
      HasSubstr("missing.pem"));
}

}  // namespace
}  // namespace client
}  // namespace informer

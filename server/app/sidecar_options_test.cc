#include "server/app/sidecar_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"

namespace server {
namespace {

using ::testing::HasSubstr;

// Sets a flag from its command-line text, as the parser would.
void Set(const std::string& name, const std::string& value) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  ASSERT_NE(flag, nullptr) << name;
  std::string error;
  ASSERT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream(path) << text;
  return path;
}

class SidecarOptionsTest : public ::testing::Test {
 private:
  absl::FlagSaver saver_;  // every test starts from the defaults
};

TEST_F(SidecarOptionsTest, DefaultsAreLazyModeOnLoopback) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->config.allow_unlisted_resources);
  EXPECT_TRUE(o->config.resources.empty());
  EXPECT_FALSE(o->config_file_given);
  EXPECT_FALSE(o->demo);
  EXPECT_EQ(o->grpc_listen, "127.0.0.1:50051");
  EXPECT_EQ(o->http_listen, ":9090");
  EXPECT_EQ(o->print_events, SidecarOptions::PrintEvents::kAuto);
  EXPECT_EQ(o->informer.watch.max_pending_keys, 65536u);
  EXPECT_EQ(o->informer.watch.history_size, 10000u);
  EXPECT_EQ(o->informer.watch.history_bytes, size_t{16} << 20);
  EXPECT_EQ(o->informer.watch.batch_window, absl::Milliseconds(5));
  EXPECT_EQ(o->informer.max_page_bytes, int64_t{4} << 20);
  EXPECT_EQ(o->max_message_bytes, int64_t{64} << 20);
  EXPECT_EQ(o->shutdown_grace, absl::Seconds(5));
  EXPECT_TRUE(o->tls.empty());
  EXPECT_EQ(o->api_compression, informer::client::ApiCompression::kNone);
}

TEST_F(SidecarOptionsTest, WatchHistoryBytesIsPassedOnAndZeroTurnsItOff) {
  Set("watch_history_bytes", "1048576");
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->informer.watch.history_bytes, size_t{1} << 20);
  EXPECT_EQ(o->informer.watch.history_size, 10000u);
  Set("watch_history_bytes", "0");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->informer.watch.history_bytes, 0u);
}

TEST_F(SidecarOptionsTest, ApiCompressionGzipIsOptIn) {
  Set("api_compression", "gzip");
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_compression, informer::client::ApiCompression::kGzip);
  Set("api_compression", "none");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_compression, informer::client::ApiCompression::kNone);
}

TEST_F(SidecarOptionsTest, WatchListDefaultsToAutoAndParses) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->watch_list, SidecarOptions::WatchList::kAuto);
  Set("watch_list", "on");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->watch_list, SidecarOptions::WatchList::kOn);
  Set("watch_list", "off");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->watch_list, SidecarOptions::WatchList::kOff);
}

TEST_F(SidecarOptionsTest, ApiConnectionTimersDefaultAndParse) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_tcp_timeout, absl::Seconds(30));
  EXPECT_EQ(o->api_stall_timeout, absl::Seconds(30));
  EXPECT_EQ(o->api_watch_idle_timeout, absl::Seconds(75));
  Set("api_tcp_timeout", "0");
  Set("api_stall_timeout", "5s");
  Set("api_watch_idle_timeout", "2m");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_tcp_timeout, absl::ZeroDuration());
  EXPECT_EQ(o->api_stall_timeout, absl::Seconds(5));
  EXPECT_EQ(o->api_watch_idle_timeout, absl::Minutes(2));
}

TEST_F(SidecarOptionsTest, ResourcesGetTheDefaultNamespace) {
  Set("resources", "pods,deployments.apps");
  Set("namespace", "team-a");
  Set("lazy_idle_timeout", "90s");
  Set("demo", "true");
  Set("print_events", "false");
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->config.allow_unlisted_resources);
  ASSERT_EQ(o->config.resources.size(), 2u);
  EXPECT_EQ(o->config.resources[0].config.resource, "pods");
  EXPECT_EQ(o->config.resources[0].config.namespace_, "team-a");
  EXPECT_EQ(o->default_namespace, "team-a");
  EXPECT_EQ(o->config.lazy_idle_timeout, absl::Seconds(90));
  EXPECT_TRUE(o->demo);
  EXPECT_EQ(o->print_events, SidecarOptions::PrintEvents::kFalse);
}

TEST_F(SidecarOptionsTest, ConfigFileIsReadAndItsErrorsNameTheLine) {
  Set("config", WriteFile("good.yaml",
                          "resources:\n- resource: pods\n"
                          "  namespace: web\n"));
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->config_file_given);
  ASSERT_EQ(o->config.resources.size(), 1u);
  EXPECT_EQ(o->config.resources[0].config.namespace_, "web");

  const std::string bad = WriteFile(
      "bad.yaml", "resources:\n- resource: pods\n  resyncPeriod: 5x\n");
  Set("config", bad);
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), HasSubstr(bad + ":3:"));
  EXPECT_THAT(o.status().message(), HasSubstr("resyncPeriod"));

  Set("resources", "pods");
  o = OptionsFromFlags();
  EXPECT_THAT(o.status().message(),
              HasSubstr("--config and --resources both list resources"));
}

TEST_F(SidecarOptionsTest, SecretsNeedAllowSecrets) {
  Set("resources", "pods,Secret");
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(),
              HasSubstr("resource \"Secret\": Secrets are withheld unless "
                        "--allow_secrets is set"));
  Set("allow_secrets", "true");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->allow_secrets);
}

struct BadValue {
  const char* flag;
  const char* value;
  const char* error;  // part of the message
};

TEST_F(SidecarOptionsTest, EveryBadValueNamesItsFlag) {
  const BadValue cases[] = {
      {"api_compression", "deflate",
       "--api_compression must be none or gzip, not \"deflate\""},
      {"api_compression", "", "--api_compression must be none or gzip"},
      {"lazy_idle_timeout", "soon", "--lazy_idle_timeout: "},
      {"watch_list", "true",
       "--watch_list must be auto, on or off, not \"true\""},
      {"api_tcp_timeout", "1s", "--api_tcp_timeout must be 0 or at least 2s"},
      {"api_stall_timeout", "500ms",
       "--api_stall_timeout must be 0 or at least 1s"},
      {"api_watch_idle_timeout", "0",
       "--api_watch_idle_timeout must be at least 1s"},
      {"lazy_idle_timeout", "0s", "--lazy_idle_timeout: must be positive"},
      {"watch_max_pending", "0", "--watch_max_pending must be at least 1"},
      {"watch_history", "-1", "--watch_history must not be negative"},
      {"watch_history_bytes", "-1",
       "--watch_history_bytes must not be negative"},
      {"watch_batch_window", "2s",
       "--watch_batch_window must be between 0 and 1s, not 2s"},
      {"watch_batch_window", "-1ms", "--watch_batch_window must be between"},
      {"watch_batch_min_rate", "-1",
       "--watch_batch_min_rate must not be negative"},
      {"watch_max_message_bytes", "100",
       "--watch_max_message_bytes must be between 1024 and "
       "--max_message_bytes, not 100"},
      {"watch_max_message_bytes", "999999999",
       "--watch_max_message_bytes must be between 1024"},
      {"grpc_listen", "", "--grpc_listen is empty"},
      {"grpc_keepalive_time", "500ms",
       "--grpc_keepalive_time must be at least 1s"},
      {"grpc_keepalive_timeout", "10ms",
       "--grpc_keepalive_timeout must be at least 100ms"},
      {"grpc_min_ping_interval", "-1s",
       "--grpc_min_ping_interval must not be negative"},
      {"max_concurrent_streams", "0",
       "--max_concurrent_streams must be at least 1"},
      {"max_message_bytes", "100",
       "--max_message_bytes must be between 4096 and 2147483647"},
      {"max_message_bytes", "4294967296",
       "--max_message_bytes must be between 4096 and 2147483647"},
      {"max_request_bytes", "10",
       "--max_request_bytes must be between 1024 and 2147483647"},
      {"max_list_page_bytes", "0",
       "--max_list_page_bytes must be between 1 and --max_message_bytes"},
      {"max_list_page_bytes", "134217728",
       "--max_list_page_bytes must be between 1 and --max_message_bytes"},
      {"print_events", "maybe",
       "--print_events must be true, false or auto, not \"maybe\""},
      {"shutdown_grace", "-1s", "--shutdown_grace must not be negative"},
      {"workqueue_idle_timeout", "-1s",
       "--workqueue_idle_timeout must not be negative"},
      {"event_retry_interval", "0s", "--event_retry_interval must be positive"},
      {"event_flush_timeout", "-5s",
       "--event_flush_timeout must not be negative"},
  };
  for (const BadValue& c : cases) {
    SCOPED_TRACE(absl::StrCat("--", c.flag, "=", c.value));
    absl::FlagSaver saver;
    Set(c.flag, c.value);
    absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(o.status().message(), HasSubstr(c.error));
  }
}

TEST_F(SidecarOptionsTest, GrpcListenUnixPathMustFitSunPathInADirectory) {
  // /tmp exists; TEST_TMPDIR may itself be longer than a socket path.
  const std::string fits = "/tmp/" + std::string(102, 's');
  ASSERT_EQ(fits.size(), 107u);
  Set("grpc_listen", "unix:" + fits);
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->grpc_listen, "unix:" + fits);

  const std::string too_long = fits + "x";
  Set("grpc_listen", "unix:" + too_long);
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.status().message(),
            absl::StrCat("--grpc_listen: the unix socket path \"", too_long,
                         "\" is 108 characters long; the limit is 107 "
                         "(sockaddr_un.sun_path, 108 bytes with the NUL)"));

  Set("grpc_listen", "unix-abstract:" + std::string(108, 'a'));
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(),
              HasSubstr("is 108 characters long; the limit is 107"));

  Set("grpc_listen", "unix:/tmp/no-such-dir-of-the-sidecar/grpc.sock");
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(),
              HasSubstr("--grpc_listen: the directory "
                        "\"/tmp/no-such-dir-of-the-sidecar\" of the unix "
                        "socket path"));

  Set("grpc_listen", "unix:");
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(),
              HasSubstr("--grpc_listen names an empty unix socket path"));
}

TEST_F(SidecarOptionsTest, HelpGroupsNameEveryFlagOnceAndOnlyRealOnes) {
  std::set<std::string> seen;
  for (const informer::FlagGroup& group : SidecarFlagGroups()) {
    EXPECT_FALSE(group.flags.empty()) << group.title;
    for (const std::string& name : group.flags) {
      EXPECT_NE(absl::FindCommandLineFlag(name), nullptr) << name;
      EXPECT_TRUE(seen.insert(name).second) << name << " in two groups";
    }
  }
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() == "server/app/sidecar_options.cc") {
      EXPECT_EQ(seen.count(std::string(name)), 1u) << name << " in no group";
    }
  }
}

TEST_F(SidecarOptionsTest, CacheUpstreamAndItsCredentials) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->cache_upstream.enabled());
  const std::string token = WriteFile("upstream-token", "t0ken\n");
  Set("cache_upstream", "http://127.0.0.1:8001/");
  Set("cache_upstream_token_file", token);
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cache_upstream.url, "http://127.0.0.1:8001");
  EXPECT_EQ(o->cache_upstream.token_file, token);
  EXPECT_TRUE(o->warnings.empty());
  // A token in clear text to another host is allowed, with a warning.
  Set("cache_upstream", "http://node-cache.kube-system:8001");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->warnings.size(), 1u);
  EXPECT_THAT(o->warnings[0], HasSubstr("--cache_upstream_token_file"));
}

TEST_F(SidecarOptionsTest, BadCacheUpstreamFlagsNameTheFlag) {
  Set("cache_upstream", "node-cache:8001");
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()),
              HasSubstr("--cache_upstream "));
  Set("cache_upstream", "https://node-cache:8001");
  Set("cache_upstream_ca_file", "/nonexistent/ca.crt");
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()),
              HasSubstr("--cache_upstream_ca_file"));
  Set("cache_upstream_ca_file", "");
  Set("demo", "true");
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()),
              HasSubstr("--demo and --cache_upstream"));
  Set("demo", "false");
  Set("cache_upstream", "");
  Set("cache_upstream_token_file", WriteFile("t", "x"));
  o = OptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()),
              HasSubstr("--cache_upstream_token_file needs --cache_upstream"));
}

TEST_F(SidecarOptionsTest, CacheDirIsOffByDefaultAndTheIntervalParses) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cache_dir, "");
  EXPECT_EQ(o->cache_snapshot_interval, absl::Minutes(5));
  Set("cache_dir", "/var/cache/informer");
  Set("cache_snapshot_interval", "30s");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cache_dir, "/var/cache/informer");
  EXPECT_EQ(o->cache_snapshot_interval, absl::Seconds(30));
  Set("cache_snapshot_interval", "0");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cache_snapshot_interval, absl::ZeroDuration());
  for (const char* bad : {"-1s", "10ms"}) {
    Set("cache_snapshot_interval", bad);
    o = OptionsFromFlags();
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_THAT(o.status().message(), HasSubstr("--cache_snapshot_interval"));
  }
}

TEST_F(SidecarOptionsTest, ServeStaleAndReadyWhenStaleAreOffByDefault) {
  absl::StatusOr<SidecarOptions> o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->serve_stale_on_start);
  EXPECT_FALSE(o->ready_when_stale);
  Set("serve_stale_on_start", "true");
  Set("ready_when_stale", "true");
  o = OptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->serve_stale_on_start);
  EXPECT_TRUE(o->ready_when_stale);
}

}  // namespace
}  // namespace server

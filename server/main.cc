// informer_sidecar: serves Kubernetes informer caches over gRPC
// (informer.v1.Informer), with server reflection and grpc.health.v1.
//
// With --demo, or when no cluster is configured (no --kubeconfig, no
// $KUBECONFIG or ~/.kube/config, not in a pod), it runs the API server
// emulator in-process as a demo cluster that changes every second.

#include <glog/logging.h>
#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "informer/client/kube_client.h"
#include "informer/client/kubeconfig.h"
#include "informer/cache/event_printer.h"
#include "informer/util/logging.h"
#include "server/security/authz.h"
#include "emulator/emulator.h"
#include "server/event_recording.h"
#include "server/ops/grpc_metrics_interceptor.h"
#include "server/ops/http_server.h"
#include "server/config/informer_registry.h"
#include "server/kubeapi/kube_api_flags.h"
#include "server/ops/malloc_tuning.h"
#include "server/config/resource_resolver.h"
#include "server/config/sidecar_config.h"
#include "server/ops/sidecar_metrics.h"
#include "server/sidecar_server.h"
#include "server/security/tls_config.h"
#include "server/workqueue_service.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "Path to a kubeconfig file. Default: $KUBECONFIG, then the "
          "in-cluster service account, then ~/.kube/config; with none of "
          "them the sidecar runs its demo cluster.");
ABSL_FLAG(std::string, context, "",
          "The kubeconfig context to use (default: its current-context).");
ABSL_FLAG(bool, in_cluster, false,
          "Use the pod's service account (in-cluster config) and fail if it "
          "is not available.");
ABSL_FLAG(std::string, resources, "",
          "Comma-separated resources to run informers for from the start, "
          "named as kubectl does (pods, po, deployments.apps, a CRD "
          "plural...); shorthand for a --config resource list. Requests may "
          "use any name of a resource (po, pod, Pod, pods). With neither "
          "--resources nor --config the sidecar runs in lazy mode: an "
          "informer starts on the first request for a resource (in --demo: "
          "pods,configmaps,deployments.apps from the start, others lazily).");
ABSL_FLAG(std::string, config, "",
          "YAML config file: resources (each with namespace, labelSelector, "
          "fieldSelector, resyncPeriod, metadataOnly, transform.dropFields, "
          "indexes of label/field/ownerUid), allowUnlistedResources (lazy "
          "mode) and lazyIdleTimeout. See server/config/testdata/"
          "sidecar_config_example.yaml. A bad file stops the sidecar at "
          "start with FILE:LINE:COLUMN and the field.");
ABSL_FLAG(std::string, namespace, "",
          "Default namespace of the informers: resources that set no "
          "namespace of their own, and lazily started ones (default: all "
          "namespaces).");
ABSL_FLAG(std::string, lazy_idle_timeout, "",
          "Lazy mode: stop an informer started on demand after it had no "
          "request and no Watch stream for this long (Go duration, e.g. 30s, "
          "5m). Default: the config's lazyIdleTimeout, else 5m.");
ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50051",
          "gRPC listen address: host:port, or unix:/path/to/socket.");
ABSL_FLAG(int64_t, watch_max_pending, 65536,
          "Informer.Watch: distinct objects a slow stream may have pending "
          "(after coalescing) before it ends with RESOURCE_EXHAUSTED; the "
          "client resumes with its last token.");
ABSL_FLAG(int64_t, watch_history, 10000,
          "Informer.Watch: events kept per resource for streams resuming "
          "with a token; older tokens get RESET and a fresh initial state.");
ABSL_FLAG(absl::Duration, watch_batch_window, absl::Milliseconds(5),
          "Informer.Watch: under load (see --watch_batch_min_rate) a stream "
          "that wrote less than this long ago gathers events until the "
          "window ends, so busy streams send several events per message "
          "(gRPC's per-message cost dominates fan-out); a stream quiet for "
          "longer writes at once. Adds at most this much latency. 0 "
          "disables; at most 1s.");
ABSL_FLAG(double, watch_batch_min_rate, 20000,
          "Informer.Watch: the batching window applies only while the "
          "sidecar queues at least this many events per second for all its "
          "streams together; below it every event is written at once. 0: "
          "always batch.");
ABSL_FLAG(std::string, grpc_tls_cert_file, "",
          "Serve gRPC over TLS with this PEM certificate chain (needs "
          "--grpc_tls_key_file).");
ABSL_FLAG(std::string, grpc_tls_key_file, "",
          "The PEM private key of --grpc_tls_cert_file.");
ABSL_FLAG(std::string, grpc_tls_client_ca_file, "",
          "mTLS: require every gRPC client to present a certificate signed "
          "by a CA in this PEM bundle (needs --grpc_tls_cert_file).");
ABSL_FLAG(std::string, tokens_file, "",
          "YAML file mapping bearer tokens to the resources and namespaces "
          "they may read; with it, informer.v1 calls need the metadata "
          "\"authorization: Bearer <token>\". Default: no tokens, every "
          "local caller reads everything (but Secrets).");
ABSL_FLAG(bool, allow_secrets, false,
          "Serve Secrets. Without it, a secrets resource in --resources is a "
          "start-up error and requests for Secrets get PERMISSION_DENIED; "
          "with a tokens file, only tokens naming secrets may read them.");
ABSL_FLAG(std::string, print_events, "auto",
          "Print one line per informer notification to stdout (type, "
          "resource, namespace/name, resourceVersion; never object "
          "contents): \"true\", \"false\", or \"auto\" = only in demo "
          "mode, so a newcomer sees events stream.");
ABSL_FLAG(absl::Duration, workqueue_idle_timeout, absl::Minutes(10),
          "informer.v1.WorkQueue: a queue with no worker and no activity for "
          "this long is removed (0: never).");
ABSL_FLAG(bool, demo, false,
          "Run the in-process demo cluster (the API server emulator seeded "
          "with namespaces, pods, deployments and configmaps that change "
          "every second) even when a cluster is configured.");

// --- Operations: metrics and probes, lifecycle, keepalive, limits ---
ABSL_FLAG(std::string, http_listen, ":9090",
          "HTTP address of /metrics (Prometheus), /healthz (liveness) and "
          "/readyz (every configured informer synced): host:port, :port for "
          "all interfaces, port 0 picks one; empty disables. Serves no "
          "object data.");
ABSL_FLAG(std::string, ports_file, "",
          "After binding, write \"grpc=PORT\\nhttp=PORT\\n\" to this file "
          "(atomically; 0 for a unix socket or a disabled HTTP server), for "
          "wrappers and tests that listen on port 0.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "On SIGTERM/SIGINT: how long running unary calls may take to "
          "finish (Watch streams end at once with UNAVAILABLE). A second "
          "signal exits at once with 128+signal (130 SIGINT, 143 SIGTERM).");
ABSL_FLAG(absl::Duration, grpc_keepalive_time, absl::Seconds(30),
          "Ping each gRPC client connection after this long without "
          "activity, so the streams of a client that died without closing "
          "its connection are reclaimed.");
ABSL_FLAG(absl::Duration, grpc_keepalive_timeout, absl::Seconds(10),
          "Close a gRPC connection whose ping is not answered within this "
          "long (ending its streams).");
ABSL_FLAG(absl::Duration, grpc_min_ping_interval, absl::Seconds(10),
          "The shortest interval between client keepalive pings the sidecar "
          "accepts (also without calls in flight); a client pinging more "
          "often is disconnected (GOAWAY too_many_pings).");
ABSL_FLAG(int32_t, max_concurrent_streams, 1000,
          "Most concurrent gRPC calls (Watch streams included) per client "
          "connection; more wait in the client until one ends.");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
          "Largest gRPC message the sidecar sends (a larger response fails "
          "with RESOURCE_EXHAUSTED). Clients receive at most 4 MiB unless "
          "they raise their own limit.");
ABSL_FLAG(int64_t, max_request_bytes, int64_t{1} << 20,
          "Largest gRPC message the sidecar accepts from a client.");
ABSL_FLAG(int64_t, max_list_page_bytes, int64_t{4} << 20,
          "Upper bound on a List page's size, whatever the request's "
          "max_page_bytes asks (at most --max_message_bytes).");

// ---- Events (informer.v1.Events, issue 8) ----
ABSL_FLAG(std::string, event_component, "",
          "source.component (and reportingComponent) of the Kubernetes "
          "Events recorded through informer.v1.Events. Default: the app's "
          "name: $APP_NAME, else the workload name in $POD_NAME (pod "
          "\"web-7d4b9c8f5-xz2lq\" -> \"web\"), else \"informer-sidecar\". "
          "The host/instance is $POD_NAME, else the hostname.");
ABSL_FLAG(absl::Duration, event_retry_interval, absl::Seconds(10),
          "Pause between tries of an event write the API server failed "
          "(5xx, connection errors; 12 tries). A 429/503 Retry-After "
          "overrides it.");
ABSL_FLAG(absl::Duration, event_flush_timeout, absl::Seconds(5),
          "At shutdown, how long to keep writing queued events to the API "
          "server before exiting anyway.");

namespace {

constexpr char kUsage[] =
    "informer_sidecar: Kubernetes informer caches over gRPC "
    "(informer.v1.Informer: Watch, List, Get, ByIndex, ListIndexValues, "
    "ListResources).\n"
    "Health (grpc.health.v1): the overall status \"\" and each configured "
    "resource name are NOT_SERVING until the informers synced; a lazily "
    "started resource's name is SERVING while its informer runs.\n"
    "Resources: --resources=pods,... or --config=FILE (YAML); with neither, "
    "lazy mode starts an informer on the first request for any resource and "
    "stops it after --lazy_idle_timeout idle. Any kubectl name works in "
    "requests (po, pod, Pod, pods, deploy, deployments.apps).\n"
    "Usage: informer_sidecar [--demo] [--kubeconfig=FILE] "
    "[--config=FILE | --resources=pods,...] [--grpc_listen=ADDR]";

// The resources and lazy-mode settings from --config, --resources,
// --namespace and --lazy_idle_timeout. Errors name the file, line and field
// (or the flag).
absl::StatusOr<server::SidecarConfig> LoadSidecarConfig() {
  const std::string file = absl::GetFlag(FLAGS_config);
  const std::string list = absl::GetFlag(FLAGS_resources);
  if (!file.empty() && !absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError(
        "--config and --resources both list resources; list them in one "
        "place (the config file)");
  }
  absl::StatusOr<server::SidecarConfig> config =
      file.empty() ? server::SidecarConfigFromResourceList(list)
                   : server::LoadSidecarConfigFile(file);
  if (!config.ok()) return config.status();
  // Neither flag: lazy mode (the demo also serves its resources eagerly,
  // see Run).
  if (file.empty() && config->resources.empty()) {
    config->allow_unlisted_resources = true;
  }
  server::ApplyDefaultNamespace(&*config, absl::GetFlag(FLAGS_namespace));
  const std::string idle = absl::GetFlag(FLAGS_lazy_idle_timeout);
  if (!idle.empty()) {
    absl::StatusOr<absl::Duration> d = server::ParseGoDuration(idle);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--lazy_idle_timeout: ",
          d.ok() ? "must be positive" : std::string(d.status().message())));
    }
    config->lazy_idle_timeout = *d;
  }
  return config;
}

// The client-side form of a resource's config.
informer::client::ResourceClientOptions ResourceClientOptionsOf(
    const server::ResourceConfig& config) {
  informer::client::ResourceClientOptions options;
  options.metadata_only = config.metadata_only;
  options.transform.drop_fields = config.drop_fields;
  options.label_selector = config.label_selector;
  options.field_selector = config.field_selector;
  return options;
}

// TLS credentials and the authorizer from the security flags, into
// `options`. Every mistake is a start-up error naming the flag. In lazy mode
// (`lazy`: unlisted resources allowed) tokens may name any resource.
absl::Status SetUpSecurity(const std::vector<server::ResourceConfig>& configs,
                           bool lazy, const std::string& listen,
                           server::SidecarServer::Options* options,
                           std::unique_ptr<server::Authorizer>* authorizer) {
  const bool allow_secrets = absl::GetFlag(FLAGS_allow_secrets);
  server::Authorizer::Options authz;
  authz.allow_secrets = allow_secrets;
  for (const server::ResourceConfig& config : configs) {
    if (server::IsSecretsResource(config.resource) && !allow_secrets) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource \"", config.resource,
          "\": Secrets are withheld unless --allow_secrets is set"));
    }
    if (!lazy) authz.configured_resources.push_back(config.resource);
  }
  const std::string tokens_file = absl::GetFlag(FLAGS_tokens_file);
  if (tokens_file.empty()) {
    *authorizer = server::Authorizer::AllowAll(std::move(authz));
  } else {
    absl::StatusOr<std::unique_ptr<server::Authorizer>> loaded =
        server::Authorizer::FromTokensFile(tokens_file, std::move(authz));
    if (!loaded.ok()) return loaded.status();
    *authorizer = *std::move(loaded);
    LOG(INFO) << "informer_sidecar: bearer tokens required (" << tokens_file
              << ": " << absl::StrJoin((*authorizer)->token_names(), ", ")
              << ")";
  }
  options->informer.authorizer = authorizer->get();

  server::TlsFiles tls;
  tls.cert_file = absl::GetFlag(FLAGS_grpc_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_grpc_tls_key_file);
  tls.client_ca_file = absl::GetFlag(FLAGS_grpc_tls_client_ca_file);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      server::BuildServerCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  options->credentials = *std::move(credentials);
  if (options->credentials != nullptr) {
    LOG(INFO) << "informer_sidecar: gRPC over TLS"
              << (tls.client_ca_file.empty()
                      ? ""
                      : " with client certificates (mTLS)");
  } else if (!server::IsLocalListenAddress(listen)) {
    LOG(WARNING) << "informer_sidecar: --grpc_listen=" << listen
                 << " is reachable from other hosts and TLS is off; set "
                    "--grpc_tls_cert_file/--grpc_tls_key_file (and "
                    "--tokens_file), or listen on loopback or a unix socket";
  }
  return absl::OkStatus();
}

// The cluster to talk to, or nullopt for the demo cluster (with the reason).
absl::StatusOr<absl::optional<informer::client::RestConfig>> ChooseCluster(
    std::string* demo_reason) {
  if (absl::GetFlag(FLAGS_demo)) {
    *demo_reason = "--demo";
    return absl::nullopt;
  }
  if (absl::GetFlag(FLAGS_in_cluster)) {
    informer::client::InClusterOptions options;
    absl::StatusOr<informer::client::RestConfig> config =
        informer::client::InClusterConfig(options);
    if (!config.ok()) return config.status();
    return absl::optional<informer::client::RestConfig>(*std::move(config));
  }
  informer::client::ConnectionFlags flags;
  flags.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  flags.overrides.context = absl::GetFlag(FLAGS_context);
  absl::StatusOr<informer::client::RestConfig> config =
      informer::client::LoadRestConfig(flags);
  if (config.ok()) {
    return absl::optional<informer::client::RestConfig>(*std::move(config));
  }
  // An explicit choice that fails is an error, not a reason for the demo.
  if (!flags.kubeconfig.empty() || !flags.overrides.context.empty()) {
    return config.status();
  }
  *demo_reason = std::string("no cluster configured (") +
                 std::string(config.status().message()) + ")";
  return absl::nullopt;
}

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// Keepalive, message size limits, the List page cap and the gRPC call
// metrics, from the operations flags, into `options`. Errors name the flag.
absl::Status SetUpLimits(server::metrics::Registry* metrics,
                         server::SidecarServer::Options* options) {
  const absl::Duration keepalive_time =
      absl::GetFlag(FLAGS_grpc_keepalive_time);
  const absl::Duration keepalive_timeout =
      absl::GetFlag(FLAGS_grpc_keepalive_timeout);
  const absl::Duration min_ping = absl::GetFlag(FLAGS_grpc_min_ping_interval);
  const int32_t max_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  const int64_t max_request = absl::GetFlag(FLAGS_max_request_bytes);
  const int64_t max_page = absl::GetFlag(FLAGS_max_list_page_bytes);
  constexpr int64_t kIntMax = 0x7fffffff;
  if (keepalive_time < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        "--grpc_keepalive_time must be at least 1s");
  }
  if (keepalive_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "--grpc_keepalive_timeout must be at least 100ms");
  }
  if (min_ping < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--grpc_min_ping_interval must not be negative");
  }
  if (max_streams < 1) {
    return absl::InvalidArgumentError(
        "--max_concurrent_streams must be at least 1");
  }
  if (max_message < 4096 || max_message > kIntMax) {
    return absl::InvalidArgumentError(
        "--max_message_bytes must be between 4096 and 2147483647");
  }
  if (max_request < 1024 || max_request > kIntMax) {
    return absl::InvalidArgumentError(
        "--max_request_bytes must be between 1024 and 2147483647");
  }
  if (max_page < 1 || max_page > max_message) {
    return absl::InvalidArgumentError(
        "--max_list_page_bytes must be between 1 and --max_message_bytes");
  }
  options->informer.max_page_bytes = max_page;
  absl::StatusOr<std::unique_ptr<server::GrpcMetricsInterceptorFactory>>
      interceptor = server::GrpcMetricsInterceptorFactory::Create(
          metrics, server::kMetricPrefix);
  if (!interceptor.ok()) return interceptor.status();
  // The builder hook is a copyable std::function; the factory moves into
  // the builder the one time it runs.
  auto factory =
      std::make_shared<std::unique_ptr<server::GrpcMetricsInterceptorFactory>>(
          *std::move(interceptor));
  options->configure.push_back([=](grpc::ServerBuilder& builder) {
    // Server pings find dead clients (a killed process whose kernel did not
    // reset the connection, a vanished node); their streams then end.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(Millis(keepalive_time)));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               static_cast<int>(Millis(keepalive_timeout)));
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Clients may ping too (to detect a dead sidecar), also while idle,
    // but not more often than this.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(
        GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
        static_cast<int>(Millis(min_ping)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, max_streams);
    builder.SetMaxSendMessageSize(static_cast<int>(max_message));
    builder.SetMaxReceiveMessageSize(static_cast<int>(max_request));
    if (*factory != nullptr) {
      std::vector<std::unique_ptr<
          grpc::experimental::ServerInterceptorFactoryInterface>>
          creators;
      creators.push_back(std::move(*factory));
      builder.experimental().SetInterceptorCreators(std::move(creators));
    }
  });
  LOG(INFO) << "informer_sidecar: gRPC keepalive " << keepalive_time
            << " (timeout " << keepalive_timeout << ", client pings every "
            << min_ping << " or less often), at most " << max_streams
            << " streams per connection, messages up to " << max_message
            << " bytes out and " << max_request << " in, List pages up to "
            << max_page << " bytes";
  return absl::OkStatus();
}

// Writes "grpc=PORT\nhttp=PORT\n" to `path` atomically (a temporary file
// renamed), so a reader never sees half of it.
absl::Status WritePortsFile(const std::string& path, int grpc_port,
                            int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "grpc=" << grpc_port << "\nhttp=" << http_port << "\n";
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("--ports_file: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("--ports_file: cannot rename ",
                                               tmp, " to ", path, ": ",
                                               std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The first SIGINT/SIGTERM notifies `shutdown`; a second one (or an orderly
// shutdown still running `deadline` later) ends the process at once:
// 128+signal like a shell (130 SIGINT, 143 SIGTERM), 1 on the deadline.
// Runs on its own (detached) thread; the signals are blocked everywhere.
void WaitForSignals(sigset_t signals, absl::Notification* shutdown,
                    absl::Duration deadline) {
  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  LOG(INFO) << "informer_sidecar: " << strsignal(sig)
            << ": shutting down (ending Watch streams with UNAVAILABLE, "
               "stopping informers); a second signal exits at once";
  shutdown->Notify();
  const absl::Time until = absl::Now() + deadline;
  while (true) {
    const timespec ts =
        absl::ToTimespec(std::max(until - absl::Now(), absl::ZeroDuration()));
    siginfo_t info;
    const int second = sigtimedwait(&signals, &info, &ts);
    if (second > 0) {
      LOG(WARNING) << "informer_sidecar: " << strsignal(second)
                   << " again: exiting at once";
      _exit(128 + second);
    }
    if (errno == EAGAIN) {
      LOG(ERROR) << "informer_sidecar: shutdown still running after "
                 << deadline << ": exiting";
      _exit(1);
    }
  }
}

// Blocks SIGINT/SIGTERM in every thread (call before starting any) so that
// only the waiter thread receives them.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Run() {
  const sigset_t signals = BlockShutdownSignals();
  // One gRPC library reference held until the process exits (after the
  // signals are blocked: it starts gRPC's threads). Without it, destroying
  // the server (the last gRPC object) runs grpc_shutdown() synchronously,
  // which joins gRPC's executor threads; one may be in a poll of up to
  // 10 s, so a SIGTERM sometimes took 10 s instead of a fraction of a
  // second (seen in CI; stacks taken with gdb). Nothing needs the library
  // torn down: the process exits right after.
  grpc_init();
  // The config first: a mistake in it stops the sidecar before anything
  // starts.
  absl::StatusOr<server::SidecarConfig> sidecar_config = LoadSidecarConfig();
  if (!sidecar_config.ok()) {
    LOG(ERROR) << "informer_sidecar: bad configuration: "
               << sidecar_config.status().message();
    return 2;
  }
  // Operations endpoint first: /healthz answers (and /readyz says what is
  // missing) while the rest starts. Declared before everything that
  // reports into the metrics registry, so it outlives them.
  server::metrics::Registry metrics;
  absl::StatusOr<std::unique_ptr<server::SidecarMetrics>> ops =
      server::SidecarMetrics::Create(&metrics);
  if (!ops.ok()) {
    LOG(ERROR) << "informer_sidecar: " << ops.status();
    return 1;
  }
  std::unique_ptr<server::HttpServer> http;
  const std::string http_listen = absl::GetFlag(FLAGS_http_listen);
  if (!http_listen.empty()) {
    server::HttpServer::Options http_options;
    http_options.listen = http_listen;
    http_options.registry = &metrics;
    http_options.not_ready = [m = ops->get()] { return m->NotReady(); };
    absl::StatusOr<std::unique_ptr<server::HttpServer>> started =
        server::HttpServer::Start(std::move(http_options));
    if (!started.ok()) {
      LOG(ERROR) << "informer_sidecar: --http_listen: "
                 << started.status().message();
      return 1;
    }
    http = *std::move(started);
    LOG(INFO) << "informer_sidecar: HTTP /metrics /healthz /readyz on "
              << http_listen << " (port " << http->port() << ")";
  }
  std::string demo_reason;
  absl::StatusOr<absl::optional<informer::client::RestConfig>> cluster =
      ChooseCluster(&demo_reason);
  if (!cluster.ok()) {
    LOG(ERROR) << "informer_sidecar: cannot load the cluster configuration: "
               << cluster.status();
    return 1;
  }

  std::unique_ptr<emulator::Emulator> demo;
  informer::client::RestConfig rest_config;
  if (!cluster->has_value()) {
    LOG(INFO) << "informer_sidecar: DEMO MODE (" << demo_reason
              << "): serving an in-process demo cluster whose objects change "
                 "every second";
    emulator::EmulatorOptions options;
    options.demo = true;
    options.churn_interval = absl::Seconds(1);
    demo = std::make_unique<emulator::Emulator>(options);
    if (absl::Status st = demo->Start(); !st.ok()) {
      LOG(ERROR) << "informer_sidecar: cannot start the demo cluster: " << st;
      return 1;
    }
    rest_config.server = demo->url();
    LOG(INFO) << "demo cluster API server at " << rest_config.server;
  } else {
    rest_config = **std::move(cluster);
    LOG(INFO) << "informer_sidecar: using the cluster at "
              << rest_config.server;
  }

  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(
          rest_config, informer::RealClock(), [&ops] {
            informer::client::TransportOptions transport;
            transport.observer = (*ops)->ApiObserver();
            return transport;
          }());
  if (!kube.ok()) {
    LOG(ERROR) << "informer_sidecar: " << kube.status();
    return 1;
  }
  // The demo with nothing configured serves its seeded resources from the
  // start (so the first events show at once) and others lazily.
  if (demo != nullptr && absl::GetFlag(FLAGS_config).empty() &&
      sidecar_config->resources.empty()) {
    for (const char* name : {"pods", "configmaps", "deployments.apps"}) {
      server::SidecarConfig::Resource r;
      r.config.resource = name;
      r.config.namespace_ = absl::GetFlag(FLAGS_namespace);
      r.config.origin = "demo default";
      sidecar_config->resources.push_back(std::move(r));
    }
  }
  std::vector<server::ResourceConfig> configs;
  for (server::SidecarConfig::Resource& r : sidecar_config->resources) {
    configs.push_back(std::move(r.config));
  }
  server::InformerRegistry::Options registry_options;
  registry_options.allow_unlisted = sidecar_config->allow_unlisted_resources;
  registry_options.lazy_namespace = absl::GetFlag(FLAGS_namespace);
  registry_options.lazy_idle_timeout = sidecar_config->lazy_idle_timeout;
  server::DiscoveryResolver resolver((*kube)->discovery());
  registry_options.resolver = &resolver;
  if (registry_options.allow_unlisted) {
    LOG(INFO) << "informer_sidecar: lazy mode: informers for resources not "
                 "configured start on first request and stop after "
              << registry_options.lazy_idle_timeout << " idle";
  }
  const std::string listen = absl::GetFlag(FLAGS_grpc_listen);
  server::SidecarServer::Options sidecar_options;
  if (absl::GetFlag(FLAGS_watch_max_pending) < 1 ||
      absl::GetFlag(FLAGS_watch_history) < 0) {
    LOG(ERROR) << "informer_sidecar: --watch_max_pending must be at least 1 "
                  "and --watch_history not negative";
    return 1;
  }
  const absl::Duration batch_window = absl::GetFlag(FLAGS_watch_batch_window);
  if (batch_window < absl::ZeroDuration() || batch_window > absl::Seconds(1)) {
    LOG(ERROR) << "informer_sidecar: --watch_batch_window must be between 0 "
                  "and 1s, not "
               << batch_window;
    return 1;
  }
  sidecar_options.informer.watch.batch_window = batch_window;
  if (absl::GetFlag(FLAGS_watch_batch_min_rate) < 0) {
    LOG(ERROR) << "informer_sidecar: --watch_batch_min_rate must not be "
                  "negative";
    return 1;
  }
  sidecar_options.informer.watch.batch_min_rate =
      absl::GetFlag(FLAGS_watch_batch_min_rate);
  sidecar_options.informer.watch.max_pending_keys =
      static_cast<size_t>(absl::GetFlag(FLAGS_watch_max_pending));
  sidecar_options.informer.watch.history_size =
      static_cast<size_t>(absl::GetFlag(FLAGS_watch_history));
  if (absl::Status st = SetUpLimits(&metrics, &sidecar_options); !st.ok()) {
    LOG(ERROR) << "informer_sidecar: " << st.message();
    return 1;
  }
  std::unique_ptr<server::Authorizer> authorizer;
  if (absl::Status st = SetUpSecurity(configs, registry_options.allow_unlisted,
                                      listen, &sidecar_options, &authorizer);
      !st.ok()) {
    LOG(ERROR) << "informer_sidecar: " << st.message();
    return 1;
  }
  informer::client::KubeClient* client = kube->get();
  absl::StatusOr<std::unique_ptr<server::InformerRegistry>> registry =
      server::InformerRegistry::Create(
          std::move(configs),
          [client](const server::ResourceConfig& config)
              -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
            absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>>
                rc = client->ForResource(config.resource, config.namespace_,
                                         ResourceClientOptionsOf(config));
            if (!rc.ok()) return rc.status();
            // Whatever alias named it, core Secrets need --allow_secrets.
            if ((*rc)->resource().group.empty() &&
                (*rc)->resource().resource == "secrets" &&
                !absl::GetFlag(FLAGS_allow_secrets)) {
              return absl::InvalidArgumentError(
                  "it is the Secrets resource, withheld unless "
                  "--allow_secrets is set");
            }
            return std::unique_ptr<informer::ListerWatcher>(*std::move(rc));
          },
          std::move(registry_options));
  if (!registry.ok()) {
    LOG(ERROR) << "informer_sidecar: " << registry.status();
    return 1;
  }

  // informer.v1.WorkQueue: remote work queues fed by the informers.
  server::WorkQueueService::Options workqueue_options;
  workqueue_options.idle_timeout = absl::GetFlag(FLAGS_workqueue_idle_timeout);
  workqueue_options.authorizer = authorizer.get();
  auto workqueues = std::make_unique<server::WorkQueueService>(
      registry->get(), workqueue_options);
  sidecar_options.services.push_back(workqueues.get());

  // Events: recorded over gRPC, written to the API server asynchronously.
  server::EventRecordingOptions event_options;
  event_options.component = absl::GetFlag(FLAGS_event_component);
  event_options.authorizer = authorizer.get();
  event_options.retry.retry_interval =
      absl::GetFlag(FLAGS_event_retry_interval);
  auto events = std::make_unique<server::EventRecording>(
      (*kube)->transport(), std::move(event_options));
  sidecar_options.services.push_back(events->service());
  LOG(INFO) << "informer_sidecar: recording events as component \""
            << events->component() << "\", host \"" << events->host() << "\"";

  absl::StatusOr<std::unique_ptr<server::SidecarServer>> sidecar =
      server::SidecarServer::Start(registry->get(), listen,
                                   std::move(sidecar_options));
  if (!sidecar.ok()) {
    LOG(ERROR) << "informer_sidecar: " << sidecar.status();
    return 1;
  }
  LOG(INFO) << "informer_sidecar: gRPC listening on " << listen
            << ((*sidecar)->port() > 0
                    ? " (port " + std::to_string((*sidecar)->port()) + ")"
                    : "");
  (*ops)->Attach(registry->get(), &(*sidecar)->informer_service().watch_hub());
  if (const std::string ports_file = absl::GetFlag(FLAGS_ports_file);
      !ports_file.empty()) {
    if (absl::Status st = WritePortsFile(ports_file, (*sidecar)->port(),
                                         http != nullptr ? http->port() : 0);
        !st.ok()) {
      LOG(ERROR) << "informer_sidecar: " << st.message();
      return 1;
    }
  }
  // Demo mode prints the notifications so the run command shows events.
  const std::string print_events = absl::GetFlag(FLAGS_print_events);
  std::vector<std::unique_ptr<informer::EventPrinter>> printers;
  if (print_events == "true" || (print_events == "auto" && demo != nullptr)) {
    for (const auto& entry : (*registry)->entries()) {
      printers.push_back(std::make_unique<informer::EventPrinter>(
          stdout, entry->config.resource));
      if (absl::Status st =
              entry->informer->AddEventHandler(printers.back().get()).status();
          !st.ok()) {
        LOG(ERROR) << "informer_sidecar: " << st;
        return 1;
      }
    }
  } else if (print_events != "false" && print_events != "auto") {
    LOG(ERROR) << "informer_sidecar: --print_events must be true, false or "
                  "auto, not \""
               << print_events << "\"";
    return 1;
  }
  if (absl::Status st = (*registry)->Start(); !st.ok()) {
    LOG(ERROR) << "informer_sidecar: " << st;
    return 1;
  }
  auto kube_api = server::kubeapi::StartKubeApiFromFlags(
      registry->get(), client->discovery(), authorizer.get(), &metrics);
  if (!kube_api.ok()) {
    LOG(ERROR) << "informer_sidecar: " << kube_api.status().message();
    return 1;
  }

  // Lazy informers: their resource names turn SERVING when they synced and
  // NOT_SERVING when stopped for idleness (they never gate the overall
  // status).
  grpc::HealthCheckServiceInterface* health =
      (*sidecar)->grpc_server()->GetHealthCheckService();
  const int lazy_health = (*registry)->AddObserver(
      {.on_lazy_synced =
           [health](server::InformerEntry* e) {
             health->SetServingStatus(e->config.resource, true);
           },
       .on_retired =
           [health](server::InformerEntry* e) {
             health->SetServingStatus(e->config.resource, false);
           }});

  // SIGINT/SIGTERM: an orderly shutdown (below); a second signal, or a
  // shutdown still running 10 s past its grace and flush timeouts, exits
  // at once.
  const absl::Duration grace = absl::GetFlag(FLAGS_shutdown_grace);
  absl::Notification shutdown;
  std::thread(
      WaitForSignals, signals, &shutdown,
      grace + absl::GetFlag(FLAGS_event_flush_timeout) + absl::Seconds(10))
      .detach();
  shutdown.WaitForNotification();
  if (http != nullptr) http->SetShuttingDown();
  events->StopAccepting();  // ends events Watch streams at once
  // Ends every informer Watch stream with UNAVAILABLE, refuses new calls,
  // and gives running unary calls `grace`.
  (*sidecar)->Shutdown(grace);
  (*sidecar)->Wait();
  (*ops)->Detach();  // the Watch hub goes with the server
  (*registry)->RemoveObserver(lazy_health);
  sidecar->reset();
  LOG(INFO) << "informer_sidecar: gRPC server stopped";
  // Queued events go to the API server (bounded), before the demo cluster
  // they may be written to stops.
  if (!events->Flush(absl::GetFlag(FLAGS_event_flush_timeout))) {
    LOG(WARNING) << "informer_sidecar: queued events not all written within "
                 << absl::GetFlag(FLAGS_event_flush_timeout)
                 << "; exiting without them";
    google::FlushLogFiles(google::GLOG_INFO);
    std::_Exit(0);
  }
  events.reset();
  LOG(INFO) << "informer_sidecar: events flushed";
  workqueues.reset();  // removes its handlers from the informers
  kube_api->reset();  // its handlers and informer leases, before the registry
  (*registry)->Stop();
  registry->reset();
  LOG(INFO) << "informer_sidecar: informers stopped";
  if (demo != nullptr) demo->Stop();
  if (http != nullptr) http->Stop();
  LOG(INFO) << "informer_sidecar: stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything else (no thread may exist yet): see malloc_tuning.h.
  server::ReexecWithMallocTunables(argv);
  informer::InitProgram(argc, argv, kUsage);
  // Debian's Abseil is built with Mutex deadlock detection on: it records
  // every lock acquisition order in a global graph, a few percent of the
  // sidecar's CPU under fan-out load. The tests keep it on; the lock order
  // is documented per class.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run();
}

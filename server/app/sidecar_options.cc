#include "server/app/sidecar_options.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/registry/resource_resolver.h"

// The sidecar's flags, in the groups --help shows (SidecarFlagGroups below
// lists them by group; a flag in no group still shows, under "Other flags").

// ---- Cluster: which API server, which resources ----

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

ABSL_FLAG(std::string, watch_list, "auto",
          "How the informers get their initial state: \"auto\" streams it "
          "as one WatchList watch (sendInitialEvents=true, ending at the "
          "k8s.io/initial-events-end bookmark) and falls back to LIST for "
          "that round on any failure, and to LIST+WATCH for good once the "
          "API server refuses WatchList (422, e.g. its WatchList gate is "
          "off); \"on\" asks for WatchList again every round even after a "
          "refusal (client-go with WatchListClient on); \"off\" always "
          "lists (LIST+WATCH).");

ABSL_FLAG(std::string, api_compression, "none",
          "Compression of the API server's responses: \"none\" (no "
          "Accept-Encoding is sent) or \"gzip\". The API server gzips every "
          "list over 128 KiB for a client that asks, which costs its CPU "
          "and makes a large list several times slower to arrive over "
          "loopback or a pod network; choose gzip only for a thin link "
          "(the sidecar far from its API server).");

ABSL_FLAG(absl::Duration, api_tcp_timeout, absl::Seconds(30),
          "A connection to the API server whose packets stop being "
          "acknowledged (a NAT or load balancer forgot the flow) is closed "
          "and replaced after about this long, watches included: TCP "
          "keepalive and TCP_USER_TIMEOUT. 0: the kernel's defaults (hours).");

ABSL_FLAG(absl::Duration, api_stall_timeout, absl::Seconds(30),
          "A request to the API server other than a watch that receives no "
          "byte for this long (plus up to ~5 s: libcurl averages the speed) "
          "is abandoned and retried: a stuck proxy, a server stopped "
          "mid-response. 0: only the 60 s request timeout.");

ABSL_FLAG(absl::Duration, api_watch_idle_timeout, absl::Seconds(75),
          "A watch that receives no byte for this long is replaced, from its "
          "last resourceVersion. The API server bookmarks every watch about "
          "once a minute, so only a stuck connection stays this silent.");

ABSL_FLAG(std::string, cache_upstream, "",
          "Chaining: an http:// or https:// URL of another sidecar's "
          "Kubernetes API facade (its --kube_api_listen) that every informer "
          "lists and watches from, lazily started ones too, so a node's "
          "sidecars cost the API server one list and watch per resource. "
          "Writes (Events), discovery and everything else still go to the "
          "cluster of --kubeconfig / in-cluster; with no cluster configured "
          "the upstream serves everything (Event writes then fail with its "
          "405) and no demo starts.");

ABSL_FLAG(std::string, cache_upstream_token_file, "",
          "A bearer token file for --cache_upstream (one of the upstream's "
          "--tokens_file tokens), re-read every minute and after a 401, as "
          "a projected service-account token is. Sent in clear text over "
          "http:// (a warning unless the upstream is on loopback).");

ABSL_FLAG(std::string, cache_upstream_ca_file, "",
          "PEM CA bundle that verifies an https:// --cache_upstream "
          "(default: the system roots).");

// ---- Serving: gRPC and HTTP listeners, connection limits ----

ABSL_FLAG(std::string, grpc_listen, "127.0.0.1:50051",
          "gRPC listen address: host:port, or unix:/path/to/socket (a path "
          "of at most 107 characters, in an existing directory).");

ABSL_FLAG(std::string, http_listen, ":9090",
          "HTTP address of /metrics (Prometheus), /healthz (liveness) and "
          "/readyz (every configured informer synced): host:port, :port for "
          "all interfaces, port 0 picks one; empty disables. Serves no "
          "object data.");

ABSL_FLAG(std::string, ports_file, "",
          "After binding, write \"grpc=PORT\\nhttp=PORT\\n\" to this file "
          "(atomically; 0 for a unix socket or a disabled HTTP server), for "
          "wrappers and tests that listen on port 0. With --kube_api_listen "
          "it is rewritten once the facade serves, adding "
          "\"kube_api=PORT\\n\".");

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

// ---- Watch streams (informer.v1.Informer/Watch) ----

ABSL_FLAG(int64_t, watch_max_pending, 65536,
          "Informer.Watch: distinct objects a slow stream may have pending "
          "(after coalescing) before it ends with RESOURCE_EXHAUSTED; the "
          "client resumes with its last token.");

ABSL_FLAG(int64_t, watch_history, 10000,
          "Informer.Watch: events kept per resource for streams resuming "
          "with a token; older tokens get RESET and a fresh initial state.");

ABSL_FLAG(int64_t, watch_history_bytes,
          static_cast<int64_t>(server::kDefaultWatchHistoryBytes),
          "Informer.Watch: bytes of object states each resource's history "
          "may keep (with --watch_history, whichever binds first); the "
          "oldest events go first. The default keeps about 3,900 updates of "
          "a 1.5 KB object, 970 of an 8 KB Pod. 0: no history.");

ABSL_FLAG(absl::Duration, watch_batch_window, absl::Milliseconds(5),
          "Informer.Watch: under load (see --watch_batch_min_rate) a stream "
          "that wrote less than this long ago gathers events until the "
          "window ends, so busy streams send several events per message "
          "(gRPC's per-message cost dominates fan-out); a stream quiet for "
          "longer writes at once. Adds at most this much latency. 0 "
          "disables; at most 1s.");

ABSL_FLAG(int64_t, watch_max_message_bytes, int64_t{1} << 20,
          "Informer.Watch: no response message is larger than this; "
          "initial states, coalesced backlogs and resync bursts are split "
          "(gRPC clients receive at most 4 MiB by default). An object "
          "larger than this travels alone, up to --max_message_bytes. "
          "Between 1024 and --max_message_bytes.");

ABSL_FLAG(double, watch_batch_min_rate, 20000,
          "Informer.Watch: the batching window applies only while the "
          "sidecar queues at least this many events per second for all its "
          "streams together; below it every event is written at once. 0: "
          "always batch.");

// ---- Security: TLS and bearer tokens ----

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

// ---- Operations: shutdown, work queues, events ----

ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "On SIGTERM/SIGINT: how long running unary calls may take to "
          "finish (Watch streams end at once with UNAVAILABLE). A second "
          "signal exits at once with 128+signal (130 SIGINT, 143 SIGTERM).");

ABSL_FLAG(absl::Duration, workqueue_idle_timeout, absl::Minutes(10),
          "informer.v1.WorkQueue: a queue with no worker and no activity for "
          "this long is removed (0: never).");

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

// ---- Warm restarts ----

ABSL_FLAG(std::string, cache_dir, "",
          "Keep each informer's cache in this directory (one snapshot file "
          "per resource) and start from it after a restart: the informer "
          "watches from the snapshot's resourceVersion instead of listing "
          "everything again. Written at shutdown and every "
          "--cache_snapshot_interval. Locked: a second sidecar on the same "
          "directory exits with an error. Empty (default): off.");

ABSL_FLAG(absl::Duration, cache_snapshot_interval, absl::Minutes(5),
          "With --cache_dir: how often the snapshots are written while "
          "running (also at shutdown). 0: at shutdown only.");

ABSL_FLAG(bool, serve_stale_on_start, false,
          "With --cache_dir: when an informer was loaded from its snapshot "
          "and its first list or watch fails (the API server cannot be "
          "reached), serve the snapshot at once, marked stale "
          "(ListResources, INITIAL_STATE_DONE.stale, "
          "informer_sidecar_informer_stale), until the API server answers. "
          "Off (default): such an informer waits for its sync.");

ABSL_FLAG(bool, ready_when_stale, false,
          "With --serve_stale_on_start: /readyz reports ready while "
          "informers serve stale data. Off (default): not ready until "
          "every configured informer synced.");

// ---- Demo ----

ABSL_FLAG(bool, demo, false,
          "Run the in-process demo cluster (the API server emulator seeded "
          "with namespaces, pods, deployments and configmaps that change "
          "every second) even when a cluster is configured.");

ABSL_FLAG(std::string, print_events, "auto",
          "Print one line per informer notification to stdout (type, "
          "resource, namespace/name, resourceVersion; never object "
          "contents): \"true\", \"false\", or \"auto\" = only in demo "
          "mode, so a newcomer sees events stream.");

namespace server {
namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", problem));
}

// A unix socket address (gRPC's "unix:PATH" or "unix-abstract:NAME"): its
// path must fit in sockaddr_un.sun_path with the NUL, and a file socket's
// directory must exist. gRPC only finds either out when binding, after the
// informers started; here the error names the flag before anything starts.
absl::Status CheckUnixListen(absl::string_view flag,
                             absl::string_view address) {
  absl::string_view path = address;
  const bool abstract = absl::ConsumePrefix(&path, "unix-abstract:");
  if (!abstract && !absl::ConsumePrefix(&path, "unix:")) {
    return absl::OkStatus();
  }
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (path.empty()) return Invalid(flag, "names an empty unix socket path");
  if (path.size() > kMaxPath) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": the unix socket path \"", path, "\" is ", path.size(),
        " characters long; the limit is ", kMaxPath, " (sockaddr_un.sun_path, ",
        kMaxPath + 1, " bytes with the NUL)"));
  }
  if (abstract) return absl::OkStatus();
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == absl::string_view::npos
          ? "."
          : std::string(path.substr(0, std::max<size_t>(slash, 1)));
  struct stat info;
  const bool found = stat(dir.c_str(), &info) == 0;
  if (!found || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": the directory \"", dir, "\" of the unix socket path \"",
        path, "\": ", found ? "not a directory" : std::strerror(errno)));
  }
  return absl::OkStatus();
}

// --cache_upstream and its credential flags.
absl::Status UpstreamFromFlags(SidecarOptions* options) {
  absl::StatusOr<CacheUpstream> upstream = ValidateCacheUpstream(
      absl::GetFlag(FLAGS_cache_upstream),
      absl::GetFlag(FLAGS_cache_upstream_token_file),
      absl::GetFlag(FLAGS_cache_upstream_ca_file), &options->warnings);
  if (!upstream.ok()) return upstream.status();
  if (upstream->enabled() && options->demo) {
    return absl::InvalidArgumentError(
        "--demo and --cache_upstream both choose where the informers read "
        "from; give one of them");
  }
  options->cache_upstream = *std::move(upstream);
  return absl::OkStatus();
}

// The resources and lazy-mode settings from --config, --resources,
// --namespace and --lazy_idle_timeout. Errors name the file, line and field
// (or the flag).
absl::Status ResourcesFromFlags(SidecarOptions* options) {
  const std::string file = absl::GetFlag(FLAGS_config);
  const std::string list = absl::GetFlag(FLAGS_resources);
  if (!file.empty() && !absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError(
        "--config and --resources both list resources; list them in one "
        "place (the config file)");
  }
  absl::StatusOr<SidecarConfig> config =
      file.empty() ? SidecarConfigFromResourceList(list)
                   : LoadSidecarConfigFile(file);
  if (!config.ok()) return config.status();
  // Neither flag: lazy mode (the demo also serves its resources eagerly,
  // see Sidecar::Start).
  if (file.empty() && config->resources.empty()) {
    config->allow_unlisted_resources = true;
  }
  options->default_namespace = absl::GetFlag(FLAGS_namespace);
  ApplyDefaultNamespace(&*config, options->default_namespace);
  const std::string idle = absl::GetFlag(FLAGS_lazy_idle_timeout);
  if (!idle.empty()) {
    absl::StatusOr<absl::Duration> d = ParseGoDuration(idle);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--lazy_idle_timeout: ",
          d.ok() ? "must be positive" : std::string(d.status().message())));
    }
    config->lazy_idle_timeout = *d;
  }
  options->config = *std::move(config);
  options->config_file_given = !file.empty();
  options->kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  options->context = absl::GetFlag(FLAGS_context);
  options->in_cluster = absl::GetFlag(FLAGS_in_cluster);
  options->demo = absl::GetFlag(FLAGS_demo);
  const std::string compression = absl::GetFlag(FLAGS_api_compression);
  if (compression == "none") {
    options->api_compression = informer::client::ApiCompression::kNone;
  } else if (compression == "gzip") {
    options->api_compression = informer::client::ApiCompression::kGzip;
  } else {
    return Invalid(
        "api_compression",
        absl::StrCat("must be none or gzip, not \"", compression, "\""));
  }
  return UpstreamFromFlags(options);
}

// The timers that bound how long a dead API server connection goes
// unnoticed.
absl::Status ApiConnectionFromFlags(SidecarOptions* options) {
  options->api_tcp_timeout = absl::GetFlag(FLAGS_api_tcp_timeout);
  options->api_stall_timeout = absl::GetFlag(FLAGS_api_stall_timeout);
  options->api_watch_idle_timeout = absl::GetFlag(FLAGS_api_watch_idle_timeout);
  // Keepalive's idle time is half of it, in whole seconds.
  if (options->api_tcp_timeout != absl::ZeroDuration() &&
      options->api_tcp_timeout < absl::Seconds(2)) {
    return Invalid("api_tcp_timeout", "must be 0 or at least 2s");
  }
  // libcurl's stall timer counts whole seconds.
  if (options->api_stall_timeout != absl::ZeroDuration() &&
      options->api_stall_timeout < absl::Seconds(1)) {
    return Invalid("api_stall_timeout", "must be 0 or at least 1s");
  }
  if (options->api_watch_idle_timeout < absl::Seconds(1)) {
    return Invalid("api_watch_idle_timeout", "must be at least 1s");
  }
  return absl::OkStatus();
}

absl::Status WatchMessageOutOfRange(int64_t bytes) {
  return Invalid(
      "watch_max_message_bytes",
      absl::StrCat("must be between 1024 and --max_message_bytes, not ",
                   bytes));
}

// Watch stream settings.
absl::Status WatchFromFlags(SidecarOptions* options) {
  const int64_t max_pending = absl::GetFlag(FLAGS_watch_max_pending);
  const int64_t history = absl::GetFlag(FLAGS_watch_history);
  const int64_t history_bytes = absl::GetFlag(FLAGS_watch_history_bytes);
  const absl::Duration window = absl::GetFlag(FLAGS_watch_batch_window);
  const double min_rate = absl::GetFlag(FLAGS_watch_batch_min_rate);
  if (max_pending < 1) {
    return Invalid("watch_max_pending", "must be at least 1");
  }
  if (history < 0) return Invalid("watch_history", "must not be negative");
  if (history_bytes < 0) {
    return Invalid("watch_history_bytes", "must not be negative");
  }
  if (window < absl::ZeroDuration() || window > absl::Seconds(1)) {
    return Invalid("watch_batch_window",
                   absl::StrCat("must be between 0 and 1s, not ",
                                absl::FormatDuration(window)));
  }
  if (min_rate < 0) {
    return Invalid("watch_batch_min_rate", "must not be negative");
  }
  const int64_t message = absl::GetFlag(FLAGS_watch_max_message_bytes);
  // ServingFromFlags ran first: max_message_bytes is set and valid.
  if (message < 1024 || message > options->max_message_bytes) {
    return WatchMessageOutOfRange(message);
  }
  WatchOptions& watch = options->informer.watch;
  watch.max_pending_keys = static_cast<size_t>(max_pending);
  watch.history_size = static_cast<size_t>(history);
  watch.history_bytes = static_cast<size_t>(history_bytes);
  watch.batch_window = window;
  watch.batch_min_rate = min_rate;
  watch.max_message_bytes = static_cast<size_t>(message);
  return absl::OkStatus();
}

// Listeners, keepalive, message size limits and the List page cap.
absl::Status ServingFromFlags(SidecarOptions* options) {
  constexpr int64_t kIntMax = 0x7fffffff;
  options->grpc_listen = absl::GetFlag(FLAGS_grpc_listen);
  if (options->grpc_listen.empty()) return Invalid("grpc_listen", "is empty");
  if (absl::Status unix_ok =
          CheckUnixListen("grpc_listen", options->grpc_listen);
      !unix_ok.ok()) {
    return unix_ok;
  }
  options->http_listen = absl::GetFlag(FLAGS_http_listen);
  options->ports_file = absl::GetFlag(FLAGS_ports_file);
  options->keepalive_time = absl::GetFlag(FLAGS_grpc_keepalive_time);
  options->keepalive_timeout = absl::GetFlag(FLAGS_grpc_keepalive_timeout);
  options->min_ping_interval = absl::GetFlag(FLAGS_grpc_min_ping_interval);
  options->max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options->max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options->max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  const int64_t max_page = absl::GetFlag(FLAGS_max_list_page_bytes);
  if (options->keepalive_time < absl::Seconds(1)) {
    return Invalid("grpc_keepalive_time", "must be at least 1s");
  }
  if (options->keepalive_timeout < absl::Milliseconds(100)) {
    return Invalid("grpc_keepalive_timeout", "must be at least 100ms");
  }
  if (options->min_ping_interval < absl::ZeroDuration()) {
    return Invalid("grpc_min_ping_interval", "must not be negative");
  }
  if (options->max_concurrent_streams < 1) {
    return Invalid("max_concurrent_streams", "must be at least 1");
  }
  if (options->max_message_bytes < 4096 ||
      options->max_message_bytes > kIntMax) {
    return Invalid("max_message_bytes", "must be between 4096 and 2147483647");
  }
  if (options->max_request_bytes < 1024 ||
      options->max_request_bytes > kIntMax) {
    return Invalid("max_request_bytes", "must be between 1024 and 2147483647");
  }
  if (max_page < 1 || max_page > options->max_message_bytes) {
    return Invalid("max_list_page_bytes",
                   "must be between 1 and --max_message_bytes");
  }
  options->informer.max_page_bytes = max_page;
  return absl::OkStatus();
}

// TLS files, tokens and Secrets. The files are read (and checked) when the
// sidecar starts; Secrets listed without --allow_secrets are refused here.
absl::Status SecurityFromFlags(SidecarOptions* options) {
  options->tls.cert_file = absl::GetFlag(FLAGS_grpc_tls_cert_file);
  options->tls.key_file = absl::GetFlag(FLAGS_grpc_tls_key_file);
  options->tls.client_ca_file = absl::GetFlag(FLAGS_grpc_tls_client_ca_file);
  options->tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options->allow_secrets = absl::GetFlag(FLAGS_allow_secrets);
  if (options->allow_secrets) return absl::OkStatus();
  for (const SidecarConfig::Resource& r : options->config.resources) {
    if (IsSecretsResource(r.config.resource)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource \"", r.config.resource,
          "\": Secrets are withheld unless --allow_secrets is set"));
    }
  }
  return absl::OkStatus();
}

// Shutdown, work queues, events, --print_events.
absl::Status OperationsFromFlags(SidecarOptions* options) {
  const std::string print_events = absl::GetFlag(FLAGS_print_events);
  if (print_events == "true") {
    options->print_events = SidecarOptions::PrintEvents::kTrue;
  } else if (print_events == "false") {
    options->print_events = SidecarOptions::PrintEvents::kFalse;
  } else if (print_events == "auto") {
    options->print_events = SidecarOptions::PrintEvents::kAuto;
  } else {
    return Invalid("print_events",
                   absl::StrCat("must be true, false or auto, not \"",
                                print_events, "\""));
  }
  options->shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  if (options->shutdown_grace < absl::ZeroDuration()) {
    return Invalid("shutdown_grace", "must not be negative");
  }
  options->workqueue_idle_timeout = absl::GetFlag(FLAGS_workqueue_idle_timeout);
  if (options->workqueue_idle_timeout < absl::ZeroDuration()) {
    return Invalid("workqueue_idle_timeout", "must not be negative");
  }
  options->event_component = absl::GetFlag(FLAGS_event_component);
  options->event_retry_interval = absl::GetFlag(FLAGS_event_retry_interval);
  if (options->event_retry_interval <= absl::ZeroDuration()) {
    return Invalid("event_retry_interval", "must be positive");
  }
  options->event_flush_timeout = absl::GetFlag(FLAGS_event_flush_timeout);
  if (options->event_flush_timeout < absl::ZeroDuration()) {
    return Invalid("event_flush_timeout", "must not be negative");
  }
  return absl::OkStatus();
}

absl::Status CacheDirFromFlags(SidecarOptions* options) {
  options->cache_dir = absl::GetFlag(FLAGS_cache_dir);
  options->serve_stale_on_start = absl::GetFlag(FLAGS_serve_stale_on_start);
  options->ready_when_stale = absl::GetFlag(FLAGS_ready_when_stale);
  options->cache_snapshot_interval =
      absl::GetFlag(FLAGS_cache_snapshot_interval);
  if (options->cache_snapshot_interval < absl::ZeroDuration()) {
    return Invalid("cache_snapshot_interval", "must not be negative");
  }
  if (options->cache_snapshot_interval > absl::ZeroDuration() &&
      options->cache_snapshot_interval < absl::Seconds(1)) {
    return Invalid("cache_snapshot_interval", "must be 0 or at least 1s");
  }
  return absl::OkStatus();
}

absl::Status WatchListFromFlags(SidecarOptions* options) {
  const std::string mode = absl::GetFlag(FLAGS_watch_list);
  if (mode == "auto") {
    options->watch_list = SidecarOptions::WatchList::kAuto;
  } else if (mode == "on") {
    options->watch_list = SidecarOptions::WatchList::kOn;
  } else if (mode == "off") {
    options->watch_list = SidecarOptions::WatchList::kOff;
  } else {
    return Invalid("watch_list", absl::StrCat("must be auto, on or off, "
                                              "not \"",
                                              mode, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SidecarOptions> OptionsFromFlags() {
  SidecarOptions options;
  // Serving before Watch: the watch message cap is checked against
  // --max_message_bytes, so a bad --max_message_bytes must be reported as
  // itself first.
  for (absl::Status (*step)(SidecarOptions*) :
       {ResourcesFromFlags, ApiConnectionFromFlags, ServingFromFlags,
        WatchFromFlags, SecurityFromFlags, OperationsFromFlags,
        WatchListFromFlags, CacheDirFromFlags}) {
    if (absl::Status st = step(&options); !st.ok()) return st;
  }
  for (const std::string& warning : options.warnings) {
    LOG(WARNING) << "informer_sidecar: " << warning;
  }
  return options;
}

std::vector<informer::FlagGroup> SidecarFlagGroups() {
  return {
      {"Cluster: which API server, which resources",
       {"kubeconfig", "context", "in_cluster", "api_compression",
        "api_tcp_timeout", "api_stall_timeout", "api_watch_idle_timeout",
        "resources", "config", "namespace", "lazy_idle_timeout", "watch_list"}},
      {"Serving: gRPC and HTTP listeners, connection limits",
       {"grpc_listen", "http_listen", "ports_file", "grpc_keepalive_time",
        "grpc_keepalive_timeout", "grpc_min_ping_interval",
        "max_concurrent_streams", "max_message_bytes", "max_request_bytes",
        "max_list_page_bytes"}},
      {"Watch streams (informer.v1.Informer/Watch)",
       {"watch_max_pending", "watch_history", "watch_history_bytes",
        "watch_batch_window", "watch_batch_min_rate",
        "watch_max_message_bytes"}},
      {"Security: TLS and bearer tokens",
       {"grpc_tls_cert_file", "grpc_tls_key_file", "grpc_tls_client_ca_file",
        "tokens_file", "allow_secrets"}},
      {"Operations: shutdown, work queues, events",
       {"shutdown_grace", "workqueue_idle_timeout", "event_component",
        "event_retry_interval", "event_flush_timeout"}},
      {"Warm restarts: the cache kept on local disk",
       {"cache_dir", "cache_snapshot_interval", "serve_stale_on_start",
        "ready_when_stale"}},
      {"Kubernetes API facade: kubectl and client-go read the cache",
       {"kube_api_listen", "kube_api_tls_cert_file", "kube_api_tls_key_file",
        "kube_api_tls_client_ca_file", "kube_api_history",
        "kube_api_advertised_address", "cache_upstream",
        "cache_upstream_token_file", "cache_upstream_ca_file"}},
      {"Demo", {"demo", "print_events"}},
  };
}

}  // namespace server

#ifndef SERVER_APP_SIDECAR_OPTIONS_H_
#define SERVER_APP_SIDECAR_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "informer/client/kubeconfig.h"
#include "informer/util/logging.h"
#include "server/config/cache_upstream.h"
#include "server/config/sidecar_config.h"
#include "server/informer_service/informer_service.h"
#include "server/security/tls_config.h"

namespace server {

// Everything the sidecar binary is told on its command line, validated.
// OptionsFromFlags() builds it from the flags (server/app/sidecar_options.cc
// defines them); Sidecar::Start (sidecar_app.h) runs it. Plain data.
struct SidecarOptions {
  // ---- Cluster ----
  std::string kubeconfig;
  std::string context;
  bool in_cluster = false;
  // Run the in-process demo cluster even when a cluster is configured.
  bool demo = false;
  // The resources (from --config or --resources) and lazy mode.
  SidecarConfig config;
  // A config file was given: the demo then adds no default resources.
  bool config_file_given = false;
  // --namespace: of lazily started informers (and already applied to the
  // resources that set none).
  std::string default_namespace;
  // --api_compression: whether API responses may come gzipped (opt-in).
  informer::client::ApiCompression api_compression =
      informer::client::ApiCompression::kNone;
  // --api_tcp_timeout, --api_stall_timeout, --api_watch_idle_timeout: how
  // long a dead API server connection goes unnoticed (RestConfig's
  // tcp_timeout and stall_timeout, ResourceClientOptions'
  // watch_idle_timeout).
  absl::Duration api_tcp_timeout = absl::Seconds(30);
  absl::Duration api_stall_timeout = absl::Seconds(30);
  absl::Duration api_watch_idle_timeout = absl::Seconds(75);
  // --watch_list: how the informers get their initial state (kAuto:
  // WatchList, LIST+WATCH for good once the server refuses it; kOn:
  // WatchList every round, a refusal falls back for that round only;
  // kOff: LIST+WATCH).
  enum class WatchList { kAuto, kOn, kOff };
  WatchList watch_list = WatchList::kAuto;
  // --cache_upstream and its credentials: where the reflectors list and
  // watch (disabled: the cluster).
  CacheUpstream cache_upstream;
  // Problems that do not stop the sidecar (logged by OptionsFromFlags).
  std::vector<std::string> warnings;

  // ---- Serving ----
  std::string grpc_listen;
  std::string http_listen;  // empty: no HTTP server
  std::string ports_file;   // empty: none written
  absl::Duration keepalive_time;
  absl::Duration keepalive_timeout;
  absl::Duration min_ping_interval;
  int32_t max_concurrent_streams = 0;
  int64_t max_message_bytes = 0;
  int64_t max_request_bytes = 0;

  // ---- Watch streams, List pages ----
  // watch.*, max_page_bytes; the authorizer is set by Sidecar::Start.
  InformerService::Options informer;

  // ---- Security ----
  TlsFiles tls;
  std::string tokens_file;  // empty: no bearer tokens
  bool allow_secrets = false;

  // ---- Operations ----
  enum class PrintEvents { kAuto, kTrue, kFalse };
  PrintEvents print_events = PrintEvents::kAuto;
  absl::Duration shutdown_grace;
  absl::Duration workqueue_idle_timeout;
  std::string event_component;  // empty: derived from the environment
  absl::Duration event_retry_interval;
  absl::Duration event_flush_timeout;

  // ---- Warm restarts ----
  // --cache_dir: where each informer's snapshot is kept (empty: off).
  std::string cache_dir;
  // --cache_snapshot_interval: between periodic writes (0: at shutdown
  // only).
  absl::Duration cache_snapshot_interval = absl::Minutes(5);
  // --serve_stale_on_start: an informer loaded from its snapshot serves
  // it, marked stale, while the API server cannot be reached.
  bool serve_stale_on_start = false;
  // --ready_when_stale: /readyz counts a stale informer as ready.
  bool ready_when_stale = false;
};

// The options from the flags. Every check of a flag's value (and of the
// config file, read here) happens here, before anything starts:
// InvalidArgument (NotFound for an unreadable file) whose message names the
// flag, or the file with line, column and field.
absl::StatusOr<SidecarOptions> OptionsFromFlags();

// The sidecar's flags in the groups --help shows.
std::vector<informer::FlagGroup> SidecarFlagGroups();

}  // namespace server

#endif  // SERVER_APP_SIDECAR_OPTIONS_H_

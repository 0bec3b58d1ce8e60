#include "server/app/sidecar_app.h"

#include <glog/logging.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "emulator/emulator.h"
#include "informer/cache/event_printer.h"
#include "informer/client/kube_client.h"
#include "informer/object/zstd_json_compressor.h"
#include "server/app/grpc_serving_hook.h"
#include "server/app/ports_file.h"
#include "server/app/sidecar_metrics.h"
#include "server/app/sidecar_server.h"
#include "server/app/snapshot_metrics.h"
#include "server/config/cache_upstream.h"
#include "server/events_service/event_recording.h"
#include "server/ops/heap_releaser.h"
#include "server/ops/http_server.h"
#include "server/ops/metrics.h"
#include "server/registry/cluster_gate.h"
#include "server/registry/cluster_identity.h"
#include "server/registry/informer_registry.h"
#include "server/registry/resource_resolver.h"
#include "server/registry/snapshot_fallback.h"
#include "server/registry/snapshot_keeper.h"
#include "server/security/authz.h"
#include "server/security/tls_config.h"
#include "server/workqueue_service/workqueue_service.h"

namespace server {
namespace {

// The client-side form of a resource's config.
informer::client::ResourceClientOptions ResourceClientOptionsOf(
    const ResourceConfig& config, absl::Duration watch_idle_timeout) {
  informer::client::ResourceClientOptions options;
  options.watch_idle_timeout = watch_idle_timeout;
  options.metadata_only = config.metadata_only;
  options.transform.drop_fields = config.drop_fields;
  // Each resource's objects are kept compressed, with a dictionary trained
  // on that resource's own first objects.
  options.transform.compressor =
      std::make_shared<informer::ZstdJsonCompressor>();
  options.label_selector = config.label_selector;
  options.field_selector = config.field_selector;
  return options;
}

}  // namespace

Sidecar::Sidecar(SidecarOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Sidecar>> Sidecar::Start(
    SidecarOptions options) {
  std::unique_ptr<Sidecar> s(new Sidecar(std::move(options)));
  // The cluster first, so that the first log line says which one (a
  // newcomer running the demo sees DEMO MODE at the top).
  if (absl::Status st = s->ChooseCluster(); !st.ok()) {
    return absl::Status(
        st.code(),
        absl::StrCat("cannot load the cluster configuration: ", st.message()));
  }
  // Then the operations endpoint: /healthz answers (and /readyz says what
  // is missing) while the rest starts.
  for (absl::Status (Sidecar::*step)() :
       {&Sidecar::OpenCacheDir, &Sidecar::StartHttp, &Sidecar::StartCluster,
        &Sidecar::CreateRegistry, &Sidecar::LoadSnapshots,
        &Sidecar::StartServer, &Sidecar::StartPrinters,
        &Sidecar::StartInformers}) {
    if (absl::Status st = ((*s).*step)(); !st.ok()) return st;
  }
  return s;
}

absl::Status Sidecar::ChooseCluster() {
  if (options_.demo) {
    demo_reason_ = "--demo";
  } else if (options_.in_cluster) {
    informer::client::InClusterOptions in_cluster;
    absl::StatusOr<informer::client::RestConfig> config =
        informer::client::InClusterConfig(in_cluster);
    if (!config.ok()) return config.status();
    cluster_ = *std::move(config);
  } else {
    informer::client::ConnectionFlags flags;
    flags.kubeconfig = options_.kubeconfig;
    flags.overrides.context = options_.context;
    absl::StatusOr<informer::client::RestConfig> config =
        informer::client::LoadRestConfig(flags);
    if (config.ok()) {
      cluster_ = *std::move(config);
    } else if (!flags.kubeconfig.empty() || !flags.overrides.context.empty()) {
      // An explicit choice that fails is an error, not a reason for the
      // demo.
      return config.status();
    } else if (options_.cache_upstream.enabled()) {
      // A chained sidecar without credentials of its own: the upstream
      // facade answers everything (it refuses writes with 405), no demo.
      cluster_ = UpstreamRestConfig(options_.cache_upstream,
                                    informer::client::RestConfig());
      upstream_only_ = true;
      LOG(INFO) << "informer_sidecar: no cluster configured ("
                << config.status().message() << "): --cache_upstream "
                << cluster_->server
                << " serves discovery and lists and watches; Event writes "
                   "will fail (a Kubernetes API facade is read-only)";
      return absl::OkStatus();
    } else {
      demo_reason_ = absl::StrCat("no cluster configured (",
                                  config.status().message(), ")");
    }
  }
  if (cluster_.has_value()) {
    LOG(INFO) << "informer_sidecar: using the cluster at " << cluster_->server;
    if (options_.cache_upstream.enabled()) {
      LOG(INFO) << "informer_sidecar: informers list and watch from the "
                   "cache upstream "
                << options_.cache_upstream.url
                << "; writes, discovery and resource resolution go to the "
                   "cluster";
    }
  } else {
    LOG(INFO) << "informer_sidecar: DEMO MODE (" << demo_reason_
              << "): serving an in-process demo cluster whose objects change "
                 "every second";
  }
  return absl::OkStatus();
}

absl::Status Sidecar::StartHttp() {
  // The heap's releases and measurements: the metrics read it, the gRPC
  // server asks it for releases. Released again a minute after a relist's
  // release: the relist's transient allocations (3-8 MB at 2,000
  // ConfigMaps, freed within 10-90 s as the consumers catch up) are in use
  // at the first, resident after it until the next relist.
  HeapReleaser::Options heap_options;
  heap_options.release_again_after = absl::Minutes(1);
  heap_ = std::make_unique<HeapReleaser>(std::move(heap_options));
  // Before everything that reports into the metrics registry.
  metrics_ = std::make_unique<metrics::Registry>();
  absl::StatusOr<std::unique_ptr<SidecarMetrics>> ops =
      SidecarMetrics::Create(metrics_.get(), heap_.get());
  if (!ops.ok()) return ops.status();
  ops_ = *std::move(ops);
  if (options_.http_listen.empty()) return absl::OkStatus();
  HttpServer::Options http_options;
  http_options.listen = options_.http_listen;
  http_options.registry = metrics_.get();
  ops_->SetReadyWhenStale(options_.ready_when_stale);
  http_options.not_ready = [m = ops_.get()] { return m->NotReady(); };
  absl::StatusOr<std::unique_ptr<HttpServer>> started =
      HttpServer::Start(std::move(http_options));
  if (!started.ok()) {
    return absl::Status(
        started.status().code(),
        absl::StrCat("--http_listen: ", started.status().message()));
  }
  http_ = *std::move(started);
  LOG(INFO) << "informer_sidecar: HTTP /metrics /healthz /readyz on "
            << options_.http_listen << " (port " << http_->port() << ")";
  return absl::OkStatus();
}

absl::Status Sidecar::StartCluster() {
  informer::client::RestConfig rest_config;
  if (!cluster_.has_value()) {
    emulator::EmulatorOptions demo_options;
    demo_options.demo = true;
    demo_options.churn_interval = absl::Seconds(1);
    demo_ = std::make_unique<emulator::Emulator>(demo_options);
    if (absl::Status st = demo_->Start(); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("cannot start the demo "
                                                  "cluster: ",
                                                  st.message()));
    }
    rest_config.server = demo_->url();
    LOG(INFO) << "demo cluster API server at " << rest_config.server;
  } else {
    rest_config = *cluster_;
  }
  // Every way to a cluster (kubeconfig, in-cluster, the demo) honours
  // them; the upstream's connection copies them.
  rest_config.compression = options_.api_compression;
  rest_config.tcp_timeout = options_.api_tcp_timeout;
  rest_config.stall_timeout = options_.api_stall_timeout;
  informer::client::TransportOptions transport;
  transport.observer = ops_->ApiObserver();
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(rest_config, informer::RealClock(),
                                           std::move(transport));
  if (!kube.ok()) return kube.status();
  kube_ = *std::move(kube);
  if (!options_.cache_upstream.enabled() || upstream_only_) {
    return absl::OkStatus();
  }
  // The reflectors' own connection: the upstream's URL and credentials
  // with the cluster's transport settings (--api_compression included).
  informer::client::TransportOptions upstream_transport;
  upstream_transport.observer = ops_->ApiObserver();
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> upstream =
      informer::client::KubeClient::Create(
          UpstreamRestConfig(options_.cache_upstream, rest_config),
          informer::RealClock(), std::move(upstream_transport));
  if (!upstream.ok()) {
    return absl::Status(
        upstream.status().code(),
        absl::StrCat("--cache_upstream: ", upstream.status().message()));
  }
  upstream_ = *std::move(upstream);
  return absl::OkStatus();
}

// The authorizer from the tokens file and the TLS credentials. In lazy mode
// (`lazy`: unlisted resources allowed) tokens may name any resource.
absl::Status Sidecar::SetUpSecurity(bool lazy) {
  Authorizer::Options authz;
  authz.allow_secrets = options_.allow_secrets;
  if (!lazy) {
    for (const SidecarConfig::Resource& r : options_.config.resources) {
      authz.configured_resources.push_back(r.config.resource);
    }
  }
  if (options_.tokens_file.empty()) {
    authorizer_ = Authorizer::AllowAll(std::move(authz));
  } else {
    absl::StatusOr<std::unique_ptr<Authorizer>> loaded =
        Authorizer::FromTokensFile(options_.tokens_file, std::move(authz));
    if (!loaded.ok()) return loaded.status();
    authorizer_ = *std::move(loaded);
    LOG(INFO) << "informer_sidecar: bearer tokens required ("
              << options_.tokens_file << ": "
              << absl::StrJoin(authorizer_->token_names(), ", ") << ")";
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      BuildServerCredentials(options_.tls);
  if (!credentials.ok()) return credentials.status();
  credentials_ = *std::move(credentials);
  if (credentials_ != nullptr) {
    LOG(INFO) << "informer_sidecar: gRPC over TLS"
              << (options_.tls.client_ca_file.empty()
                      ? ""
                      : " with client certificates (mTLS)");
  } else if (!IsLocalListenAddress(options_.grpc_listen)) {
    LOG(WARNING) << "informer_sidecar: --grpc_listen=" << options_.grpc_listen
                 << " is reachable from other hosts and TLS is off; set "
                    "--grpc_tls_cert_file/--grpc_tls_key_file (and "
                    "--tokens_file), or listen on loopback or a unix socket";
  }
  return absl::OkStatus();
}

namespace {

// Reads the API server's cluster identity for the gate; another cluster
// than the snapshots' ends the process in order (as SIGTERM does): its
// informers never synced, so no snapshot is written over, and the next
// start reads the identity, rejects the snapshots and lists cold.
std::unique_ptr<ClusterCheck> NewClusterCheck(
    informer::client::HttpTransport* transport) {
  return std::make_unique<ClusterCheck>(
      [transport] { return ReadClusterIdentity(transport); },
      [](const std::string& actual) {
        LOG(ERROR) << "informer_sidecar: the API server is another cluster ("
                   << actual
                   << ") than the one the snapshots were trusted for: "
                      "shutting down; the next start lists cold";
        kill(getpid(), SIGTERM);
      },
      [transport] { return FallbackClusterIdentity(transport->config()); });
}

// The ResourceClient behind an informer's source (through the cluster
// gate), or null.
const informer::client::ResourceClient* ResourceClientOf(
    const informer::ListerWatcher* source) {
  if (const auto* gated = dynamic_cast<const ClusterGatedSource*>(source)) {
    source = gated->inner();
  }
  return dynamic_cast<const informer::client::ResourceClient*>(source);
}

}  // namespace

ResourceResolver* Sidecar::ReadSnapshotIdentities() {
  if (!options_.serve_stale_on_start || snapshots_ == nullptr) {
    return resolver_.get();
  }
  snapshot_ids_ = std::make_unique<SnapshotIdentities>(
      SnapshotIdentities::Read(snapshots_->dir()));
  fallback_resolver_ = std::make_unique<SnapshotFallbackResolver>(
      resolver_.get(), snapshot_ids_.get());
  cluster_check_ = NewClusterCheck(kube_->transport());
  return fallback_resolver_.get();
}

absl::StatusOr<std::string> Sidecar::ClusterFromSnapshots(
    const absl::Status& unread) {
  if (snapshot_ids_ == nullptr || !IsApiServerUnreachable(unread)) {
    return unread;
  }
  absl::StatusOr<std::string> cluster = snapshot_ids_->Cluster();
  if (!cluster.ok()) {
    LOG(WARNING) << "informer_sidecar: no cluster identity in the snapshots "
                    "either: "
                 << cluster.status().message();
    return unread;
  }
  // Only this sidecar writes this directory (its lock), so the snapshots
  // are of the cluster it was last configured for; no list or watch runs
  // before the API server confirmed it (cluster_check_).
  LOG(WARNING) << "informer_sidecar: cannot tell which cluster this is ("
               << unread.message()
               << "): --serve_stale_on_start trusts the snapshots' own "
                  "cluster identity, "
               << *cluster;
  cluster_check_->Trust(*cluster);
  return cluster;
}

absl::Status Sidecar::CreateRegistry() {
  // The demo with nothing configured serves its seeded resources from the
  // start (so the first events show at once) and others lazily.
  SidecarConfig& config = options_.config;
  if (demo_ != nullptr && !options_.config_file_given &&
      config.resources.empty()) {
    for (const char* name : {"pods", "configmaps", "deployments.apps"}) {
      SidecarConfig::Resource r;
      r.config.resource = name;
      r.config.namespace_ = options_.default_namespace;
      r.config.origin = "demo default";
      config.resources.push_back(std::move(r));
    }
  }
  InformerRegistry::Options registry_options;
  registry_options.allow_unlisted = config.allow_unlisted_resources;
  registry_options.lazy_namespace = options_.default_namespace;
  registry_options.lazy_idle_timeout = config.lazy_idle_timeout;
  registry_options.use_watch_list =
      options_.watch_list != SidecarOptions::WatchList::kOff;
  registry_options.watch_list_after_refusal =
      options_.watch_list == SidecarOptions::WatchList::kOn;
  registry_options.serve_stale_on_start = options_.serve_stale_on_start;
  resolver_ = std::make_unique<DiscoveryResolver>(kube_->discovery());
  registry_options.resolver = ReadSnapshotIdentities();
  if (registry_options.allow_unlisted) {
    LOG(INFO) << "informer_sidecar: lazy mode: informers for resources not "
                 "configured start on first request and stop after "
              << registry_options.lazy_idle_timeout << " idle";
  }
  if (absl::Status st = SetUpSecurity(registry_options.allow_unlisted);
      !st.ok()) {
    return st;
  }
  std::vector<ResourceConfig> configs;
  for (const SidecarConfig::Resource& r : config.resources) {
    configs.push_back(r.config);
  }
  informer::client::KubeClient* client = kube_.get();
  // Resources resolve through the cluster's discovery; the reflectors list
  // and watch over the upstream's connection when there is one.
  informer::client::HttpTransport* lists =
      upstream_ != nullptr ? upstream_->transport() : kube_->transport();
  const bool allow_secrets = options_.allow_secrets;
  const absl::Duration watch_idle = options_.api_watch_idle_timeout;
  absl::StatusOr<std::unique_ptr<InformerRegistry>> registry =
      InformerRegistry::Create(
          std::move(configs),
          [client, lists, allow_secrets, watch_idle,
           snapshot_ids = snapshot_ids_.get(),
           check = cluster_check_.get()](const ResourceConfig& c)
              -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
            absl::StatusOr<informer::client::ApiResource> resource =
                ResolveOrFromSnapshot(client->discovery(), snapshot_ids,
                                      c.resource);
            if (!resource.ok()) return resource.status();
            auto rc = std::make_unique<informer::client::ResourceClient>(
                lists, *std::move(resource), c.namespace_,
                ResourceClientOptionsOf(c, watch_idle));
            // Whatever alias named it, core Secrets need --allow_secrets.
            if (rc->resource().group.empty() &&
                rc->resource().resource == "secrets" && !allow_secrets) {
              return absl::InvalidArgumentError(
                  "it is the Secrets resource, withheld unless "
                  "--allow_secrets is set");
            }
            if (check != nullptr) {
              return std::unique_ptr<informer::ListerWatcher>(
                  std::make_unique<ClusterGatedSource>(std::move(rc), check));
            }
            return std::unique_ptr<informer::ListerWatcher>(std::move(rc));
          },
          std::move(registry_options));
  if (!registry.ok()) return registry.status();
  registry_ = *std::move(registry);
  return absl::OkStatus();
}

namespace {

// A fault hook for the tests of a full disk (no test can fill a real one
// portably): INFORMER_SIDECAR_TEST_SNAPSHOT_WRITE_LIMIT=BYTES fails every
// snapshot write past BYTES of its file as ENOSPC would.
std::function<absl::Status(uint64_t, size_t)> SnapshotWriteLimitFromEnv() {
  const char* env = std::getenv("INFORMER_SIDECAR_TEST_SNAPSHOT_WRITE_LIMIT");
  uint64_t limit = 0;
  if (env == nullptr || !absl::SimpleAtoi(env, &limit)) return nullptr;
  LOG(WARNING) << "informer_sidecar: snapshot writes fail past " << limit
               << " bytes (INFORMER_SIDECAR_TEST_SNAPSHOT_WRITE_LIMIT)";
  return [limit](uint64_t offset, size_t size) {
    if (offset + size <= limit) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        "no space left on device (INFORMER_SIDECAR_TEST_SNAPSHOT_WRITE_"
        "LIMIT)");
  };
}

}  // namespace

absl::Status Sidecar::OpenCacheDir() {
  if (options_.cache_dir.empty()) return absl::OkStatus();
  SnapshotKeeper::Options o;
  o.dir = options_.cache_dir;
  o.interval = options_.cache_snapshot_interval;
  o.before_write = SnapshotWriteLimitFromEnv();
  absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
      SnapshotKeeper::Create(std::move(o));
  if (!keeper.ok()) {
    // Another sidecar's directory: running beside it would have both
    // overwrite each other's snapshots.
    if (absl::IsFailedPrecondition(keeper.status()) &&
        absl::StrContains(keeper.status().message(), "in use")) {
      return keeper.status();
    }
    // A directory that cannot be used costs what running without one
    // costs: cold starts. Serving matters more.
    LOG(WARNING) << "informer_sidecar: " << keeper.status().message()
                 << ": snapshots off (every informer starts cold and none "
                    "is written)";
    return absl::OkStatus();
  }
  snapshots_ = *std::move(keeper);
  LOG(INFO) << "informer_sidecar: caches kept in " << options_.cache_dir
            << " (written at shutdown"
            << (options_.cache_snapshot_interval > absl::ZeroDuration()
                    ? absl::StrCat(" and every ",
                                   absl::FormatDuration(
                                       options_.cache_snapshot_interval))
                    : std::string())
            << ")";
  return absl::OkStatus();
}

absl::Status Sidecar::LoadSnapshots() {
  if (snapshots_ == nullptr) return absl::OkStatus();
  if (absl::Status st = RegisterSnapshotMetrics(metrics_.get(), snapshots_);
      !st.ok()) {
    return st;
  }
  // Read once: every snapshot of this sidecar carries it.
  absl::StatusOr<std::string> cluster = ReadClusterIdentity(kube_->transport());
  if (!cluster.ok()) cluster = ClusterFromSnapshots(cluster.status());
  if (!cluster.ok()) {
    // Without it no snapshot can be trusted: every informer starts cold,
    // and snapshots are still written (under the fallback identity).
    LOG(WARNING) << "informer_sidecar: cannot tell which cluster this is ("
                 << cluster.status().message()
                 << "): snapshots are not loaded (cold start)";
  } else {
    LOG(INFO) << "informer_sidecar: cluster identity for snapshots: "
              << *cluster;
  }
  const std::string identity =
      cluster.ok() ? *cluster
                   : FallbackClusterIdentity(kube_->transport()->config());
  watch_resume_ = std::make_unique<WatchResumeStore>();
  for (const auto& entry : registry_->entries()) {
    const auto* rc = ResourceClientOf(entry->source.get());
    if (rc == nullptr || entry->lazy) continue;
    const ResourceConfig& c = entry->config;
    SnapshotKeeper::Target t;
    t.informer = entry->informer.get();
    t.identity.cluster = identity;
    t.identity.group = rc->resource().group;
    t.identity.version = rc->resource().version;
    t.identity.resource = rc->resource().resource;
    // Recorded for a start without the API server (--serve_stale_on_start).
    t.identity.kind = rc->resource().kind;
    t.identity.namespace_ = c.namespace_;
    t.identity.label_selector = c.label_selector;
    t.identity.field_selector = c.field_selector;
    t.identity.metadata_only = c.metadata_only;
    // The client's own transform: its compressor (one dictionary per
    // resource) compresses the loaded objects as it does the listed ones.
    t.transform = rc->transform();
    t.identity.transform = informer::TransformIdentity(t.transform);
    // Configured entries live as long as the registry.
    t.on_loaded = [e = entry.get()](absl::Time written) {
      e->stale.MarkLoadedFromSnapshot(written);
    };
    // Apps' resume tokens survive the restart.
    watch_resume_->Wire(c.resource, &t);
    snapshots_->Add(std::move(t));
  }
  if (cluster.ok()) snapshots_->Load();
  return absl::OkStatus();
}

void Sidecar::WriteSnapshotsAtShutdown() {
  if (snapshots_ == nullptr) return;
  snapshots_->Stop();  // the periodic writes
  const absl::Time start = absl::Now();
  absl::Status st = snapshots_->WriteAll();
  LOG(INFO) << "informer_sidecar: snapshots written at shutdown in "
            << absl::FormatDuration(absl::Now() - start)
            << (st.ok() ? std::string()
                        : absl::StrCat(" (failures: ", st.message(), ")"));
}

absl::Status Sidecar::StartServer() {
  SidecarServer::Options server_options;
  server_options.informer = options_.informer;
  server_options.informer.authorizer = authorizer_.get();
  server_options.informer.watch.resume_store = watch_resume_.get();
  server_options.credentials = credentials_;
  server_options.heap_releaser = heap_.get();
  auto hook = ServingHook(options_, metrics_.get(),
                          &server_options.informer.count_watch_call);
  if (!hook.ok()) return hook.status();
  server_options.configure.push_back(*std::move(hook));
  LOG(INFO) << "informer_sidecar: gRPC keepalive " << options_.keepalive_time
            << " (timeout " << options_.keepalive_timeout
            << ", client pings every " << options_.min_ping_interval
            << " or less often), at most " << options_.max_concurrent_streams
            << " streams per connection, messages up to "
            << options_.max_message_bytes << " bytes out and "
            << options_.max_request_bytes << " in, List pages up to "
            << options_.informer.max_page_bytes << " bytes";

  // informer.v1.WorkQueue: remote work queues fed by the informers.
  WorkQueueService::Options workqueue_options;
  workqueue_options.idle_timeout = options_.workqueue_idle_timeout;
  workqueue_options.authorizer = authorizer_.get();
  workqueues_ =
      std::make_unique<WorkQueueService>(registry_.get(), workqueue_options);
  server_options.services.push_back(workqueues_.get());
  // Events: recorded over gRPC, written to the API server asynchronously.
  EventRecordingOptions event_options;
  event_options.component = options_.event_component;
  event_options.authorizer = authorizer_.get();
  event_options.retry.retry_interval = options_.event_retry_interval;
  events_ = std::make_unique<EventRecording>(kube_->transport(),
                                             std::move(event_options));
  server_options.services.push_back(events_->service());
  LOG(INFO) << "informer_sidecar: recording events as component \""
            << events_->component() << "\", host \"" << events_->host() << "\"";

  absl::StatusOr<std::unique_ptr<SidecarServer>> server = SidecarServer::Start(
      registry_.get(), options_.grpc_listen, std::move(server_options));
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  LOG(INFO) << "informer_sidecar: gRPC listening on " << options_.grpc_listen
            << (server_->port() > 0
                    ? absl::StrCat(" (port ", server_->port(), ")")
                    : "");
  ops_->Attach(registry_.get(), &server_->informer_service().watch_hub());
  if (!options_.ports_file.empty()) {
    return WritePortsFile(options_.ports_file, grpc_port(), http_port());
  }
  return absl::OkStatus();
}

// Demo mode prints the notifications so the run command shows events.
absl::Status Sidecar::StartPrinters() {
  const bool print =
      options_.print_events == SidecarOptions::PrintEvents::kTrue ||
      (options_.print_events == SidecarOptions::PrintEvents::kAuto &&
       demo_ != nullptr);
  if (!print) return absl::OkStatus();
  for (const auto& entry : registry_->entries()) {
    printers_.push_back(std::make_unique<informer::EventPrinter>(
        stdout, entry->config.resource));
    if (absl::Status st =
            entry->informer->AddEventHandler(printers_.back().get()).status();
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status Sidecar::StartInformers() {
  if (absl::Status st = registry_->Start(); !st.ok()) return st;
  absl::StatusOr<std::unique_ptr<kubeapi::KubeApiServer>> kube_api =
      kubeapi::StartKubeApiFromFlags(registry_.get(), kube_->discovery(),
                                     authorizer_.get(), metrics_.get(),
                                     snapshot_ids_.get());
  if (!kube_api.ok()) return kube_api.status();
  kube_api_ = *std::move(kube_api);
  // The ports file was written when gRPC started; once the facade serves
  // it is rewritten with the facade's port too (for wrappers and chained
  // sidecars started on port 0).
  if (kube_api_ != nullptr && !options_.ports_file.empty()) {
    if (absl::Status st = WritePortsFile(options_.ports_file, grpc_port(),
                                         http_port(), kube_api_->port());
        !st.ok()) {
      return st;
    }
  }
  // Lazy informers: their resource names turn SERVING when they synced and
  // NOT_SERVING when stopped for idleness (they never gate the overall
  // status).
  grpc::HealthCheckServiceInterface* health =
      server_->grpc_server()->GetHealthCheckService();
  if (snapshots_ != nullptr) snapshots_->Start();
  lazy_health_ = registry_->AddObserver(
      {.on_lazy_synced =
           [health](InformerEntry* e) {
             health->SetServingStatus(e->config.resource, true);
           },
       .on_retired =
           [health](InformerEntry* e) {
             health->SetServingStatus(e->config.resource, false);
           }});
  return absl::OkStatus();
}

int Sidecar::grpc_port() const {
  return server_ != nullptr ? server_->port() : 0;
}

int Sidecar::http_port() const { return http_ != nullptr ? http_->port() : 0; }

absl::Duration Sidecar::shutdown_deadline() const {
  return options_.shutdown_grace + options_.event_flush_timeout +
         absl::Seconds(10);
}

bool Sidecar::Shutdown() {
  if (stopped_) return true;
  stopped_ = true;
  if (http_ != nullptr) http_->SetShuttingDown();
  if (events_ != nullptr) events_->StopAccepting();  // ends events Watch
  if (server_ != nullptr) {
    // Ends every informer Watch stream with UNAVAILABLE, refuses new calls,
    // and gives running unary calls the grace.
    server_->Shutdown(options_.shutdown_grace);
    server_->Wait();
    ops_->Detach();  // the Watch hub goes with the server
    if (lazy_health_ >= 0) registry_->RemoveObserver(lazy_health_);
    server_.reset();
    LOG(INFO) << "informer_sidecar: gRPC server stopped";
  }
  // Queued events go to the API server (bounded), before the demo cluster
  // they may be written to stops.
  if (events_ != nullptr && !events_->Flush(options_.event_flush_timeout)) {
    LOG(WARNING) << "informer_sidecar: queued events not all written within "
                 << options_.event_flush_timeout << "; exiting without them";
    return false;
  }
  events_.reset();
  LOG(INFO) << "informer_sidecar: events flushed";
  kube_api_.reset();    // its handlers and informer leases
  workqueues_.reset();  // removes its handlers from the informers
  WriteSnapshotsAtShutdown();
  if (registry_ != nullptr) registry_->Stop();
  registry_.reset();
  LOG(INFO) << "informer_sidecar: informers stopped";
  if (demo_ != nullptr) demo_->Stop();
  if (http_ != nullptr) http_->Stop();
  return true;
}

Sidecar::~Sidecar() {
  // A started sidecar stops in order; one whose start failed releases what
  // it holds in reverse (the members' order).
  if (server_ != nullptr && !stopped_) Shutdown();
  // The metrics may keep the keeper alive: its writes end here, before
  // the informers go.
  if (snapshots_ != nullptr) snapshots_->Stop();
}

sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

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

}  // namespace server

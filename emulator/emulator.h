#ifndef EMULATOR_EMULATOR_H_
#define EMULATOR_EMULATOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "emulator/api_status.h"
#include "emulator/emulator_hooks.h"
#include "emulator/list_options.h"
#include "emulator/list_stall.h"
#include "emulator/object_store.h"
#include "emulator/resource_registry.h"
#include "emulator/seed.h"
#include "informer/util/clock.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace emulator {

struct EmulatorOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: pick a free port (see Emulator::port())
  // HTTPS with a CA and server certificate generated at Start()
  // (Emulator::ca_cert_pem()); plain HTTP otherwise.
  bool tls = false;
  // The API server emulated: v1.37 (false, the default) or v1.24 (true: no
  // WatchList, a watch with resourceVersionMatch gets 422 Invalid, v1.24's
  // continue tokens, bookmarks and /version). See ServerVersion.
  bool v1_24 = false;
  // A list at a resourceVersion newer than the store's waits this long for
  // it before the 504 (the API server's watch cache waits 3 s).
  absl::Duration too_large_rv_wait = absl::Seconds(3);
  absl::Duration bookmark_interval = absl::Seconds(60);
  // Watch events kept per resource (older RVs get 410 Expired).
  size_t history_length = 1000;
  absl::Duration compaction_interval = absl::Minutes(5);
  // Watch length when the request has no timeoutSeconds.
  absl::Duration default_watch_timeout = absl::Minutes(30);

  // Bearer tokens. No tokens: authentication is off (every request is
  // allowed). Otherwise a missing or unknown token gets 401, and a token
  // whose `allowed` is false gets 403.
  struct Token {
    std::string token;
    std::string user;
    bool allowed = true;
  };
  std::vector<Token> tokens;

  // kube-apiserver's --watch-cache (on by default): a list at
  // resourceVersion=0 (without a continue token or match=Exact) is served
  // whole from memory, ignoring `limit`, as the v1.24 cacher does. Off:
  // every list goes to "etcd" and honours `limit` (tests of paging through
  // an initial list turn it off, as --watch-cache=false would).
  bool watch_cache = true;
  // etcd's --watch-progress-notify-interval (see ObjectStore::Options).
  absl::Duration progress_notify_interval = absl::Minutes(10);
  // Pacing of list response bodies, in bytes of JSON per second per
  // response (0: as fast as the emulator goes, ~2 GB/s). A real API server
  // encodes a large list at ~75-155 MB/s. Applies to the uncompressed
  // body; gzip (when asked) costs its own CPU on top, as on the server.
  double serve_bytes_per_sec = 0;
  // Pacing of a WatchList's initial events (a watch with
  // sendInitialEvents=true: its bytes up to and including the
  // initial-events-end bookmark; not the live events after it), in bytes
  // per second per watch (0: unpaced). Unset: serve_bytes_per_sec, so that
  // a paced emulator paces both ways of taking the initial state.
  // kube-apiserver v1.37.2 streams a JSON WatchList at about half the rate
  // of the same JSON LIST
  // (docs/perf-log/2026-12-03-watchlist-parallel-decode.md): half of
  // serve_bytes_per_sec reproduces that relation.
  absl::optional<double> serve_watch_list_bytes_per_sec;

  int seed_pods = 0;        // SeedPods(...) at Start()
  int seed_configmaps = 0;  // SeedConfigMaps(...) at Start()
  bool demo = false;        // SeedDemo(...) at Start()
  // With demo: churn interval (zero: no churn).
  absl::Duration churn_interval = absl::ZeroDuration();

  informer::Clock* clock = informer::RealClock();
};

// Emulator is the serving core of an in-process Kubernetes API server: the
// HTTP(S) protocol (discovery, CRUD, paged lists, chunked watch streams with
// bookmarks and WatchList, metav1.Status errors byte-compatible with the
// v1.37 and v1.24 captures) over an ObjectStore. The sidecar's demo mode
// embeds it alone; request faults and the load generator plug in through
// EmulatorHooks (EmulatorWithFaults, which //emulator:kube_emulator and
// tests use).
//
// Control endpoints under /_emulator/ (no authentication) expose the stream
// faults, restart and compaction to out-of-process tests, and whatever the
// hooks serve; see kube_emulator_main.cc.
//
// Thread-safety: Start/Stop from one thread; everything else from any
// thread. Each connection gets its own thread (watches are long-lived).
// Ownership: owns the store, registry, faults and server; the clock must
// outlive it. Registering custom resources must happen before Start().
class Emulator {
 public:
  explicit Emulator(EmulatorOptions options);
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;
  virtual ~Emulator();  // Stop()s

  // Adds optional behaviour (not owned; must outlive Stop()). Before
  // Start() only.
  void AddHooks(EmulatorHooks* hooks);

  // Generates TLS material if asked, seeds, binds and starts serving.
  absl::Status Start();
  // Ends every watch, stops serving and joins all connection threads.
  void Stop();

  int port() const { return port_; }
  // "http://127.0.0.1:PORT" or "https://...".
  std::string url() const;
  // PEM of the generated CA (empty without TLS).
  const std::string& ca_cert_pem() const { return ca_cert_pem_; }

  ObjectStore& store() { return *store_; }
  ResourceRegistry& registry() { return *registry_; }
  // The registered resource named like "pods" or "deployments.apps";
  // CHECK-fails for unknown names (tests and seeds use fixed names).
  const ResourceInfo& Resource(absl::string_view name) const;

  // Stream faults on the currently open watches of `resource` (null: all).
  // Cut: the next event is sent half-written, then the connection drops.
  void CutWatches(const ResourceInfo* resource);
  // Stall: nothing more is sent (no events, bookmarks or end) until
  // ResumeWatches; the connection stays open.
  void StallWatches(const ResourceInfo* resource);
  void ResumeWatches(const ResourceInfo* resource);
  // Stall lists: lists of `resource` (null: all) started from now on send
  // half their body, then nothing, the connection held open, until
  // ResumeLists (also clear_faults; the connection is then dropped).
  void StallLists(const ResourceInfo* resource);
  void ResumeLists();
  // One line of invalid JSON is written on each stream.
  void InjectMalformedEvent(const ResourceInfo* resource);
  // Creates a ConfigMap whose data makes its JSON larger than `bytes`.
  absl::StatusOr<StoredObjectPtr> CreateLargeObject(absl::string_view ns,
                                                    absl::string_view name,
                                                    size_t bytes);
  // API requests served so far (control endpoints and health probes not
  // counted), by kind: list (GET of a collection), watch (GET with
  // watch=1), other (discovery, get, writes, unknown paths). Also served as
  // GET /_emulator/requests, so that tests of chained caches can show that
  // a downstream reader costs the API server nothing.
  struct RequestCounts {
    int64_t list = 0;
    int64_t watch = 0;
    int64_t other = 0;
  };
  RequestCounts request_counts() const;

  // An API server restart as clients see it: the watch cache starts over
  // at the current RV (a watch from an older RV gets 410), every watch is
  // dropped abruptly. etcd keeps its history until it is compacted.
  void Restart();

 private:
  // The resource a request addresses.
  struct Route {
    const ResourceInfo* resource = nullptr;
    std::string ns;
    std::string name;
    std::string subresource;
  };
  struct WatchParams;
  // /api/{version}/... or /apis/{group}/{version}/...: `rest` is the index
  // of the first path segment after the version.
  struct ApiPath {
    std::string group;
    std::string version;
    size_t rest = 0;
  };
  class StreamQueue;

  absl::Status MakeServer();
  absl::Status Seed();
  absl::Status Serve();

  // `gzip`: the client's Accept-Encoding asked for gzip (the header itself
  // is removed before handlers run, see Serve).
  void Handle(const httplib::Request& req, bool gzip, httplib::Response& res);
  // The token of the request's bearer credentials; null when unknown.
  const EmulatorOptions::Token* Authenticate(const httplib::Request& req) const;
  // The 403 a user without rights gets for a resource path, as RBAC words
  // it from the path alone; nullopt for other paths.
  absl::optional<ApiStatus> Forbidden(const std::vector<absl::string_view>& seg,
                                      const httplib::Request& req,
                                      absl::string_view user) const;
  // Serves discovery paths (true) or fills `api` for a resource path.
  bool ServeDiscovery(const std::vector<absl::string_view>& seg, bool is_get,
                      ApiPath* api, httplib::Response& res);
  // False: no such resource (404).
  bool ParseRoute(const std::vector<absl::string_view>& seg, const ApiPath& api,
                  Route* route) const;
  // The hooks' answers, first one wins.
  absl::optional<EmulatorHooks::Failure> InjectedFailure(
      absl::string_view verb, absl::string_view resource);
  bool TakeWatchExpiry(absl::string_view resource);
  bool TakeContinueExpiry();

  void HandleControl(const httplib::Request& req, httplib::Response& res);
  // Control operations on streams, restart and compaction; false when `op`
  // is none of them.
  bool HandleStreamControl(absl::string_view op, const ResourceInfo* resource);
  // Control operations that answer with data; 404 for unknown ones.
  void HandleInspection(absl::string_view op, const ResourceInfo* resource,
                        const httplib::Request& req, httplib::Response& res);
  ServerVersion server_version() const;
  // A list request's parameters; the API server's error otherwise.
  absl::optional<ApiStatus> ParseList(const Route& route,
                                      const httplib::Request& req,
                                      ListRequest* lr) const;
  void HandleList(const Route& route, const httplib::Request& req, bool gzip,
                  httplib::Response& res);
  // Serves `body` as a list stalled mid-body (see StallLists).
  void ServeStalledList(std::string body, int64_t stall,
                        httplib::Response& res);
  void HandleWatch(const Route& route, const httplib::Request& req,
                   httplib::Response& res);
  // A watch request's parameters; the API server's error otherwise.
  absl::optional<ApiStatus> ParseWatch(const Route& route,
                                       const httplib::Request& req,
                                       WatchRequest* wr,
                                       WatchParams* params) const;
  // A WatchList at a resourceVersion the store has not reached waits for
  // it (too_large_rv_wait); the 504 to send in an ERROR event if it never
  // comes, nullopt otherwise.
  absl::optional<ApiStatus> AwaitWatchListRv(const WatchRequest& wr) const;
  void HandleWrite(const Route& route, const std::string& verb,
                   const httplib::Request& req, httplib::Response& res);

  EmulatorOptions options_;
  std::unique_ptr<ResourceRegistry> registry_;
  std::unique_ptr<ObjectStore> store_;
  std::vector<EmulatorHooks*> hooks_;
  std::unique_ptr<Churner> churner_;
  ListStalls list_stalls_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listen_thread_;
  std::atomic<bool> listen_returned_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> list_requests_{0};
  std::atomic<int64_t> watch_requests_{0};
  std::atomic<int64_t> other_requests_{0};
  int port_ = 0;
  std::string ca_cert_pem_;
};

}  // namespace emulator

#endif  // EMULATOR_EMULATOR_H_

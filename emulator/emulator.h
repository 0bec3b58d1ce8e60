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
#include "informer/util/clock.h"
#include "emulator/fault_injector.h"
#include "emulator/object_store.h"
#include "emulator/resource_registry.h"
#include "emulator/seed.h"

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
  // Behave like kube-apiserver v1.24: no WatchList, a watch with
  // resourceVersionMatch gets 422 Invalid.
  bool v1_24 = false;
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

  int seed_pods = 0;  // SeedPods(...) at Start()
  bool demo = false;  // SeedDemo(...) at Start()
  // With demo: churn interval (zero: no churn).
  absl::Duration churn_interval = absl::ZeroDuration();

  informer::Clock* clock = informer::RealClock();
};

// Emulator is an in-process Kubernetes API server: the HTTP(S) protocol
// (discovery, CRUD, paged lists, chunked watch streams with bookmarks and
// WatchList, metav1.Status errors byte-compatible with v1.24) over an
// ObjectStore, plus fault injection for tests. The sidecar's demo mode
// embeds it; //emulator:kube_emulator runs it as a process.
//
// Control endpoints under /_emulator/ (no authentication) expose the fault
// injection to out-of-process tests; see kube_emulator_main.cc.
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
  ~Emulator();  // Stop()s

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
  FaultInjector& faults() { return faults_; }
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
  // One line of invalid JSON is written on each stream.
  void InjectMalformedEvent(const ResourceInfo* resource);
  // Creates a ConfigMap whose data makes its JSON larger than `bytes`.
  absl::StatusOr<StoredObjectPtr> CreateLargeObject(absl::string_view ns,
                                                    absl::string_view name,
                                                    size_t bytes);
  // An API server restart as clients see it: history compacted (old RVs and
  // continue tokens get 410), every watch dropped abruptly.
  void Restart();

 private:
  struct Route;
  class StreamQueue;

  void Handle(const httplib::Request& req, httplib::Response& res);
  void HandleControl(const httplib::Request& req, httplib::Response& res);
  void HandleList(const Route& route, const httplib::Request& req,
                  httplib::Response& res);
  void HandleWatch(const Route& route, const httplib::Request& req,
                   httplib::Response& res);
  void HandleWrite(const Route& route, const std::string& verb,
                   const httplib::Request& req, httplib::Response& res);

  EmulatorOptions options_;
  std::unique_ptr<ResourceRegistry> registry_;
  std::unique_ptr<ObjectStore> store_;
  FaultInjector faults_;
  std::unique_ptr<Churner> churner_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listen_thread_;
  std::atomic<bool> listen_returned_{false};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::string ca_cert_pem_;
};

}  // namespace emulator

#endif  // EMULATOR_EMULATOR_H_

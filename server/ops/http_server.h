#ifndef SERVER_OPS_HTTP_SERVER_H_
#define SERVER_OPS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/ops/metrics.h"

namespace httplib {
class Server;
}

namespace server {

// HttpServer is the sidecar's operations endpoint (plain HTTP, cpp-httplib):
//
//   GET /metrics  the registry's Prometheus text exposition
//   GET /healthz  200 "ok" while the process serves at all (liveness)
//   GET /readyz   200 "ok" once every configured informer synced; else 503
//                 naming the ones that have not ("not ready: pods,...").
//                 503 "shutting down" once SetShuttingDown was called.
//
// It never serves object data. Requests are handled by a small fixed pool
// of threads (no thread per connection beyond it).
//
// Thread-safety: all methods from any thread. The registry and the
// callback's captures must outlive the server. Destruction stops it.
class HttpServer {
 public:
  struct Options {
    // "host:port"; an empty host (":9090") listens on all interfaces; port 0
    // picks a free one (see port()).
    std::string listen = ":9090";
    metrics::Registry* registry = nullptr;  // required
    // The names of what is not ready yet (empty: ready). Called per request.
    std::function<std::vector<std::string>()> not_ready;
    int threads = 4;
  };

  // InvalidArgument for a malformed address or options, Unavailable when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Options options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // /readyz answers 503 from now on (the process is going away).
  void SetShuttingDown() { shutting_down_.store(true); }
  // Stops listening and joins; idempotent.
  void Stop();

 private:
  explicit HttpServer(Options options);

  const Options options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> listen_returned_{false};
};

}  // namespace server

#endif  // SERVER_OPS_HTTP_SERVER_H_

#include "server/ops/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "informer/util/host_port.h"

namespace server {

HttpServer::HttpServer(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options) {
  if (options.registry == nullptr) {
    return absl::InvalidArgumentError("HttpServer: no metrics registry");
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError("HttpServer: threads must be >= 1");
  }
  absl::StatusOr<informer::HostPort> address =
      informer::ParseHostPort(options.listen);
  if (!address.ok()) return address.status();
  // ":port" listens on every interface.
  const std::string host = address->host.empty() ? "0.0.0.0" : address->host;
  const int port = address->port;
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options)));
  s->server_ = std::make_unique<httplib::Server>();
  httplib::Server& svr = *s->server_;
  const int threads = s->options_.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // httplib's default also sets SO_REUSEPORT, which would let a second
  // sidecar bind the same port silently; keep only SO_REUSEADDR.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  HttpServer* self = s.get();
  svr.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->options_.registry->Render(), metrics::kContentType);
  });
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  svr.Get("/readyz", [self](const httplib::Request&, httplib::Response& res) {
    if (self->shutting_down_.load()) {
      res.status = 503;
      res.set_content("shutting down\n", "text/plain");
      return;
    }
    std::vector<std::string> missing;
    if (self->options_.not_ready) missing = self->options_.not_ready();
    if (missing.empty()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(
          absl::StrCat("not ready: ", absl::StrJoin(missing, ","), "\n"),
          "text/plain");
    }
  });
  if (port == 0) {
    s->port_ = svr.bind_to_any_port(host);
    if (s->port_ <= 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for HTTP on ", s->options_.listen));
    }
  } else {
    if (!svr.bind_to_port(host, port)) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for HTTP on ", s->options_.listen));
    }
    s->port_ = port;
  }
  s->thread_ = std::thread([self] {
    self->server_->listen_after_bind();
    self->listen_returned_.store(true);
  });
  // stop() only takes effect once the accept loop runs; it starts within
  // microseconds, and Stop() must never race ahead of it.
  while (!svr.is_running() && !s->listen_returned_.load()) {
    std::this_thread::yield();
  }
  return s;
}

void HttpServer::Stop() {
  if (stopped_.exchange(true)) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace server

#ifndef INFORMER_CLIENT_HTTP_TRANSPORT_H_
#define INFORMER_CLIENT_HTTP_TRANSPORT_H_

// HTTP(S) to one Kubernetes API server over libcurl.
//
// * TLS is verified by default (CA file or in-memory CA data, else the system
//   roots); insecure-skip-tls-verify and tls-server-name as in kubeconfig.
//   Client certificates are handed to libcurl from memory (blobs), so exec
//   plugins' certificates never touch the disk.
// * Keep-alive: a unary request's easy handle, with its open connection,
//   is kept for the next request (never shared by two threads at once), so
//   consecutive requests reuse connections; DNS and TLS sessions are shared
//   by all. Each watch gets its own connection (HTTP/1.1), which is what
//   the API server emulator speaks.
// * HTTP/1.1 is the default and HTTP/2 is opt-in (RestConfig::http2).
//   Why: every watch is a long-lived streaming response; over HTTP/1.1 it
//   owns one connection, which is what the API server emulator speaks and
//   what libcurl 7.88 (Debian 12) handles without surprises, whereas that
//   release line had bugs in HTTP/2 stream pause/resume that can stall or
//   corrupt a long-running stream. With http2 set, libcurl offers h2 via
//   ALPN on https:// only (CURL_HTTP_VERSION_2TLS); a server that does not
//   pick h2, and every cleartext http:// server, is spoken to in HTTP/1.1
//   (no h2c upgrade), so the option never breaks a connection.
//   HttpResponse::protocol reports what was actually used.
// * Compression (RestConfig::compression): with kNone (the default) no
//   request carries Accept-Encoding, so the API server never spends CPU
//   gzipping a list; with kGzip every request (watches too, which the API
//   server never compresses) says "Accept-Encoding: gzip" and libcurl
//   decodes the body before any callback sees it.
// * Credentials come from a CredentialProvider before every request; a 401
//   invalidates them and the request is retried once with fresh ones (an
//   exec plugin re-runs, a token file is re-read).
// * 429/503 with Retry-After: GETs are retried up to max_get_retries times,
//   waiting Retry-After (capped, jittered) on the injected Clock; otherwise
//   the status carries RetryAfter() (see informer/api_error.h).
// * Dead connections (RestConfig::tcp_timeout, stall_timeout): every
//   connection gets TCP keepalive and TCP_USER_TIMEOUT, so one whose packets
//   are dropped fails within about tcp_timeout; a non-watch request that
//   receives nothing for stall_timeout fails; a stream fails when nothing
//   arrives for its idle timeout. HTTP/2 PING cannot bound a stream here:
//   libcurl 7.88 sends a PING only from curl_easy_upkeep() on connections
//   of an easy handle's own cache, never times out an unanswered one and
//   reports no PING ACK to the application, so over HTTP/2 the same TCP
//   and idle bounds apply as over HTTP/1.1.
//
// Thread-safety: all methods are thread-safe; requests run concurrently.
// The transport must outlive streams it opened.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/client/credential_provider.h"
#include "informer/client/kubeconfig.h"
#include "informer/util/clock.h"

struct curl_slist;

namespace informer {
namespace client {

inline constexpr char kVersion[] = "0.1.0";
inline constexpr char kDefaultUserAgent[] = "informer-sidecar/0.1.0";

struct HttpRequest {
  std::string method = "GET";
  // Path and query relative to the server URL (its path prefix is
  // prepended), e.g. "/api/v1/namespaces/demo/pods?limit=500".
  std::string path;
  std::string accept = "application/json";
  std::string content_type;  // for POST/PATCH bodies
  std::string body;
  // Optional: a 2xx response's body is handed to body_sink chunk by chunk
  // as it arrives (on the requesting thread) instead of being collected in
  // HttpResponse::body, which then stays empty. Lets a list be decoded while
  // it downloads, with no buffer for the whole body. A non-OK return aborts
  // the transfer and becomes Do's result. Bodies of other codes (errors,
  // a 401 retried with fresh credentials) never reach the sink. A transfer
  // that breaks midway may have fed part of the body: on any error the
  // sink's data must be discarded. Do only (Stream ignores it).
  std::function<absl::Status(absl::string_view chunk)> body_sink;
  // Optional, Do only: once *cancel is true the transfer is abandoned
  // within about a second, even while waiting for the server, and Do
  // returns Cancelled. For speculative requests that may become useless.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  // Lower-case header names.
  std::map<std::string, std::string> headers;
  // The HTTP version the exchange used (CURLINFO_HTTP_VERSION): "HTTP/1.1",
  // "HTTP/2", ... (observability, and tests of the http2 option).
  std::string protocol;
  // Body bytes this exchange received (after content decoding; a request
  // retried after 401/429 counts only the answer returned).
  uint64_t bytes_received = 0;
};

// One HTTP exchange with the API server, as seen by an observer (metrics):
// never bodies, headers or credentials.
struct RequestObservation {
  // The HTTP method; "WATCH" for streaming requests (Stream).
  std::string verb;
  // The HTTP status code; 0 when no response arrived (connection refused,
  // cut, timed out).
  int code = 0;
  // On the transport's clock: until the whole body arrived (Do), or the
  // response headers (Stream).
  absl::Duration latency;
};

struct TransportOptions {
  // GETs answered 429/503 with a Retry-After are retried this many times.
  int max_get_retries = 3;
  // Longest Retry-After honoured by an internal retry; a longer one is
  // returned to the caller.
  absl::Duration max_retry_wait = absl::Seconds(10);
  // An internal retry waits Retry-After plus up to this fraction of it, at
  // random: clients turned away together do not return together.
  double retry_jitter = 0.2;
  // Optional: called after every attempt (a retried request reports each
  // one) on the requesting thread. Must be thread-safe and cheap.
  std::function<void(const RequestObservation&)> observer;
};

// A response body being received incrementally (a watch). Read() from one
// thread; Stop() from any thread unblocks it promptly.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Appends the next bytes to *out (at least one byte on OK). OutOfRange at
  // the normal end of the body; Cancelled after Stop(); DeadlineExceeded when
  // no byte arrived for the idle timeout; Unavailable when the connection
  // broke.
  virtual absl::Status Read(std::string* out) = 0;
  virtual void Stop() = 0;
};

class HttpTransport {
 public:
  // InvalidArgument for an unusable server URL.
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(
      const RestConfig& config, std::unique_ptr<CredentialProvider> creds,
      Clock* clock, TransportOptions options = {});
  ~HttpTransport();

  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // A complete request. OK only for 2xx; other codes become the status of
  // informer/api_error.h (code, message with path and Status.message,
  // HttpCode/RetryAfter payload); transport failures are UNAVAILABLE (a
  // refused connection reads like kubectl's "The connection to the server
  // HOST:PORT was refused - did you specify the right host or port?").
  absl::StatusOr<HttpResponse> Do(const HttpRequest& request);

  // Starts a streaming GET and returns once the response headers arrived
  // with a 2xx code (a non-2xx answer is read fully and returned as its
  // error). The stream fails with DeadlineExceeded when no byte arrives for
  // `idle_timeout`. The request timeout does not apply.
  absl::StatusOr<std::unique_ptr<HttpStream>> Stream(
      const HttpRequest& request, absl::Duration idle_timeout);

  const RestConfig& config() const { return config_; }
  Clock* clock() const { return clock_; }

  // How many TCP connections unary requests opened (keep-alive tests).
  int connections_opened() const;

  // Body bytes received so far by all requests and streams of this
  // transport (after content decoding; error bodies and retried attempts
  // included). Thread-safe; monotonic.
  uint64_t bytes_received() const;

 private:
  class Share;
  class CurlStream;
  friend class CurlStream;

  HttpTransport(const RestConfig& config,
                std::unique_ptr<CredentialProvider> creds, Clock* clock,
                TransportOptions options);

  // A fresh libcurl easy handle (CURL* is void*) configured for `request`
  // with `creds`; *headers receives the header list the caller frees after
  // the transfer.
  void* NewHandle(const HttpRequest& request, const Credentials& creds,
                  bool streaming, curl_slist** headers) const;
  absl::StatusOr<HttpResponse> DoOnce(const HttpRequest& request,
                                      const Credentials& creds);

  const RestConfig config_;
  const std::unique_ptr<CredentialProvider> creds_;
  Clock* const clock_;
  const TransportOptions options_;
  std::string base_url_;        // scheme://host:port/prefix (host may be SNI)
  std::string connect_to_;      // CURLOPT_CONNECT_TO entry, "" if unused
  std::string host_header_;     // "Host: ..." when connect_to_ is used
  std::string server_address_;  // host:port actually dialled (for errors)
  std::unique_ptr<Share> share_;
  std::atomic<uint64_t> bytes_received_{0};
  // Size of the latest large (>= 2 MiB) successful GET body: the initial
  // reservation for chunked bodies, whose size is not announced.
  std::atomic<size_t> last_large_get_bytes_{0};
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_HTTP_TRANSPORT_H_

#include "informer/client/http_transport.h"

#include <curl/curl.h>
#include <errno.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "informer/client/curl_response.h"
#include "informer/object/api_error.h"

namespace informer {
namespace client {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// libcurl's receive buffer (CURLOPT_BUFFERSIZE, its maximum). The default
// 16 KiB means one write callback per 16 KiB: thousands of calls for a list.
constexpr long kReceiveBufferBytes = 512 * 1024;
// Unread body bytes at which a stream's transfer pauses (see
// ResponseState::pause_above).
constexpr size_t kStreamPauseAboveBytes = 1 << 20;

// CURLOPT_XFERINFOFUNCTION for requests with HttpRequest::cancel: a
// non-zero return aborts the transfer (CURLE_ABORTED_BY_CALLBACK). libcurl
// calls it often while data flows and about once a second while idle.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel->load(std::memory_order_relaxed) ? 1 : 0;
}

// CURLOPT_SOCKOPTFUNCTION: bounds how long a connection whose packets are
// dropped stays open (RestConfig::tcp_timeout). Keepalive covers a quiet
// connection (a watch has nothing to send); TCP_USER_TIMEOUT covers one
// with unacknowledged data, on which Linux sends no keepalive probes. With
// both set, Linux closes a connection at the first keepalive probe after
// tcp_timeout without an answer, so probes every tcp_timeout/6 from
// tcp_timeout/2 on bound it at about tcp_timeout. Failures leave the
// kernel's defaults (the request itself still works).
int OnSocket(void* user, curl_socket_t fd, curlsocktype purpose) {
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKOPT_OK;
  const auto* timeout = static_cast<const absl::Duration*>(user);
  const int64_t ms = absl::ToInt64Milliseconds(*timeout);
  const int idle = static_cast<int>(std::max<int64_t>(1, ms / 2000));
  const int interval = static_cast<int>(std::max<int64_t>(1, ms / 6000));
  const int count = 3;
  const int on = 1;
  const unsigned int user_timeout = static_cast<unsigned int>(ms);
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)) !=
          0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
                 sizeof(user_timeout)) != 0) {
    LOG_FIRST_N(WARNING, 1) << "cannot set TCP keepalive/user timeout on "
                               "API server connections (errno "
                            << errno
                            << "): dead connections are noticed "
                               "only by the kernel's defaults";
  }
  return CURL_SOCKOPT_OK;
}

// A Retry-After wait with up to `jitter` (a fraction) added, so that the
// clients the server turned away together do not all come back together.
absl::Duration Jittered(absl::Duration wait, double jitter) {
  if (jitter <= 0) return wait;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> u(0.0, jitter);
  return wait + wait * u(rng);
}

bool Is2xx(int code) { return code >= 200 && code < 300; }

// What a failed transfer of `h` means. `server_address` is the host:port
// dialled, "" when a proxy is in the way (a refusal then is the proxy's,
// which libcurl's detail names).
absl::Status TransferError(CURL* h, CURLcode rc, const char* errbuf,
                           const HttpRequest& req,
                           const std::string& server_address,
                           absl::Duration tcp_timeout) {
  std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(absl::StrCat(
        "request timed out: ", req.method, " ", req.path, ": ", detail));
  }
  long os_errno = 0;
  curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
  if ((rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) &&
      os_errno == ETIMEDOUT && tcp_timeout > absl::ZeroDuration()) {
    // The kernel gave up on the connection: keepalive probes or data
    // went unacknowledged for tcp_timeout (packets dropped on the way).
    return ConnectionError(
        req.method, req.path,
        absl::StrCat("connection dead: no TCP acknowledgement from the API "
                     "server for ",
                     absl::FormatDuration(tcp_timeout),
                     " (keepalive / TCP_USER_TIMEOUT): ", detail));
  }
  if (rc == CURLE_COULDNT_CONNECT && os_errno == ECONNREFUSED &&
      !server_address.empty()) {
    return ConnectionRefusedError(server_address, req.method, req.path, detail);
  }
  return ConnectionError(req.method, req.path, detail);
}

std::string ProtocolName(CURL* h) {
  long v = 0;
  curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &v);
  switch (v) {
    case CURL_HTTP_VERSION_1_0:
      return "HTTP/1.0";
    case CURL_HTTP_VERSION_1_1:
      return "HTTP/1.1";
    case CURL_HTTP_VERSION_2_0:
      return "HTTP/2";
    case CURL_HTTP_VERSION_3:
      return "HTTP/3";
    default:
      return "";
  }
}

}  // namespace

// A CURLSH whose DNS cache and TLS sessions are shared by all unary
// requests, and the idle easy handles of unary requests.
//
// The connection cache is deliberately NOT shared (CURL_LOCK_DATA_CONNECT):
// libcurl documents sharing connections between concurrent threads as
// unsupported even with lock callbacks, and its bug tracker has crashes and
// heap corruption from exactly that (a connection closed or reused by two
// threads at once). Requests run concurrently here (a page prefetch next
// to the pager's request, informers listing side by side). Instead each
// easy handle keeps its own connections, and a finished request's handle
// is kept for the next one: one thread at a time uses it, and consecutive
// requests still reuse its connection.
class HttpTransport::Share {
 public:
  Share() {
    share_ = curl_share_init();
    curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &Share::Lock);
    curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &Share::Unlock);
    curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  ~Share() {
    // The handles first: a share still in use cannot be cleaned up.
    for (CURL* h : idle_) curl_easy_cleanup(h);
    curl_share_cleanup(share_);
  }
  CURLSH* get() const { return share_; }
  std::atomic<int> connections{0};

  // An easy handle for one unary request, with default options: the most
  // recently released one (its connection still open), else a new one.
  CURL* Acquire() {
    {
      absl::MutexLock lock(&idle_mu_);
      if (!idle_.empty()) {
        CURL* h = idle_.back();
        idle_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  // Keeps `h` (no transfer running on it) for a later request. At most
  // kMaxIdle are kept: each holds a receive buffer and connections.
  void Release(CURL* h) {
    // Options back to defaults now, so that no idle handle points at the
    // finished request's buffers and callbacks; live connections stay.
    curl_easy_reset(h);
    {
      absl::MutexLock lock(&idle_mu_);
      if (idle_.size() < kMaxIdle) {
        idle_.push_back(h);
        return;
      }
    }
    curl_easy_cleanup(h);
  }

 private:
  static constexpr size_t kMaxIdle = 4;
  // libcurl's lock protocol is callback based, so the analysis cannot
  // follow it.
  static void Lock(CURL*, curl_lock_data data, curl_lock_access,
                   void* user) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    static_cast<Share*>(user)->mu_[data % kLocks].Lock();
  }
  static void Unlock(CURL*, curl_lock_data data,
                     void* user) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    static_cast<Share*>(user)->mu_[data % kLocks].Unlock();
  }
  static constexpr int kLocks = CURL_LOCK_DATA_LAST;
  absl::Mutex mu_[kLocks];
  CURLSH* share_;
  absl::Mutex idle_mu_;
  std::vector<CURL*> idle_ ABSL_GUARDED_BY(idle_mu_);
};

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(
    const RestConfig& config, std::unique_ptr<CredentialProvider> creds,
    Clock* clock, TransportOptions options) {
  GlobalInit();
  std::unique_ptr<HttpTransport> t(
      new HttpTransport(config, std::move(creds), clock, options));
  CURLU* url = curl_url();
  std::string server = config.server;
  if (!absl::StrContains(server, "://")) server = "https://" + server;
  if (curl_url_set(url, CURLUPART_URL, server.c_str(), 0) != CURLUE_OK) {
    curl_url_cleanup(url);
    return absl::InvalidArgumentError(
        absl::StrCat("invalid server URL \"", config.server, "\""));
  }
  auto part = [url](CURLUPart p, unsigned flags) {
    char* v = nullptr;
    std::string out;
    if (curl_url_get(url, p, &v, flags) == CURLUE_OK && v != nullptr) out = v;
    curl_free(v);
    return out;
  };
  std::string scheme = part(CURLUPART_SCHEME, 0);
  std::string host = part(CURLUPART_HOST, 0);
  std::string port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  std::string path = part(CURLUPART_PATH, 0);
  curl_url_cleanup(url);
  if (scheme != "http" && scheme != "https") {
    return absl::InvalidArgumentError(absl::StrCat("server URL \"",
                                                   config.server,
                                                   "\": scheme must be https "
                                                   "or http"));
  }
  while (absl::EndsWith(path, "/")) path.pop_back();
  if (config.proxy_url.empty()) {
    t->server_address_ = absl::StrCat(host, ":", port);
  }
  if (!config.tls_server_name.empty() && scheme == "https") {
    // Verify the certificate against tls-server-name while connecting to
    // the real address: the URL names the TLS name and CONNECT_TO maps it.
    t->base_url_ =
        absl::StrCat(scheme, "://", config.tls_server_name, ":", port, path);
    t->connect_to_ =
        absl::StrCat(config.tls_server_name, ":", port, ":", host, ":", port);
    t->host_header_ = absl::StrCat("Host: ", host, ":", port);
  } else {
    t->base_url_ = absl::StrCat(scheme, "://", host, ":", port, path);
  }
  return t;
}

namespace {

// TLS: server verification (CA), client certificate.
void SetTlsOptions(CURL* h, const RestConfig& config,
                   const Credentials& creds) {
  if (config.insecure_skip_tls_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  }
  if (!config.ca_data.empty()) {
    curl_blob blob{const_cast<char*>(config.ca_data.data()),
                   config.ca_data.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  } else if (!config.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, config.ca_file.c_str());
  }
  if (!creds.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(creds.client_cert_pem.data()),
                   creds.client_cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(creds.client_key_pem.data()),
                  creds.client_key_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
  }
}

// Timeouts and the TCP options that bound how long a dead connection goes
// unnoticed (a stream has its idle timeout, in CurlStream, instead of the
// request and stall timeouts).
void SetDeadConnectionOptions(CURL* h, const RestConfig& config,
                              bool streaming) {
  if (config.tcp_timeout > absl::ZeroDuration()) {
    // All keepalive settings come from OnSocket: libcurl's own would
    // overwrite its TCP_KEEPIDLE/TCP_KEEPINTVL after the callback.
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 0L);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, &OnSocket);
    curl_easy_setopt(h, CURLOPT_SOCKOPTDATA,
                     const_cast<absl::Duration*>(&config.tcp_timeout));
  } else {
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  }
  curl_easy_setopt(
      h, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(config.connect_timeout)));
  if (streaming) return;
  if (config.request_timeout > absl::ZeroDuration()) {
    curl_easy_setopt(
        h, CURLOPT_TIMEOUT_MS,
        static_cast<long>(absl::ToInt64Milliseconds(config.request_timeout)));
  }
  if (config.stall_timeout > absl::ZeroDuration()) {
    // Less than a byte a second for stall_timeout: the server (or a proxy)
    // stopped sending, before or during the response.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(
                         1, absl::ToInt64Seconds(config.stall_timeout))));
  }
}

}  // namespace

HttpTransport::HttpTransport(const RestConfig& config,
                             std::unique_ptr<CredentialProvider> creds,
                             Clock* clock, TransportOptions options)
    : config_(config),
      creds_(std::move(creds)),
      clock_(clock),
      options_(options),
      share_(std::make_unique<Share>()) {}

HttpTransport::~HttpTransport() = default;

int HttpTransport::connections_opened() const {
  return share_->connections.load();
}

uint64_t HttpTransport::bytes_received() const {
  return bytes_received_.load(std::memory_order_relaxed);
}

void* HttpTransport::NewHandle(const HttpRequest& req, const Credentials& creds,
                               bool streaming, curl_slist** headers) const {
  CURL* h = streaming ? curl_easy_init() : share_->Acquire();
  std::string url = base_url_ + req.path;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  SetDeadConnectionOptions(h, config_, streaming);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
  curl_easy_setopt(h, CURLOPT_USERAGENT,
                   config_.user_agent.empty() ? kDefaultUserAgent
                                              : config_.user_agent.c_str());
  if (config_.compression == ApiCompression::kGzip) {
    // Sends "Accept-Encoding: gzip" and decodes the answer.
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
  } else {
    // No Accept-Encoding header, no decoding (libcurl's default, stated).
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, static_cast<char*>(nullptr));
  }
  curl_easy_setopt(
      h, CURLOPT_HTTP_VERSION,
      config_.http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1);
  if (!streaming) curl_easy_setopt(h, CURLOPT_SHARE, share_->get());

  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (!req.body.empty() || req.method == "POST" || req.method == "PATCH" ||
        req.method == "PUT") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE,
                       static_cast<long>(req.body.size()));
      curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, req.body.c_str());
    }
  }

  SetTlsOptions(h, config_, creds);
  if (!config_.proxy_url.empty()) {
    curl_easy_setopt(h, CURLOPT_PROXY, config_.proxy_url.c_str());
  } else {
    // Like client-go, honour $HTTPS_PROXY etc. (libcurl's default) only
    // when no proxy-url is configured.
  }

  curl_slist* list = nullptr;
  list = curl_slist_append(list, ("Accept: " + req.accept).c_str());
  if (!req.content_type.empty()) {
    list =
        curl_slist_append(list, ("Content-Type: " + req.content_type).c_str());
  }
  if (!creds.bearer_token.empty()) {
    list = curl_slist_append(
        list, ("Authorization: Bearer " + creds.bearer_token).c_str());
  } else if (!config_.username.empty()) {
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(h, CURLOPT_USERNAME, config_.username.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, config_.password.c_str());
  }
  // libcurl adds "Expect: 100-continue" to large bodies; the API server
  // does not need the extra round trip.
  list = curl_slist_append(list, "Expect:");
  if (!host_header_.empty()) {
    list = curl_slist_append(list, host_header_.c_str());
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  *headers = list;
  return h;
}

absl::StatusOr<HttpResponse> HttpTransport::DoOnce(const HttpRequest& req,
                                                   const Credentials& creds) {
  const absl::Time start = clock_->Now();
  curl_slist* headers = nullptr;
  curl_slist* connect_to = nullptr;
  CURL* h = NewHandle(req, creds, /*streaming=*/false, &headers);
  if (!connect_to_.empty()) {
    connect_to = curl_slist_append(nullptr, connect_to_.c_str());
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  ResponseState st;
  st.reserve_from_length = true;
  st.total_bytes = &bytes_received_;
  st.sink = &req.body_sink;
  if (req.method == "GET" && !req.body_sink) {
    // A little headroom: pages of a list vary in size.
    const size_t last = last_large_get_bytes_.load(std::memory_order_relaxed);
    st.size_hint = last + last / 8;
  }
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnCurlHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &st);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnCurlWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
  if (req.cancel != nullptr) {
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA,
                     const_cast<std::atomic<bool>*>(req.cancel));
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  }
  CURLcode rc = curl_easy_perform(h);
  long code = 0;
  long new_connections = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &new_connections);
  share_->connections += static_cast<int>(new_connections);
  absl::Status failed;
  if (!st.sink_status.ok()) {
    failed = st.sink_status;
  } else if (rc == CURLE_ABORTED_BY_CALLBACK && req.cancel != nullptr) {
    failed = absl::CancelledError(
        absl::StrCat(req.method, " ", req.path, ": cancelled"));
  } else if (rc != CURLE_OK) {
    failed =
        TransferError(h, rc, errbuf, req, server_address_, config_.tcp_timeout);
  }
  HttpResponse resp;
  resp.protocol = ProtocolName(h);
  share_->Release(h);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect_to);
  if (options_.observer) {
    RequestObservation o;
    o.verb = req.method;
    o.code = failed.ok() || !st.sink_status.ok() ? static_cast<int>(code) : 0;
    o.latency = clock_->Now() - start;
    options_.observer(o);
  }
  if (!failed.ok()) return failed;
  resp.status = static_cast<int>(code);
  resp.body = std::move(st.body);
  resp.bytes_received = st.bytes;
  if (req.method == "GET" && rc == CURLE_OK && Is2xx(static_cast<int>(code))) {
    // Only large bodies teach the hint: small GETs (single objects,
    // discovery) must not make the next list page grow from scratch, and
    // a small last page must not either.
    if (st.bytes >= kHugePageBodyBytes && !req.body_sink) {
      last_large_get_bytes_.store(st.bytes, std::memory_order_relaxed);
    }
  }
  resp.headers = std::move(st.headers);
  return resp;
}

absl::StatusOr<HttpResponse> HttpTransport::Do(const HttpRequest& req) {
  bool refreshed_credentials = false;
  int retries = 0;
  while (true) {
    absl::StatusOr<Credentials> creds = creds_->Get();
    if (!creds.ok()) return creds.status();
    absl::StatusOr<HttpResponse> resp = DoOnce(req, *creds);
    if (!resp.ok()) return resp.status();
    if (Is2xx(resp->status)) return resp;
    if (resp->status == 401 && !refreshed_credentials) {
      // Expired token / rotated certificate: fetch fresh ones once.
      creds_->Invalidate(*creds);
      refreshed_credentials = true;
      continue;
    }
    auto ra = resp->headers.find("retry-after");
    std::string retry_after = ra == resp->headers.end() ? "" : ra->second;
    absl::optional<absl::Duration> wait = ParseRetryAfter(retry_after);
    const bool cancelled =
        req.cancel != nullptr && req.cancel->load(std::memory_order_relaxed);
    if ((resp->status == 429 || resp->status == 503) && wait.has_value() &&
        req.method == "GET" && retries < options_.max_get_retries &&
        *wait <= options_.max_retry_wait && !cancelled) {
      ++retries;
      const absl::Duration jittered = Jittered(*wait, options_.retry_jitter);
      VLOG(1) << req.method << " " << req.path << ": " << resp->status
              << ", retrying after " << jittered;
      clock_->SleepUntil(clock_->Now() + jittered);
      continue;
    }
    return StatusFromHttpResponse(resp->status, req.method, req.path,
                                  resp->body, retry_after);
  }
}

// A streaming transfer driven by the reader thread through a private multi
// handle: Read() performs and polls; Stop() wakes the poll from any thread.
class HttpTransport::CurlStream final : public HttpStream {
 public:
  CurlStream(HttpTransport* t, const HttpRequest& req, const Credentials& creds,
             absl::Duration idle_timeout)
      : req_(req),
        idle_timeout_(idle_timeout),
        clock_(t->clock_),
        server_address_(t->server_address_),
        tcp_timeout_(t->config_.tcp_timeout) {
    easy_ = t->NewHandle(req, creds, /*streaming=*/true, &headers_);
    if (!t->connect_to_.empty()) {
      connect_to_ = curl_slist_append(nullptr, t->connect_to_.c_str());
      curl_easy_setopt(easy_, CURLOPT_CONNECT_TO, connect_to_);
    }
    curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, errbuf_);
    st_.clock = clock_;
    st_.last_byte = clock_->Now();
    st_.pause_above = kStreamPauseAboveBytes;
    st_.total_bytes = &t->bytes_received_;
    curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &OnCurlHeader);
    curl_easy_setopt(easy_, CURLOPT_HEADERDATA, &st_);
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &OnCurlWrite);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, &st_);
    multi_ = curl_multi_init();
    curl_multi_add_handle(multi_, easy_);
  }

  ~CurlStream() override {
    curl_multi_remove_handle(multi_, easy_);
    curl_easy_cleanup(easy_);
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_);
    curl_slist_free_all(connect_to_);
  }

  // Drives the transfer until the response headers are complete. Returns
  // the HTTP status code via *code.
  absl::Status AwaitHeaders(int* code) {
    while (!st_.headers_done && !done_) {
      absl::Status s = Pump();
      if (!s.ok()) return s;
    }
    if (done_ && result_ != CURLE_OK) {
      return TransferError(easy_, result_, errbuf_, req_, server_address_,
                           tcp_timeout_);
    }
    *code = st_.status;
    return absl::OkStatus();
  }

  // Reads the rest of the body (for error responses).
  absl::StatusOr<std::string> ReadAll() {
    st_.pause_above = 0;  // the whole body is wanted here
    if (st_.paused) {
      st_.paused = false;
      curl_easy_pause(easy_, CURLPAUSE_CONT);
    }
    while (!done_) {
      absl::Status s = Pump();
      if (!s.ok()) return s;
    }
    return std::move(st_.body);
  }

  std::string RetryAfterHeader() const { return st_.Header("retry-after"); }

  absl::Status Read(std::string* out) override {
    while (true) {
      if (stopped_.load()) return absl::CancelledError("watch stopped");
      if (!st_.body.empty()) {
        out->append(st_.body);
        st_.body.clear();
        if (st_.paused) {
          // May call OnCurlWrite at once with the chunk it kept: that goes
          // into the (now empty) body for the next Read.
          st_.paused = false;
          curl_easy_pause(easy_, CURLPAUSE_CONT);
        }
        return absl::OkStatus();
      }
      if (done_) {
        if (result_ == CURLE_OK) {
          return absl::OutOfRangeError("watch stream ended by the server");
        }
        return TransferError(easy_, result_, errbuf_, req_, server_address_,
                             tcp_timeout_);
      }
      absl::Status s = Pump();
      if (!s.ok()) return s;
    }
  }

  void Stop() override {
    stopped_.store(true);
    curl_multi_wakeup(multi_);
  }

 private:
  // One round of perform + poll. Returns non-OK for stop and idle timeout;
  // progress (bytes, completion) shows in st_ / done_.
  absl::Status Pump() {
    if (stopped_.load()) return absl::CancelledError("watch stopped");
    int running = 0;
    curl_multi_perform(multi_, &running);
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &queued)) {
      if (m->msg == CURLMSG_DONE) {
        done_ = true;
        result_ = m->data.result;
      }
    }
    if (done_ || !st_.body.empty() || (st_.headers_done && !headers_seen_)) {
      headers_seen_ = st_.headers_done;
      return absl::OkStatus();
    }
    const absl::Duration remaining =
        st_.last_byte + idle_timeout_ - clock_->Now();
    if (remaining <= absl::ZeroDuration()) {
      // The API server bookmarks every watch about once a minute: this
      // long without a byte means it, or a proxy on the way, is stuck.
      return absl::DeadlineExceededError(
          absl::StrCat("watch ", req_.path, " received no data for ",
                       absl::FormatDuration(idle_timeout_),
                       " (not even a bookmark); treating it as hung"));
    }
    // Wall-clock poll slices are capped so an injected clock that moves
    // independently of real time is still re-checked regularly.
    int timeout_ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(remaining) + 1, 1, 1000));
    curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    return absl::OkStatus();
  }

  const HttpRequest req_;
  const absl::Duration idle_timeout_;
  Clock* const clock_;
  const std::string server_address_;
  const absl::Duration tcp_timeout_;
  CURL* easy_ = nullptr;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  curl_slist* connect_to_ = nullptr;
  char errbuf_[CURL_ERROR_SIZE] = {0};
  std::atomic<bool> stopped_{false};
  // Reader-thread state (callbacks run inside curl_multi_perform).
  ResponseState st_;
  bool headers_seen_ = false;
  bool done_ = false;
  CURLcode result_ = CURLE_OK;
};

absl::StatusOr<std::unique_ptr<HttpStream>> HttpTransport::Stream(
    const HttpRequest& req, absl::Duration idle_timeout) {
  bool refreshed_credentials = false;
  int retries = 0;
  while (true) {
    absl::StatusOr<Credentials> creds = creds_->Get();
    if (!creds.ok()) return creds.status();
    const absl::Time start = clock_->Now();
    auto stream = std::make_unique<CurlStream>(this, req, *creds, idle_timeout);
    int code = 0;
    absl::Status s = stream->AwaitHeaders(&code);
    if (options_.observer) {
      RequestObservation o;
      o.verb = "WATCH";
      o.code = s.ok() ? code : 0;
      o.latency = clock_->Now() - start;
      options_.observer(o);
    }
    if (!s.ok()) return s;
    if (Is2xx(code)) return std::unique_ptr<HttpStream>(std::move(stream));
    absl::StatusOr<std::string> body = stream->ReadAll();
    if (!body.ok()) return body.status();
    if (code == 401 && !refreshed_credentials) {
      creds_->Invalidate(*creds);
      refreshed_credentials = true;
      continue;
    }
    std::string retry_after = stream->RetryAfterHeader();
    absl::optional<absl::Duration> wait = ParseRetryAfter(retry_after);
    if ((code == 429 || code == 503) && wait.has_value() &&
        retries < options_.max_get_retries &&
        *wait <= options_.max_retry_wait) {
      ++retries;
      clock_->SleepUntil(clock_->Now() +
                         Jittered(*wait, options_.retry_jitter));
      continue;
    }
    return StatusFromHttpResponse(code, req.method, req.path, *body,
                                  retry_after);
  }
}

}  // namespace client
}  // namespace informer

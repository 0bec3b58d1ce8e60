#include "server/kubeapi/kube_api_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace server {
namespace kubeapi {

absl::StatusOr<RawHttpClient> RawHttpClient::Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(strerror(errno));
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string err = strerror(errno);
    close(fd);
    return absl::UnavailableError(err);
  }
  return RawHttpClient(fd);
}

RawHttpClient::RawHttpClient(RawHttpClient&& other) noexcept
    : fd_(other.fd_), buf_(std::move(other.buf_)) {
  other.fd_ = -1;
}

RawHttpClient::~RawHttpClient() {
  if (fd_ >= 0) close(fd_);
}

absl::Status RawHttpClient::Send(
    const std::string& method, const std::string& target,
    const std::map<std::string, std::string>& headers) {
  std::string req = absl::StrCat(method, " ", target,
                                 " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "User-Agent: kube-api-facade-test\r\n");
  for (const auto& [k, v] : headers) absl::StrAppend(&req, k, ": ", v, "\r\n");
  if (method != "GET" && method != "HEAD") {
    absl::StrAppend(
        &req, "Content-Length: 2\r\nContent-Type: application/json\r\n\r\n{}");
  } else {
    absl::StrAppend(&req, "\r\n");
  }
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = write(fd_, req.data() + off, req.size() - off);
    if (n <= 0) return absl::UnavailableError(strerror(errno));
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RawHttpClient::Fill() {
  char tmp[65536];
  ssize_t n = read(fd_, tmp, sizeof(tmp));
  if (n == 0) return absl::OutOfRangeError("connection closed");
  if (n < 0) {
    return absl::DeadlineExceededError(absl::StrCat("read: ", strerror(errno)));
  }
  buf_.append(tmp, static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::StatusOr<std::string> RawHttpClient::ReadLine() {
  while (true) {
    size_t at = buf_.find("\r\n");
    if (at != std::string::npos) {
      std::string line = buf_.substr(0, at);
      buf_.erase(0, at + 2);
      return line;
    }
    if (absl::Status st = Fill(); !st.ok()) return st;
  }
}

absl::StatusOr<std::string> RawHttpClient::ReadExactly(size_t n) {
  while (buf_.size() < n) {
    if (absl::Status st = Fill(); !st.ok()) return st;
  }
  std::string out = buf_.substr(0, n);
  buf_.erase(0, n);
  return out;
}

absl::StatusOr<RawHttpClient::Head> RawHttpClient::ReadHead() {
  Head head;
  absl::StatusOr<std::string> line = ReadLine();
  if (!line.ok()) return line.status();
  head.status_line = *line;
  if (line->size() < 12 || !absl::SimpleAtoi(line->substr(9, 3), &head.code)) {
    return absl::InternalError(absl::StrCat("bad status line: ", *line));
  }
  while (true) {
    line = ReadLine();
    if (!line.ok()) return line.status();
    if (line->empty()) break;
    size_t colon = line->find(':');
    if (colon == std::string::npos) continue;
    head.headers[absl::AsciiStrToLower(line->substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line->substr(colon + 1)));
  }
  return head;
}

absl::StatusOr<std::string> RawHttpClient::ReadChunk() {
  absl::StatusOr<std::string> size_line = ReadLine();
  if (!size_line.ok()) return size_line.status();
  size_t size = 0;
  if (!absl::SimpleHexAtoi(*size_line, &size)) {
    return absl::InternalError(absl::StrCat("bad chunk size: ", *size_line));
  }
  absl::StatusOr<std::string> data = ReadExactly(size + 2);
  if (!data.ok()) return data.status();
  if (data->substr(size) != "\r\n") {
    return absl::InternalError("chunk not followed by CRLF");
  }
  data->resize(size);
  return data;
}

absl::StatusOr<std::string> RawHttpClient::ReadBody(const Head& head) {
  auto te = head.headers.find("transfer-encoding");
  if (te != head.headers.end() && te->second == "chunked") {
    std::string body;
    while (true) {
      absl::StatusOr<std::string> chunk = ReadChunk();
      if (!chunk.ok()) return chunk.status();
      if (chunk->empty()) return body;
      body += *chunk;
    }
  }
  size_t length = 0;
  auto cl = head.headers.find("content-length");
  if (cl != head.headers.end()) (void)absl::SimpleAtoi(cl->second, &length);
  return ReadExactly(length);
}

absl::StatusOr<SimpleResponse> HttpGet(
    int port, const std::string& target,
    const std::map<std::string, std::string>& headers,
    const std::string& method) {
  absl::StatusOr<RawHttpClient> c = RawHttpClient::Connect(port);
  if (!c.ok()) return c.status();
  if (absl::Status st = c->Send(method, target, headers); !st.ok()) return st;
  absl::StatusOr<RawHttpClient::Head> head = c->ReadHead();
  if (!head.ok()) return head.status();
  SimpleResponse r;
  r.code = head->code;
  r.headers = head->headers;
  if (method == "HEAD") return r;
  absl::StatusOr<std::string> body = c->ReadBody(*head);
  if (!body.ok()) return body.status();
  r.body = *std::move(body);
  return r;
}

}  // namespace kubeapi
}  // namespace server

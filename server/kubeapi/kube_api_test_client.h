#ifndef SERVER_KUBEAPI_KUBE_API_TEST_CLIENT_H_
#define SERVER_KUBEAPI_KUBE_API_TEST_CLIENT_H_

// A raw HTTP/1.1 client for the facade's tests: one blocking socket, so a
// test sees the exact bytes (status line, headers, chunk framing) the way
// the API server's captures recorded them, and can hold many watches open.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace server {
namespace kubeapi {

class RawHttpClient {
 public:
  // Connects to 127.0.0.1:port; reads time out after 20 s (a hung test
  // fails instead of blocking).
  static absl::StatusOr<RawHttpClient> Connect(int port);
  RawHttpClient(RawHttpClient&& other) noexcept;
  RawHttpClient& operator=(RawHttpClient&&) = delete;
  ~RawHttpClient();

  // Sends a request (no body).
  absl::Status Send(const std::string& method, const std::string& target,
                    const std::map<std::string, std::string>& headers = {});
  // Reads the status line and headers; header names lower-cased.
  struct Head {
    int code = 0;
    std::string status_line;
    std::map<std::string, std::string> headers;
  };
  absl::StatusOr<Head> ReadHead();
  // The next chunk's data of a chunked body (empty at the final "0" chunk).
  absl::StatusOr<std::string> ReadChunk();
  // A whole body: chunked or Content-Length.
  absl::StatusOr<std::string> ReadBody(const Head& head);
  // Bytes received so far that the framing parsers have not consumed.
  int fd() const { return fd_; }

 private:
  explicit RawHttpClient(int fd) : fd_(fd) {}
  absl::Status Fill();
  absl::StatusOr<std::string> ReadLine();
  absl::StatusOr<std::string> ReadExactly(size_t n);

  int fd_ = -1;
  std::string buf_;
};

// One request on a fresh connection: {code, body}.
struct SimpleResponse {
  int code = 0;
  std::map<std::string, std::string> headers;
  std::string body;
};
absl::StatusOr<SimpleResponse> HttpGet(
    int port, const std::string& target,
    const std::map<std::string, std::string>& headers = {},
    const std::string& method = "GET");

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_KUBE_API_TEST_CLIENT_H_

#ifndef INFORMER_CLIENT_TEST_SERVER_H_
#define INFORMER_CLIENT_TEST_SERVER_H_

// Test-only: a local HTTP(S) server on an ephemeral port (cpp-httplib) for
// exercising the API client against recorded responses, and a self-signed
// certificate generator so TLS tests need no files.

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

namespace informer {
namespace client {
namespace testing {

// A self-signed certificate for "localhost" and 127.0.0.1 (PEM), usable
// both as the server certificate and as the CA that verifies it.
struct TestCert {
  std::string cert_pem;
  std::string key_pem;
};
TestCert MakeSelfSignedCert(const std::string& common_name);

// Runs an httplib server on 127.0.0.1:<port 0> in a background thread.
// Register handlers on server() before Start(). Stops and joins on
// destruction. Handlers run on the server's worker threads.
class TestServer {
 public:
  // tls: serve HTTPS with `cert` (and require client certificates signed by
  // `client_ca` when it is non-empty).
  TestServer();
  TestServer(const TestCert& cert, const std::string& client_ca_pem = "");
  ~TestServer();

  httplib::Server& server() { return *server_; }
  void Start();
  int port() const { return port_; }
  // "http://127.0.0.1:<port>" or "https://127.0.0.1:<port>".
  std::string url() const;

 private:
  bool tls_ = false;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace testing
}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_TEST_SERVER_H_

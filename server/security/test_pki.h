#ifndef SERVER_SECURITY_TEST_PKI_H_
#define SERVER_SECURITY_TEST_PKI_H_

#include <string>

#include "absl/status/statusor.h"

namespace server {

// A throw-away PKI for TLS and mTLS tests of the sidecar: a CA, a server
// certificate for "localhost" and 127.0.0.1 (serverAuth), and a client
// certificate (clientAuth), all signed by the CA; EC P-256 keys, valid from
// an hour ago for a day. All PEM. (emulator/tls_certs.h makes only a
// server certificate and does not expose its CA key.)
struct TestPki {
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
};

// Internal error naming the OpenSSL step that failed. Thread-safe.
absl::StatusOr<TestPki> MakeTestPki();

}  // namespace server

#endif  // SERVER_SECURITY_TEST_PKI_H_

#ifndef EMULATOR_TLS_CERTS_H_
#define EMULATOR_TLS_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace emulator {

// A throw-away PKI for TLS in tests and demos (the emulator's HTTPS, the
// sidecar's TLS and mTLS): a self-signed CA, a server certificate
// (serverAuth) and a client certificate (clientAuth, CN "test-client") it
// signed; EC P-256 keys, SHA-256, valid for a year from an hour ago; all PEM.
// The one generator of the workspace: no package depends on server/ for it.
struct TestPki {
  std::string ca_cert_pem;
  std::string server_cert_pem;
  std::string server_key_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
};

// `dns_names` and `ips` become the server certificate's subjectAltNames
// (e.g. {"localhost"}, {"127.0.0.1"}). Each call makes a new CA. Internal
// error naming the OpenSSL step that failed. Thread-safe.
absl::StatusOr<TestPki> GenerateTestPki(
    const std::vector<std::string>& dns_names,
    const std::vector<std::string>& ips);

}  // namespace emulator

#endif  // EMULATOR_TLS_CERTS_H_

#ifndef EMULATOR_TLS_CERTS_H_
#define EMULATOR_TLS_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace emulator {

// A throw-away PKI for serving HTTPS in tests and demos: a self-signed CA and
// a server certificate it signed (EC P-256, SHA-256, valid for a year from an
// hour ago), all PEM.
struct TestPki {
  std::string ca_cert_pem;
  std::string server_cert_pem;
  std::string server_key_pem;
};

// `dns_names` and `ips` become the server certificate's subjectAltNames
// (e.g. {"localhost"}, {"127.0.0.1"}). Internal error naming the OpenSSL
// step that failed. Thread-safe.
absl::StatusOr<TestPki> GenerateTestPki(
    const std::vector<std::string>& dns_names,
    const std::vector<std::string>& ips);

}  // namespace emulator

#endif  // EMULATOR_TLS_CERTS_H_

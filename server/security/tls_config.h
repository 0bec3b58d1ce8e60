#ifndef SERVER_SECURITY_TLS_CONFIG_H_
#define SERVER_SECURITY_TLS_CONFIG_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace server {

// The sidecar's TLS settings, as given by the flags --grpc_tls_cert_file,
// --grpc_tls_key_file and --grpc_tls_client_ca_file (paths to PEM files).
struct TlsFiles {
  // The server's certificate chain (leaf first).
  std::string cert_file;
  // The private key of the leaf certificate.
  std::string key_file;
  // With a client CA, the server requires every client to present a
  // certificate that this CA bundle verifies (mTLS).
  std::string client_ca_file;

  bool empty() const {
    return cert_file.empty() && key_file.empty() && client_ca_file.empty();
  }
};

// Builds the gRPC listening credentials for `files`:
//   - nothing set: null (the caller listens without TLS);
//   - certificate and key: TLS (grpc::SslServerCredentials);
//   - plus a client CA: mTLS, clients without a certificate the CA verifies
//     are refused during the handshake.
// Everything is read and checked here (at start-up) so that mistakes give an
// InvalidArgument naming the flag and the file, instead of gRPC's opaque
// handshake failures later: a certificate without a key (or the reverse), a
// client CA without a certificate, unreadable files, files without PEM
// certificates or key, a key that does not belong to the certificate.
// Private key bytes never appear in errors or logs.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> BuildServerCredentials(
    const TlsFiles& files);

// True for listen addresses only reachable from this host or pod: a unix
// socket ("unix:..."), 127.0.0.0/8, ::1 or "localhost" (with a port).
bool IsLocalListenAddress(absl::string_view listen);

}  // namespace server

#endif  // SERVER_SECURITY_TLS_CONFIG_H_

#include "server/security/tls_config.h"

#include <glog/logging.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "informer/util/host_port.h"
#include "informer/util/loopback.h"
#include "informer/util/read_file.h"

namespace server {
namespace {

constexpr char kCertFlag[] = "--grpc_tls_cert_file";
constexpr char kKeyFlag[] = "--grpc_tls_key_file";
constexpr char kClientCaFlag[] = "--grpc_tls_client_ca_file";

struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The file named by `flag`, with the flag in front of any error.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> text = informer::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", text.status().message()));
  }
  return text;
}

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every PEM certificate of `pem`; none is an error naming the flag.
absl::StatusOr<std::vector<X509Ptr>> ParseCerts(absl::string_view flag,
                                                const std::string& path,
                                                const std::string& pem) {
  BioPtr bio = MemBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of input reads as an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", path,
                     "\" holds no PEM certificate (\"-----BEGIN "
                     "CERTIFICATE-----\")"));
  }
  return certs;
}

void WarnIfExpired(absl::string_view flag, const std::string& path,
                   X509* cert) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    LOG(WARNING) << flag << ": the certificate in \"" << path
                 << "\" has expired; clients will refuse it";
  } else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    LOG(WARNING) << flag << ": the certificate in \"" << path
                 << "\" is not valid yet";
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> BuildServerCredentials(
    const TlsFiles& files) {
  if (files.empty()) return std::shared_ptr<grpc::ServerCredentials>();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.cert_file.empty() ? kKeyFlag : kCertFlag, " needs ",
        files.cert_file.empty() ? kCertFlag : kKeyFlag,
        " too: TLS needs both the certificate and its private key"));
  }
  if (files.cert_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kClientCaFlag, " (mTLS) needs TLS: set ", kCertFlag,
                     " and ", kKeyFlag, " too"));
  }

  absl::StatusOr<std::string> cert_pem =
      ReadFlagFile(kCertFlag, files.cert_file);
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::vector<X509Ptr>> chain =
      ParseCerts(kCertFlag, files.cert_file, *cert_pem);
  if (!chain.ok()) return chain.status();
  WarnIfExpired(kCertFlag, files.cert_file, chain->front().get());

  absl::StatusOr<std::string> key_pem = ReadFlagFile(kKeyFlag, files.key_file);
  if (!key_pem.ok()) return key_pem.status();
  BioPtr key_bio = MemBio(*key_pem);
  PkeyPtr key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kKeyFlag, ": \"", files.key_file,
        "\" holds no unencrypted PEM private key (\"-----BEGIN PRIVATE "
        "KEY-----\", \"-----BEGIN EC PRIVATE KEY-----\" or \"-----BEGIN RSA "
        "PRIVATE KEY-----\")"));
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(kKeyFlag, ": the key in \"", files.key_file,
                     "\" does not belong to the certificate in \"",
                     files.cert_file, "\" (", kCertFlag, ")"));
  }

  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*std::move(key_pem), *cert_pem});
  if (!files.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca_pem =
        ReadFlagFile(kClientCaFlag, files.client_ca_file);
    if (!ca_pem.ok()) return ca_pem.status();
    absl::StatusOr<std::vector<X509Ptr>> cas =
        ParseCerts(kClientCaFlag, files.client_ca_file, *ca_pem);
    if (!cas.ok()) return cas.status();
    for (const X509Ptr& ca : *cas) {
      WarnIfExpired(kClientCaFlag, files.client_ca_file, ca.get());
    }
    options.pem_root_certs = *std::move(ca_pem);
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::SslServerCredentials(options);
  if (credentials == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("gRPC refused the TLS settings of ", kCertFlag, ", ",
                     kKeyFlag, " and ", kClientCaFlag));
  }
  return credentials;
}

bool IsLocalListenAddress(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") ||
      absl::StartsWith(listen, "unix-abstract:")) {
    return true;
  }
  absl::StatusOr<informer::HostPort> address = informer::ParseHostPort(listen);
  return informer::IsLoopbackHost(
      address.ok() ? absl::string_view(address->host) : listen);
}

}  // namespace server

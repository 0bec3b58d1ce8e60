#include "server/security/test_pki.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace server {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

absl::Status Failed(absl::string_view step) {
  char buf[256] = {0};
  ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
  return absl::InternalError(absl::StrCat("test PKI: ", step, ": ", buf));
}

absl::StatusOr<Key> P256Key() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return Failed("EVP_EC_gen");
  return Key(key);
}

// Signs a certificate for `key` named `cn` with `issuer`/`issuer_key`
// (self-signed when `issuer` is null), with extensions "nid -> config".
absl::StatusOr<Cert> Sign(EVP_PKEY* key, const char* cn, X509* issuer,
                          EVP_PKEY* issuer_key,
                          const std::vector<std::pair<int, const char*>>& ext) {
  Cert cert(X509_new());
  if (cert == nullptr) return Failed("X509_new");
  X509_set_version(cert.get(), 2);
  BIGNUM* serial = BN_new();
  BN_rand(serial, 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1,
                             0);
  X509* signer = issuer == nullptr ? cert.get() : issuer;
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : ext) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, signer, cert.get(), nullptr, nullptr, 0);
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (e == nullptr) return Failed(value);
    const int added = X509_add_ext(cert.get(), e, -1);
    X509_EXTENSION_free(e);
    if (added != 1) return Failed("X509_add_ext");
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return Failed("X509_sign");
  }
  return cert;
}

std::string Drain(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

std::string CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return Drain(bio.get());
}

std::string KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr,
                           nullptr);
  return Drain(bio.get());
}

}  // namespace

absl::StatusOr<TestPki> MakeTestPki() {
  absl::StatusOr<Key> ca_key = P256Key();
  absl::StatusOr<Key> server_key = P256Key();
  absl::StatusOr<Key> client_key = P256Key();
  if (!ca_key.ok()) return ca_key.status();
  if (!server_key.ok()) return server_key.status();
  if (!client_key.ok()) return client_key.status();
  absl::StatusOr<Cert> ca =
      Sign(ca_key->get(), "informer-sidecar-test-ca", nullptr, ca_key->get(),
           {{NID_basic_constraints, "critical,CA:TRUE"},
            {NID_key_usage, "critical,keyCertSign,cRLSign"},
            {NID_subject_key_identifier, "hash"}});
  if (!ca.ok()) return ca.status();
  absl::StatusOr<Cert> server =
      Sign(server_key->get(), "localhost", ca->get(), ca_key->get(),
           {{NID_basic_constraints, "critical,CA:FALSE"},
            {NID_key_usage, "critical,digitalSignature"},
            {NID_ext_key_usage, "serverAuth"},
            {NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"}});
  if (!server.ok()) return server.status();
  absl::StatusOr<Cert> client =
      Sign(client_key->get(), "test-client", ca->get(), ca_key->get(),
           {{NID_basic_constraints, "critical,CA:FALSE"},
            {NID_key_usage, "critical,digitalSignature"},
            {NID_ext_key_usage, "clientAuth"}});
  if (!client.ok()) return client.status();
  TestPki pki;
  pki.ca_cert = CertPem(ca->get());
  pki.server_cert = CertPem(server->get());
  pki.server_key = KeyPem(server_key->get());
  pki.client_cert = CertPem(client->get());
  pki.client_key = KeyPem(client_key->get());
  return pki;
}

}  // namespace server

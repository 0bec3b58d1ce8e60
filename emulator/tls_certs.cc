#include "emulator/tls_certs.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace emulator {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct CtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

absl::Status OpenSslError(absl::string_view step) {
  char buf[256] = {0};
  ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
  return absl::InternalError(absl::StrCat(step, ": ", buf));
}

absl::StatusOr<PkeyPtr> NewEcKey() {
  std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) !=
          1) {
    return OpenSslError("EC keygen init");
  }
  EVP_PKEY* key = nullptr;
  if (EVP_PKEY_keygen(ctx.get(), &key) != 1) return OpenSslError("EC keygen");
  return PkeyPtr(key);
}

absl::Status AddExt(X509* cert, X509* issuer, int nid,
                    const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslError(absl::StrCat("extension ", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return OpenSslError("X509_add_ext");
  return absl::OkStatus();
}

absl::StatusOr<X509Ptr> NewCert(
    EVP_PKEY* subject_key, const std::string& cn, X509* issuer,
    EVP_PKEY* issuer_key,
    const std::vector<std::pair<int, std::string>>& extensions) {
  X509Ptr cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  if (X509_set_pubkey(cert.get(), subject_key) != 1) {
    return OpenSslError("X509_set_pubkey");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(
      cert.get(), issuer == nullptr ? name : X509_get_subject_name(issuer));
  X509* issuer_cert = issuer == nullptr ? cert.get() : issuer;
  for (const auto& [nid, value] : extensions) {
    absl::Status s = AddExt(cert.get(), issuer_cert, nid, value);
    if (!s.ok()) return s;
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslError("PEM cert");
  return BioString(bio.get());
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return OpenSslError("PEM key");
  }
  return BioString(bio.get());
}

// A leaf certificate for a new key, signed by the CA: its PEM and its key's.
absl::Status IssueLeaf(X509* ca, EVP_PKEY* ca_key, const std::string& cn,
                       std::vector<std::pair<int, std::string>> exts,
                       std::string* cert_pem, std::string* key_pem) {
  absl::StatusOr<PkeyPtr> key = NewEcKey();
  if (!key.ok()) return key.status();
  exts.insert(exts.begin(), {{NID_basic_constraints, "critical,CA:FALSE"},
                             {NID_authority_key_identifier, "keyid"}});
  absl::StatusOr<X509Ptr> cert = NewCert(key->get(), cn, ca, ca_key, exts);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> pem = CertPem(cert->get());
  if (!pem.ok()) return pem.status();
  *cert_pem = *std::move(pem);
  pem = KeyPem(key->get());
  if (!pem.ok()) return pem.status();
  *key_pem = *std::move(pem);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestPki> GenerateTestPki(
    const std::vector<std::string>& dns_names,
    const std::vector<std::string>& ips) {
  absl::StatusOr<PkeyPtr> ca_key = NewEcKey();
  if (!ca_key.ok()) return ca_key.status();
  absl::StatusOr<X509Ptr> ca =
      NewCert(ca_key->get(), "kube-emulator-ca", nullptr, ca_key->get(),
              {{NID_basic_constraints, "critical,CA:TRUE"},
               {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
               {NID_subject_key_identifier, "hash"}});
  if (!ca.ok()) return ca.status();
  TestPki pki;
  absl::StatusOr<std::string> ca_pem = CertPem(ca->get());
  if (!ca_pem.ok()) return ca_pem.status();
  pki.ca_cert_pem = *std::move(ca_pem);

  std::vector<std::string> sans;
  for (const auto& d : dns_names) sans.push_back(absl::StrCat("DNS:", d));
  for (const auto& ip : ips) sans.push_back(absl::StrCat("IP:", ip));
  std::vector<std::pair<int, std::string>> server_exts = {
      {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
      {NID_ext_key_usage, "serverAuth"}};
  if (!sans.empty()) {
    server_exts.emplace_back(NID_subject_alt_name, absl::StrJoin(sans, ","));
  }
  if (absl::Status st =
          IssueLeaf(ca->get(), ca_key->get(), "kube-apiserver", server_exts,
                    &pki.server_cert_pem, &pki.server_key_pem);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = IssueLeaf(ca->get(), ca_key->get(), "test-client",
                                  {{NID_key_usage, "critical,digitalSignature"},
                                   {NID_ext_key_usage, "clientAuth"}},
                                  &pki.client_cert_pem, &pki.client_key_pem);
      !st.ok()) {
    return st;
  }
  return pki;
}

}  // namespace emulator

#include "informer/client/test_server.h"

#include <glog/logging.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace informer {
namespace client {
namespace testing {
namespace {

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n);
}

X509* ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return x;
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return k;
}

}  // namespace

TestCert MakeSelfSignedCert(const std::string& common_name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  CHECK(key != nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 365 * 10);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (const auto& [nid, value] :
       {std::pair<int, const char*>{NID_subject_alt_name,
                                    "DNS:localhost,DNS:kubernetes.test,IP:"
                                    "127.0.0.1"},
        {NID_basic_constraints, "critical,CA:TRUE"},
        {NID_key_usage, "critical,digitalSignature,keyCertSign"},
        {NID_ext_key_usage, "serverAuth,clientAuth"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    CHECK(ext != nullptr);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  CHECK(X509_sign(x, key, EVP_sha256()) > 0);
  TestCert out;
  BIO* cb = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cb, x);
  out.cert_pem = BioToString(cb);
  BIO_free(cb);
  BIO* kb = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(kb, key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = BioToString(kb);
  BIO_free(kb);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

TestServer::TestServer() : server_(std::make_unique<httplib::Server>()) {}

TestServer::TestServer(const TestCert& cert, const std::string& client_ca_pem)
    : tls_(true) {
  X509* x = ParseCert(cert.cert_pem);
  EVP_PKEY* k = ParseKey(cert.key_pem);
  X509_STORE* store = nullptr;
  if (!client_ca_pem.empty()) {
    store = X509_STORE_new();
    X509* ca = ParseCert(client_ca_pem);
    X509_STORE_add_cert(store, ca);
    X509_free(ca);
  }
  server_ = std::make_unique<httplib::SSLServer>(x, k, store);
  X509_free(x);
  EVP_PKEY_free(k);
}

TestServer::~TestServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void TestServer::Start() {
  port_ = server_->bind_to_any_port("127.0.0.1");
  CHECK_GT(port_, 0);
  // The socket already listens; connections queue until the loop accepts.
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() is a no-op until the accept loop runs; wait for it so the
  // destructor can always stop the server. httplib offers no notification.
  while (!server_->is_running()) std::this_thread::yield();
}

std::string TestServer::url() const {
  return std::string(tls_ ? "https" : "http") +
         "://127.0.0.1:" + std::to_string(port_);
}

}  // namespace testing
}  // namespace client
}  // namespace informer

#include "emulator/tls_certs.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "gtest/gtest.h"

namespace emulator {
namespace {

X509* LoadCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

TEST(TlsCertsTest, ServerCertificateVerifiesAgainstTheCaForItsNames) {
  auto pki = GenerateTestPki({"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(pki.ok()) << pki.status();
  X509* ca = LoadCert(pki->ca_cert_pem);
  X509* cert = LoadCert(pki->server_cert_pem);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cert, nullptr);

  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  EXPECT_EQ(X509_verify_cert(ctx), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);

  EXPECT_EQ(X509_check_host(cert, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);
  EXPECT_NE(X509_check_host(cert, "example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ca(ca), 1);
  EXPECT_EQ(X509_check_ca(cert), 0);
  X509_free(ca);
  X509_free(cert);

  BIO* bio = BIO_new_mem_buf(pki->server_key_pem.data(),
                             static_cast<int>(pki->server_key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(key, nullptr);
  EVP_PKEY_free(key);
}

TEST(TlsCertsTest, ClientCertificateIsForClientsOnly) {
  auto pki = GenerateTestPki({"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(pki.ok()) << pki.status();
  X509* ca = LoadCert(pki->ca_cert_pem);
  X509* client = LoadCert(pki->client_cert_pem);
  X509* server = LoadCert(pki->server_cert_pem);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(client, nullptr);
  ASSERT_NE(server, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, client, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
  EXPECT_EQ(X509_verify_cert(ctx), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  // Extended key usage: each certificate for its side only.
  EXPECT_EQ(X509_check_purpose(client, X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_NE(X509_check_purpose(client, X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_EQ(X509_check_purpose(server, X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_NE(X509_check_purpose(server, X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_EQ(X509_check_ca(client), 0);
  X509_free(ca);
  X509_free(client);
  X509_free(server);

  BIO* bio = BIO_new_mem_buf(pki->client_key_pem.data(),
                             static_cast<int>(pki->client_key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(key, nullptr);
  EVP_PKEY_free(key);
}

TEST(TlsCertsTest, EachCallMakesADifferentCa) {
  auto a = GenerateTestPki({"localhost"}, {});
  auto b = GenerateTestPki({"localhost"}, {});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->ca_cert_pem, b->ca_cert_pem);
}

}  // namespace
}  // namespace emulator

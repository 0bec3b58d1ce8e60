#ifndef INFORMER_CLIENT_CREDENTIAL_PROVIDER_H_
#define INFORMER_CLIENT_CREDENTIAL_PROVIDER_H_

// The seam between the HTTP transport and where credentials come from
// (static kubeconfig fields, a rotating token file, an exec plugin).

#include <string>

#include "absl/status/statusor.h"

namespace informer {
namespace client {

// What one request authenticates with. Empty fields are not used.
struct Credentials {
  std::string bearer_token;
  std::string client_cert_pem;
  std::string client_key_pem;

  bool operator==(const Credentials& o) const {
    return bearer_token == o.bearer_token &&
           client_cert_pem == o.client_cert_pem &&
           client_key_pem == o.client_key_pem;
  }
};

// Thread-safe: the transport calls Get() before every request, from any
// thread, and Invalidate() after the server answered 401 to a request made
// with `rejected`, so the next Get() fetches fresh credentials (re-run the
// plugin, re-read the file). Invalidating credentials that were already
// replaced is a no-op, so a burst of 401s re-runs a plugin once.
class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  virtual absl::StatusOr<Credentials> Get() = 0;
  virtual void Invalidate(const Credentials& rejected) = 0;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_CREDENTIAL_PROVIDER_H_

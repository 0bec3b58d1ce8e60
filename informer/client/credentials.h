#ifndef INFORMER_CLIENT_CREDENTIALS_H_
#define INFORMER_CLIENT_CREDENTIALS_H_

// Credential providers for static kubeconfig fields and rotating token
// files, and the factory that picks the right provider for a RestConfig.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/client/credential_provider.h"
#include "informer/client/kubeconfig.h"
#include "informer/util/clock.h"

namespace informer {
namespace client {

// Fixed credentials. Thread-safe (immutable).
class StaticCredentialProvider final : public CredentialProvider {
 public:
  explicit StaticCredentialProvider(Credentials c) : creds_(std::move(c)) {}
  absl::StatusOr<Credentials> Get() override { return creds_; }
  void Invalidate(const Credentials&) override {}

 private:
  const Credentials creds_;
};

// A bearer token read from a file and re-read every `period` (client-go
// uses one minute) and after a 401, so projected service-account token
// rotation is picked up without a restart. A failed re-read keeps the last
// good token (the kubelet rewrites the file atomically, but be lenient).
// Thread-safe; `clock` must outlive the provider.
class TokenFileCredentialProvider final : public CredentialProvider {
 public:
  TokenFileCredentialProvider(std::string path, Credentials base, Clock* clock,
                              absl::Duration period = absl::Minutes(1));
  absl::StatusOr<Credentials> Get() override;
  void Invalidate(const Credentials& rejected) override;

 private:
  const std::string path_;
  const Credentials base_;  // client cert/key to send along, if any
  Clock* const clock_;
  const absl::Duration period_;

  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  absl::Time next_read_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// Picks: exec plugin if configured, else the token file, else static
// fields. Client certificate/key files are read here (InvalidArgument
// naming the file when unreadable). `clock` must outlive the provider.
absl::StatusOr<std::unique_ptr<CredentialProvider>> MakeCredentialProvider(
    const RestConfig& config, Clock* clock);

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_CREDENTIALS_H_

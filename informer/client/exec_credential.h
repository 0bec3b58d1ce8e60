#ifndef INFORMER_CLIENT_EXEC_CREDENTIAL_H_
#define INFORMER_CLIENT_EXEC_CREDENTIAL_H_

// Exec credential plugins (client.authentication.k8s.io v1 and v1beta1), as
// configured under users[].user.exec: run the command with its args and
// env (plus KUBERNETES_EXEC_INFO), parse the ExecCredential it prints, and
// cache the token or client certificate until its expirationTimestamp.

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "informer/client/credential_provider.h"
#include "informer/client/kubeconfig.h"
#include "informer/util/clock.h"

namespace informer {
namespace client {

// The status of an ExecCredential.
struct ExecCredentialStatus {
  Credentials credentials;
  absl::optional<absl::Time> expiration;  // nullopt: valid until a 401
};

// Parses the plugin's stdout. `want_api_version` must match the
// document's apiVersion. InvalidArgument naming the problem.
absl::StatusOr<ExecCredentialStatus> ParseExecCredential(
    absl::string_view json, absl::string_view want_api_version);

// Runs plugins and caches their answer.
//
// Thread-safe. Get() runs the plugin when nothing valid is cached (at most
// one run at a time; concurrent callers wait for it and share the answer).
// A cached answer is valid while clock->Now() < expirationTimestamp;
// Invalidate() of the cached credentials (after a 401) forces a re-run.
// `clock` must outlive the provider.
//
// A run that has not exited after cluster.exec_timeout (measured on
// `clock`) is killed with its whole process group and Get() returns
// DeadlineExceeded naming the command. A failing run's stderr (its last
// 4 KiB) is included in the Unauthenticated error; stdin is /dev/null.
class ExecCredentialProvider final : public CredentialProvider {
 public:
  ExecCredentialProvider(ExecConfig config, const RestConfig& cluster,
                         Clock* clock);

  absl::StatusOr<Credentials> Get() override;
  void Invalidate(const Credentials& rejected) override;

  // How many times the plugin ran (for tests and metrics).
  int runs() const;

 private:
  absl::StatusOr<std::string> RunPlugin() const;
  std::string ExecInfoJson() const;

  const ExecConfig config_;
  // spec.cluster for provideClusterInfo.
  const std::string server_;
  const std::string ca_data_;
  const bool insecure_;
  const std::string tls_server_name_;
  const std::string proxy_url_;
  const absl::Duration run_timeout_;  // RestConfig::exec_timeout
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::optional<ExecCredentialStatus> cached_ ABSL_GUARDED_BY(mu_);
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace client
}  // namespace informer

#endif  // INFORMER_CLIENT_EXEC_CREDENTIAL_H_

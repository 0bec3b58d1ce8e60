#ifndef INTEGRATION_TESTS_REAL_CONTROL_PLANE_H_
#define INTEGRATION_TESTS_REAL_CONTROL_PLANE_H_

// A real etcd + kube-apiserver (built by tools/realkube.sh build) on
// loopback for C++ tests. The logic lives in one place,
// integration_tests/realkube/control_plane.py: this class runs its `serve`
// supervisor as a child with a private state directory and drives the
// controls through its command line.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace integration {

// Runs `argv` to completion with `stdin_text` on its standard input and
// `env` ("NAME=value") added to the environment; returns its standard
// output. The child dies with the caller (PR_SET_PDEATHSIG). Internal
// error (naming its stderr) on a non-zero exit; DeadlineExceeded (after
// SIGKILL) past `timeout`.
absl::StatusOr<std::string> RunCommand(
    const std::vector<std::string>& argv, absl::string_view stdin_text = "",
    absl::Duration timeout = absl::Minutes(2),
    const std::vector<std::string>& env = {});

// One control plane: etcd on a free port with a fresh data dir,
// kube-apiserver on a free port with TLS from a throw-away CA, static
// tokens for an admin (system:masters) and an unprivileged user, RBAC, and
// the `default` ServiceAccount in the namespaces it creates (no
// kube-controller-manager runs). Start() returns once /readyz is ok.
//
// The destructor stops both (SIGTERM to the supervisor, which stops the
// API server, then etcd; SIGKILL after a bound) and removes the state
// directory; should the test process die instead, the supervisor gets
// SIGTERM from the kernel (PR_SET_PDEATHSIG) and its children die with it.
//
// Thread-compatible: one thread at a time drives it. Not copyable.
class RealControlPlane {
 public:
  struct Options {
    // The peers' directory; empty: $REALKUBE_BIN.
    std::string bin_dir;
    // --feature-gates of the first start (name -> enabled).
    std::map<std::string, bool> feature_gates;
    absl::Duration start_timeout = absl::Minutes(5);
  };

  static absl::StatusOr<std::unique_ptr<RealControlPlane>> Start(
      Options options);
  ~RealControlPlane();
  RealControlPlane(const RealControlPlane&) = delete;
  RealControlPlane& operator=(const RealControlPlane&) = delete;

  // "https://127.0.0.1:PORT"; the port stays the same across restarts.
  const std::string& server() const { return server_; }
  // The gitVersion the API server reports, e.g. "v1.37.2".
  const std::string& version() const { return version_; }
  const std::string& ca_file() const { return ca_file_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& user_token() const { return user_token_; }
  // The unprivileged user's name (no roles until a test binds some).
  const std::string& user() const { return user_; }
  // Kubeconfigs naming server(), ca_file() and the admin's / the user's
  // token.
  const std::string& admin_kubeconfig() const { return admin_kubeconfig_; }
  const std::string& user_kubeconfig() const { return user_kubeconfig_; }
  const std::string& etcd_endpoint() const { return etcd_endpoint_; }
  const std::string& bin_dir() const { return bin_dir_; }
  const std::string& state_dir() const { return state_dir_; }

  // Stops kube-apiserver and starts it again on the same port against the
  // same etcd. `feature_gates` replaces the gates of the last start when
  // given (an empty map: none); unset keeps them.
  absl::Status RestartApiServer(
      std::optional<std::map<std::string, bool>> feature_gates = std::nullopt);
  // Compacts etcd at its current revision; returns that revision.
  absl::StatusOr<int64_t> CompactEtcd();
  // Creates the namespace (if missing) and its `default` ServiceAccount.
  absl::Status CreateNamespace(absl::string_view name);
  // The real kubectl as the admin; returns its standard output.
  absl::StatusOr<std::string> Kubectl(const std::vector<std::string>& args,
                                      absl::string_view stdin_text = "") const;

 private:
  RealControlPlane() = default;
  // control_plane.py `command` --state-dir ... `args`; returns its output.
  absl::StatusOr<std::string> Control(const std::string& command,
                                      const std::vector<std::string>& args);
  // Reads the supervisor's state (JSON) into the members.
  absl::Status LoadState(absl::string_view json);
  void Stop();

  std::string script_;
  std::string state_dir_;
  pid_t supervisor_ = 0;
  std::string server_, version_, ca_file_, admin_token_, user_token_, user_;
  std::string admin_kubeconfig_, user_kubeconfig_, etcd_endpoint_, bin_dir_;
};

}  // namespace integration

#endif  // INTEGRATION_TESTS_REAL_CONTROL_PLANE_H_

#include "informer/client/exec_credential.h"

#include <errno.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

extern char** environ;

namespace informer {
namespace client {
namespace {

// Plugin output beyond this is not a credential.
constexpr size_t kMaxOutput = 1 << 20;
// How much of a failing plugin's stderr goes into the error (its tail).
constexpr size_t kMaxStderr = 4096;

std::string GetString(const rapidjson::Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace

absl::StatusOr<ExecCredentialStatus> ParseExecCredential(
    absl::string_view json, absl::string_view want_api_version) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(
        "exec plugin output is not a JSON ExecCredential object");
  }
  std::string api_version = GetString(doc, "apiVersion");
  if (api_version != want_api_version) {
    return absl::InvalidArgumentError(
        absl::StrCat("exec plugin returned apiVersion \"", api_version,
                     "\", configured \"", want_api_version, "\""));
  }
  if (GetString(doc, "kind") != "ExecCredential") {
    return absl::InvalidArgumentError(
        "exec plugin output has kind other than ExecCredential");
  }
  auto status = doc.FindMember("status");
  if (status == doc.MemberEnd() || !status->value.IsObject()) {
    return absl::InvalidArgumentError("exec plugin output has no status");
  }
  ExecCredentialStatus out;
  const rapidjson::Value& s = status->value;
  out.credentials.bearer_token = GetString(s, "token");
  out.credentials.client_cert_pem = GetString(s, "clientCertificateData");
  out.credentials.client_key_pem = GetString(s, "clientKeyData");
  const bool has_cert = !out.credentials.client_cert_pem.empty();
  const bool has_key = !out.credentials.client_key_pem.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError(
        "exec plugin returned only one of clientCertificateData and "
        "clientKeyData");
  }
  if (out.credentials.bearer_token.empty() && !has_cert) {
    return absl::InvalidArgumentError(
        "exec plugin returned neither a token nor a client certificate");
  }
  std::string expiry = GetString(s, "expirationTimestamp");
  if (!expiry.empty()) {
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, expiry, &t, &err)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "exec plugin expirationTimestamp \"", expiry, "\": ", err));
    }
    out.expiration = t;
  }
  return out;
}

ExecCredentialProvider::ExecCredentialProvider(ExecConfig config,
                                               const RestConfig& cluster,
                                               Clock* clock)
    : config_(std::move(config)),
      server_(cluster.server),
      ca_data_(cluster.ca_data),
      insecure_(cluster.insecure_skip_tls_verify),
      tls_server_name_(cluster.tls_server_name),
      proxy_url_(cluster.proxy_url),
      run_timeout_(cluster.exec_timeout),
      clock_(clock) {}

int ExecCredentialProvider::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

absl::StatusOr<Credentials> ExecCredentialProvider::Get() {
  // Holding mu_ across the run serialises plugin runs: concurrent callers
  // wait and then see the fresh cache instead of each running the plugin.
  absl::MutexLock lock(&mu_);
  if (cached_.has_value() && (!cached_->expiration.has_value() ||
                              clock_->Now() < *cached_->expiration)) {
    return cached_->credentials;
  }
  cached_.reset();
  ++runs_;
  absl::StatusOr<std::string> output = RunPlugin();
  if (!output.ok()) return output.status();
  absl::StatusOr<ExecCredentialStatus> parsed =
      ParseExecCredential(*output, config_.api_version);
  if (!parsed.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "exec plugin ", config_.command, ": ", parsed.status().message()));
  }
  cached_ = *std::move(parsed);
  return cached_->credentials;
}

void ExecCredentialProvider::Invalidate(const Credentials& rejected) {
  absl::MutexLock lock(&mu_);
  if (cached_.has_value() && cached_->credentials == rejected) {
    cached_.reset();
  }
}

std::string ExecCredentialProvider::ExecInfoJson() const {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.String(config_.api_version.c_str());
  w.Key("kind");
  w.String("ExecCredential");
  w.Key("spec");
  w.StartObject();
  w.Key("interactive");
  w.Bool(false);
  if (config_.provide_cluster_info) {
    w.Key("cluster");
    w.StartObject();
    w.Key("server");
    w.String(server_.c_str());
    if (!tls_server_name_.empty()) {
      w.Key("tls-server-name");
      w.String(tls_server_name_.c_str());
    }
    if (!ca_data_.empty()) {
      w.Key("certificate-authority-data");
      w.String(absl::Base64Escape(ca_data_).c_str());
    }
    if (!proxy_url_.empty()) {
      w.Key("proxy-url");
      w.String(proxy_url_.c_str());
    }
    w.Key("insecure-skip-tls-verify");
    w.Bool(insecure_);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

absl::StatusOr<std::string> ExecCredentialProvider::RunPlugin() const {
  const std::string& cmd = config_.command;
  if (config_.interactive_mode == "Always") {
    return absl::FailedPreconditionError(absl::StrCat(
        "exec plugin ", cmd,
        " requires an interactive terminal (interactiveMode: Always)"));
  }
  // Environment: ours, then the configured variables, then the exec info.
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    bool overridden = absl::StartsWith(kv, "KUBERNETES_EXEC_INFO=");
    for (const auto& [name, value] : config_.env) {
      if (absl::StartsWith(kv, name + "=")) overridden = true;
    }
    if (!overridden) env.emplace_back(kv);
  }
  for (const auto& [name, value] : config_.env) {
    env.push_back(absl::StrCat(name, "=", value));
  }
  env.push_back(absl::StrCat("KUBERNETES_EXEC_INFO=", ExecInfoJson()));
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> args;
  args.push_back(cmd);
  args.insert(args.end(), config_.args.begin(), config_.args.end());
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  // stdout carries the credential, stderr the plugin's diagnostics (kept
  // for the error message); `wake` lets the watchdog interrupt the reader
  // even if a killed plugin left a descendant holding the pipes open.
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int wake[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out, err, wake}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
        p[i] = -1;
      }
    }
  };
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(wake, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    return absl::InternalError(absl::StrCat("pipe: ", strerror(e)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // Its own process group, so a timeout kills the plugin and everything it
  // started (a shell script's children hold the pipes too).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cmd.c_str(), &actions, &attr, argv.data(),
                        envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  out[1] = err[1] = -1;
  if (rc != 0) {
    close_all();
    std::string msg =
        absl::StrCat("exec plugin ", cmd, ": cannot run: ", strerror(rc));
    if (!config_.install_hint.empty()) {
      absl::StrAppend(&msg, "\n", config_.install_hint);
    }
    return absl::UnauthenticatedError(msg);
  }

  // The watchdog waits on the injected clock, so tests drive the timeout
  // with a FakeClock. It kills only before `finished` is set, and the child
  // is reaped only after the watchdog is joined, so the pid it signals can
  // never have been reused.
  absl::Mutex watch_mu;
  bool finished = false;
  bool timed_out = false;
  const absl::Time deadline = clock_->Now() + run_timeout_;
  const int wake_fd = wake[1];
  std::thread watchdog([&, wake_fd] {
    absl::MutexLock lock(&watch_mu);
    if (!clock_->AwaitWithDeadline(&watch_mu, absl::Condition(&finished),
                                   deadline)) {
      timed_out = true;
      kill(-pid, SIGKILL);
      char c = 0;
      while (write(wake_fd, &c, 1) < 0 && errno == EINTR) {
      }
    }
  });

  std::string output;
  std::string errors;
  bool too_long = false;
  bool stderr_truncated = false;
  bool out_open = true;
  bool err_open = true;
  char buf[4096];
  while (out_open || err_open) {
    pollfd fds[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                     {err_open ? err[0] : -1, POLLIN, 0},
                     {wake[0], POLLIN, 0}};
    int n = poll(fds, 3, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) {
      // Timed out: keep what the plugin already said on stderr, without
      // waiting for more (a descendant may hold the pipe open).
      if (err_open && fcntl(err[0], F_SETFL, O_NONBLOCK) == 0) {
        ssize_t got;
        while ((got = read(err[0], buf, sizeof(buf))) > 0 &&
               errors.size() < 2 * kMaxStderr) {
          errors.append(buf, got);
        }
      }
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      if (i == 0) {
        if (output.size() + got > kMaxOutput) {
          too_long = true;  // keep draining so the child is not blocked
        } else {
          output.append(buf, got);
        }
      } else {
        // Keep the tail: the last lines usually say what went wrong.
        errors.append(buf, got);
        if (errors.size() > 2 * kMaxStderr) {
          errors.erase(0, errors.size() - kMaxStderr);
          stderr_truncated = true;
        }
      }
    }
  }
  {
    absl::MutexLock lock(&watch_mu);
    finished = true;
  }
  watchdog.join();
  close_all();
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }

  if (errors.size() > kMaxStderr) {
    errors.erase(0, errors.size() - kMaxStderr);
    stderr_truncated = true;
  }
  std::string stderr_text(absl::StripAsciiWhitespace(errors));
  auto with_stderr = [&](std::string msg) {
    if (!stderr_text.empty()) {
      absl::StrAppend(&msg, "; stderr: ", stderr_truncated ? "..." : "",
                      stderr_text);
    }
    return msg;
  };
  if (timed_out) {
    LOG(WARNING) << "exec credential plugin " << cmd << " killed after "
                 << run_timeout_;
    return absl::DeadlineExceededError(with_stderr(
        absl::StrCat("exec plugin ", cmd, " did not finish within ",
                     absl::FormatDuration(run_timeout_), " and was killed")));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::string how = WIFEXITED(wstatus)
                          ? absl::StrCat("exit status ", WEXITSTATUS(wstatus))
                          : absl::StrCat("signal ", WTERMSIG(wstatus));
    LOG(WARNING) << "exec credential plugin " << cmd << " failed: " << how;
    return absl::UnauthenticatedError(
        with_stderr(absl::StrCat("exec plugin ", cmd, " failed: ", how)));
  }
  if (too_long) {
    return absl::UnauthenticatedError(absl::StrCat(
        "exec plugin ", cmd, " printed more than ", kMaxOutput, " bytes"));
  }
  return output;
}

}  // namespace client
}  // namespace informer

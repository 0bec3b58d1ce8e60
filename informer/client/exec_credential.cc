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

namespace {

// The plugin's environment: ours, minus anything the config or the exec
// info overrides, then the configured variables, then KUBERNETES_EXEC_INFO.
std::vector<std::string> PluginEnvironment(const ExecConfig& config,
                                           const std::string& exec_info) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    bool overridden = absl::StartsWith(kv, "KUBERNETES_EXEC_INFO=");
    for (const auto& [name, value] : config.env) {
      if (absl::StartsWith(kv, name + "=")) overridden = true;
    }
    if (!overridden) env.emplace_back(kv);
  }
  for (const auto& [name, value] : config.env) {
    env.push_back(absl::StrCat(name, "=", value));
  }
  env.push_back(absl::StrCat("KUBERNETES_EXEC_INFO=", exec_info));
  return env;
}

// A null-terminated char* array over `strings` (which must outlive it), as
// posix_spawn wants for argv and envp.
std::vector<char*> CStringArray(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// stdout carries the credential, stderr the plugin's diagnostics (kept
// for the error message); `wake` lets the watchdog interrupt the reader
// even if a killed plugin left a descendant holding the pipes open.
struct PluginPipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int wake[2] = {-1, -1};

  ~PluginPipes() { CloseAll(); }

  // Creates all three; on failure closes any it made and returns errno.
  int Open() {
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        pipe2(wake, O_CLOEXEC) != 0) {
      int e = errno;
      CloseAll();
      return e;
    }
    return 0;
  }
  // The child's ends, once the child holds its own copies.
  void CloseWriteEnds() {
    Close(out[1]);
    Close(err[1]);
  }
  void CloseAll() {
    for (int* p : {out, err, wake}) {
      Close(p[0]);
      Close(p[1]);
    }
  }

 private:
  static void Close(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

// Starts `argv[0]` (searched on PATH) with stdin on /dev/null and stdout /
// stderr on the pipes. Returns posix_spawnp's error code (0 on success).
int SpawnPlugin(const std::string& cmd, const PluginPipes& pipes,
                std::vector<char*>& argv, std::vector<char*>& envp,
                pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipes.out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipes.err[1], 2);
  // Its own process group, so a timeout kills the plugin and everything it
  // started (a shell script's children hold the pipes too).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc =
      posix_spawnp(pid, cmd.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// What the plugin printed, bounded: stdout up to kMaxOutput (beyond it only
// `too_long` is set), stderr's tail.
struct PluginOutput {
  std::string output;
  std::string errors;
  bool too_long = false;
  bool stderr_truncated = false;
};

void AppendStdout(const char* buf, size_t got, PluginOutput* out) {
  if (out->output.size() + got > kMaxOutput) {
    out->too_long = true;  // keep draining so the child is not blocked
  } else {
    out->output.append(buf, got);
  }
}

// Keeps the tail: the last lines usually say what went wrong.
void AppendStderr(const char* buf, size_t got, PluginOutput* out) {
  out->errors.append(buf, got);
  if (out->errors.size() > 2 * kMaxStderr) {
    out->errors.erase(0, out->errors.size() - kMaxStderr);
    out->stderr_truncated = true;
  }
}

// After a timeout: keeps what the plugin already said on stderr, without
// waiting for more (a descendant may hold the pipe open).
void DrainStderrNonBlocking(int fd, char* buf, size_t size, PluginOutput* out) {
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) return;
  ssize_t got;
  while ((got = read(fd, buf, size)) > 0 &&
         out->errors.size() < 2 * kMaxStderr) {
    out->errors.append(buf, got);
  }
}

// Reads stdout and stderr until both close or the wake pipe fires.
void ReadPluginOutput(const PluginPipes& pipes, PluginOutput* out) {
  bool open[2] = {true, true};  // stdout, stderr
  char buf[4096];
  while (open[0] || open[1]) {
    pollfd fds[3] = {{open[0] ? pipes.out[0] : -1, POLLIN, 0},
                     {open[1] ? pipes.err[0] : -1, POLLIN, 0},
                     {pipes.wake[0], POLLIN, 0}};
    int n = poll(fds, 3, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) {
      if (open[1]) DrainStderrNonBlocking(pipes.err[0], buf, sizeof(buf), out);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        open[i] = false;
        continue;
      }
      if (i == 0) {
        AppendStdout(buf, got, out);
      } else {
        AppendStderr(buf, got, out);
      }
    }
  }
}

// Turns a finished run into the provider's answer: the stdout on a clean
// exit, else an error naming the command and carrying stderr's tail.
absl::StatusOr<std::string> PluginResult(const std::string& cmd,
                                         absl::Duration run_timeout,
                                         bool timed_out, int wstatus,
                                         PluginOutput& out) {
  if (out.errors.size() > kMaxStderr) {
    out.errors.erase(0, out.errors.size() - kMaxStderr);
    out.stderr_truncated = true;
  }
  std::string stderr_text(absl::StripAsciiWhitespace(out.errors));
  auto with_stderr = [&](std::string msg) {
    if (!stderr_text.empty()) {
      absl::StrAppend(&msg, "; stderr: ", out.stderr_truncated ? "..." : "",
                      stderr_text);
    }
    return msg;
  };
  if (timed_out) {
    LOG(WARNING) << "exec credential plugin " << cmd << " killed after "
                 << run_timeout;
    return absl::DeadlineExceededError(with_stderr(
        absl::StrCat("exec plugin ", cmd, " did not finish within ",
                     absl::FormatDuration(run_timeout), " and was killed")));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::string how = WIFEXITED(wstatus)
                          ? absl::StrCat("exit status ", WEXITSTATUS(wstatus))
                          : absl::StrCat("signal ", WTERMSIG(wstatus));
    LOG(WARNING) << "exec credential plugin " << cmd << " failed: " << how;
    return absl::UnauthenticatedError(
        with_stderr(absl::StrCat("exec plugin ", cmd, " failed: ", how)));
  }
  if (out.too_long) {
    return absl::UnauthenticatedError(absl::StrCat(
        "exec plugin ", cmd, " printed more than ", kMaxOutput, " bytes"));
  }
  return std::move(out.output);
}

}  // namespace

absl::StatusOr<std::string> ExecCredentialProvider::RunPlugin() const {
  const std::string& cmd = config_.command;
  if (config_.interactive_mode == "Always") {
    return absl::FailedPreconditionError(absl::StrCat(
        "exec plugin ", cmd,
        " requires an interactive terminal (interactiveMode: Always)"));
  }
  std::vector<std::string> env = PluginEnvironment(config_, ExecInfoJson());
  std::vector<char*> envp = CStringArray(env);
  std::vector<std::string> args;
  args.push_back(cmd);
  args.insert(args.end(), config_.args.begin(), config_.args.end());
  std::vector<char*> argv = CStringArray(args);

  PluginPipes pipes;
  if (int e = pipes.Open(); e != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(e)));
  }
  pid_t pid = 0;
  int rc = SpawnPlugin(cmd, pipes, argv, envp, &pid);
  pipes.CloseWriteEnds();
  if (rc != 0) {
    pipes.CloseAll();
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
  const int wake_fd = pipes.wake[1];
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

  PluginOutput out;
  ReadPluginOutput(pipes, &out);
  {
    absl::MutexLock lock(&watch_mu);
    finished = true;
  }
  watchdog.join();
  pipes.CloseAll();
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  return PluginResult(cmd, run_timeout_, timed_out, wstatus, out);
}

}  // namespace client
}  // namespace informer

#include "integration_tests/real_control_plane.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "integration_tests/sidecar_process.h"
#include "rapidjson/document.h"

extern char** environ;

namespace integration {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kScript[] = "integration_tests/realkube/control_plane.py";
// The supervisor stops the API server and etcd (each SIGTERM, SIGKILL
// after 20 s) before it exits.
constexpr absl::Duration kStopBound = absl::Seconds(60);

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// fork + exec with the child's stdio on the given descriptors (-1: keep)
// and `death_signal` sent to it when this thread exits. Everything the
// child needs is built before the fork (only async-signal-safe calls
// after it).
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args,
                            const std::vector<std::string>& env_add, int in_fd,
                            int out_fd, int err_fd, int death_signal) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env_add.begin(), env_add.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args_copy = args;
  std::vector<char*> argv;
  for (std::string& a : args_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(127);
    if (in_fd >= 0) dup2(in_fd, STDIN_FILENO);
    if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` until `deadline`; true once reaped (`status` set).
bool WaitUntil(pid_t pid, absl::Time deadline, int* status) {
  while (true) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// Reads `fds` (closing each at EOF) into `outs` until all hit EOF or the
// deadline passes. False on the deadline.
bool ReadAll(std::vector<int> fds, std::vector<std::string*> outs,
             absl::Time deadline) {
  size_t open_fds = fds.size();
  while (open_fds > 0) {
    std::vector<pollfd> pfds;
    for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    if (poll(pfds.data(), pfds.size(), static_cast<int>(ms)) < 0 &&
        errno != EINTR) {
      return false;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0 || pfds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t n = read(fds[i], buf, sizeof(buf));
      if (n > 0) {
        outs[i]->append(buf, n);
      } else if (n == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
        --open_fds;
      }
    }
  }
  return true;
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

std::string GatesArg(const std::map<std::string, bool>& gates) {
  std::vector<std::string> items;
  for (const auto& [name, on] : gates) {
    items.push_back(absl::StrCat(name, "=", on ? "true" : "false"));
  }
  return absl::StrJoin(items, ",");
}

}  // namespace

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       absl::string_view stdin_text,
                                       absl::Duration timeout,
                                       const std::vector<std::string>& env) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
      pipe2(err, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe2 failed");
  }
  absl::StatusOr<pid_t> pid = Spawn(argv, env, in[0], out[1], err[1], SIGKILL);
  CloseAll({in[0], out[1], err[1]});
  if (!pid.ok()) {
    CloseAll({in[1], out[0], err[0]});
    return pid.status();
  }
  // Small inputs only (kubectl manifests): written before reading.
  signal(SIGPIPE, SIG_IGN);
  for (size_t done = 0; done < stdin_text.size();) {
    const ssize_t n =
        write(in[1], stdin_text.data() + done, stdin_text.size() - done);
    if (n <= 0) break;
    done += n;
  }
  close(in[1]);
  std::string stdout_text, stderr_text;
  const absl::Time deadline = absl::Now() + timeout;
  const bool finished =
      ReadAll({out[0], err[0]}, {&stdout_text, &stderr_text}, deadline);
  int status = 0;
  if (!finished || !WaitUntil(*pid, deadline, &status)) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &status, 0);
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " still running after ",
                     absl::FormatDuration(timeout), ": ", stderr_text));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "),
                                            " failed (status ", status,
                                            "): ", stderr_text));
  }
  return stdout_text;
}

absl::StatusOr<std::unique_ptr<RealControlPlane>> RealControlPlane::Start(
    Options options) {
  std::unique_ptr<RealControlPlane> cp(new RealControlPlane());
  absl::StatusOr<std::string> script = FindRunfile(kScript);
  if (!script.ok()) return script.status();
  cp->script_ = *script;
  cp->bin_dir_ =
      options.bin_dir.empty() ? Env("REALKUBE_BIN") : options.bin_dir;
  if (cp->bin_dir_.empty()) {
    return absl::FailedPreconditionError(
        "REALKUBE_BIN is not set: pass --test_env=REALKUBE_BIN=$(tools/"
        "realkube.sh bin-dir)");
  }
  // Short: the supervisor's control socket path must fit in 107 bytes.
  char dir[] = "/tmp/rkcc_XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
  cp->state_dir_ = dir;
  std::vector<std::string> argv = {kPython,       cp->script_,    "serve",
                                   "--state-dir", cp->state_dir_, "--bin-dir",
                                   cp->bin_dir_};
  if (!options.feature_gates.empty()) {
    argv.push_back("--feature-gates=" + GatesArg(options.feature_gates));
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  const std::string log = cp->state_dir_ + "/supervisor.log";
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  // SIGTERM, not SIGKILL, should this thread die: the supervisor then
  // still stops its children itself.
  absl::StatusOr<pid_t> pid = Spawn(argv, {}, -1, out[1], log_fd, SIGTERM);
  CloseAll({out[1], log_fd});
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  cp->supervisor_ = *pid;
  // The supervisor prints one JSON line once ready (or failed), then
  // nothing more: read to EOF.
  std::string line, ignored;
  if (!ReadAll({out[0]}, {&line}, absl::Now() + options.start_timeout)) {
    close(out[0]);
    return absl::DeadlineExceededError(absl::StrCat(
        "control plane not ready within ",
        absl::FormatDuration(options.start_timeout), "; logs in ", dir));
  }
  absl::Status loaded = cp->LoadState(line);
  if (!loaded.ok()) return loaded;
  return cp;
}

RealControlPlane::~RealControlPlane() {
  Stop();
  if (!state_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(state_dir_, ignored);
  }
}

void RealControlPlane::Stop() {
  if (supervisor_ <= 0) return;
  int status = 0;
  kill(supervisor_, SIGTERM);
  if (!WaitUntil(supervisor_, absl::Now() + kStopBound, &status)) {
    kill(supervisor_, SIGKILL);  // its children die with it (pdeathsig)
    waitpid(supervisor_, &status, 0);
  }
  supervisor_ = 0;
}

absl::Status RealControlPlane::LoadState(absl::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InternalError(absl::StrCat("control plane: no state (see ",
                                            state_dir_,
                                            "/supervisor.log): ", json));
  }
  if (doc.HasMember("ok") && !doc["ok"].GetBool()) {
    return absl::InternalError(
        absl::StrCat("control plane failed: ",
                     doc.HasMember("error") ? doc["error"].GetString() : json));
  }
  const rapidjson::Value& s = doc.HasMember("state") ? doc["state"] : doc;
  const std::pair<const char*, std::string*> fields[] = {
      {"server", &server_},
      {"version", &version_},
      {"ca_file", &ca_file_},
      {"admin_token", &admin_token_},
      {"user_token", &user_token_},
      {"user", &user_},
      {"admin_kubeconfig", &admin_kubeconfig_},
      {"user_kubeconfig", &user_kubeconfig_},
      {"etcd_endpoint", &etcd_endpoint_},
  };
  for (const auto& [name, member] : fields) {
    if (!s.HasMember(name) || !s[name].IsString()) {
      return absl::InternalError(
          absl::StrCat("control plane state lacks ", name, ": ", json));
    }
    *member = s[name].GetString();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RealControlPlane::Control(
    const std::string& command, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, script_, command, "--state-dir",
                                   state_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, "", absl::Minutes(6));
}

absl::Status RealControlPlane::RestartApiServer(
    std::optional<std::map<std::string, bool>> feature_gates) {
  std::vector<std::string> args;
  if (feature_gates.has_value()) {
    args.push_back("--feature-gates=" + GatesArg(*feature_gates));
  }
  absl::StatusOr<std::string> state = Control("restart-apiserver", args);
  if (!state.ok()) return state.status();
  return LoadState(*state);
}

absl::StatusOr<int64_t> RealControlPlane::CompactEtcd() {
  absl::StatusOr<std::string> reply = Control("compact", {});
  if (!reply.ok()) return reply.status();
  rapidjson::Document doc;
  doc.Parse(reply->c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("revision")) {
    return absl::InternalError(absl::StrCat("compact: ", *reply));
  }
  return doc["revision"].GetInt64();
}

absl::Status RealControlPlane::CreateNamespace(absl::string_view name) {
  return Control("create-namespace", {std::string(name)}).status();
}

absl::StatusOr<std::string> RealControlPlane::Kubectl(
    const std::vector<std::string>& args, absl::string_view stdin_text) const {
  std::vector<std::string> argv = {bin_dir_ + "/kubectl",
                                   "--kubeconfig=" + admin_kubeconfig_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, stdin_text, absl::Minutes(2),
                    {"KUBECACHEDIR=" + state_dir_ + "/kubectl-cache"});
}

}  // namespace integration

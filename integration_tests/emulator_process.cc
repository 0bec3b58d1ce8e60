#include "integration_tests/emulator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace integration {
namespace {

constexpr char kRelativePath[] = "emulator/kube_emulator";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Workspace() {
  std::string w = Env("TEST_WORKSPACE");
  return w.empty() ? "informer_sidecar" : w;
}

}  // namespace

absl::StatusOr<std::string> FindEmulatorBinary(absl::string_view argv0) {
  std::vector<std::string> candidates;
  for (const char* root_env : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const std::string root = Env(root_env);
    if (!root.empty()) {
      candidates.push_back(
          absl::StrCat(root, "/", Workspace(), "/", kRelativePath));
    }
  }
  candidates.push_back(
      absl::StrCat(argv0, ".runfiles/", Workspace(), "/", kRelativePath));
  candidates.push_back(kRelativePath);
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return absl::NotFoundError(absl::StrCat(
      "kube_emulator not found in runfiles; tried ", candidates.front(),
      " and ", candidates.size() - 1, " other places"));
}

absl::StatusOr<std::unique_ptr<EmulatorProcess>> EmulatorProcess::Start(
    const std::string& binary, const std::vector<std::string>& flags,
    bool quiet) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                     O_WRONLY, 0);
  }
  std::vector<std::string> args = {binary, "--port=0"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return absl::InternalError(absl::StrCat("posix_spawn ", binary, ": ", rc));
  }
  // The child prints its port once it serves; EOF means it died first.
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(out[0]);
  int port = 0;
  if (!absl::SimpleAtoi(line, &port) || port <= 0) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    return absl::InternalError(absl::StrCat(
        "kube_emulator did not report a port (got \"", line, "\")"));
  }
  return std::unique_ptr<EmulatorProcess>(new EmulatorProcess(pid, port));
}

EmulatorProcess::~EmulatorProcess() { Terminate(); }

std::string EmulatorProcess::url() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

int EmulatorProcess::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = 0;
  return status;
}

}  // namespace integration

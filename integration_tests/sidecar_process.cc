#include "integration_tests/sidecar_process.h"

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace integration {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Workspace() {
  std::string w = Env("TEST_WORKSPACE");
  return w.empty() ? "informer_sidecar" : w;
}

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

absl::StatusOr<std::string> FindRunfile(absl::string_view relative,
                                        absl::string_view argv0) {
  std::vector<std::string> candidates;
  for (const char* root_env : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const std::string root = Env(root_env);
    if (!root.empty()) {
      candidates.push_back(absl::StrCat(root, "/", Workspace(), "/", relative));
    }
  }
  if (!argv0.empty()) {
    candidates.push_back(
        absl::StrCat(argv0, ".runfiles/", Workspace(), "/", relative));
  }
  candidates.push_back(std::string(relative));
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return absl::NotFoundError(absl::StrCat(
      relative, " not found in runfiles; tried ", candidates.front(), " and ",
      candidates.size() - 1, " other places"));
}

absl::StatusOr<std::string> WriteKubeconfig(const std::string& dir,
                                            absl::string_view url,
                                            absl::string_view token) {
  const std::string path = dir + "/kubeconfig";
  std::ofstream f(path);
  f << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
    << "clusters:\n- name: test\n  cluster:\n    server: " << url << "\n"
    << "contexts:\n- name: test\n  context:\n    cluster: test\n"
    << "    user: test\n"
    << "users:\n- name: test\n  user:\n";
  if (token.empty()) {
    f << "    {}\n";
  } else {
    f << "    token: " << token << "\n";
  }
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return path;
}

absl::Status WaitForHealthServing(const std::shared_ptr<grpc::Channel>& channel,
                                  absl::string_view service,
                                  absl::Duration timeout) {
  // Messages are hand-encoded to need no health proto: HealthCheckRequest
  // is field 1 (service, string); HealthCheckResponse is 0x08 <status>.
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    request.push_back(static_cast<char>(service.size()));
    request.append(service.data(), service.size());
  }
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  auto call = stub.PrepareCall(&ctx, "/grpc.health.v1.Health/Watch", &cq);
  void* tag;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  bool serving = false;
  if (cq.Next(&tag, &ok) && ok) {
    grpc::Slice slice(request);
    call->Write(grpc::ByteBuffer(&slice, 1), reinterpret_cast<void*>(2));
    if (cq.Next(&tag, &ok) && ok) {
      call->WritesDone(reinterpret_cast<void*>(3));
      if (cq.Next(&tag, &ok) && ok) {
        while (!serving) {
          grpc::ByteBuffer response;
          call->Read(&response, reinterpret_cast<void*>(4));
          if (!cq.Next(&tag, &ok) || !ok) break;
          grpc::Slice got;
          if (!response.DumpToSingleSlice(&got).ok()) break;
          serving =
              got.size() == 2 && got.begin()[0] == 0x08 && got.begin()[1] == 1;
        }
      }
    }
  }
  ctx.TryCancel();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (serving) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat("health of \"", service, "\" not SERVING within ",
                     absl::FormatDuration(timeout)));
  }
  return absl::UnavailableError(absl::StrCat(
      "health watch of \"", service, "\" ended: ", status.error_message()));
}

absl::StatusOr<std::unique_ptr<SidecarProcess>> SidecarProcess::Start(
    const std::string& binary, Options options) {
  std::unique_ptr<SidecarProcess> p(new SidecarProcess());
  char dir[] = "/tmp/sidecar_e2e_XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
  p->dir_ = dir;
  std::vector<std::string> args = {binary};
  bool has_listen = false;
  for (const std::string& f : options.flags) {
    if (absl::StartsWith(f, "--grpc_listen=")) {
      has_listen = true;
      p->address_ = f.substr(strlen("--grpc_listen="));
    }
  }
  if (!has_listen) {
    p->address_ = absl::StrCat("unix:", p->dir_, "/grpc.sock");
    args.push_back("--grpc_listen=" + p->address_);
  }
  // The metrics/probes port defaults to :9090, which parallel tests would
  // fight over; any --http_listen in the flags comes later and wins.
  args.push_back("--http_listen=127.0.0.1:0");
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    // An addition replaces the inherited variable of its name (getenv
    // would find the inherited one first).
    const absl::string_view inherited(*e);
    bool replaced = false;
    for (const std::string& add : options.env) {
      const absl::string_view name =
          absl::string_view(add).substr(0, add.find('=') + 1);
      replaced = replaced || absl::StartsWith(inherited, name);
    }
    if (!replaced) env_strings.emplace_back(*e);
  }
  env_strings.insert(env_strings.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.quiet) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                     O_WRONLY, 0);
  } else if (!options.stderr_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO,
                                     options.stderr_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  const int rc = posix_spawn(&p->pid_, binary.c_str(), &actions, nullptr,
                             argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    p->pid_ = 0;
    return absl::InternalError(absl::StrCat("posix_spawn ", binary, ": ", rc));
  }
  std::shared_ptr<grpc::Channel> channel = p->NewChannel();
  if (!channel->WaitForConnected(Deadline(options.start_timeout))) {
    int status = 0;
    const bool exited = waitpid(p->pid_, &status, WNOHANG) == p->pid_;
    if (exited) p->pid_ = 0;
    return absl::UnavailableError(absl::StrCat(
        "informer_sidecar did not accept connections on ", p->address_,
        exited ? absl::StrCat(" (it exited with status ", status, ")") : ""));
  }
  if (options.wait_serving) {
    absl::Status st = WaitForHealthServing(channel, "", options.start_timeout);
    if (!st.ok()) return st;
  }
  return p;
}

SidecarProcess::~SidecarProcess() {
  Kill();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::shared_ptr<grpc::Channel> SidecarProcess::NewChannel() const {
  grpc::ChannelArguments args;
  // A fresh connection per channel, so tests can tell streams apart.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(),
                                   args);
}

int SidecarProcess::Terminate(int signal) {
  if (pid_ <= 0) return -1000;
  kill(pid_, signal);
  return Wait();
}

int SidecarProcess::Wait() {
  if (pid_ <= 0) return -1000;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

void SidecarProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

}  // namespace integration

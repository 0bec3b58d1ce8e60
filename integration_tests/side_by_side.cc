#include "integration_tests/side_by_side.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace integration {
namespace {

// kube-apiserver pretty-prints JSON for a "curl/..." User-Agent (a third
// more bytes for a list of Pods); clients get it compact.
constexpr char kUserAgent[] = "informer-sidecar-bench";

// The number after "\"key\":" in a flat JSON object.
absl::StatusOr<double> JsonNumber(absl::string_view line,
                                  absl::string_view key) {
  const std::string k = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(k);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("no ", key, " in ", line));
  }
  absl::string_view rest = line.substr(at + k.size());
  const size_t end = rest.find_first_of(",}");
  double v = 0;
  if (!absl::SimpleAtod(rest.substr(0, end), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("bad ", key, " in ", line));
  }
  return v;
}

// Runs `cmd` through the shell; its stdout, or an error on a non-zero exit.
absl::StatusOr<std::string> Output(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen: " + cmd);
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  if (pclose(p) != 0) {
    return absl::InternalError(absl::StrCat("failed: ", cmd, "\n", out));
  }
  return out;
}

}  // namespace

ProcMemory ReadProcMemory(pid_t pid) {
  ProcMemory m;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    double kb = 0;
    if (f.size() != 3 || !absl::SimpleAtod(f[1], &kb)) continue;
    if (f[0] == "VmRSS:") m.rss = kb * 1024;
    if (f[0] == "VmHWM:") m.hwm = kb * 1024;
    if (f[0] == "RssAnon:") m.anon = kb * 1024;
  }
  return m;
}

absl::StatusOr<absl::Time> LogLineTime(const std::string& path,
                                       const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 25 || line.find(needle) == std::string::npos) continue;
    absl::Time t;
    std::string err;
    if (absl::ParseTime("%E4Y%m%d %H:%M:%E*S", line.substr(1, 24),
                        absl::LocalTimeZone(), &t, &err)) {
      return t;
    }
  }
  return absl::NotFoundError(absl::StrCat("no '", needle, "' in ", path));
}

absl::StatusOr<SyncResult> ParseClientGoLine(const std::string& line) {
  SyncResult r;
  absl::StatusOr<double> v = JsonNumber(line, "sync_seconds");
  if (!v.ok()) return v.status();
  r.sync_seconds = *v;
  if (!(v = JsonNumber(line, "rss_bytes_after_sync")).ok()) return v.status();
  r.rss_bytes = *v;
  if (!(v = JsonNumber(line, "rss_peak_bytes")).ok()) return v.status();
  r.peak_bytes = *v;
  if (!(v = JsonNumber(line, "objects")).ok()) return v.status();
  r.objects = *v;
  return r;
}

absl::StatusOr<SyncResult> RunClientGo(const std::string& binary,
                                       const std::string& kubeconfig,
                                       const std::string& resource,
                                       const std::string& ns, bool strip,
                                       bool watch_list,
                                       absl::Duration timeout) {
  const std::string cmd = absl::StrCat(
      watch_list ? "" : "KUBE_FEATURE_WatchListClient=false ", binary,
      " --kubeconfig=", kubeconfig, " --resource=", resource, " --namespace='",
      ns, "'", strip ? " --strip-managed-fields" : "",
      " --sync-timeout=", absl::ToInt64Seconds(timeout), "s 2>&1");
  absl::StatusOr<std::string> out = Output(cmd);
  if (!out.ok()) return out.status();
  // The JSON line is the last line (client-go may log before it).
  std::vector<std::string> lines =
      absl::StrSplit(*out, '\n', absl::SkipWhitespace());
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (absl::StartsWith(*it, "{")) return ParseClientGoLine(*it);
  }
  return absl::InternalError("kube-informer-bench printed no JSON: " + *out);
}

absl::StatusOr<SyncResult> RunCurl(const std::string& url,
                                   const std::string& curl_flags) {
  absl::StatusOr<std::string> out = Output(
      absl::StrCat("curl -sS -f -o /dev/null -A ", kUserAgent, " ", curl_flags,
                   " -w '%{size_download} %{time_total}' '", url, "'"));
  if (!out.ok()) return out.status();
  std::vector<std::string> f = absl::StrSplit(*out, ' ');
  SyncResult r;
  if (f.size() != 2 || !absl::SimpleAtod(f[0], &r.objects) ||
      !absl::SimpleAtod(f[1], &r.sync_seconds)) {
    return absl::InternalError("bad curl output: " + *out);
  }
  return r;
}

absl::StatusOr<SyncResult> RunCurlWatchList(const std::string& url,
                                            const std::string& curl_flags,
                                            absl::Duration timeout) {
  // What the API server puts in the bookmark that ends the initial events.
  constexpr absl::string_view kEnd = "k8s.io/initial-events-end";
  // The shell prints its pid, which curl then takes over (exec): the pid
  // to stop once the bookmark is in, since the watch goes on after it.
  const std::string cmd = absl::StrCat(
      "echo $$; exec curl -sS -N --http1.1 -A ", kUserAgent, " ", curl_flags,
      " '", url,
      "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
      "&allowWatchBookmarks=true&timeoutSeconds=",
      absl::ToInt64Seconds(timeout) + 1, "'");
  const absl::Time start = absl::Now();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen: " + cmd);
  // read(), not fread(): fread waits for a full buffer, and the stream
  // idles once the bookmark is in.
  std::string pid_line;  // the shell's pid, until its newline is in
  pid_t pid = 0;
  std::string window;  // the stream's last bytes: a marker may span reads
  double bytes = 0;
  bool found = false;
  char buf[1 << 16];
  ssize_t got;
  while (!found && (got = read(fileno(p), buf, sizeof(buf))) > 0) {
    absl::string_view data(buf, static_cast<size_t>(got));
    if (pid == 0) {
      pid_line.append(data.data(), data.size());
      const size_t nl = pid_line.find('\n');
      if (nl == std::string::npos) continue;
      int v = 0;
      if (!absl::SimpleAtoi(pid_line.substr(0, nl), &v) || v <= 0) break;
      pid = v;
      data = absl::string_view(pid_line).substr(nl + 1);
    }
    bytes += static_cast<double>(data.size());
    window.append(data.data(), data.size());
    found = absl::StrContains(window, kEnd);
    if (window.size() >= kEnd.size()) {
      window.erase(0, window.size() - kEnd.size() + 1);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (pid > 0) kill(pid, SIGTERM);
  pclose(p);
  if (!found) {
    return absl::UnavailableError(
        absl::StrCat("no initial-events-end bookmark from: ", cmd));
  }
  SyncResult r;
  r.sync_seconds = seconds;
  r.objects = bytes;
  return r;
}

}  // namespace integration

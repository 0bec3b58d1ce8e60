// Kubernetes API facade benchmark: the real informer_sidecar serving its
// caches with --kube_api_listen, against the API server emulator it caches,
// both read by plain HTTP clients in this process.
//
//   bazel run -c opt //integration_tests:kube_api_bench -- --runs=5
//
// Three processes share the machine: kube_emulator (seeded with --pods Pods
// of ~6 KiB and --configmaps ConfigMaps of ~1 KiB), informer_sidecar (caches
// pods and configmaps of all namespaces, serves the facade) and this binary.
//
// Lists: each case (resource, unpaged or --page per page, every page
// followed through `continue`) is fetched from the emulator and from the
// facade alternately (the order flips every run), on one kept-alive libcurl
// handle per server; the time is from the request to the last body byte.
// Reported: medians over --runs, the ratio facade/emulator, and the bytes
// (the facade's items have no managedFields: the informer drops them).
//
// Watch fan-out: --watchers HTTP watches of namespace "bench" on ONE epoll
// loop (raw sockets, chunked framing parsed here), first all on the
// facade, then all on the emulator (alternating per run), while the
// emulator's load generator updates --objects ConfigMaps round-robin at
// each --rates rate for --duration. Every update carries its CLOCK_MONOTONIC
// write time (data.sent), so latency = receipt - write, over every MODIFIED
// event every watcher received. Reported (medians over --runs): the rate
// the load generator achieved (it writes less when its process is short of
// CPU, as when it serves the watchers itself), deliveries/s = achieved
// updates/s x watchers, "delivered" = MODIFIED events received / (updates x
// watchers), p50/p99, the CPU (utime+stime / wall) of the sidecar, the
// emulator and this client during the phase, watches the server ended, and
// runs in which some watcher had not caught up a minute after the load. A
// fence object written after the load tells when every watcher has
// everything.

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "integration_tests/emulator_process.h"
#include "integration_tests/sidecar_process.h"

ABSL_FLAG(int, pods, 10000, "Pods seeded in the emulator (~6 KiB each).");
ABSL_FLAG(int, configmaps, 50000,
          "ConfigMaps seeded in the emulator (~1 KiB each).");
ABSL_FLAG(int, page, 500, "limit of the paged list cases.");
ABSL_FLAG(int, runs, 5, "Alternated runs per case (medians are reported).");
ABSL_FLAG(int, watchers, 100, "HTTP watches per fan-out phase.");
ABSL_FLAG(std::string, rates, "500,1000,2000",
          "Comma-separated update rates (per second) for the fan-out phases "
          "(empty: skip the fan-out).");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "How long each fan-out phase writes.");
ABSL_FLAG(int, objects, 1000, "ConfigMaps the fan-out updates cycle over.");
ABSL_FLAG(int, object_bytes, 1024, "Approximate JSON size of each object.");
ABSL_FLAG(bool, quiet, true, "Hide the sidecar's and emulator's logs.");
ABSL_FLAG(std::string, sidecar_binary, "",
          "Another informer_sidecar binary to measure (A/B comparisons of "
          "builds); default: the one in the runfiles.");

namespace {

// The child processes, ended by Die (which skips their destructors).
std::vector<pid_t>& Children() {
  static auto* children = new std::vector<pid_t>();
  return *children;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kube_api_bench: %s\n", what.c_str());
  for (pid_t pid : Children()) kill(pid, SIGTERM);
  std::exit(1);
}

// The sidecar as a child whose log is read for the facade's bound port
// (--kube_api_listen=127.0.0.1:0), then drained (and echoed unless quiet)
// so it never blocks on a full pipe.
class SidecarChild {
 public:
  SidecarChild(const std::string& binary, const std::vector<std::string>& flags,
               bool quiet) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) Die("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {binary};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(),
                    environ) != 0) {
      Die("cannot start " + binary);
    }
    Children().push_back(pid_);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0], quiet] { Read(fd, quiet); });
  }
  ~SidecarChild() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    reader_.join();
  }

  pid_t pid() const { return pid_; }
  // The facade's port once logged; dies after `timeout`.
  int AwaitPort(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return port_ != 0 || eof_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (port_ == 0) Die("the sidecar never logged the facade's port");
    return port_;
  }

 private:
  void Read(int fd, bool quiet) {
    FILE* f = fdopen(fd, "r");
    char* line = nullptr;
    size_t cap = 0;
    const std::string marker = "Kubernetes API facade serving ";
    while (getline(&line, &cap, f) > 0) {
      if (!quiet) std::fputs(line, stderr);
      absl::string_view l(line);
      size_t at = l.find(marker);
      if (at == absl::string_view::npos) continue;
      size_t colon = l.rfind(':');
      int port = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(l.substr(colon + 1)),
                           &port)) {
        absl::MutexLock lock(&mu_);
        port_ = port;
      }
    }
    free(line);
    fclose(f);
    absl::MutexLock lock(&mu_);
    eof_ = true;
  }

  pid_t pid_ = 0;
  std::thread reader_;
  absl::Mutex mu_;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

// One kept-alive libcurl handle to one server.
class HttpClient {
 public:
  explicit HttpClient(int port)
      : base_(absl::StrCat("http://127.0.0.1:", port)),
        curl_(curl_easy_init()) {
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &HttpClient::OnData);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl_, CURLOPT_TCP_NODELAY, 1L);
  }
  ~HttpClient() { curl_easy_cleanup(curl_); }

  struct Result {
    long status = 0;
    int64_t bytes = 0;
    std::string head;  // the body's first bytes (list metadata)
    std::string body;  // the whole body when asked for
  };

  Result Request(const std::string& path, const char* method = "GET",
                 const std::string& post = "", bool keep_body = false) {
    result_ = Result();
    keep_body_ = keep_body;
    const std::string url = base_ + path;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT, 3600L);
    struct curl_slist* headers = nullptr;
    if (std::string(method) == "POST") {
      headers = curl_slist_append(headers, "Content-Type: application/json");
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE,
                       static_cast<long>(post.size()));
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, post.c_str());
    } else {
      curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(curl_);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) Die(url + ": " + curl_easy_strerror(rc));
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &result_.status);
    return std::move(result_);
  }

 private:
  static size_t OnData(char* data, size_t size, size_t n, void* self) {
    auto* c = static_cast<HttpClient*>(self);
    const size_t len = size * n;
    c->result_.bytes += len;
    if (c->result_.head.size() < 4096) {
      c->result_.head.append(data,
                             std::min(len, 4096 - c->result_.head.size()));
    }
    if (c->keep_body_) c->result_.body.append(data, len);
    return len;
  }

  const std::string base_;
  CURL* curl_;
  Result result_;
  bool keep_body_ = false;
};

// The string value of `"key":"..."` in `json` (first occurrence), or "".
std::string JsonString(absl::string_view json, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\":\"");
  size_t at = json.find(needle);
  if (at == absl::string_view::npos) return "";
  at += needle.size();
  return std::string(json.substr(at, json.find('"', at) - at));
}

struct ListTiming {
  double ms = 0;
  int64_t bytes = 0;
  int pages = 0;
};

// One list, following `continue` to the end when paged.
ListTiming TimeList(HttpClient& client, const std::string& path, int limit) {
  ListTiming t;
  const int64_t start = integration::MonotonicNanos();
  std::string next;
  do {
    std::string p = path;
    if (limit > 0) {
      absl::StrAppend(&p, "?limit=", limit);
      if (!next.empty()) absl::StrAppend(&p, "&continue=", next);
    }
    HttpClient::Result r = client.Request(p);
    if (r.status != 200) Die(absl::StrCat(p, ": HTTP ", r.status, " ", r.head));
    t.bytes += r.bytes;
    ++t.pages;
    next = limit > 0 ? JsonString(r.head, "continue") : "";
  } while (!next.empty());
  t.ms = (integration::MonotonicNanos() - start) / 1e6;
  return t;
}

void RunLists(int emu_port, int facade_port) {
  struct Case {
    const char* resource;
    int objects;
    int limit;
  };
  const int page = absl::GetFlag(FLAGS_page);
  const std::vector<Case> cases = {
      {"pods", absl::GetFlag(FLAGS_pods), 0},
      {"pods", absl::GetFlag(FLAGS_pods), page},
      {"configmaps", absl::GetFlag(FLAGS_configmaps), 0},
      {"configmaps", absl::GetFlag(FLAGS_configmaps), page},
  };
  HttpClient emu(emu_port), facade(facade_port);
  std::printf(
      "| list | objects | limit | pages | emulator | facade | facade / "
      "emulator | emulator MB | facade MB |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Case& c : cases) {
    const std::string path = absl::StrCat("/api/v1/", c.resource);
    std::vector<double> e_ms, f_ms;
    ListTiming e, f;
    // One untimed list from each first: connections, caches, page faults.
    TimeList(emu, path, c.limit);
    TimeList(facade, path, c.limit);
    for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
      if (run % 2 == 0) {
        e = TimeList(emu, path, c.limit);
        f = TimeList(facade, path, c.limit);
      } else {
        f = TimeList(facade, path, c.limit);
        e = TimeList(emu, path, c.limit);
      }
      e_ms.push_back(e.ms);
      f_ms.push_back(f.ms);
    }
    const double em = integration::Median(e_ms), fm = integration::Median(f_ms);
    std::printf(
        "| %s | %d | %s | %d | %.1f ms | %.1f ms | %.2f | %.1f | %.1f "
        "|\n",
        c.resource, c.objects,
        c.limit > 0 ? absl::StrCat(c.limit).c_str() : "none", f.pages, em, fm,
        em > 0 ? fm / em : 0, e.bytes / 1e6, f.bytes / 1e6);
    std::fflush(stdout);
  }
}

// One HTTP watch on a non-blocking socket: the response head, then the
// chunked body, split into newline-terminated events.
struct Watcher {
  int fd = -1;
  std::string in;  // unparsed bytes
  bool head_done = false;
  int64_t chunk_left = -1;  // -1: expecting a chunk-size line
  std::string event;        // the event being assembled
  bool fenced = false;
  bool ended = false;
};

struct FanoutResult {
  std::vector<int32_t> latencies_us;
  // Watches the server ended (the zero chunk, or the connection closed),
  // e.g. after an ERROR event for a watcher that fell out of its history.
  int ended = 0;
  int errors = 0;  // ERROR events
};

class WatchLoop {
 public:
  WatchLoop(int port, const std::string& path, int n) : ep_(epoll_create1(0)) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    watchers_.resize(n);
    for (int i = 0; i < n; ++i) {
      Watcher& w = watchers_[i];
      w.fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(w.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))) {
        Die(absl::StrCat("connect: ", strerror(errno)));
      }
      int one = 1;
      setsockopt(w.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (write(w.fd, request.data(), request.size()) !=
          static_cast<ssize_t>(request.size())) {
        Die("write");
      }
      fcntl(w.fd, F_SETFL, fcntl(w.fd, F_GETFL) | O_NONBLOCK);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = i;
      epoll_ctl(ep_, EPOLL_CTL_ADD, w.fd, &ev);
    }
  }
  ~WatchLoop() {
    for (Watcher& w : watchers_) close(w.fd);
    close(ep_);
  }

  // Reads until every watcher has seen an object named `fence`, or
  // `timeout`. Returns whether all did.
  bool RunUntilFence(const std::string& fence, absl::Duration timeout) {
    fence_ = absl::StrCat("\"name\":\"", fence, "\"");
    for (Watcher& w : watchers_) w.fenced = false;
    const absl::Time end = absl::Now() + timeout;
    std::vector<epoll_event> events(watchers_.size());
    std::vector<char> buf(1 << 16);
    while (!AllFenced()) {
      const int64_t left = absl::ToInt64Milliseconds(end - absl::Now());
      if (left <= 0) return false;
      int n = epoll_wait(ep_, events.data(), events.size(),
                         static_cast<int>(std::min<int64_t>(left, 1000)));
      for (int i = 0; i < n; ++i) {
        Watcher& w = watchers_[events[i].data.u32];
        for (;;) {
          ssize_t got = read(w.fd, buf.data(), buf.size());
          if (got > 0) {
            w.in.append(buf.data(), got);
            continue;
          }
          if (got == 0) End(w);
          break;
        }
        if (!w.ended) Parse(w, integration::MonotonicNanos());
      }
    }
    return true;
  }

  void Record(bool on) { recording_ = on; }
  FanoutResult Take() { return std::move(result_); }

 private:
  void End(Watcher& w) {
    if (w.ended) return;
    w.ended = true;
    ++result_.ended;
    epoll_ctl(ep_, EPOLL_CTL_DEL, w.fd, nullptr);
  }

  bool AllFenced() const {
    for (const Watcher& w : watchers_) {
      if (!w.fenced && !w.ended) return false;
    }
    return true;
  }

  void Parse(Watcher& w, int64_t now) {
    size_t pos = 0;
    if (!w.head_done) {
      size_t end = w.in.find("\r\n\r\n");
      if (end == std::string::npos) return;
      if (!absl::StartsWith(w.in, "HTTP/1.1 200")) {
        Die("watch answered " + w.in.substr(0, w.in.find("\r\n")));
      }
      w.head_done = true;
      pos = end + 4;
    }
    for (;;) {
      if (w.chunk_left < 0) {
        size_t eol = w.in.find("\r\n", pos);
        if (eol == std::string::npos) break;
        int64_t size = 0;
        if (!absl::SimpleHexAtoi(w.in.substr(pos, eol - pos), &size)) {
          Die("bad chunk size");
        }
        pos = eol + 2;
        if (size == 0) {  // the end of the watch
          End(w);
          break;
        }
        w.chunk_left = size;
        continue;
      }
      // Data of the chunk, then its CRLF.
      const size_t avail = w.in.size() - pos;
      if (w.chunk_left > 0) {
        const size_t take = std::min<size_t>(avail, w.chunk_left);
        Feed(w, absl::string_view(w.in).substr(pos, take), now);
        pos += take;
        w.chunk_left -= take;
        if (w.chunk_left > 0) break;
      }
      if (w.in.size() - pos < 2) break;
      pos += 2;
      w.chunk_left = -1;
    }
    w.in.erase(0, pos);
  }

  void Feed(Watcher& w, absl::string_view data, int64_t now) {
    for (;;) {
      size_t nl = data.find('\n');
      if (nl == absl::string_view::npos) {
        w.event.append(data.data(), data.size());
        return;
      }
      w.event.append(data.data(), nl);
      OnEvent(w, now);
      w.event.clear();
      data.remove_prefix(nl + 1);
    }
  }

  void OnEvent(Watcher& w, int64_t now) {
    const absl::string_view e(w.event);
    if (e.find(fence_) != absl::string_view::npos) w.fenced = true;
    if (!recording_) return;
    if (absl::StartsWith(e, "{\"type\":\"ERROR\"")) ++result_.errors;
    if (!absl::StartsWith(e, "{\"type\":\"MODIFIED\"")) return;
    int64_t sent = 0;
    if (!absl::SimpleAtoi(JsonString(e, "sent"), &sent)) return;
    result_.latencies_us.push_back(static_cast<int32_t>((now - sent) / 1000));
  }

  const int ep_;
  std::vector<Watcher> watchers_;
  std::string fence_;
  bool recording_ = false;
  FanoutResult result_;
};

void CreateFence(int emu_port, const std::string& name) {
  HttpClient emu(emu_port);
  HttpClient::Result r =
      emu.Request("/api/v1/namespaces/bench/configmaps", "POST",
                  absl::StrCat("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                               "\"metadata\":{\"name\":\"",
                               name, "\"}}"));
  if (r.status != 201) Die(absl::StrCat("fence: HTTP ", r.status));
}

struct PhaseRow {
  double updates_per_s = 0, delivered = 0, p50 = 0, p99 = 0, sidecar_cpu = 0,
         emu_cpu = 0, client_cpu = 0;
  int ended = 0, errors = 0;
  bool complete = true;  // every open watch saw the end fence in time
};

// One fan-out phase: `watchers` watches on `port` (the facade or the
// emulator) from the namespace's current resourceVersion, then a load.
PhaseRow RunPhase(int port, int emu_port, pid_t sidecar, pid_t emulator,
                  int rate, int* fence_index) {
  HttpClient server(port);
  HttpClient::Result list =
      server.Request("/api/v1/namespaces/bench/configmaps?limit=1");
  const std::string rv = JsonString(list.head, "resourceVersion");
  WatchLoop loop(port,
                 absl::StrCat("/api/v1/namespaces/bench/configmaps?watch=1&"
                              "resourceVersion=",
                              rv),
                 absl::GetFlag(FLAGS_watchers));
  // Every watch is open once each has seen an object created now.
  const std::string ready = absl::StrCat("fence-", (*fence_index)++);
  CreateFence(emu_port, ready);
  if (!loop.RunUntilFence(ready, absl::Seconds(60))) Die("watches not open");
  const double cpu0 = integration::ProcessCpuSeconds(sidecar),
               emu0 = integration::ProcessCpuSeconds(emulator),
               self0 = integration::ProcessCpuSeconds(getpid());
  const absl::Time t0 = absl::Now();
  loop.Record(true);
  std::string report;
  std::thread writer([&] {
    HttpClient emu(emu_port);
    HttpClient::Result r = emu.Request(
        absl::StrCat("/_emulator/load?namespace=bench&objects=",
                     absl::GetFlag(FLAGS_objects),
                     "&bytes=", absl::GetFlag(FLAGS_object_bytes),
                     "&rate=", rate, "&millis=",
                     absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_duration))),
        "POST");
    if (r.status != 200) Die(absl::StrCat("load: HTTP ", r.status));
    report = r.head;
    CreateFence(emu_port, absl::StrCat("fence-end-", *fence_index));
  });
  // Reads while the load runs; a watcher that has not caught up a minute
  // after the load ended is late.
  const bool all =
      loop.RunUntilFence(absl::StrCat("fence-end-", *fence_index),
                         absl::GetFlag(FLAGS_duration) + absl::Seconds(60));
  writer.join();
  ++*fence_index;
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  FanoutResult r = loop.Take();
  PhaseRow row;
  row.complete = all;
  row.ended = r.ended;
  row.errors = r.errors;
  // What the load generator achieved ({"updates":N,"seconds":S}): it
  // writes less than asked when its own process is short of CPU.
  int64_t updates = 0;
  const size_t at = report.find("\"updates\":");
  if (at == std::string::npos ||
      !absl::SimpleAtoi(report.substr(at + 10, report.find(',', at) - at - 10),
                        &updates)) {
    Die("load report without updates: " + report);
  }
  row.updates_per_s =
      updates / absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration));
  row.delivered =
      updates > 0
          ? 100.0 * r.latencies_us.size() /
                (static_cast<double>(updates) * absl::GetFlag(FLAGS_watchers))
          : 0;
  row.p50 = integration::PercentileMs(r.latencies_us, 0.5);
  row.p99 = integration::PercentileMs(r.latencies_us, 0.99);
  row.sidecar_cpu =
      100 * (integration::ProcessCpuSeconds(sidecar) - cpu0) / wall;
  row.emu_cpu = 100 * (integration::ProcessCpuSeconds(emulator) - emu0) / wall;
  row.client_cpu =
      100 * (integration::ProcessCpuSeconds(getpid()) - self0) / wall;
  return row;
}

void RunFanout(int emu_port, int facade_port, pid_t sidecar, pid_t emulator) {
  std::vector<int> rates;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_rates), ',', absl::SkipEmpty())) {
    int r = 0;
    if (!absl::SimpleAtoi(s, &r) || r <= 0) Die("bad --rates");
    rates.push_back(r);
  }
  if (rates.empty()) return;
  // The objects exist before any watch opens: only updates are measured.
  HttpClient emu(emu_port);
  emu.Request(absl::StrCat("/_emulator/load?namespace=bench&millis=0&objects=",
                           absl::GetFlag(FLAGS_objects),
                           "&bytes=", absl::GetFlag(FLAGS_object_bytes)),
              "POST");
  std::printf(
      "\n| served by | updates/s asked (achieved) | watchers | deliveries/s "
      "| delivered | p50 | p99 "
      "| sidecar CPU | emulator CPU | client CPU | watches ended (ERROR "
      "events) / late runs |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  int fence = 0;
  for (int rate : rates) {
    std::map<bool, std::vector<PhaseRow>> rows;  // true: facade
    for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
      for (int k = 0; k < 2; ++k) {
        const bool facade = (k == 0) == (run % 2 == 0);
        rows[facade].push_back(RunPhase(facade ? facade_port : emu_port,
                                        emu_port, sidecar, emulator, rate,
                                        &fence));
      }
    }
    for (bool facade : {true, false}) {
      auto med = [&](double PhaseRow::*field) {
        std::vector<double> v;
        for (const PhaseRow& r : rows[facade]) v.push_back(r.*field);
        return integration::Median(v);
      };
      int ended = 0, errors = 0, late = 0;
      for (const PhaseRow& r : rows[facade]) {
        ended += r.ended;
        errors += r.errors;
        late += r.complete ? 0 : 1;
      }
      std::printf(
          "| %s | %d (%.0f) | %d | %.0f | %.1f%% | %.2f ms | %.2f ms | %.0f%% "
          "| %.0f%% | %.0f%% | %d (%d) / %d of %zu |\n",
          facade ? "facade" : "emulator", rate, med(&PhaseRow::updates_per_s),
          absl::GetFlag(FLAGS_watchers),
          med(&PhaseRow::updates_per_s) * absl::GetFlag(FLAGS_watchers),
          med(&PhaseRow::delivered), med(&PhaseRow::p50), med(&PhaseRow::p99),
          med(&PhaseRow::sidecar_cpu), med(&PhaseRow::emu_cpu),
          med(&PhaseRow::client_cpu), ended, errors, late, rows[facade].size());
      std::fflush(stdout);
    }
  }
}

int Main(const char* argv0) {
  absl::StatusOr<std::string> emu_bin =
      integration::FindRunfile("emulator/kube_emulator", argv0);
  absl::StatusOr<std::string> sidecar_bin =
      integration::FindRunfile("server/informer_sidecar", argv0);
  if (!emu_bin.ok() || !sidecar_bin.ok()) Die("binaries not found");
  if (!absl::GetFlag(FLAGS_sidecar_binary).empty()) {
    sidecar_bin = absl::GetFlag(FLAGS_sidecar_binary);
  }
  char dir[] = "/tmp/kube_api_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) Die("mkdtemp");
  curl_global_init(CURL_GLOBAL_ALL);
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  auto emu = integration::EmulatorProcess::Start(
      *emu_bin,
      {absl::StrCat("--seed_pods=", absl::GetFlag(FLAGS_pods)),
       "--history=100000"},
      quiet);
  if (!emu.ok()) Die(emu.status().ToString());
  Children().push_back((*emu)->pid());
  const int emu_port = (*emu)->port();
  {
    HttpClient seed(emu_port);
    HttpClient::Result r = seed.Request(
        absl::StrCat("/_emulator/load?namespace=cms&millis=0&objects=",
                     absl::GetFlag(FLAGS_configmaps), "&bytes=1024"),
        "POST");
    if (r.status != 200)
      Die(absl::StrCat("seeding: HTTP ", r.status, " ", r.head));
  }
  auto kubeconfig = integration::WriteKubeconfig(dir, (*emu)->url());
  if (!kubeconfig.ok()) Die(kubeconfig.status().ToString());
  SidecarChild sidecar(
      *sidecar_bin,
      {"--kubeconfig=" + *kubeconfig, "--resources=pods,configmaps",
       "--grpc_listen=127.0.0.1:0", "--http_listen=", "--print_events=false",
       "--kube_api_listen=127.0.0.1:0"},
      quiet);
  const int facade_port = sidecar.AwaitPort(absl::Minutes(5));
  // The facade's first request of a resource waits for its sync (up to
  // 60 s, then 503): repeat until both answer.
  HttpClient probe(facade_port);
  for (const char* r : {"pods", "configmaps"}) {
    for (int i = 0;; ++i) {
      HttpClient::Result res =
          probe.Request(absl::StrCat("/api/v1/", r, "?limit=1"));
      if (res.status == 200) break;
      if (res.status != 503 || i > 10) {
        Die(absl::StrCat("facade ", r, ": HTTP ", res.status, " ", res.head));
      }
    }
  }
  std::printf(
      "kube_api_bench: %d pods, %d configmaps, %d runs; %s\n\n",
      absl::GetFlag(FLAGS_pods), absl::GetFlag(FLAGS_configmaps),
      absl::GetFlag(FLAGS_runs),
      absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone())
          .c_str());
  RunLists(emu_port, facade_port);
  RunFanout(emu_port, facade_port, sidecar.pid(), (*emu)->pid());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  absl::ParseCommandLine(argc, argv);
  return Main(argv[0]);
}

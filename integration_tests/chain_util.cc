#include "integration_tests/chain_util.h"

#include <httplib.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "rapidjson/document.h"

namespace integration {
namespace {

namespace v1 = ::informer::v1;

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::StatusOr<std::string> HttpGetBody(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  httplib::Result r = cli.Get(path.c_str());
  if (!r) {
    return absl::UnavailableError(
        absl::StrCat("GET ", path, " on port ", port, ": no answer"));
  }
  if (r->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET ", path, ": HTTP ", r->status, ": ", r->body));
  }
  return r->body;
}

// "namespace/name" (or "name") and metadata.resourceVersion of an object.
bool KeyAndVersion(const std::string& json, std::string* key, std::string* rv) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("metadata")) {
    return false;
  }
  const auto& md = doc["metadata"];
  if (!md.IsObject() || !md.HasMember("name")) return false;
  const std::string ns =
      md.HasMember("namespace") ? md["namespace"].GetString() : "";
  *key = absl::StrCat(ns, ns.empty() ? "" : "/", md["name"].GetString());
  *rv =
      md.HasMember("resourceVersion") ? md["resourceVersion"].GetString() : "";
  return true;
}

// How `got` differs from `want`, briefly.
std::string Diff(const ObjectVersions& want, const ObjectVersions& got) {
  int missing = 0, extra = 0, stale = 0;
  std::string example;
  for (const auto& [key, rv] : want) {
    auto it = got.find(key);
    if (it == got.end()) {
      if (++missing == 1) absl::StrAppend(&example, " missing ", key);
    } else if (it->second != rv) {
      if (++stale == 1) {
        absl::StrAppend(&example, " ", key, " at ", it->second, " not ", rv);
      }
    }
  }
  for (const auto& [key, rv] : got) {
    if (want.count(key) == 0 && ++extra == 1) {
      absl::StrAppend(&example, " extra ", key);
    }
  }
  return absl::StrCat(missing, " missing, ", extra, " extra, ", stale,
                      " at another resourceVersion (want ", want.size(),
                      " objects);", example);
}

std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

}  // namespace

absl::StatusOr<std::string> WaitForFile(
    const std::string& path,
    const std::function<bool(const std::string& contents)>& ready,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) return absl::InternalError("inotify_init1 failed");
  // Watch first, then read: a change between the two still wakes us.
  if (inotify_add_watch(fd, dir.c_str(),
                        IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE) <
      0) {
    close(fd);
    return absl::InternalError(absl::StrCat("inotify_add_watch ", dir));
  }
  std::string contents;
  while (true) {
    contents = ReadWholeFile(path);
    if (ready(contents)) break;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat(
          path, " not as expected within ", absl::FormatDuration(timeout),
          "; it holds: ", contents.substr(0, 2000)));
    }
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
  }
  close(fd);
  return contents;
}

std::map<std::string, int64_t> ParseKeyValues(const std::string& contents) {
  std::map<std::string, int64_t> out;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, '=');
    int64_t v = 0;
    if (absl::SimpleAtoi(kv.second, &v)) out[kv.first] = v;
  }
  return out;
}

absl::StatusOr<EmulatorRequests> GetEmulatorRequests(int port) {
  absl::StatusOr<std::string> body = HttpGetBody(port, "/_emulator/requests");
  if (!body.ok()) return body.status();
  rapidjson::Document doc;
  doc.Parse(body->data(), body->size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("list")) {
    return absl::DataLossError(
        absl::StrCat("bad /_emulator/requests: ", *body));
  }
  EmulatorRequests r;
  r.list = doc["list"].GetInt64();
  r.watch = doc["watch"].GetInt64();
  r.other = doc["other"].GetInt64();
  return r;
}

absl::StatusOr<ObjectVersions> GetEmulatorState(int port,
                                                const std::string& resource) {
  absl::StatusOr<std::string> body =
      HttpGetBody(port, absl::StrCat("/_emulator/state?resource=", resource));
  if (!body.ok()) return body.status();
  rapidjson::Document doc;
  doc.Parse(body->data(), body->size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("objects")) {
    return absl::DataLossError(absl::StrCat("bad /_emulator/state: ", *body));
  }
  ObjectVersions out;
  for (const auto& o : doc["objects"].GetArray()) {
    out[o["key"].GetString()] = o["resourceVersion"].GetString();
  }
  return out;
}

absl::StatusOr<double> GetMetricSum(int http_port, const std::string& name) {
  absl::StatusOr<std::string> body = HttpGetBody(http_port, "/metrics");
  if (!body.ok()) return body.status();
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    if (!absl::ConsumePrefix(&line, name)) continue;
    // `name` may end inside a label set ("family{verb=\"get\"").
    if (line.empty() || !absl::StrContains("{ ,}", line[0])) continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space != absl::string_view::npos &&
        absl::SimpleAtod(line.substr(space + 1), &v)) {
      sum += v;
    }
  }
  return sum;
}

absl::StatusOr<ObjectVersions> ListVersions(
    const std::shared_ptr<grpc::Channel>& channel,
    const std::string& resource) {
  std::unique_ptr<v1::Informer::Stub> stub = v1::Informer::NewStub(channel);
  ObjectVersions out;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(30)));
    v1::ListRequest req;
    req.set_resource(resource);
    req.set_continue_token(token);
    req.set_limit(1000);
    v1::ListResponse resp;
    grpc::Status st = stub->List(&ctx, req, &resp);
    if (!st.ok()) {
      return absl::UnavailableError(
          absl::StrCat("List ", resource, ": ", st.error_message()));
    }
    for (const v1::Object& o : resp.objects()) {
      std::string key, rv;
      if (!KeyAndVersion(o.json(), &key, &rv)) {
        return absl::DataLossError(absl::StrCat("bad object: ", o.json()));
      }
      out[key] = rv;
    }
    token = resp.continue_token();
  } while (!token.empty());
  return out;
}

absl::Status WaitForConvergence(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& resource,
                                const ObjectVersions& want,
                                absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<v1::Informer::Stub> stub = v1::Informer::NewStub(channel);
  ObjectVersions view;
  std::string last_error;
  // A stream that ends (the sidecar ended it, or its upstream went away
  // and it reset) is opened again until the deadline.
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(deadline));
    v1::WatchRequest req;
    req.set_resource(resource);
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader =
        stub->Watch(&ctx, req);
    view.clear();
    v1::WatchResponse resp;
    while (reader->Read(&resp)) {
      for (const v1::Event& e : resp.events()) {
        if (e.type() == v1::EVENT_TYPE_RESET) view.clear();
        if (!e.has_object()) continue;
        std::string key, rv;
        if (!KeyAndVersion(e.object().json(), &key, &rv)) {
          return absl::DataLossError(
              absl::StrCat("bad object: ", e.object().json()));
        }
        if (e.type() == v1::EVENT_TYPE_DELETED) {
          view.erase(key);
        } else {
          view[key] = e.resource_version().empty() ? rv : e.resource_version();
        }
      }
      if (view != want) continue;
      absl::StatusOr<ObjectVersions> listed = ListVersions(channel, resource);
      if (!listed.ok()) return listed.status();
      if (*listed == want) {
        ctx.TryCancel();
        reader->Finish();
        return absl::OkStatus();
      }
      last_error = absl::StrCat("the Watch matched but List differs: ",
                                Diff(want, *listed));
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) last_error = st.error_message();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      resource, " did not converge within ", absl::FormatDuration(timeout),
      ": ", Diff(want, view), " ", last_error));
}

PortedSidecar::~PortedSidecar() {
  process.reset();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

absl::StatusOr<PortedSidecar> StartPortedSidecar(const std::string& binary,
                                                 std::vector<std::string> flags,
                                                 const std::string& stderr_file,
                                                 bool quiet,
                                                 absl::Duration timeout,
                                                 std::vector<std::string> env) {
  char dir[] = "/tmp/chain_e2e_XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
  PortedSidecar out;
  out.dir = dir;
  out.ports_file = absl::StrCat(dir, "/ports");
  bool facade = false;
  for (const std::string& f : flags) {
    facade = facade || absl::StartsWith(f, "--kube_api_listen=");
  }
  flags.push_back("--ports_file=" + out.ports_file);
  flags.push_back("--print_events=false");
  SidecarProcess::Options options;
  options.flags = std::move(flags);
  options.quiet = quiet;
  options.stderr_file = stderr_file;
  options.start_timeout = timeout;
  options.env = std::move(env);
  absl::StatusOr<std::unique_ptr<SidecarProcess>> process =
      SidecarProcess::Start(binary, std::move(options));
  if (!process.ok()) return process.status();
  out.process = *std::move(process);
  absl::StatusOr<std::string> ports = WaitForFile(
      out.ports_file,
      [facade](const std::string& c) {
        return absl::StrContains(c, "http=") &&
               (!facade || absl::StrContains(c, "kube_api="));
      },
      timeout);
  if (!ports.ok()) return ports.status();
  out.ports = ParseKeyValues(*ports);
  return out;
}

}  // namespace integration

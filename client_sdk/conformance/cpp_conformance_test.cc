// The C++ SDK through every scenario of the conformance suite (README.md
// here): for each scenarios/*.json, the scripted server plays it, a
// RemoteInformer or a WorkQueueWorker (RunWithReconnect) is driven against
// it as the scenario's "client" says, and at every checkpoint what the SDK
// shows (handler calls, mirror, resume token, errors and recoveries
// reported, the worker's `process` outcomes) is sent to the server until it
// matches, or the test fails after the deadline with the last difference.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/remote_informer.h"
#include "client_sdk/cpp/workqueue_worker.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace client_sdk {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(20);

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/informer_sidecar/",
                      path);
}

// The scripted server as a child process, talked to in JSON lines.
class ServerProcess {
 public:
  ~ServerProcess() { Close(); }

  bool Start(const std::string& binary, const std::string& scenario) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execl(binary.c_str(), binary.c_str(), scenario.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
    return true;
  }

  // The next line, or nullopt when the child exited or after kDeadline * 3.
  std::optional<std::string> ReadLine() {
    const absl::Time deadline = absl::Now() + kDeadline * 3;
    while (true) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  void WriteLine(const std::string& line) {
    std::string data = line + "\n";
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = write(in_, data.data() + off, data.size() - off);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  // Closes its stdin (it exits then) and reaps it.
  void Close() {
    if (in_ >= 0) close(in_);
    in_ = -1;
    if (pid_ > 0) {
      int status = 0;
      const absl::Time deadline = absl::Now() + kDeadline;
      while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (absl::Now() > deadline) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
          break;
        }
        absl::SleepFor(absl::Milliseconds(10));
      }
      pid_ = -1;
    }
    if (out_ >= 0) close(out_);
    out_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::string buf_;
};

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteStrings(Writer* w, const char* name,
                  const std::vector<std::string>& v) {
  w->Key(name);
  w->StartArray();
  for (const std::string& s : v) w->String(s.c_str());
  w->EndArray();
}

void WriteInts(Writer* w, const char* name, const std::vector<int64_t>& v) {
  w->Key(name);
  w->StartArray();
  for (int64_t n : v) w->Int64(n);
  w->EndArray();
}

// Errors and recoveries as the scenarios name them.
class ErrorLog : public StreamErrorHandler {
 public:
  void OnError(const StreamError& e) override {
    absl::MutexLock lock(&mu_);
    errors_.push_back(absl::StrCat(absl::StatusCodeToString(e.status.code()),
                                   e.final ? " final" : ""));
  }
  void OnRecovered(int64_t failures) override {
    absl::MutexLock lock(&mu_);
    recoveries_.push_back(failures);
  }
  void Write(Writer* w) {
    absl::MutexLock lock(&mu_);
    WriteStrings(w, "errors", errors_);
    WriteInts(w, "recoveries", recoveries_);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> recoveries_ ABSL_GUARDED_BY(mu_);
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string Observe() = 0;
  virtual void Release(const std::string& key, uint64_t after_expired) = 0;
};

class InformerDriver final : public Driver,
                             public informer::ResourceEventHandler {
 public:
  InformerDriver(const rapidjson::Value& client, const std::string& target) {
    RemoteInformer::Options options;
    options.resource = client["resource"].GetString();
    if (client.HasMember("namespace")) {
      options.namespace_ = client["namespace"].GetString();
    }
    if (client.HasMember("label_selector")) {
      options.label_selector = client["label_selector"].GetString();
    }
    options.initial_backoff =
        absl::Milliseconds(client["initial_backoff_ms"].GetInt());
    options.max_backoff = absl::Milliseconds(client["max_backoff_ms"].GetInt());
    options.error_handler = &errors_;
    informer_ = std::make_unique<RemoteInformer>(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()),
        options);
    informer_->AddEventHandler(this);
    EXPECT_TRUE(informer_->Start().ok());
  }
  ~InformerDriver() override { informer_->Stop(); }

  void OnAdd(const informer::ObjectPtr& obj, bool initial) override {
    Record(absl::StrCat("add ", obj->Key(), " ", obj->resource_version(),
                        initial ? " initial" : ""));
  }
  void OnUpdate(const informer::ObjectPtr& o,
                const informer::ObjectPtr& n) override {
    Record(absl::StrCat("update ", n->Key(), " ", o->resource_version(), " ",
                        n->resource_version()));
  }
  void OnDelete(const informer::ObjectPtr& obj, bool unknown) override {
    Record(absl::StrCat("delete ", obj->Key(), " ", obj->resource_version(),
                        unknown ? " tombstone" : ""));
  }

  std::string Observe() override {
    rapidjson::StringBuffer buf;
    Writer w(buf);
    w.StartObject();
    {
      absl::MutexLock lock(&mu_);
      WriteStrings(&w, "calls", calls_);
    }
    errors_.Write(&w);
    w.Key("mirror");
    w.StartObject();
    std::map<std::string, std::string> mirror;
    for (const informer::ObjectPtr& o : informer_->List()) {
      mirror[o->Key()] = std::string(o->resource_version());
    }
    for (const auto& [key, rv] : mirror) {
      w.Key(key.c_str());
      w.String(rv.c_str());
    }
    w.EndObject();
    w.Key("resume_token");
    w.String(informer_->resume_token().c_str());
    w.Key("synced");
    w.Bool(informer_->HasSynced());
    w.Key("stale");
    w.Bool(informer_->IsStale());
    w.EndObject();
    return buf.GetString();
  }

  void Release(const std::string& key, uint64_t) override {
    ADD_FAILURE() << "release " << key << " for an informer";
  }

 private:
  void Record(std::string s) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
  }

  ErrorLog errors_;
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RemoteInformer> informer_;
};

class WorkerDriver final : public Driver {
 public:
  WorkerDriver(const rapidjson::Value& client, const std::string& target) {
    if (client.HasMember("fail")) {
      for (const auto& m : client["fail"].GetObject()) {
        fail_[m.name.GetString()] = m.value.GetInt();
      }
    }
    if (client.HasMember("hold")) {
      for (const auto& k : client["hold"].GetArray()) {
        hold_.insert(k.GetString());
      }
    }
    worker_ = std::make_unique<WorkQueueWorker>(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()),
        client["queue"].GetString(),
        client.HasMember("name") ? client["name"].GetString() : "");
    WorkQueueWorker::ReconnectOptions options;
    options.initial_backoff =
        absl::Milliseconds(client["initial_backoff_ms"].GetInt());
    options.max_backoff = absl::Milliseconds(client["max_backoff_ms"].GetInt());
    options.error_handler = &errors_;
    thread_ = std::thread([this, options] {
      absl::Status st = worker_->RunWithReconnect(
          [this](const informer::v1::Lease& l) { return Process(l.key()); },
          options);
      EXPECT_TRUE(st.ok()) << st;
    });
  }
  ~WorkerDriver() override {
    worker_->Stop();
    thread_.join();
  }

  std::string Observe() override {
    rapidjson::StringBuffer buf;
    Writer w(buf);
    w.StartObject();
    errors_.Write(&w);
    {
      absl::MutexLock lock(&mu_);
      WriteStrings(&w, "started", started_);
      WriteStrings(&w, "processed", processed_);
    }
    w.EndObject();
    return buf.GetString();
  }

  void Release(const std::string& key, uint64_t after_expired) override {
    if (after_expired != 0) {
      const absl::Time deadline = absl::Now() + kDeadline;
      while (!worker_->IsExpired(after_expired)) {
        ASSERT_LT(absl::Now(), deadline)
            << "lease " << after_expired << " never known as expired";
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    absl::MutexLock lock(&mu_);
    released_.insert(key);
  }

 private:
  absl::Status Process(const std::string& key) {
    absl::MutexLock lock(&mu_);
    const int attempt = ++attempts_[key];
    started_.push_back(key);
    if (hold_.count(key) > 0 && attempt == 1) {
      auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return released_.count(key) > 0;
      };
      mu_.AwaitWithTimeout(absl::Condition(&released), kDeadline);
    }
    const auto it = fail_.find(key);
    if (it != fail_.end() && attempt <= it->second) {
      processed_.push_back(key + " FAIL");
      return absl::InternalError("scripted failure of " + key);
    }
    processed_.push_back(key + " FORGET");
    return absl::OkStatus();
  }

  std::map<std::string, int> fail_;
  std::set<std::string> hold_;
  ErrorLog errors_;
  absl::Mutex mu_;
  std::map<std::string, int> attempts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> released_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> processed_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<WorkQueueWorker> worker_;
  std::thread thread_;
};

std::string Str(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  v.Accept(w);
  return buf.GetString();
}

// Runs one scenario; every failure is a gtest failure.
void RunScenario(const std::string& path) {
  ServerProcess server;
  ASSERT_TRUE(
      server.Start(Runfile("client_sdk/conformance/scripted_server"), path));
  std::optional<std::string> line = server.ReadLine();
  ASSERT_TRUE(line.has_value()) << "the scripted server said nothing";
  rapidjson::Document hello;
  hello.Parse(line->c_str());
  ASSERT_TRUE(hello.IsObject() && hello.HasMember("listening")) << *line;
  const std::string target =
      absl::StrCat("127.0.0.1:", hello["listening"].GetInt());
  const rapidjson::Value& client = hello["client"];
  std::unique_ptr<Driver> driver;
  if (std::string(client["kind"].GetString()) == "informer") {
    driver = std::make_unique<InformerDriver>(client, target);
  } else {
    driver = std::make_unique<WorkerDriver>(client, target);
  }
  while (true) {
    line = server.ReadLine();
    ASSERT_TRUE(line.has_value()) << "the scripted server exited";
    rapidjson::Document msg;
    msg.Parse(line->c_str());
    ASSERT_TRUE(msg.IsObject()) << *line;
    if (msg.HasMember("done")) {
      EXPECT_TRUE(msg["ok"].GetBool()) << "scenario failed: " << *line;
      break;
    }
    if (msg.HasMember("release")) {
      uint64_t after = 0;
      if (msg["after_expired"].IsUint64())
        after = msg["after_expired"].GetUint64();
      driver->Release(msg["release"].GetString(), after);
      continue;
    }
    const std::string name = Str(msg["checkpoint"]);
    const absl::Time deadline = absl::Now() + kDeadline;
    while (true) {
      server.WriteLine(absl::StrCat("{\"observe\":", driver->Observe(), "}"));
      line = server.ReadLine();
      ASSERT_TRUE(line.has_value()) << "no answer at checkpoint " << name;
      rapidjson::Document reply;
      reply.Parse(line->c_str());
      ASSERT_TRUE(reply.IsObject()) << *line;
      if (reply.HasMember("match") && reply["match"].GetBool()) break;
      ASSERT_FALSE(reply.HasMember("done")) << "scenario failed: " << *line;
      ASSERT_LT(absl::Now(), deadline)
          << "checkpoint " << name << ": " << reply["diff"].GetString();
      // Polls again after a short while (the SDK works on its threads).
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  driver.reset();  // stops the SDK before the server goes
  server.Close();
}

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           Runfile("client_sdk/conformance/scenarios"))) {
    if (entry.path().extension() == ".json") {
      files.push_back(entry.path().stem().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceTest, Scenario) {
  RunScenario(Runfile(
      absl::StrCat("client_sdk/conformance/scenarios/", GetParam(), ".json")));
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ConformanceTest,
                         ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ConformanceSuiteTest, EveryScenarioIsHere) {
  EXPECT_GE(ScenarioFiles().size(), 16u);
}

}  // namespace
}  // namespace client_sdk

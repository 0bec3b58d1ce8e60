// fanout_floor_server: gRPC's own floor for the Watch fan-out benchmark
// (fanout_bench --backends=...,floor).
//
// A bare gRPC callback server that serves informer.v1.Informer/Watch with
// the sidecar's wire messages and write discipline, and nothing else: no
// API server, no informer, no filter, no coalescing, no resume. It generates
// ConfigMap MODIFIED events itself, each serialized ONCE into a refcounted
// slice (a whole WatchResponse.events field) that every stream's message
// references, and writes them to every open stream with one write in flight
// per stream, each write carrying what is queued (up to
// --max_message_bytes), under the same batching rule as the sidecar's
// defaults (--batch_window, engaged above --batch_min_rate events queued
// per second in total). Whatever the sidecar spends per delivery above this
// is its own.
//
// Control (HTTP on 127.0.0.1, the port printed on stdout as the emulator
// does, so integration::EmulatorProcess starts it), mirroring the
// emulator's endpoints the benchmark uses:
//   POST /_emulator/load?namespace=&objects=&bytes=&rate=&millis=
//       RATE updates/s of ~BYTES ConfigMaps (round-robin over OBJECTS), each
//       stamped with data.sent = its CLOCK_MONOTONIC ns when generated;
//       blocks for MILLIS, then answers {"updates":N,"seconds":S}.
//   POST /api/v1/namespaces/NS/configmaps   body: an object's JSON
//       sends it to every stream as ADDED (the benchmark's fence).
// A Watch gets INITIAL_STATE_DONE at once (the initial state is empty),
// then every event generated while it is open.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration_tests/bench_stats.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "server/informer_service/watch/resume_token.h"
#include "server/ops/malloc_tuning.h"

ABSL_FLAG(int, port, 0, "HTTP control port on 127.0.0.1 (0: any).");
ABSL_FLAG(std::string, grpc_listen, "", "gRPC address, e.g. unix:/tmp/x.sock.");
ABSL_FLAG(absl::Duration, batch_window, absl::Milliseconds(5),
          "As the sidecar's --watch_batch_window (0: write at once).");
ABSL_FLAG(int, batch_min_rate, 20000,
          "As the sidecar's --watch_batch_min_rate: events queued per second "
          "in total above which the window applies.");
ABSL_FLAG(int, max_message_bytes, 1 << 20,
          "As the sidecar's --watch_max_message_bytes.");

namespace {

namespace v1 = ::informer::v1;

// One event as a serialized one-event WatchResponse: a whole `events`
// field, so concatenating such slices yields a valid WatchResponse.
grpc::Slice EncodeEvent(v1::EventType type, const std::string& json,
                        const std::string& rv, const std::string& token) {
  v1::WatchResponse response;
  v1::Event* e = response.add_events();
  e->set_type(type);
  if (!json.empty()) e->mutable_object()->set_json(json);
  e->set_resource_version(rv);
  e->set_resume_token(token);
  grpc::Slice slice(response.ByteSizeLong());
  response.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return slice;
}

// The JSON the sidecar sends for the emulator's load objects: the same
// members in the same order, padded as the emulator pads them (to the
// requested size before the server adds uid, resourceVersion and
// creationTimestamp).
std::string ConfigMapJson(const std::string& ns, int index, int64_t rv,
                          int64_t sent, int object_bytes) {
  const std::string labels = absl::StrFormat(
      "\"labels\":{\"load\":\"true\",\"group\":\"g-%05d\"}", index / 10);
  const std::string data = absl::StrFormat("\"data\":{\"sent\":\"%d\"", sent);
  std::string json = absl::StrFormat(
      "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
      "\"load-%05d\",\"namespace\":\"%s\",",
      index, ns);
  // The emulator's padding: what it writes, before the server's fields.
  const size_t written = json.size() + labels.size() + 2 + data.size() +
                         std::string(",\"payload\":\"").size();
  const size_t target = static_cast<size_t>(std::max(object_bytes, 0));
  const size_t pad =
      target > written + 4 + 150 ? target - written - 4 - 150 : 0;
  absl::StrAppendFormat(
      &json,
      "\"uid\":\"%08x-0000-4000-8000-000000000000\",\"resourceVersion\":\"%d\","
      "\"creationTimestamp\":\"2026-12-01T00:00:00Z\",%s},%s,\"payload\":\"",
      index, rv, labels, data);
  json.append(pad, 'x');
  json += "\"}}";
  return json;
}

class Hub;

// One Watch call: a queue of shared event slices and one write in flight.
// Lock order: Hub::mu_ -> FloorStream::mu_ -> Hub::flush_mu_.
class FloorStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FloorStream(Hub* hub);
  // Queues `event` and writes if the batching rule allows.
  void Push(const grpc::Slice& event, bool batching);
  // The flusher: the window this stream waited for ended.
  void Flush();
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void MaybeWriteLocked(bool force, bool batching)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The client went away: finish now, or after the write in flight.
  void FailLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Hub* const hub_;
  absl::Mutex mu_;
  std::vector<grpc::Slice> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool deferred_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_write_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

// The open streams, the event generator and the batching flusher.
class Hub {
 public:
  Hub(absl::Duration window, int min_rate, size_t max_message_bytes)
      : window_ns_(absl::ToInt64Nanoseconds(window)),
        min_rate_(min_rate),
        max_message_bytes_(max_message_bytes),
        tokens_(absl::StrCat(absl::Hex(integration::MonotonicNanos())), 1) {
    if (window_ns_ > 0) flusher_ = std::thread([this] { FlushLoop(); });
  }
  ~Hub() {
    {
      absl::MutexLock lock(&flush_mu_);
      stop_ = true;
    }
    if (flusher_.joinable()) flusher_.join();
  }

  int64_t window_ns() const { return window_ns_; }
  // The verdict of the last rate period (read by streams under their lock).
  bool batching() const { return busy_.load(std::memory_order_relaxed); }
  size_t max_message_bytes() const { return max_message_bytes_; }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Open() {
    auto* s = new FloorStream(this);
    absl::MutexLock lock(&mu_);
    streams_.insert(s);
    s->Push(EncodeEvent(v1::EVENT_TYPE_INITIAL_STATE_DONE, "",
                        absl::StrCat(rv_), tokens_.Encode(seq_)),
            false);
    return s;
  }
  void Remove(FloorStream* s) {
    absl::MutexLock lock(&mu_);
    streams_.erase(s);
    absl::MutexLock flush_lock(&flush_mu_);
    deferred_.erase(s);
  }
  // A stream asks to be flushed at `due_ns` (called under its lock).
  void Defer(FloorStream* s, int64_t due_ns) {
    absl::MutexLock lock(&flush_mu_);
    deferred_.insert(s);
    flush_due_ns_ = std::min(flush_due_ns_, due_ns);
  }

  // One event to every stream; returns nothing (the generator's work).
  void Publish(v1::EventType type, const std::string& json) {
    absl::MutexLock lock(&mu_);
    const int64_t rv = rv_;
    const grpc::Slice event =
        EncodeEvent(type, json, absl::StrCat(rv), tokens_.Encode(++seq_));
    const bool batching = BatchingLocked(streams_.size());
    for (FloorStream* s : streams_) s->Push(event, batching);
  }

  // RATE updates/s over `objects` objects for `duration`; paced as the
  // emulator's load generator (a 1 ms tick, catching up on time).
  int64_t RunLoad(const std::string& ns, int objects, int bytes, int rate,
                  absl::Duration duration) {
    const int64_t start = integration::MonotonicNanos();
    const int64_t end = start + absl::ToInt64Nanoseconds(duration);
    int64_t updates = 0;
    while (true) {
      const int64_t now = std::min(integration::MonotonicNanos(), end);
      const int64_t due = static_cast<int64_t>(
          static_cast<double>(rate) * static_cast<double>(now - start) / 1e9 +
          1e-9);
      while (updates < due) {
        const int index = static_cast<int>(updates % objects);
        int64_t rv;
        {
          absl::MutexLock lock(&mu_);
          rv = ++rv_;
        }
        Publish(
            v1::EVENT_TYPE_MODIFIED,
            ConfigMapJson(ns, index, rv, integration::MonotonicNanos(), bytes));
        ++updates;
      }
      if (now >= end) break;
      absl::SleepFor(absl::Nanoseconds(
          std::min<int64_t>(1000000, std::max<int64_t>(end - now, 0))));
    }
    return updates;
  }

 private:
  // The sidecar's rule: the window applies while the events queued for
  // streams, counted over 100 ms periods, reach min_rate per second.
  bool BatchingLocked(size_t streams) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (window_ns_ <= 0) return false;
    if (min_rate_ <= 0) return true;
    queued_ += streams;
    const int64_t now = integration::MonotonicNanos();
    constexpr int64_t kPeriodNs = 100 * 1000 * 1000;
    if (now - rate_since_ns_ >= kPeriodNs) {
      const double rate = static_cast<double>(queued_) * 1e9 /
                          static_cast<double>(now - rate_since_ns_);
      busy_.store(rate >= min_rate_, std::memory_order_relaxed);
      queued_ = 0;
      rate_since_ns_ = now;
    }
    return busy_.load(std::memory_order_relaxed);
  }

  void FlushLoop() {
    std::vector<FloorStream*> due;
    while (true) {
      {
        absl::MutexLock lock(&flush_mu_);
        while (true) {
          if (stop_) return;
          const int64_t at = flush_due_ns_;
          const int64_t now = integration::MonotonicNanos();
          if (now >= at) break;
          auto changed = [this, at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_) {
            return stop_ || flush_due_ns_ < at;
          };
          flush_mu_.AwaitWithTimeout(absl::Condition(&changed),
                                     at == INT64_MAX
                                         ? absl::InfiniteDuration()
                                         : absl::Nanoseconds(at - now));
        }
        flush_due_ns_ = INT64_MAX;
        due.assign(deferred_.begin(), deferred_.end());
        deferred_.clear();
      }
      // Under mu_: a stream in streams_ is alive (Remove takes mu_).
      absl::MutexLock lock(&mu_);
      for (FloorStream* s : due) {
        if (streams_.contains(s)) s->Flush();
      }
      due.clear();
    }
  }

  const int64_t window_ns_;
  const int min_rate_;
  const size_t max_message_bytes_;
  const server::ResumeTokenEncoder tokens_;
  std::thread flusher_;

  absl::Mutex mu_;
  absl::flat_hash_set<FloorStream*> streams_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1000;
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rate_since_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> busy_{false};

  absl::Mutex flush_mu_;
  absl::flat_hash_set<FloorStream*> deferred_ ABSL_GUARDED_BY(flush_mu_);
  int64_t flush_due_ns_ ABSL_GUARDED_BY(flush_mu_) = INT64_MAX;
  bool stop_ ABSL_GUARDED_BY(flush_mu_) = false;
};

FloorStream::FloorStream(Hub* hub) : hub_(hub) {}

void FloorStream::Push(const grpc::Slice& event, bool batching) {
  absl::MutexLock lock(&mu_);
  if (failed_) return;
  pending_.push_back(event);  // a reference, not a copy
  MaybeWriteLocked(/*force=*/false, batching);
}

void FloorStream::Flush() {
  absl::MutexLock lock(&mu_);
  deferred_ = false;
  MaybeWriteLocked(/*force=*/true, true);
}

void FloorStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok || failed_) {
    FailLocked();
    return;
  }
  MaybeWriteLocked(/*force=*/false, hub_->batching());
}

void FloorStream::OnCancel() {
  absl::MutexLock lock(&mu_);
  FailLocked();
}

void FloorStream::FailLocked() {
  failed_ = true;
  pending_.clear();
  if (writing_ || finished_) return;
  finished_ = true;
  Finish(grpc::Status::CANCELLED);
}

void FloorStream::OnDone() {
  hub_->Remove(this);
  delete this;
}

void FloorStream::MaybeWriteLocked(bool force, bool batching) {
  if (writing_ || failed_ || pending_.empty()) return;
  const int64_t now = integration::MonotonicNanos();
  if (!force && batching && hub_->window_ns() > 0 &&
      now < last_write_ns_ + hub_->window_ns()) {
    if (!deferred_) {
      deferred_ = true;
      hub_->Defer(this, last_write_ns_ + hub_->window_ns());
    }
    return;
  }
  // As many queued events as fit in the cap (at least one).
  size_t n = 0, bytes = 0;
  while (n < pending_.size() &&
         (n == 0 || bytes + pending_[n].size() <= hub_->max_message_bytes())) {
    bytes += pending_[n].size();
    ++n;
  }
  response_ = grpc::ByteBuffer(pending_.data(), n);
  pending_.erase(pending_.begin(), pending_.begin() + n);
  writing_ = true;
  last_write_ns_ = now;
  StartWrite(&response_);
}

class FloorService final
    : public v1::Informer::WithRawCallbackMethod_Watch<v1::Informer::Service> {
 public:
  explicit FloorService(Hub* hub) : hub_(hub) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(
      grpc::CallbackServerContext*, const grpc::ByteBuffer*) override {
    return hub_->Open();
  }

 private:
  Hub* const hub_;
};

// The integer parameter `key`, `def` when absent, -1 when not an integer
// (which every caller refuses).
int IntParam(const httplib::Request& req, const char* key, int def) {
  int v = def;
  if (req.has_param(key) && !absl::SimpleAtoi(req.get_param_value(key), &v)) {
    return -1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  // The sidecar's malloc settings, so that the two differ in their work only.
  server::ReexecWithMallocTunables(argv);
  absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::string listen = absl::GetFlag(FLAGS_grpc_listen);
  if (listen.empty()) {
    std::fprintf(stderr, "--grpc_listen is required\n");
    return 2;
  }
  Hub hub(absl::GetFlag(FLAGS_batch_window),
          absl::GetFlag(FLAGS_batch_min_rate),
          static_cast<size_t>(absl::GetFlag(FLAGS_max_message_bytes)));
  FloorService service(&hub);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "cannot listen on %s\n", listen.c_str());
    return 1;
  }

  httplib::Server http;
  http.Post("/_emulator/load", [&hub](const httplib::Request& req,
                                      httplib::Response& res) {
    const int objects = IntParam(req, "objects", 1000);
    const int rate = IntParam(req, "rate", 1000);
    const int millis = IntParam(req, "millis", 10000);
    const int bytes = IntParam(req, "bytes", 1024);
    if (objects <= 0 || rate <= 0 || millis < 0 || bytes < 0) {
      res.status = 400;
      res.set_content(
          "objects and rate must be positive integers, millis and bytes "
          "non-negative integers",
          "text/plain");
      return;
    }
    const std::string ns =
        req.has_param("namespace") ? req.get_param_value("namespace") : "bench";
    const absl::Time t0 = absl::Now();
    const int64_t updates =
        hub.RunLoad(ns, objects, bytes, rate, absl::Milliseconds(millis));
    res.set_content(absl::StrCat("{\"updates\":", updates, ",\"seconds\":",
                                 absl::ToDoubleSeconds(absl::Now() - t0), "}"),
                    "application/json");
  });
  http.Post(R"(/api/v1/namespaces/([^/]+)/configmaps)",
            [&hub](const httplib::Request& req, httplib::Response& res) {
              hub.Publish(v1::EVENT_TYPE_ADDED, req.body);
              res.status = 201;
              res.set_content(req.body, "application/json");
            });
  const int port = absl::GetFlag(FLAGS_port);
  const int bound = port == 0
                        ? http.bind_to_any_port("127.0.0.1")
                        : (http.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound <= 0) {
    std::fprintf(stderr, "cannot bind the control port\n");
    return 1;
  }
  std::printf("%d\n", bound);
  std::fflush(stdout);
  http.listen_after_bind();
  server->Shutdown();
  return 0;
}

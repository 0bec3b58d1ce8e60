// WatchDecoder's initial phase (WatchList): initial ADDED events decoded on
// worker threads in batches. Every scenario is run through the parallel
// decoder and through the inline one, on the same bytes cut into the same
// chunks, and must come out the same: events in the same order, then the
// same final status (code, message, payload).

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/client/http_transport.h"
#include "informer/client/watch_decoder.h"
#include "informer/listwatch/lister_watcher.h"
#include "informer/object/object.h"
#include "informer/object/wire.h"

namespace informer {
namespace client {
namespace {

// A response body served from memory: `chunks` one per Read, then `end`
// (or, with block_at_end, nothing until Stop(), as a live watch that went
// quiet).
class ScriptedBody final : public HttpStream {
 public:
  ScriptedBody(std::vector<std::string> chunks, absl::Status end,
               bool block_at_end = false)
      : chunks_(std::move(chunks)),
        end_(std::move(end)),
        block_at_end_(block_at_end) {}

  absl::Status Read(std::string* out) override {
    if (stopped_.HasBeenNotified()) return absl::CancelledError("stopped");
    if (next_ < chunks_.size()) {
      out->append(chunks_[next_++]);
      return absl::OkStatus();
    }
    if (block_at_end_) {
      stopped_.WaitForNotification();
      return absl::CancelledError("stopped");
    }
    return end_;
  }
  void Stop() override {
    if (!stopped_.HasBeenNotified()) stopped_.Notify();
  }

 private:
  const std::vector<std::string> chunks_;
  const absl::Status end_;
  const bool block_at_end_;
  size_t next_ = 0;
  absl::Notification stopped_;
};

// Stores objects uncompressed and records which threads decoded them.
class ThreadRecorder final : public JsonCompressor {
 public:
  std::shared_ptr<const JsonDictionary> Compress(absl::string_view,
                                                 std::string* out) override {
    out->clear();
    absl::MutexLock lock(&mu_);
    threads_.insert(std::this_thread::get_id());
    return nullptr;
  }
  std::set<std::thread::id> TakeThreads() {
    absl::MutexLock lock(&mu_);
    return std::move(threads_);
  }

 private:
  absl::Mutex mu_;
  std::set<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

std::string Added(int i, absl::string_view type = "ADDED") {
  return absl::StrCat(R"({"type":")", type,
                      R"(","object":{"apiVersion":"v1","kind":"ConfigMap",)",
                      R"("metadata":{"name":"cm-)", i,
                      R"(","namespace":"demo","resourceVersion":")", 100 + i,
                      R"("},"data":{"k":"some value to make it longer"}}})",
                      "\n");
}

std::string Bookmark(int rv, bool end) {
  return absl::StrCat(
      R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1",)",
      R"("metadata":{"resourceVersion":")", rv, R"(")",
      end ? R"(,"annotations":{"k8s.io/initial-events-end":"true"})" : "",
      "}}}\n");
}

std::string AddedRange(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i) out += Added(i);
  return out;
}

// `body` in pieces of `size` bytes (lines straddle pieces).
std::vector<std::string> Cut(const std::string& body, size_t size) {
  std::vector<std::string> chunks;
  for (size_t at = 0; at < body.size(); at += size) {
    chunks.push_back(body.substr(at, size));
  }
  return chunks;
}

std::string Describe(const WatchEvent& ev) {
  std::string s(WatchEventTypeName(ev.type));
  if (ev.object != nullptr) absl::StrAppend(&s, " ", ev.object->name());
  absl::StrAppend(&s, " rv=", ev.resource_version);
  if (ev.initial_events_end) absl::StrAppend(&s, " end");
  if (ev.type == WatchEventType::kError) {
    absl::StrAppend(&s, " ", ev.status.code, " ", ev.status.message);
  }
  return s;
}

struct Outcome {
  std::vector<std::string> events;
  absl::Status end;  // Next's first non-OK status
};

WatchDecoder::Options Parallel(int threads = 2) {
  WatchDecoder::Options o;
  o.initial_event_threads = threads;
  o.batch_bytes = 1024;  // ~6 events per batch: many batches
  return o;
}

Outcome ReadAll(std::vector<std::string> chunks, absl::Status end,
                WatchDecoder::Options options) {
  WatchDecoder decoder(
      std::make_unique<ScriptedBody>(std::move(chunks), std::move(end)),
      TransformOptions(), "/api/v1/configmaps?watch=1", nullptr, options);
  Outcome out;
  for (;;) {
    WatchEvent ev;
    absl::Status s = decoder.Next(&ev);
    if (!s.ok()) {
      out.end = s;
      // Sticky, as inline.
      EXPECT_EQ(decoder.Next(&ev), s);
      return out;
    }
    out.events.push_back(Describe(ev));
  }
}

// The same bytes through the parallel and the inline decoder, at several
// chunk sizes: the same events and the same end.
Outcome ExpectSameAsInline(const std::string& body, const absl::Status& end) {
  Outcome inline_out;
  for (size_t chunk : {size_t{1} << 20, size_t{777}, size_t{64}}) {
    SCOPED_TRACE(absl::StrCat("chunk ", chunk));
    inline_out = ReadAll(Cut(body, chunk), end, WatchDecoder::Options());
    for (int threads : {1, 3}) {
      Outcome par = ReadAll(Cut(body, chunk), end, Parallel(threads));
      EXPECT_EQ(par.events, inline_out.events);
      EXPECT_EQ(par.end, inline_out.end);
      EXPECT_EQ(IsUndecodableEvent(par.end),
                IsUndecodableEvent(inline_out.end));
    }
  }
  return inline_out;
}

const absl::Status kEndOfStream = absl::OutOfRangeError("stream ended");

TEST(WatchDecoderInitialEventsTest, OrderKeptAcrossManyBatches) {
  const std::string body = AddedRange(0, 2000) + Bookmark(5000, true) +
                           Added(3000, "MODIFIED") + Added(3001);
  Outcome out = ExpectSameAsInline(body, kEndOfStream);
  ASSERT_EQ(out.events.size(), 2003u);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(out.events[i], absl::StrCat("ADDED cm-", i, " rv=", 100 + i));
  }
  EXPECT_EQ(out.events[2000], "BOOKMARK rv=5000 end");
  EXPECT_EQ(out.events[2001], "MODIFIED cm-3000 rv=3100");
  EXPECT_EQ(out.events[2002], "ADDED cm-3001 rv=3101");
  EXPECT_EQ(out.end, kEndOfStream);
}

TEST(WatchDecoderInitialEventsTest, OtherLinesWaitForEverythingBeforeThem) {
  // Mid-phase: a plain bookmark, a MODIFIED, a DELETED, an ADDED written
  // in another member order, an ERROR: each comes exactly in its place,
  // and batching resumes after it.
  const std::string error =
      R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",)"
      R"("status":"Failure","message":"too old","reason":"Expired",)"
      R"("code":410}})"
      "\n";
  const std::string reordered =
      R"({"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":)"
      R"({"name":"odd","namespace":"demo","resourceVersion":"77"}},)"
      R"("type":"ADDED"})"
      "\n";
  const std::string body = AddedRange(0, 100) + Bookmark(400, false) +
                           AddedRange(100, 200) + Added(200, "MODIFIED") +
                           AddedRange(201, 300) + Added(300, "DELETED") +
                           reordered + AddedRange(301, 400) + error +
                           AddedRange(400, 450) + Bookmark(900, true);
  Outcome out = ExpectSameAsInline(body, kEndOfStream);
  ASSERT_EQ(out.events.size(), 454u);
  EXPECT_EQ(out.events[100], "BOOKMARK rv=400");
  EXPECT_EQ(out.events[201], "MODIFIED cm-200 rv=300");
  EXPECT_EQ(out.events[301], "DELETED cm-300 rv=400");
  EXPECT_EQ(out.events[302], "ADDED odd rv=77");
  EXPECT_EQ(out.events[402], "ERROR rv= 410 too old");
  EXPECT_EQ(out.events[453], "BOOKMARK rv=900 end");
}

TEST(WatchDecoderInitialEventsTest, MalformedLineMidBatchFailsAsInline) {
  // Starts as an ADDED event (so it is batched) but does not parse.
  const std::string bad = R"({"type":"ADDED","object":{"metadata":{"na)"
                          "\n";
  const std::string body =
      AddedRange(0, 503) + bad + AddedRange(503, 600) + Bookmark(900, true);
  Outcome out = ExpectSameAsInline(body, kEndOfStream);
  ASSERT_EQ(out.events.size(), 503u);
  EXPECT_EQ(out.events.back(), "ADDED cm-502 rv=602");
  EXPECT_EQ(out.end.code(), absl::StatusCode::kDataLoss) << out.end;
  EXPECT_TRUE(IsUndecodableEvent(out.end));
  EXPECT_TRUE(absl::StrContains(
      out.end.message(),
      "watch /api/v1/configmaps?watch=1: undecodable event: "))
      << out.end;
}

TEST(WatchDecoderInitialEventsTest, BadObjectMidBatchFailsAsInline) {
  // Valid JSON, but the object is no object: the error names why.
  const std::string bad = R"({"type":"ADDED","object":[1,2]})"
                          "\n";
  const std::string body = AddedRange(0, 40) + bad + AddedRange(40, 600);
  Outcome out = ExpectSameAsInline(body, kEndOfStream);
  EXPECT_EQ(out.events.size(), 40u);
  EXPECT_TRUE(IsUndecodableEvent(out.end)) << out.end;
}

TEST(WatchDecoderInitialEventsTest, StreamCutMidBatch) {
  const std::string body = AddedRange(0, 333) + Added(333).substr(0, 50);
  // The connection broke: every complete event, then the transport error.
  Outcome broke = ExpectSameAsInline(
      body, absl::UnavailableError("connection reset by peer"));
  EXPECT_EQ(broke.events.size(), 333u);
  EXPECT_EQ(broke.end, absl::UnavailableError("connection reset by peer"));
  // The server closed inside an event: DataLoss naming the stray bytes.
  Outcome partial = ExpectSameAsInline(body, kEndOfStream);
  EXPECT_EQ(partial.events.size(), 333u);
  EXPECT_EQ(partial.end.code(), absl::StatusCode::kDataLoss) << partial.end;
  EXPECT_TRUE(absl::StrContains(partial.end.message(), "50 bytes"));
  // A clean end between events, before the end bookmark.
  Outcome clean = ExpectSameAsInline(AddedRange(0, 333), kEndOfStream);
  EXPECT_EQ(clean.events.size(), 333u);
  EXPECT_EQ(clean.end, kEndOfStream);
}

TEST(WatchDecoderInitialEventsTest, OverlongLineFailsAsInline) {
  WatchDecoder::Options o = Parallel();
  // The splitter's limit is far above any test line; a line that never
  // ends within it is the same ResourceExhausted either way.
  std::string huge = R"({"type":"ADDED","object":{"k":")";
  huge.append(65 << 20, 'x');
  const std::string body = AddedRange(0, 300) + huge;
  Outcome par = ReadAll(Cut(body, 1 << 20), kEndOfStream, o);
  Outcome inl = ReadAll(Cut(body, 1 << 20), kEndOfStream, {});
  EXPECT_EQ(par.events, inl.events);
  EXPECT_EQ(par.end, inl.end);
  EXPECT_EQ(par.end.code(), absl::StatusCode::kResourceExhausted) << par.end;
}

TEST(WatchDecoderInitialEventsTest, WorkersDecodeInitialEventsThenInline) {
  // Initial events go to the workers; after the end bookmark a live event
  // is decoded on the calling thread as soon as its line is in, though the
  // stream then goes quiet (no batch waits for more bytes).
  auto recorder = std::make_shared<ThreadRecorder>();
  TransformOptions transform;
  transform.compressor = recorder;
  const std::string body = AddedRange(0, 1000) + Bookmark(5000, true) +
                           Added(7000, "MODIFIED") + Added(7001);
  auto* raw = new ScriptedBody(Cut(body, 4096), kEndOfStream,
                               /*block_at_end=*/true);
  WatchDecoder decoder{std::unique_ptr<HttpStream>(raw), transform,
                       "/api/v1/configmaps", nullptr, Parallel(1)};
  WatchEvent ev;
  for (int i = 0; i < 1001; ++i) ASSERT_TRUE(decoder.Next(&ev).ok());
  EXPECT_TRUE(ev.initial_events_end);
  std::set<std::thread::id> initial = recorder->TakeThreads();
  initial.erase(std::this_thread::get_id());  // it may help
  EXPECT_EQ(initial.size(), 1u);              // the one worker

  ASSERT_TRUE(decoder.Next(&ev).ok());
  EXPECT_EQ(Describe(ev), "MODIFIED cm-7000 rv=7100");
  ASSERT_TRUE(decoder.Next(&ev).ok());
  EXPECT_EQ(Describe(ev), "ADDED cm-7001 rv=7101");
  EXPECT_EQ(recorder->TakeThreads(),
            std::set<std::thread::id>({std::this_thread::get_id()}));

  // Quiet now: Stop ends the waiting Next.
  absl::Status result;
  std::thread reader([&] { result = decoder.Next(&ev); });
  decoder.Stop();
  reader.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled) << result;
}

TEST(WatchDecoderInitialEventsTest, StopDuringTheInitialPhase) {
  auto* raw = new ScriptedBody(Cut(AddedRange(0, 500), 512), kEndOfStream,
                               /*block_at_end=*/true);
  WatchDecoder decoder(std::unique_ptr<HttpStream>(raw), TransformOptions(),
                       "/api/v1/configmaps", nullptr, Parallel(2));
  WatchEvent ev;
  ASSERT_TRUE(decoder.Next(&ev).ok());
  decoder.Stop();
  EXPECT_EQ(decoder.Next(&ev).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace client
}  // namespace informer

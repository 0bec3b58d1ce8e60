// Fan-out of one Watch event to N streams: the event serialized once, as
// one slice, and shared by every stream's response (FanoutEvent and
// WatchResponseBuilder, what WatchHub does: BM_EventOneSlice), against the
// earlier designs (the event as three slices around the object's;
// the object shared, the rest per stream) and building and serializing a
// WatchResponse per stream (what a typed ServerWriteReactor<WatchResponse>
// does: copy the object's JSON into each message, serialize each).
//
//   bazel run -c opt //server/informer_service/watch:watch_fanout_bench
// (add -- --benchmark_min_time=0.2 for a quicker run).

#include <benchmark/benchmark.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "informer/object/object.h"
#include "proto/informer/v1/informer.pb.h"
#include "server/informer_service/watch/watch_event.h"
#include "server/informer_service/watch/watch_hub.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

// A pod-sized JSON object (about 4 KiB, like a real pod without
// managedFields).
std::string PodJson() {
  std::string labels;
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&labels, i ? "," : "", "\"label-", i, "\":\"value-", i,
                    "\"");
  }
  std::string containers;
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&containers, i ? "," : "", "{\"name\":\"c", i,
                    "\",\"image\":\"registry.example.com/team/app:v1.2.", i,
                    "\",\"env\":[");
    for (int j = 0; j < 12; ++j) {
      absl::StrAppend(&containers, j ? "," : "", "{\"name\":\"ENV_", j,
                      "\",\"value\":\"some-configuration-value-", j, "\"}");
    }
    absl::StrAppend(&containers, "]}");
  }
  return absl::StrCat(
      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
      "\"web-7d9f8c6b5-x2x4z\",\"namespace\":\"default\",\"uid\":"
      "\"0f6a2c1e-1111-2222-3333-444455556666\",\"resourceVersion\":"
      "\"123456\",\"labels\":{",
      labels, "}},\"spec\":{\"containers\":[", containers,
      "]},\"status\":{\"phase\":\"Running\"}}");
}

const std::string& Json() {
  static const std::string* json = new std::string(PodJson());
  return *json;
}

// Byte buffers and slices need the gRPC core initialised.
const bool kGrpcInitialised = [] {
  grpc_init();
  return true;
}();

void BM_EncodedOnce(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  std::vector<grpc::ByteBuffer> out(streams);
  for (auto _ : state) {
    // Once per event.
    v1::Object obj;
    obj.set_json(Json());
    const grpc::Slice bytes = SerializeToSlice(obj);
    // Per stream: a few small fields and a reference to the shared bytes.
    for (int i = 0; i < streams; ++i) {
      WatchResponseBuilder builder;
      builder.Add({.type = v1::EVENT_TYPE_MODIFIED,
                   .object = &bytes,
                   .resource_version = "123456",
                   .resume_token = "dzIvYWJjZGVmLzEvNDI="});
      out[i] = builder.Finish();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * streams);
  state.counters["bytes_per_stream"] = static_cast<double>(out[0].Length());
}

// What WatchHub does since the event itself is encoded once: the whole
// `events` field (type, object, resourceVersion, token) is built once per
// event and every stream's response only references its slices.
void BM_EventEncodedOnce(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  std::vector<grpc::ByteBuffer> out(streams);
  for (auto _ : state) {
    // Once per event.
    v1::Object obj;
    obj.set_json(Json());
    const grpc::Slice bytes = SerializeToSlice(obj);
    WatchResponseBuilder once;
    once.Add({.type = v1::EVENT_TYPE_MODIFIED,
              .object = &bytes,
              .resource_version = "123456",
              .resume_token = "dzIvYWJjZGVmLzEvNDI="});
    const std::vector<grpc::Slice> parts = once.TakeSlices();
    // Per stream: slice references only.
    for (int i = 0; i < streams; ++i) {
      WatchResponseBuilder builder;
      builder.AddEncoded(parts, 1);
      out[i] = builder.Finish();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * streams);
  state.counters["bytes_per_stream"] = static_cast<double>(out[0].Length());
}

// What WatchHub does now: a FanoutEvent (as the fan-out makes one per
// informer event) encodes itself once as one slice, the object serialized
// in place; each stream's response references that one slice.
void BM_EventOneSlice(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  std::vector<grpc::ByteBuffer> out(streams);
  absl::StatusOr<informer::ObjectPtr> parsed = informer::Object::Parse(Json());
  if (!parsed.ok()) {
    state.SkipWithError("parse failed");
    return;
  }
  auto prev = std::make_shared<const SharedObject>(*parsed);
  WatchResponseBuilder builder;
  for (auto _ : state) {
    // Once per event (a new state of the object each time, as in a watch).
    auto obj = std::make_shared<const SharedObject>(*parsed);
    const FanoutEvent ev(1, obj, prev, false, false, "dzIvYWJjZGVmLzEvNDI=");
    absl::StatusOr<const EncodedEvents*> enc =
        ev.Encoded(v1::ENCODING_JSON, false);
    if (!enc.ok()) {
      state.SkipWithError("encode failed");
      return;
    }
    // Per stream: one slice reference.
    for (int i = 0; i < streams; ++i) {
      builder.AddEncoded((*enc)->slices, (*enc)->events);
      out[i] = builder.Finish();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * streams);
  state.counters["bytes_per_stream"] = static_cast<double>(out[0].Length());
}

void BM_PerStream(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  std::vector<grpc::ByteBuffer> out(streams);
  for (auto _ : state) {
    for (int i = 0; i < streams; ++i) {
      v1::WatchResponse resp;
      v1::Event* e = resp.add_events();
      e->set_type(v1::EVENT_TYPE_MODIFIED);
      e->mutable_object()->set_json(Json());
      e->set_resource_version("123456");
      e->set_resume_token("dzIvYWJjZGVmLzEvNDI=");
      out[i].Clear();  // Serialize wants an empty buffer
      bool own = false;
      grpc::Status st = grpc::SerializationTraits<v1::WatchResponse>::Serialize(
          resp, &out[i], &own);
      if (!st.ok()) state.SkipWithError("serialize failed");
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * streams);
  state.counters["bytes_per_stream"] = static_cast<double>(out[0].Length());
}

BENCHMARK(BM_EventOneSlice)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_EncodedOnce)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_EventEncodedOnce)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_PerStream)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace server

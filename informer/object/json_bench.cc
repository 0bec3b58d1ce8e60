// Decode benchmarks for the object cache's JSON path, and the RapidJSON
// baseline that justifies simdjson.
//
//   bazel run -c opt //informer/object:json_bench -- --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
//
// Input: testdata/kube-apiserver-v1.24/pods-1000.list.json.gz (1,000 real
// Pods, ~6 KB each with managedFields). Found through --data_dir=DIR, else
// $INFORMER_TESTDATA_DIR, else the runfiles path.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "benchmark/benchmark.h"
#include "informer/object/json_test_util.h"
#include "informer/object/object.h"
#include "informer/object/wire.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace informer {
namespace {

struct Inputs {
  std::string list;  // the 1,000-pod list body
  std::string pod;   // its first Pod, compact, with managedFields
};

Inputs* g_inputs = nullptr;

// ---- RapidJSON baseline: the same work as Object::Parse ----------------
// Parse (DOM), extract the same metadata, remove metadata.managedFields and
// write compact JSON. Default parse flags (no UTF-8 validation, which
// simdjson always does): the baseline is, if anything, flattered.

using RjValue = rapidjson::Value;

absl::string_view RjString(const RjValue& obj, const char* key) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return absl::string_view(it->value.GetString(), it->value.GetStringLength());
}

bool RjExtract(const RjValue& v, ObjectBuilder* b) {
  if (!v.IsObject()) return false;
  b->SetApiVersion(RjString(v, "apiVersion")).SetKind(RjString(v, "kind"));
  auto meta_it = v.FindMember("metadata");
  if (meta_it == v.MemberEnd() || !meta_it->value.IsObject()) return false;
  const RjValue& meta = meta_it->value;
  const absl::string_view name = RjString(meta, "name");
  if (name.empty()) return false;
  b->SetName(name)
      .SetNamespace(RjString(meta, "namespace"))
      .SetUid(RjString(meta, "uid"))
      .SetResourceVersion(RjString(meta, "resourceVersion"))
      .SetDeletionTimestamp(RjString(meta, "deletionTimestamp"));
  auto gen = meta.FindMember("generation");
  if (gen != meta.MemberEnd() && gen->value.IsInt64()) {
    b->SetGeneration(gen->value.GetInt64());
  }
  for (const char* map : {"labels", "annotations"}) {
    auto it = meta.FindMember(map);
    if (it == meta.MemberEnd() || !it->value.IsObject()) continue;
    for (const auto& kv : it->value.GetObject()) {
      if (!kv.value.IsString()) return false;
      absl::string_view k(kv.name.GetString(), kv.name.GetStringLength());
      absl::string_view val(kv.value.GetString(), kv.value.GetStringLength());
      if (map[0] == 'l') {
        b->AddLabel(k, val);
      } else {
        b->AddAnnotation(k, val);
      }
    }
  }
  auto refs = meta.FindMember("ownerReferences");
  if (refs != meta.MemberEnd() && refs->value.IsArray()) {
    for (const auto& r : refs->value.GetArray()) {
      OwnerReference ref;
      ref.api_version = std::string(RjString(r, "apiVersion"));
      ref.kind = std::string(RjString(r, "kind"));
      ref.name = std::string(RjString(r, "name"));
      ref.uid = std::string(RjString(r, "uid"));
      auto c = r.FindMember("controller");
      ref.controller = c != r.MemberEnd() && c->value.IsTrue();
      b->AddOwnerReference(std::move(ref));
    }
  }
  return true;
}

// Extracts, drops managedFields in place and serialises `v`.
ObjectPtr RjBuild(RjValue& v) {
  ObjectBuilder b;
  if (!RjExtract(v, &b)) return nullptr;
  v["metadata"].RemoveMember("managedFields");
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> writer(out);
  v.Accept(writer);
  b.SetJson(std::string(out.GetString(), out.GetSize()));
  return b.Build();
}

ObjectPtr RapidJsonParse(absl::string_view json) {
  // A reused arena, as a tuned RapidJSON user would do.
  thread_local std::vector<char> arena(256 << 10);
  rapidjson::MemoryPoolAllocator<> alloc(arena.data(), arena.size());
  rapidjson::Document doc(&alloc);
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) return nullptr;
  return RjBuild(doc);
}

size_t RapidJsonDecodeList(absl::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return 0;
  auto items = doc.FindMember("items");
  if (items == doc.MemberEnd() || !items->value.IsArray()) return 0;
  std::vector<ObjectPtr> out;
  out.reserve(items->value.Size());
  for (auto& item : items->value.GetArray()) {
    ObjectPtr obj = RjBuild(item);
    if (obj == nullptr) return 0;
    out.push_back(std::move(obj));
  }
  return out.size();
}

// ---- Benchmarks -------------------------------------------------------

void BM_ObjectParse_Pod_Simdjson(benchmark::State& state) {
  const std::string& pod = g_inputs->pod;
  for (auto _ : state) {
    absl::StatusOr<ObjectPtr> obj = Object::Parse(pod);
    if (!obj.ok()) {
      state.SkipWithError("parse failed");
      break;
    }
    benchmark::DoNotOptimize(obj->get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(pod.size()));
}
BENCHMARK(BM_ObjectParse_Pod_Simdjson);

// Decode + metadata only: no managedFields drop (text copied verbatim).
void BM_ObjectParse_PodKeepManagedFields_Simdjson(benchmark::State& state) {
  const std::string& pod = g_inputs->pod;
  TransformOptions keep;
  keep.drop_managed_fields = false;
  for (auto _ : state) {
    absl::StatusOr<ObjectPtr> obj = Object::Parse(pod, keep);
    if (!obj.ok()) {
      state.SkipWithError("parse failed");
      break;
    }
    benchmark::DoNotOptimize(obj->get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(pod.size()));
}
BENCHMARK(BM_ObjectParse_PodKeepManagedFields_Simdjson);

void BM_ObjectParse_Pod_RapidJson(benchmark::State& state) {
  const std::string& pod = g_inputs->pod;
  for (auto _ : state) {
    ObjectPtr obj = RapidJsonParse(pod);
    if (obj == nullptr) {
      state.SkipWithError("parse failed");
      break;
    }
    benchmark::DoNotOptimize(obj.get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(pod.size()));
}
BENCHMARK(BM_ObjectParse_Pod_RapidJson);

void BM_DecodeList_1000Pods_Simdjson(benchmark::State& state) {
  const std::string& list = g_inputs->list;
  for (auto _ : state) {
    absl::StatusOr<ObjectList> decoded = DecodeList(list);
    if (!decoded.ok() || decoded->items.size() != 1000) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(decoded->items.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(list.size()));
  state.counters["items_per_second"] =
      benchmark::Counter(1000.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeList_1000Pods_Simdjson)->Unit(benchmark::kMillisecond);

void BM_DecodeList_1000Pods_RapidJson(benchmark::State& state) {
  const std::string& list = g_inputs->list;
  for (auto _ : state) {
    size_t n = RapidJsonDecodeList(list);
    if (n != 1000) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(list.size()));
  state.counters["items_per_second"] =
      benchmark::Counter(1000.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeList_1000Pods_RapidJson)->Unit(benchmark::kMillisecond);

int Main(int argc, char** argv) {
  // Our flag first; Google Benchmark rejects flags it does not know.
  std::string data_dir = json_testing::DefaultCaptureDir();
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    absl::string_view arg(argv[i]);
    if (absl::ConsumePrefix(&arg, "--data_dir=")) {
      data_dir = std::string(arg);
    } else {
      args.push_back(argv[i]);
    }
  }
  int bench_argc = static_cast<int>(args.size());
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) {
    return 1;
  }

  absl::StatusOr<std::string> list =
      json_testing::ReadCapture(data_dir, "pods-1000.list.json.gz");
  if (!list.ok()) {
    std::fprintf(stderr,
                 "%s (pass --data_dir=DIR or set INFORMER_TESTDATA_DIR)\n",
                 std::string(list.status().message()).c_str());
    return 1;
  }
  TransformOptions keep;
  keep.drop_managed_fields = false;
  absl::StatusOr<ObjectList> decoded = DecodeList(*list, keep);
  if (!decoded.ok() || decoded->items.empty()) {
    std::fprintf(stderr, "cannot decode pods-1000.list.json.gz\n");
    return 1;
  }
  static Inputs inputs;
  inputs.list = *std::move(list);
  inputs.pod = decoded->items[0]->json().str();
  g_inputs = &inputs;

  absl::StatusOr<ObjectPtr> full = Object::Parse(inputs.pod, keep);
  absl::StatusOr<ObjectPtr> slim = Object::Parse(inputs.pod);
  if (!full.ok() || !slim.ok()) return 1;
  std::fprintf(stderr,
               "pod %s: %zu bytes JSON; MemoryUsage with managedFields %zu B, "
               "without %zu B (json %zu B)\n",
               (*full)->Key().c_str(), inputs.pod.size(),
               (*full)->MemoryUsage(), (*slim)->MemoryUsage(),
               (*slim)->json_size());
  size_t list_full = 0, list_slim = 0;
  absl::StatusOr<ObjectList> slim_list = DecodeList(inputs.list);
  if (!slim_list.ok()) return 1;
  for (const ObjectPtr& o : decoded->items) list_full += o->MemoryUsage();
  for (const ObjectPtr& o : slim_list->items) list_slim += o->MemoryUsage();
  std::fprintf(stderr,
               "1000 pods (list body %zu B): MemoryUsage with managedFields "
               "%zu B, without %zu B\n",
               inputs.list.size(), list_full, list_slim);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace informer

int main(int argc, char** argv) { return informer::Main(argc, argv); }

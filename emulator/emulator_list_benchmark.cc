// Serving speed of large lists: the emulator seeded with N realistic Pods
// (~6 KiB JSON each), a client downloading the whole list over loopback.
//
//   bazel run -c opt //emulator:emulator_list_benchmark --
//   --benchmark_min_time=1

#include <memory>

#include "benchmark/benchmark.h"
#include "emulator/emulator.h"
#include "httplib.h"

namespace emulator {
namespace {

void BM_ListPods(benchmark::State& state) {
  EmulatorOptions o;
  o.seed_pods = static_cast<int>(state.range(0));
  Emulator emu(o);
  if (!emu.Start().ok()) {
    state.SkipWithError("emulator did not start");
    return;
  }
  httplib::Client cli("127.0.0.1", emu.port());
  cli.set_read_timeout(600);
  size_t bytes = 0;
  for (auto _ : state) {
    size_t received = 0;
    auto res = cli.Get("/api/v1/namespaces/benchpods/pods",
                       [&](const char*, size_t len) {
                         received += len;
                         return true;
                       });
    if (!res || res->status != 200) {
      state.SkipWithError("list failed");
      break;
    }
    bytes += received;
    benchmark::DoNotOptimize(received);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["objects"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_ListPods)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_ListPodsPaged(benchmark::State& state) {
  EmulatorOptions o;
  o.seed_pods = static_cast<int>(state.range(0));
  Emulator emu(o);
  if (!emu.Start().ok()) {
    state.SkipWithError("emulator did not start");
    return;
  }
  httplib::Client cli("127.0.0.1", emu.port());
  size_t bytes = 0;
  for (auto _ : state) {
    std::string cont;
    do {
      std::string path = "/api/v1/namespaces/benchpods/pods?limit=500";
      if (!cont.empty()) path += "&continue=" + cont;
      auto res = cli.Get(path.c_str());
      if (!res || res->status != 200) {
        state.SkipWithError("list failed");
        return;
      }
      bytes += res->body.size();
      size_t pos = res->body.find("\"continue\":\"");
      cont.clear();
      if (pos != std::string::npos && pos < 200) {
        size_t start = pos + 12;
        cont = res->body.substr(start, res->body.find('"', start) - start);
      }
    } while (!cont.empty());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ListPodsPaged)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace emulator

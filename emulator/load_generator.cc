#include "emulator/load_generator.h"

#include <time.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emulator/api_status.h"

namespace emulator {
namespace {

std::string ConfigMapJson(absl::string_view ns, int index, int64_t sent,
                          int object_bytes) {
  // Label "group" has ten objects per value, for ByIndex benchmarks.
  std::string json = absl::StrFormat(
      "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
      "\"load-%05d\",\"namespace\":\"%s\",\"labels\":{\"load\":\"true\","
      "\"group\":\"g-%05d\"}},\"data\":{\"sent\":\"%d\",\"payload\":\"",
      index, ns, index / 10, sent);
  // The server adds uid, resourceVersion and creationTimestamp (~150 bytes).
  const size_t target = static_cast<size_t>(std::max(object_bytes, 0));
  const size_t used = json.size() + 4 + 150;
  if (target > used) json.append(target - used, 'x');
  json += "\"}}";
  return json;
}

}  // namespace

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

absl::StatusOr<LoadReport> RunLoad(ObjectStore& store,
                                   const ResourceRegistry& registry,
                                   const LoadSpec& spec,
                                   informer::Clock* clock) {
  if (spec.objects <= 0) {
    return absl::InvalidArgumentError("load: objects must be positive");
  }
  if (spec.rate <= 0 && spec.duration > absl::ZeroDuration()) {
    return absl::InvalidArgumentError("load: rate must be positive");
  }
  const ResourceInfo* configmaps = registry.FindByName("configmaps");
  const ResourceInfo* namespaces = registry.FindByName("namespaces");
  if (configmaps == nullptr || namespaces == nullptr) {
    return absl::InternalError("load: configmaps or namespaces unknown");
  }
  if (!store.Get(*namespaces, "", spec.ns).ok()) {
    absl::StatusOr<StoredObjectPtr> created = store.Create(
        *namespaces, "",
        absl::StrCat("{\"kind\":\"Namespace\",\"apiVersion\":\"v1\","
                     "\"metadata\":{\"name\":\"",
                     spec.ns, "\"}}"));
    if (!created.ok() && !absl::IsAlreadyExists(created.status())) {
      return created.status();
    }
  }
  std::vector<std::string> names;
  names.reserve(spec.objects);
  for (int i = 0; i < spec.objects; ++i) {
    names.push_back(absl::StrFormat("load-%05d", i));
    if (store.Get(*configmaps, spec.ns, names.back()).ok()) continue;
    absl::StatusOr<StoredObjectPtr> created = store.Create(
        *configmaps, spec.ns,
        ConfigMapJson(spec.ns, i, MonotonicNanos(), spec.object_bytes));
    if (!created.ok()) return created.status();
  }
  LoadReport report;
  const absl::Time start = clock->Now();
  const absl::Time end = start + spec.duration;
  while (true) {
    const absl::Time now = std::min(clock->Now(), end);
    const int64_t due = static_cast<int64_t>(
        spec.rate * absl::ToDoubleSeconds(now - start) + 1e-9);
    while (report.updates < due) {
      const int index = static_cast<int>(report.updates % names.size());
      absl::StatusOr<StoredObjectPtr> updated = store.Update(
          *configmaps, spec.ns, names[index],
          ConfigMapJson(spec.ns, index, MonotonicNanos(), spec.object_bytes));
      if (!updated.ok()) return updated.status();
      ++report.updates;
    }
    if (now >= end) break;
    clock->SleepUntil(std::min(now + absl::Milliseconds(1), end));
  }
  report.elapsed = clock->Now() - start;
  return report;
}

absl::optional<EmulatorHooks::ControlReply> LoadControl::HandleControl(
    const ControlRequest& request) {
  if (request.op != "load") return absl::nullopt;
  auto int_param = [&request](const char* key, int def) {
    int v = def;
    std::string s = request.param(key);
    if (!s.empty() && !absl::SimpleAtoi(s, &v)) v = def;
    return v;
  };
  LoadSpec spec;
  std::string ns = request.param("namespace");
  if (!ns.empty()) spec.ns = ns;
  spec.objects = int_param("objects", spec.objects);
  spec.object_bytes = int_param("bytes", spec.object_bytes);
  spec.rate = int_param("rate", static_cast<int>(spec.rate));
  spec.duration = absl::Milliseconds(int_param("millis", 10000));
  absl::StatusOr<LoadReport> report =
      RunLoad(*store_, *registry_, spec, clock_);
  if (!report.ok()) {
    return ControlReply{
        400, StatusJson(BadRequestStatus(report.status().ToString()))};
  }
  return ControlReply{
      200, absl::StrCat("{\"updates\":", report->updates, ",\"seconds\":",
                        absl::ToDoubleSeconds(report->elapsed), "}")};
}

}  // namespace emulator

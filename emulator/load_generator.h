#ifndef EMULATOR_LOAD_GENERATOR_H_
#define EMULATOR_LOAD_GENERATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "emulator/emulator_hooks.h"
#include "emulator/object_store.h"
#include "emulator/resource_registry.h"
#include "informer/util/clock.h"

namespace emulator {

// What a load run writes: `objects` ConfigMaps load-00000... in `ns`, each
// about `object_bytes` of JSON, then `rate` updates per second round-robin
// over them for `duration`.
struct LoadSpec {
  std::string ns = "bench";
  int objects = 100;
  int object_bytes = 1024;
  double rate = 1000;
  absl::Duration duration = absl::Seconds(10);
};

struct LoadReport {
  int64_t updates = 0;
  absl::Duration elapsed;
};

// Runs one load (blocking) for end-to-end latency benchmarks: every write
// stamps `data.sent` with the writer's CLOCK_MONOTONIC time in nanoseconds
// (comparable across processes of one machine), so a subscriber of the
// sidecar computes write-to-receipt latency from the object alone.
//
// Missing objects are created first (not counted, not paced). Pacing is on
// `clock`: every millisecond the generator catches up to rate * elapsed, so
// a slow store lowers the achieved rate rather than bursting later; the
// report says what was achieved. duration 0 only creates the objects.
//
// Thread-compatible: one run at a time per namespace.
absl::StatusOr<LoadReport> RunLoad(ObjectStore& store,
                                   const ResourceRegistry& registry,
                                   const LoadSpec& spec,
                                   informer::Clock* clock);

// LoadControl serves /_emulator/load?namespace=&objects=&bytes=&rate=&millis=
// (one RunLoad, blocking the request for its whole run; benchmarks call it
// from their own thread) as an EmulatorHooks. Thread-safe; the store,
// registry and clock are not owned and must outlive it.
class LoadControl : public EmulatorHooks {
 public:
  LoadControl(ObjectStore* store, const ResourceRegistry* registry,
              informer::Clock* clock)
      : store_(store), registry_(registry), clock_(clock) {}
  absl::optional<ControlReply> HandleControl(
      const ControlRequest& request) override;

 private:
  ObjectStore* const store_;
  const ResourceRegistry* const registry_;
  informer::Clock* const clock_;
};

// The CLOCK_MONOTONIC time in nanoseconds, as RunLoad writes it.
int64_t MonotonicNanos();

}  // namespace emulator

#endif  // EMULATOR_LOAD_GENERATOR_H_

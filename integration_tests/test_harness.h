#ifndef INTEGRATION_TESTS_TEST_HARNESS_H_
#define INTEGRATION_TESTS_TEST_HARNESS_H_

// Shared pieces of the informer-vs-API-server integration tests: a handler
// that records what an informer delivered, and a pump that moves a FakeClock
// whenever something is parked on it (a reflector's back-off, a transport's
// Retry-After wait) so tests never sleep on the wall clock.

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/cache/event_handler.h"
#include "informer/object/object.h"
#include "informer/util/clock.h"

namespace integration {

// key -> resourceVersion: what a cache must hold to match the API server.
using KeyRvMap = std::map<std::string, std::string>;

// Converts ObjectStore::Snapshot's (key, rv) pairs.
KeyRvMap ToKeyRvMap(const std::vector<std::pair<std::string, int64_t>>& snap);

// RecordingHandler keeps the view of the world a handler built from the
// notifications it received (add/update set key -> rv, delete erases), and
// everything needed to check the delivery contract: adds per uid (no
// duplicate adds), deletes with their final_state_unknown flag.
//
// Thread-safety: all methods are thread-safe; the informer calls the
// handler from its listener thread while the test reads.
class RecordingHandler final : public informer::ResourceEventHandler {
 public:
  struct Deleted {
    std::string key;
    std::string rv;
    bool final_state_unknown = false;
  };

  void OnAdd(const informer::ObjectPtr& obj, bool is_in_initial_list) override;
  void OnUpdate(const informer::ObjectPtr& old_obj,
                const informer::ObjectPtr& new_obj) override;
  void OnDelete(const informer::ObjectPtr& obj,
                bool final_state_unknown) override;

  // Waits until the handler's view equals `expected`. The deadline is a
  // safety net against hangs, never the expected path.
  bool AwaitView(const KeyRvMap& expected,
                 absl::Duration safety_net = absl::Seconds(60));

  KeyRvMap View() const;
  // uid -> number of OnAdd calls.
  absl::flat_hash_map<std::string, int> AddsPerUid() const;
  std::vector<Deleted> Deletes() const;
  int updates() const;
  int adds() const;

 private:
  mutable absl::Mutex mu_;
  KeyRvMap view_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> adds_per_uid_ ABSL_GUARDED_BY(mu_);
  std::vector<Deleted> deletes_ ABSL_GUARDED_BY(mu_);
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  int adds_ ABSL_GUARDED_BY(mu_) = 0;
};

// ClockPump advances a FakeClock to the earliest pending deadline each time
// some thread is parked on it, which is how a test lets a reflector's
// back-off (or a Retry-After wait) elapse without wall-clock sleeps.
// Pause() holds time still so a test can act while the reflector is parked
// (e.g. delete objects while the watch is down).
//
// Thread-safety: all methods are thread-safe. Ownership: the clock must
// outlive the pump. Destroy the pump after every component waiting on the
// clock has stopped (its destructor waits on the clock itself to wake the
// pump thread).
class ClockPump {
 public:
  explicit ClockPump(informer::FakeClock* clock);
  ~ClockPump();
  ClockPump(const ClockPump&) = delete;
  ClockPump& operator=(const ClockPump&) = delete;

  void Pause();
  void Resume();
  // Every step the pump advanced the clock by, in order.
  std::vector<absl::Duration> Steps() const;

 private:
  void Run();
  bool CanStepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !paused_ || done_;
  }

  informer::FakeClock* const clock_;
  mutable absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::Duration> steps_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Collects the statuses a reflector reports (SetWatchErrorHandler).
// Thread-safe.
class ErrorLog {
 public:
  void Add(const absl::Status& status);
  std::vector<absl::Status> Errors() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace integration

#endif  // INTEGRATION_TESTS_TEST_HARNESS_H_

#ifndef INTEGRATION_TESTS_EMULATED_INFORMER_H_
#define INTEGRATION_TESTS_EMULATED_INFORMER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "emulator/emulator_with_faults.h"
#include "informer/cache/shared_informer.h"
#include "informer/client/kube_client.h"
#include "informer/client/resource_client.h"
#include "informer/util/clock.h"
#include "integration_tests/recording_lister_watcher.h"
#include "integration_tests/test_harness.h"

namespace integration {

// One SharedIndexInformer over the real API client (libcurl over loopback
// HTTP) against an emulator, for the dead-connection and back-off tests:
// every request the reflector sends is recorded (RecordingListerWatcher),
// every error it reports is collected (ErrorLog) and a RecordingHandler
// follows the notifications. The informer, its reflector and the HTTP
// transport use `clock` (a FakeClock the test pumps); the emulator keeps
// its own.
//
// Thread-safety: as its parts; build and destroy from the test thread.
// Ownership: the emulator and clock are not owned and must outlive it.
class EmulatedInformer {
 public:
  struct Options {
    std::string resource = "pods";
    informer::client::RestConfig rest;  // server/CA are filled in
    informer::client::ResourceClientOptions client;
    informer::Reflector::Options reflector;
  };

  // Builds everything but does not start the informer; CHECK-fails when
  // the client cannot be built (the emulator is up and known).
  EmulatedInformer(emulator::EmulatorWithFaults* emu, informer::Clock* clock,
                   Options options);
  // Stops the informer first.
  ~EmulatedInformer();

  absl::Status Start() { return informer_->Start(); }
  // Waits until the handler's view equals the emulator's state of the
  // resource (the deadline is a safety net); false on timeout.
  bool AwaitConverged();

  informer::SharedIndexInformer& informer() { return *informer_; }
  informer::client::HttpTransport* transport() { return kube_->transport(); }
  informer::client::ResourceClient& client() { return *client_; }
  const RecordingListerWatcher& requests() const { return *recorder_; }
  RecordingHandler& handler() { return handler_; }
  ErrorLog& errors() { return errors_; }
  const emulator::ResourceInfo& resource() const { return *resource_; }

 private:
  emulator::EmulatorWithFaults* const emu_;
  const emulator::ResourceInfo* resource_ = nullptr;
  RecordingHandler handler_;
  ErrorLog errors_;
  std::unique_ptr<informer::client::KubeClient> kube_;
  std::unique_ptr<informer::client::ResourceClient> client_;
  std::unique_ptr<RecordingListerWatcher> recorder_;
  std::unique_ptr<informer::SharedIndexInformer> informer_;
};

// Polls `condition` every few milliseconds until it holds (true) or
// `safety_net` has passed (false): a condition wait, never a fixed sleep.
bool PollUntil(const std::function<bool()>& condition,
               absl::Duration safety_net = absl::Seconds(60));

// A Pod named `name` in namespace `ns`, created in the emulator's store.
void CreatePod(emulator::EmulatorWithFaults* emu, const std::string& ns,
               const std::string& name);

}  // namespace integration

#endif  // INTEGRATION_TESTS_EMULATED_INFORMER_H_

#ifndef EMULATOR_EMULATOR_WITH_FAULTS_H_
#define EMULATOR_EMULATOR_WITH_FAULTS_H_

#include "emulator/emulator.h"
#include "emulator/fault_injector.h"
#include "emulator/load_generator.h"

namespace emulator {

// EmulatorWithFaults is the Emulator that //emulator:kube_emulator runs and
// tests embed: the serving core plus request fault injection (faults(), and
// /_emulator/{throttle,fail,expire_watch,expire_continue,clear_faults}) and
// the load generator (/_emulator/load). The sidecar's --demo links only the
// core.
//
// Thread-safety and ownership as Emulator; the hooks live as long as it.
class EmulatorWithFaults : public Emulator {
 public:
  explicit EmulatorWithFaults(EmulatorOptions options);
  // Stops serving before the hooks go away.
  ~EmulatorWithFaults() override;

  FaultInjector& faults() { return faults_; }

 private:
  FaultInjector faults_;
  LoadControl load_;
};

}  // namespace emulator

#endif  // EMULATOR_EMULATOR_WITH_FAULTS_H_

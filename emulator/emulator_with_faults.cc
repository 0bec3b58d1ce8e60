#include "emulator/emulator_with_faults.h"

#include <utility>

namespace emulator {

EmulatorWithFaults::EmulatorWithFaults(EmulatorOptions options)
    : Emulator(options), load_(&store(), &registry(), options.clock) {
  AddHooks(&faults_);
  AddHooks(&load_);
}

EmulatorWithFaults::~EmulatorWithFaults() { Stop(); }

}  // namespace emulator

#include "server/ops/malloc_tuning.h"

#include <stdlib.h>
#include <unistd.h>

namespace server {

bool ShouldApplyMallocTunables(const char* current) {
  return current == nullptr;
}

void ReexecWithMallocTunables(char** argv) {
  if (!ShouldApplyMallocTunables(getenv("GLIBC_TUNABLES"))) return;
  // Set before exec so the new image inherits it; the new process sees it
  // set and does not exec again.
  if (setenv("GLIBC_TUNABLES", kMallocTunables, /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): run on with the defaults. glibc ignores the
  // variable now, so leave it set for children to see what was intended.
}

}  // namespace server

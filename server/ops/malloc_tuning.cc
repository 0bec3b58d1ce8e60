#include "server/ops/malloc_tuning.h"

#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

namespace server {

bool ShouldApplyMallocTunables(const char* current) {
  return current == nullptr;
}

void ReexecWithMallocTunables(char** argv) {
  if (!ShouldApplyMallocTunables(getenv("GLIBC_TUNABLES"))) return;
  // Set before exec so the new image inherits it; the new process sees it
  // set and does not exec again.
  if (setenv("GLIBC_TUNABLES", kMallocTunables, /*overwrite=*/0) != 0) return;
  // Exec the binary's real path, not /proc/self/exe: the kernel names the
  // new image after the file exec'd, and "exe" in ps, top and ss says
  // nothing about which process it is.
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n > 0) {
    path[n] = '\0';
    execv(path, argv);
  }
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): run on with the defaults. glibc ignores the
  // variable now, so leave it set for children to see what was intended.
}

bool ReleaseFreeHeapMemory() { return malloc_trim(0) != 0; }

size_t HeapInUseBytes() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

size_t ResidentBytes() {
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  unsigned long size = 0, resident = 0;  // NOLINT(runtime/int): scanf's
  const int read = std::fscanf(statm, "%lu %lu", &size, &resident);
  std::fclose(statm);
  if (read != 2) return 0;
  return static_cast<size_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace server

#ifndef SERVER_OPS_MALLOC_TUNING_H_
#define SERVER_OPS_MALLOC_TUNING_H_

#include <cstddef>

namespace server {

// The glibc malloc settings the sidecar runs with: transparent huge pages
// for the heap and one arena (the main, sbrk-grown one: glibc advises huge
// pages only there, not in per-thread arenas).
//
// Why: a cache is hundreds of MB of small objects allocated in a burst at
// sync. With 4 KiB pages every first touch is a page fault, which on
// virtual machines costs more than the download itself; see
// docs/benchmarks.md, section 'Initial sync'.
inline constexpr char kMallocTunables[] =
    "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1";

// True if a process whose GLIBC_TUNABLES is `current` (null: unset) should
// be re-executed with kMallocTunables. A value the user set, even an empty
// one, is theirs and wins.
bool ShouldApplyMallocTunables(const char* current);

// glibc reads GLIBC_TUNABLES only when a process starts, so the binary
// re-executes itself (the file /proc/self/exe points to, so that the process
// keeps its name; same pid, same arguments) once with
// it set, unless ShouldApplyMallocTunables says not to. Call first thing in
// main, before any thread exists. Returns only when it did not re-execute
// (also when exec fails: the sidecar then runs with glibc's defaults).
void ReexecWithMallocTunables(char** argv);

// Gives the heap's free memory back to the kernel (glibc's malloc_trim):
// every whole free page, also those between live chunks, which free() never
// returns by itself (it trims only the top of the heap).
//
// Why: an initial sync allocates and frees hundreds of MB of short-lived
// memory (list buffers, decoder state, the DeltaFIFO's queue of the whole
// list) interleaved with the objects that stay cached. glibc keeps the freed
// holes mapped, so RSS after a sync stays well above the memory in use (see
// docs/benchmarks.md, section 'Memory per cached object'). A relist does
// the same on a smaller scale: its new objects are allocated while the
// cache still holds the ones they replace, which are then freed below live
// memory. Call it once after the caches synced and after each relist; it
// takes a few ms per hundred MB of heap (~45 ms at 500 MB) and holds the
// arena's lock meanwhile, so not on a thread that delivers events:
// HeapReleaser runs it on its own. Returns true if memory was released.
bool ReleaseFreeHeapMemory();

// The heap bytes malloc has handed out and not had back: chunks in use in
// the arenas plus chunks mmapped on their own (glibc's mallinfo2 uordblks
// + hblkhd). What the process's data takes on the heap; RSS well above it
// is freed memory glibc keeps (see ReleaseFreeHeapMemory), or not heap at
// all (stacks, code). It walks the arenas' free lists under their locks
// (up to ~150 ms when the heap is fragmented): not for hot paths, nor for
// every scrape; HeapReleaser measures it at a bounded rate.
size_t HeapInUseBytes();

// This process's resident memory (VmRSS) in bytes; 0 if unreadable.
size_t ResidentBytes();

}  // namespace server

#endif  // SERVER_OPS_MALLOC_TUNING_H_

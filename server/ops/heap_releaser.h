#ifndef SERVER_OPS_HEAP_RELEASER_H_
#define SERVER_OPS_HEAP_RELEASER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "informer/util/clock.h"

namespace server {

// HeapReleaser gives the heap's free memory back to the kernel
// (ReleaseFreeHeapMemory, i.e. malloc_trim) and measures the heap in use
// (HeapInUseBytes, i.e. mallinfo2), both on a thread of its own.
//
// Why a thread: both walk the heap holding the arena's lock, for tens of
// ms at a few hundred MB of heap (up to ~150 ms when it is fragmented).
// Run on an informer's event thread or on a /metrics scrape, that stalls
// event delivery and the scrape itself; here they stall only allocations
// that happen to run meanwhile, once per request and not once per caller.
//
// Releases: RequestRelease returns at once. Requests that arrive while
// none runs, or while one runs, coalesce into one release after it: a
// burst of relists costs one or two trims, never one each, and never two
// at once. ReleaseAndWait waits for a release that started after it was
// called.
//
// Release again: with Options::release_again_after > 0, the thread runs
// one more release that long after the last release that served requests
// (re-armed by each such release, so a burst of relists gets one). The
// release a relist asks for runs while that relist's transient allocations
// (decoded pages, the consumers' catch-up) are still in use; once they are
// freed, glibc keeps them resident until the next relist's release. The
// second release gives them back between relists.
//
// Heap in use: LastHeapInUse returns the last measurement, never measures
// on the caller's thread. The thread measures after each release (the
// trim consolidated the free lists, so the walk is at its cheapest then),
// and when LastHeapInUse finds the last measurement older than
// `measure_interval` (that caller still gets the older one). So a reader
// polling every P sees values at most max(measure_interval, P) + one
// measurement old, and the heap is walked at most once per
// measure_interval on readers' behalf. The constructor measures once on
// the calling thread (a process's heap is small when it starts).
//
// Stop: a release running finishes, a pending one is dropped (the process
// is going away; giving memory back then is wasted work), ReleaseAndWait
// callers return false, the thread is joined. Requests after Stop are
// ignored.
//
// Thread-safety: every method from any thread, Stop too (it is
// idempotent). Ownership: the clock (not owned) must outlive the releaser.
class HeapReleaser {
 public:
  struct Options {
    // Gives free heap back; returns true if memory was released. Null:
    // ReleaseFreeHeapMemory. Replaceable for tests.
    std::function<bool()> release;
    // Heap bytes in use. Null: HeapInUseBytes. Replaceable for tests.
    std::function<size_t()> heap_in_use;
    // Timestamps of the measurements. Null: informer::RealClock().
    informer::Clock* clock = nullptr;
    // A measurement older than this is refreshed when read.
    absl::Duration measure_interval = absl::Seconds(10);
    // See "Release again" in the class comment; 0: never.
    absl::Duration release_again_after = absl::ZeroDuration();
  };

  // A measurement of the heap in use, when it was taken and how old it is
  // (when read, by the clock).
  struct HeapInUse {
    size_t bytes = 0;
    absl::Time measured = absl::InfinitePast();
    absl::Duration age;
  };

  explicit HeapReleaser(Options options);
  HeapReleaser() : HeapReleaser(Options()) {}
  ~HeapReleaser();
  HeapReleaser(const HeapReleaser&) = delete;
  HeapReleaser& operator=(const HeapReleaser&) = delete;

  // Asks for a release; returns without waiting for it.
  void RequestRelease();
  // Asks for a release and waits until one that started after this call
  // has finished. False if the releaser stopped first.
  bool ReleaseAndWait();
  // The last measurement of the heap in use (see the class comment); asks
  // the thread for a new one when it is older than measure_interval.
  HeapInUse LastHeapInUse();
  // The same without asking for a new measurement.
  HeapInUse PeekHeapInUse() const;
  // Releases finished so far, the ones run again after a delay included.
  int64_t releases() const;
  // Of those, the ones run again after a delay.
  int64_t releases_again() const;
  // See the class comment. Idempotent.
  void Stop();

 private:
  void Run();
  // Runs a release covering requests up to `covers` (none if 0; `requests`
  // of them since the last one; `again`: the delayed one, covering none)
  // and a measurement, without mu_.
  void ReleaseAndMeasure(uint64_t covers, uint64_t requests, bool again)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::function<bool()> release_;
  const std::function<size_t()> heap_in_use_;
  informer::Clock* const clock_;
  const absl::Duration measure_interval_;
  const absl::Duration release_again_after_;

  mutable absl::Mutex mu_;
  // Release requests are numbered; `requested_` is the last one's number,
  // `started_` the last one the running (or last) release covers, `done_`
  // the last one a finished release covers.
  uint64_t requested_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  bool measure_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  HeapInUse last_ ABSL_GUARDED_BY(mu_);
  int64_t releases_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t releases_again_ ABSL_GUARDED_BY(mu_) = 0;
  // When the delayed release is due; InfiniteFuture when none is.
  absl::Time again_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();

  std::once_flag join_once_;
  std::thread thread_;
};

}  // namespace server

#endif  // SERVER_OPS_HEAP_RELEASER_H_

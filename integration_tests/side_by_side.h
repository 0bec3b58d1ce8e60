#ifndef INTEGRATION_TESTS_SIDE_BY_SIDE_H_
#define INTEGRATION_TESTS_SIDE_BY_SIDE_H_

// The contenders of a side-by-side initial sync against one API server
// (the emulator or a real kube-apiserver), each a fresh process measured
// once: the real informer_sidecar, client-go v0.37's shared informer
// (kube-informer-bench, with its defaults or with managedFields stripped),
// and a plain paced download of the same list (curl). The benchmarks run
// them one after another, alternating, so that a 4 GB client-go never
// shares the machine with another contender.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace integration {

// One contender's figures for one run.
struct SyncResult {
  double sync_seconds = 0;  // see each Run* function for what is timed
  double rss_bytes = 0;     // VmRSS once synced
  double peak_bytes = 0;    // VmHWM once synced: the peak during the sync
  double objects = 0;       // objects cached (curl: bytes downloaded)
};

// VmRSS and VmHWM of `pid`, in bytes (from /proc/PID/status).
struct ProcMemory {
  double rss = 0;
  double hwm = 0;
  double anon = 0;
};
ProcMemory ReadProcMemory(pid_t pid);

// kube-informer-bench (client-go v0.37.2) once: --kubeconfig, --resource
// ("v1/pods"), --namespace (empty: all) and --strip-managed-fields when
// `strip`; with `watch_list` false, client-go's WatchListClient gate is
// turned off (KUBE_FEATURE_WatchListClient=false: LIST, then WATCH), else
// it has its default (on in v0.37: the initial state as one watch with
// sendInitialEvents). sync_seconds is its own (informer start to HasSynced,
// after a one-object probe list); rss_bytes and peak_bytes are its
// rss_bytes_after_sync and rss_peak_bytes.
absl::StatusOr<SyncResult> RunClientGo(const std::string& binary,
                                       const std::string& kubeconfig,
                                       const std::string& resource,
                                       const std::string& ns, bool strip,
                                       bool watch_list, absl::Duration timeout);

// `curl -s -o /dev/null` of `url` with `curl_flags` (e.g. --cacert and an
// Authorization header for a real API server) and a User-Agent that is not
// curl's (kube-apiserver pretty-prints JSON for curl); sync_seconds is
// curl's time_total, objects the bytes downloaded.
absl::StatusOr<SyncResult> RunCurl(const std::string& url,
                                   const std::string& curl_flags);

// The WatchList's own download floor: curl reads a watch of `url` (a
// collection's URL, without a query) with sendInitialEvents=true as the
// sidecar's reflector opens it (HTTP/1.1, resourceVersionMatch=NotOlderThan,
// bookmarks), with `curl_flags` and the same User-Agent as RunCurl, until
// the initial-events-end bookmark has arrived. A watch stays open after
// it, so curl is stopped there. sync_seconds is from curl's start to the
// bookmark, objects the bytes read. An error when the stream ends (or
// `timeout` passes, the server ends it) without the bookmark.
absl::StatusOr<SyncResult> RunCurlWatchList(const std::string& url,
                                            const std::string& curl_flags,
                                            absl::Duration timeout);

// The time of the first glog line of the file at `path` that contains
// `needle` (glog's "I20261203 15:08:23.123456 ..." prefix, local time), e.g.
// the sidecar's ": cache synced". NotFound when no line has it.
absl::StatusOr<absl::Time> LogLineTime(const std::string& path,
                                       const std::string& needle);

// Parses kube-informer-bench's JSON line (the fields above). Exposed for
// its test.
absl::StatusOr<SyncResult> ParseClientGoLine(const std::string& line);

}  // namespace integration

#endif  // INTEGRATION_TESTS_SIDE_BY_SIDE_H_

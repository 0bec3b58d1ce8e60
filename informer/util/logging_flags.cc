// The absl flags that drive glog. This file must not include
// <glog/logging.h>: glog's header declares gflags variables named FLAGS_v,
// FLAGS_logtostderr, ... in the global namespace, which would collide with
// the FLAGS_ objects ABSL_FLAG defines for the same names.

#include "informer/util/logging_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int32_t, v, 0,
          "Verbose logging level: VLOG(n) messages with n <= v are shown.");
ABSL_FLAG(std::string, vmodule, "",
          "Per-module verbose level, e.g. 'reflector=2,delta_fifo=1' "
          "(file name without extension, glob patterns allowed).");
ABSL_FLAG(bool, logtostderr, true,
          "Log to stderr instead of files (the default: containers collect "
          "stderr).");
ABSL_FLAG(int32_t, stderrthreshold, 2,
          "With --logtostderr=false: messages at or above this severity are "
          "also copied to stderr (0=INFO 1=WARNING 2=ERROR 3=FATAL).");
ABSL_FLAG(int32_t, minloglevel, 0,
          "Drop messages below this severity (0=INFO 1=WARNING 2=ERROR).");
ABSL_FLAG(std::string, log_dir, "",
          "With --logtostderr=false: directory for log files (default: the "
          "system temporary directory).");

namespace informer {
namespace internal {

LogFlagValues ReadLogFlags() {
  LogFlagValues v;
  v.v = absl::GetFlag(FLAGS_v);
  v.vmodule = absl::GetFlag(FLAGS_vmodule);
  v.logtostderr = absl::GetFlag(FLAGS_logtostderr);
  v.stderrthreshold = absl::GetFlag(FLAGS_stderrthreshold);
  v.minloglevel = absl::GetFlag(FLAGS_minloglevel);
  v.log_dir = absl::GetFlag(FLAGS_log_dir);
  return v;
}

}  // namespace internal
}  // namespace informer

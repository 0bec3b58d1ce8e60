#ifndef INFORMER_UTIL_LOGGING_FLAGS_H_
#define INFORMER_UTIL_LOGGING_FLAGS_H_

#include <cstdint>
#include <string>

namespace informer {
namespace internal {

// Values of our glog-controlling absl flags (see logging.h).
struct LogFlagValues {
  int32_t v = 0;
  std::string vmodule;
  bool logtostderr = true;
  int32_t stderrthreshold = 2;
  int32_t minloglevel = 0;
  std::string log_dir;
};

LogFlagValues ReadLogFlags();

}  // namespace internal
}  // namespace informer

#endif  // INFORMER_UTIL_LOGGING_FLAGS_H_

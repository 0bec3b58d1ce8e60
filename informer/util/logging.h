#ifndef INFORMER_UTIL_LOGGING_H_
#define INFORMER_UTIL_LOGGING_H_

#include <string>
#include <vector>

namespace informer {

// Parses the command line with absl::ParseCommandLine and initialises glog
// from our own absl flags.
//
// Why: glog 0.6 reads its settings from gflags, which absl's parser never
// sees, so `--v=2` would be rejected (or silently ignored) and `--help` would
// not list it. We define the log settings users need as absl flags
// (--v, --vmodule, --logtostderr, --stderrthreshold, --minloglevel,
// --log_dir) and copy them into glog here, once, before any logging.
//
// Call once at the start of main(). Returns the positional arguments
// (argv[0] first). Not thread-safe; nothing else may run yet.
std::vector<char*> InitProgram(int argc, char** argv, const char* usage);

}  // namespace informer

#endif  // INFORMER_UTIL_LOGGING_H_

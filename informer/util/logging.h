#ifndef INFORMER_UTIL_LOGGING_H_
#define INFORMER_UTIL_LOGGING_H_

#include <string>
#include <vector>

namespace informer {

// A titled group of flags for --help (see InitProgram).
struct FlagGroup {
  std::string title;
  // Flag names without dashes.
  std::vector<std::string> flags;
};

// Parses the command line with absl::ParseCommandLine and initialises glog
// from our own absl flags.
//
// Why: glog 0.6 reads its settings from gflags, which absl's parser never
// sees, so `--v=2` would be rejected (or silently ignored) and `--help` would
// not list it. We define the log settings users need as absl flags
// (--v, --vmodule, --logtostderr, --stderrthreshold, --minloglevel,
// --log_dir) and copy them into glog here, once, before any logging.
//
// --help (or -help) prints `usage`, then every flag of ours (defined under
// informer/, server/ or emulator/) with its default and help: the flags of
// each of `help_groups` under its title, the log settings under "Logging",
// any other flag of ours under "Other flags"; then exits 0. --helpfull
// keeps absl's listing of every flag, libraries' included.
//
// Call once at the start of main(). Returns the positional arguments
// (argv[0] first). Not thread-safe; nothing else may run yet.
std::vector<char*> InitProgram(int argc, char** argv, const char* usage,
                               const std::vector<FlagGroup>& help_groups = {});

// The text --help prints (see InitProgram).
std::string HelpText(const char* usage,
                     const std::vector<FlagGroup>& help_groups);

}  // namespace informer

#endif  // INFORMER_UTIL_LOGGING_H_

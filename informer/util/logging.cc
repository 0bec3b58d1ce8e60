#include "informer/util/logging.h"

#include <glog/logging.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "informer/util/logging_flags.h"

namespace informer {

std::vector<char*> InitProgram(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  // --help lists every flag of ours (the log settings live in
  // informer/util/logging_flags.cc, not in the binary's main file), and none of
  // the libraries' internals.
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::StartsWith(path, "informer/") ||
           absl::StartsWith(path, "server/") ||
           absl::StartsWith(path, "emulator/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const internal::LogFlagValues flags = internal::ReadLogFlags();
  // These are glog's gflags variables (fLI::FLAGS_v and friends).
  FLAGS_v = flags.v;
  FLAGS_logtostderr = flags.logtostderr;
  FLAGS_stderrthreshold = flags.stderrthreshold;
  FLAGS_minloglevel = flags.minloglevel;
  if (!flags.log_dir.empty()) FLAGS_log_dir = flags.log_dir;
  google::InitGoogleLogging(argv[0]);
  for (absl::string_view entry :
       absl::StrSplit(flags.vmodule, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    int level = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &level)) {
      LOG(WARNING) << "ignoring malformed --vmodule entry '" << entry << "'";
      continue;
    }
    google::SetVLOGLevel(std::string(kv.first).c_str(), level);
  }
  google::InstallFailureSignalHandler();
  return positional;
}

}  // namespace informer

#include "informer/util/logging.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "informer/util/logging_flags.h"

namespace informer {
namespace {

bool IsOurs(absl::string_view path) {
  return absl::StartsWith(path, "informer/") ||
         absl::StartsWith(path, "server/") ||
         absl::StartsWith(path, "emulator/");
}

// `text` wrapped at 78 columns, each line indented by `indent`.
std::string Wrap(absl::string_view text, size_t indent) {
  std::string out;
  size_t column = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > indent && column + 1 + word.size() > 78) {
      out.push_back('\n');
      column = 0;
    }
    if (column == 0) {
      out.append(indent, ' ');
      column = indent;
    } else {
      out.push_back(' ');
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
  }
  out.push_back('\n');
  return out;
}

std::string FlagHelp(const absl::CommandLineFlag& flag) {
  const std::string def = flag.DefaultValue();
  return absl::StrCat("  --", flag.Name(),
                      " (default: ", def.empty() ? "\"\"" : def, ")\n",
                      Wrap(flag.Help(), 6));
}

}  // namespace

std::string HelpText(const char* usage,
                     const std::vector<FlagGroup>& help_groups) {
  std::string out = absl::StrCat(usage, "\n");
  absl::flat_hash_map<absl::string_view, absl::CommandLineFlag*> all =
      absl::GetAllFlags();
  std::set<std::string> listed;
  auto group = [&](absl::string_view title,
                   const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) {
      auto it = all.find(name);
      if (it == all.end() || !listed.insert(name).second) continue;
      absl::StrAppend(&text, FlagHelp(*it->second));
    }
    if (!text.empty()) absl::StrAppend(&out, "\n", title, ":\n", text);
  };
  for (const FlagGroup& g : help_groups) group(g.title, g.flags);
  std::vector<std::string> logging;
  std::vector<std::string> other;
  for (const auto& [name, flag] : all) {
    if (!IsOurs(flag->Filename()) || listed.count(std::string(name)) > 0) {
      continue;
    }
    (absl::StrContains(flag->Filename(), "logging") ? logging : other)
        .emplace_back(name);
  }
  std::sort(logging.begin(), logging.end());
  std::sort(other.begin(), other.end());
  group("Logging", logging);
  group("Other flags", other);
  absl::StrAppend(&out, "\nEvery flag, the libraries' included: --helpfull.\n");
  return out;
}

std::vector<char*> InitProgram(int argc, char** argv, const char* usage,
                               const std::vector<FlagGroup>& help_groups) {
  absl::SetProgramUsageMessage(usage);
  // Our own --help: absl's repeats the program name before the usage, lists
  // only the main file's flags by default and exits 1. A request for help
  // is a success.
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help") {
      const std::string text = HelpText(usage, help_groups);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      std::exit(0);
    }
  }
  // --helpfull lists every flag, --helpshort those of ours.
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsOurs;
  config.contains_helpshort_flags = IsOurs;
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

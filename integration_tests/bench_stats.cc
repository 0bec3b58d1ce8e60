#include "integration_tests/bench_stats.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace integration {

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  const std::string stat((std::istreambuf_iterator<char>(f)),
                         std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return 0;
  // Fields after the ")" that closes the command name; utime and stime are
  // fields 14 and 15 of the whole line.
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(paren + 2), ' ');
  double utime = 0, stime = 0;
  if (fields.size() <= 12 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double PercentileMs(std::vector<int32_t>& latencies_us, double p) {
  if (latencies_us.empty()) return 0;
  const size_t k = std::min(latencies_us.size() - 1,
                            static_cast<size_t>(p * latencies_us.size()));
  std::nth_element(latencies_us.begin(), latencies_us.begin() + k,
                   latencies_us.end());
  return latencies_us[k] / 1000.0;
}

}  // namespace integration

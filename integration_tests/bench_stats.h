#ifndef INTEGRATION_TESTS_BENCH_STATS_H_
#define INTEGRATION_TESTS_BENCH_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace integration {

// What the benchmarks of this package measure processes and samples with
// (one copy, so that every benchmark's figures mean the same).

// CLOCK_MONOTONIC in nanoseconds (comparable across processes, e.g. with
// the write stamps the emulator's load generator puts in objects).
int64_t MonotonicNanos();

// utime + stime of process `pid` so far, in seconds (from /proc/PID/stat);
// 0 if the process is gone or the line cannot be read.
double ProcessCpuSeconds(pid_t pid);

// The median (the mean of the two middle values for an even count); 0 for
// none.
double Median(std::vector<double> values);

// The p-quantile (0 <= p <= 1, nearest rank) of latencies in microseconds,
// in milliseconds; 0 for none. Reorders `latencies_us`.
double PercentileMs(std::vector<int32_t>& latencies_us, double p);

}  // namespace integration

#endif  // INTEGRATION_TESTS_BENCH_STATS_H_

#ifndef SERVER_OPS_METRICS_H_
#define SERVER_OPS_METRICS_H_

// A small Prometheus metrics registry (Debian 12 has no prometheus-cpp):
// counters, gauges and histograms with labels, plus callback metrics read at
// scrape time, rendered in the text exposition format 0.0.4.

#include <glog/logging.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace server {
namespace metrics {

// The Content-Type of Registry::Render's output.
inline constexpr char kContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

// A label value tuple, in the order of its family's label names.
using LabelValues = std::vector<std::string>;

// One monotonic time series. Lock-free; pointers stay valid for the
// registry's lifetime, so hot paths keep them.
class Counter {
 public:
  // Negative increments are ignored (a counter never goes down).
  void Increment(double by = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// One time series that goes up and down. Lock-free.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// One histogram time series (cumulative buckets, sum and count), consistent
// under its own small lock.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Get() const;

 private:
  const std::vector<double>* const bounds_;  // owned by the family
  mutable absl::Mutex mu_;
  std::vector<uint64_t> buckets_ ABSL_GUARDED_BY(mu_);  // not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// A metric family: one name, help text, label names, and a series per label
// value tuple (created on first use, never removed).
template <typename T>
class Family {
 public:
  // The series for `values`. Its arity must match the label names (a
  // programming error: it CHECK-fails naming the metric).
  T& With(const LabelValues& values);
  // The series of a family without labels.
  T& Get() { return With({}); }

  const std::string& name() const { return name_; }

 private:
  friend class Registry;
  Family(std::string name, std::vector<std::string> label_names,
         std::vector<double> bounds)
      : name_(std::move(name)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}
  T* NewSeries();

  const std::string name_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> series_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// A sample produced by a callback metric at scrape time.
struct Sample {
  LabelValues labels;
  double value = 0;
};
using SampleFn = std::function<std::vector<Sample>()>;

// Bucket bounds for request latencies in seconds (1 ms to 60 s).
std::vector<double> LatencyBuckets();

// Registry owns metric families and renders them.
//
// Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__", and "le" is reserved
// for histograms); a name registers once. Errors are InvalidArgument or
// AlreadyExists naming the metric.
//
// Rendering: families in registration order, each with `# HELP` (backslash
// and newline escaped) and `# TYPE`, series sorted by label values, label
// values escaped (backslash, double quote, newline). Callback metrics run
// during Render, without the registry's lock held on their behalf beyond
// the family list; they must not call back into the registry's Add*.
//
// Thread-safety: everything is thread-safe. Families live as long as the
// registry.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  absl::StatusOr<CounterFamily*> AddCounter(
      absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names = {});
  absl::StatusOr<GaugeFamily*> AddGauge(
      absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names = {});
  // `bounds`: strictly increasing finite upper bounds (+Inf is implicit).
  absl::StatusOr<HistogramFamily*> AddHistogram(
      absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names, std::vector<double> bounds);
  // Gauges and counters whose samples `fn` reads at scrape time (e.g. from
  // an informer's counters). Each sample's labels must match
  // `label_names`; mismatching samples are skipped.
  absl::Status AddCallbackGauge(absl::string_view name, absl::string_view help,
                                std::vector<std::string> label_names,
                                SampleFn fn);
  absl::Status AddCallbackCounter(absl::string_view name,
                                  absl::string_view help,
                                  std::vector<std::string> label_names,
                                  SampleFn fn);

  // The text exposition of every metric.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Entry {
    std::string name;
    std::string help;
    Type type;
    std::vector<std::string> label_names;
    // Exactly one of these is set.
    std::unique_ptr<CounterFamily> counter;
    std::unique_ptr<GaugeFamily> gauge;
    std::unique_ptr<HistogramFamily> histogram;
    SampleFn callback;
  };

  absl::Status Validate(absl::string_view name,
                        const std::vector<std::string>& label_names) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a new entry (its family is set by the caller).
  Entry* NewEntryLocked(absl::string_view name, absl::string_view help,
                        Type type, const std::vector<std::string>& label_names)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddCallback(absl::string_view name, absl::string_view help,
                           Type type, std::vector<std::string> label_names,
                           SampleFn fn);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

// Text exposition helpers (exposed for tests).
std::string EscapeLabelValue(absl::string_view v);
std::string EscapeHelp(absl::string_view v);
// Shortest text that parses back to `v`; "+Inf", "-Inf", "NaN".
std::string FormatValue(double v);

// --- Family template members ---

template <typename T>
T& Family<T>::With(const LabelValues& values) {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(values);
  if (it != series_.end()) return *it->second;
  if (values.size() != label_names_.size()) {
    // A caller bug; fail loudly rather than emit a malformed exposition.
    LOG(FATAL) << "metric " << name_ << ": " << values.size()
               << " label values given for " << label_names_.size()
               << " label names";
  }
  auto [pos, inserted] =
      series_.emplace(values, std::unique_ptr<T>(NewSeries()));
  return *pos->second;
}

template <>
inline Counter* Family<Counter>::NewSeries() {
  return new Counter();
}
template <>
inline Gauge* Family<Gauge>::NewSeries() {
  return new Gauge();
}
template <>
inline Histogram* Family<Histogram>::NewSeries() {
  return new Histogram(&bounds_);
}

}  // namespace metrics
}  // namespace server

#endif  // SERVER_OPS_METRICS_H_

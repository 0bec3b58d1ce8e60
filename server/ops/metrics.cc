#include "server/ops/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace server {
namespace metrics {

namespace {

void AtomicAdd(std::atomic<double>* a, double by) {
  double cur = a->load(std::memory_order_relaxed);
  while (!a->compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

bool ValidMetricName(absl::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || c == ':' ||
                    (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

bool ValidLabelName(absl::string_view n) {
  if (n.empty() || absl::StartsWith(n, "__")) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok =
        absl::ascii_isalpha(c) || c == '_' || (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

void AppendLabels(const std::vector<std::string>& names,
                  const LabelValues& values, absl::string_view extra_name,
                  absl::string_view extra_value, std::string* out) {
  if (names.empty() && extra_name.empty()) return;
  out->push_back('{');
  bool first = true;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!first) out->push_back(',');
    absl::StrAppend(out, extra_name, "=\"", extra_value, "\"");
  }
  out->push_back('}');
}

void AppendSample(absl::string_view name,
                  const std::vector<std::string>& label_names,
                  const LabelValues& values, double v, std::string* out) {
  out->append(name.data(), name.size());
  AppendLabels(label_names, values, "", "", out);
  absl::StrAppend(out, " ", FormatValue(v), "\n");
}

const char* TypeName(int type) {
  switch (type) {
    case 0:
      return "counter";
    case 1:
      return "gauge";
    default:
      return "histogram";
  }
}

}  // namespace

void Counter::Increment(double by) {
  if (!(by > 0)) return;
  AtomicAdd(&value_, by);
}

void Gauge::Add(double by) { AtomicAdd(&value_, by); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(bounds->size() + 1, 0) {}

void Histogram::Observe(double v) {
  // The first bound >= v (Prometheus buckets are "less than or equal").
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin());
  absl::MutexLock lock(&mu_);
  ++buckets_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::Get() const {
  Snapshot s;
  absl::MutexLock lock(&mu_);
  s.cumulative.reserve(buckets_.size());
  uint64_t total = 0;
  for (uint64_t b : buckets_) {
    total += b;
    s.cumulative.push_back(total);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
          0.5,   1,      2.5,   5,    10,    30,   60};
}

std::string EscapeLabelValue(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  // Integers (counters, most gauges) print exactly, without an exponent.
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v) {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

absl::Status Registry::Validate(
    absl::string_view name, const std::vector<std::string>& label_names) const {
  if (!ValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name, "\" is not a valid name"));
  }
  for (const std::string& l : label_names) {
    if (!ValidLabelName(l) || l == "le") {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric ", name, ": label name \"", l, "\" is not allowed"));
    }
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    for (size_t j = i + 1; j < label_names.size(); ++j) {
      if (label_names[i] == label_names[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metric ", name, ": label \"", label_names[i], "\" repeated"));
      }
    }
  }
  for (const auto& e : entries_) {
    if (e->name == name) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric ", name, " is already registered"));
    }
  }
  return absl::OkStatus();
}

Registry::Entry* Registry::NewEntryLocked(
    absl::string_view name, absl::string_view help, Type type,
    const std::vector<std::string>& label_names) {
  auto e = std::make_unique<Entry>();
  e->name = std::string(name);
  e->help = std::string(help);
  e->type = type;
  e->label_names = label_names;
  entries_.push_back(std::move(e));
  return entries_.back().get();
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = Validate(name, label_names); !st.ok()) return st;
  Entry* e = NewEntryLocked(name, help, Type::kCounter, label_names);
  e->counter.reset(new CounterFamily(e->name, std::move(label_names), {}));
  return e->counter.get();
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = Validate(name, label_names); !st.ok()) return st;
  Entry* e = NewEntryLocked(name, help, Type::kGauge, label_names);
  e->gauge.reset(new GaugeFamily(e->name, std::move(label_names), {}));
  return e->gauge.get();
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names, std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = Validate(name, label_names); !st.ok()) return st;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name,
                       ": bucket bounds must be finite and strictly "
                       "increasing (bound ",
                       i, " is ", FormatValue(bounds[i]), ")"));
    }
  }
  Entry* e = NewEntryLocked(name, help, Type::kHistogram, label_names);
  e->histogram.reset(
      new HistogramFamily(e->name, std::move(label_names), std::move(bounds)));
  return e->histogram.get();
}

absl::Status Registry::AddCallback(absl::string_view name,
                                   absl::string_view help, Type type,
                                   std::vector<std::string> label_names,
                                   SampleFn fn) {
  if (fn == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", name, ": no callback"));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status st = Validate(name, label_names); !st.ok()) return st;
  NewEntryLocked(name, help, type, label_names)->callback = std::move(fn);
  return absl::OkStatus();
}

absl::Status Registry::AddCallbackGauge(absl::string_view name,
                                        absl::string_view help,
                                        std::vector<std::string> label_names,
                                        SampleFn fn) {
  return AddCallback(name, help, Type::kGauge, std::move(label_names),
                     std::move(fn));
}

absl::Status Registry::AddCallbackCounter(absl::string_view name,
                                          absl::string_view help,
                                          std::vector<std::string> label_names,
                                          SampleFn fn) {
  return AddCallback(name, help, Type::kCounter, std::move(label_names),
                     std::move(fn));
}

std::string Registry::Render() const {
  // Entries are never removed, so pointers taken under the lock stay valid;
  // callbacks then run without the registry's lock.
  std::vector<const Entry*> entries;
  {
    absl::MutexLock lock(&mu_);
    entries.reserve(entries_.size());
    for (const auto& e : entries_) entries.push_back(e.get());
  }
  std::string out;
  for (const Entry* e : entries) {
    absl::StrAppend(&out, "# HELP ", e->name, " ", EscapeHelp(e->help), "\n",
                    "# TYPE ", e->name, " ",
                    TypeName(static_cast<int>(e->type)), "\n");
    if (e->callback) {
      std::vector<Sample> samples = e->callback();
      std::sort(
          samples.begin(), samples.end(),
          [](const Sample& a, const Sample& b) { return a.labels < b.labels; });
      for (const Sample& s : samples) {
        if (s.labels.size() != e->label_names.size()) continue;
        AppendSample(e->name, e->label_names, s.labels, s.value, &out);
      }
    } else if (e->counter != nullptr) {
      absl::MutexLock lock(&e->counter->mu_);
      for (const auto& [values, c] : e->counter->series_) {
        AppendSample(e->name, e->label_names, values, c->value(), &out);
      }
    } else if (e->gauge != nullptr) {
      absl::MutexLock lock(&e->gauge->mu_);
      for (const auto& [values, g] : e->gauge->series_) {
        AppendSample(e->name, e->label_names, values, g->value(), &out);
      }
    } else if (e->histogram != nullptr) {
      const HistogramFamily& f = *e->histogram;
      absl::MutexLock lock(&f.mu_);
      const std::string bucket = e->name + "_bucket";
      for (const auto& [values, h] : f.series_) {
        const Histogram::Snapshot s = h->Get();
        for (size_t i = 0; i < s.cumulative.size(); ++i) {
          const std::string le =
              i < f.bounds_.size() ? FormatValue(f.bounds_[i]) : "+Inf";
          out += bucket;
          AppendLabels(e->label_names, values, "le", le, &out);
          absl::StrAppend(&out, " ", s.cumulative[i], "\n");
        }
        AppendSample(e->name + "_sum", e->label_names, values, s.sum, &out);
        AppendSample(e->name + "_count", e->label_names, values,
                     static_cast<double>(s.count), &out);
      }
    }
  }
  return out;
}

}  // namespace metrics
}  // namespace server

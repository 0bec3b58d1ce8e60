#include "server/ops/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace server {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, CounterRendersHelpTypeAndLabels) {
  Registry r;
  CounterFamily* calls =
      r.AddCounter("x_calls_total", "Calls.", {"method", "code"}).value();
  calls->With({"/a.B/C", "OK"}).Increment();
  calls->With({"/a.B/C", "OK"}).Increment(2);
  calls->With({"/a.B/D", "NOT_FOUND"}).Increment();
  calls->With({"/a.B/D", "NOT_FOUND"}).Increment(-5);  // ignored
  EXPECT_EQ(r.Render(),
            "# HELP x_calls_total Calls.\n"
            "# TYPE x_calls_total counter\n"
            "x_calls_total{method=\"/a.B/C\",code=\"OK\"} 3\n"
            "x_calls_total{method=\"/a.B/D\",code=\"NOT_FOUND\"} 1\n");
}

TEST(MetricsTest, GaugeWithoutLabels) {
  Registry r;
  GaugeFamily* g = r.AddGauge("x_open", "Open things.").value();
  g->Get().Set(5);
  g->Get().Add(-2);
  g->Get().Add(0.5);
  EXPECT_EQ(r.Render(),
            "# HELP x_open Open things.\n"
            "# TYPE x_open gauge\n"
            "x_open 3.5\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry r;
  CounterFamily* c =
      r.AddCounter("x_total", "Back\\slash and\nnewline \"quoted\".", {"v"})
          .value();
  c->With({"a\"b\\c\nd"}).Increment();
  const std::string text = r.Render();
  // HELP escapes backslash and newline only.
  EXPECT_THAT(text, HasSubstr("# HELP x_total Back\\\\slash and\\nnewline "
                              "\"quoted\".\n"));
  EXPECT_THAT(text, HasSubstr("x_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"));
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Registry r;
  HistogramFamily* h =
      r.AddHistogram("x_seconds", "Latency.", {"verb"}, {0.1, 1}).value();
  h->With({"GET"}).Observe(0.05);
  h->With({"GET"}).Observe(0.1);  // le is inclusive
  h->With({"GET"}).Observe(0.5);
  h->With({"GET"}).Observe(7);
  EXPECT_EQ(r.Render(),
            "# HELP x_seconds Latency.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{verb=\"GET\",le=\"0.1\"} 2\n"
            "x_seconds_bucket{verb=\"GET\",le=\"1\"} 3\n"
            "x_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4\n"
            "x_seconds_sum{verb=\"GET\"} 7.65\n"
            "x_seconds_count{verb=\"GET\"} 4\n");
}

TEST(MetricsTest, CallbackMetricsAreReadAtScrapeTimeAndSorted) {
  Registry r;
  int objects = 1;
  ASSERT_TRUE(
      r.AddCallbackGauge("x_objects", "Objects.", {"resource"}, [&objects] {
         return std::vector<Sample>{{{"pods"}, double(objects)},
                                    {{"configmaps"}, 2},
                                    {{"bad", "arity"}, 9}};
       }).ok());
  ASSERT_TRUE(r.AddCallbackCounter("x_relists_total", "Relists.", {}, [] {
                 return std::vector<Sample>{{{}, 4}};
               }).ok());
  objects = 10;
  EXPECT_EQ(r.Render(),
            "# HELP x_objects Objects.\n"
            "# TYPE x_objects gauge\n"
            "x_objects{resource=\"configmaps\"} 2\n"
            "x_objects{resource=\"pods\"} 10\n"
            "# HELP x_relists_total Relists.\n"
            "# TYPE x_relists_total counter\n"
            "x_relists_total 4\n");
}

TEST(MetricsTest, RejectsBadNamesDuplicatesAndBounds) {
  Registry r;
  absl::StatusOr<CounterFamily*> bad = r.AddCounter("1x", "h");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("1x"));
  EXPECT_FALSE(r.AddCounter("x-y", "h").ok());
  EXPECT_FALSE(r.AddGauge("x", "h", {"le"}).ok());
  EXPECT_FALSE(r.AddGauge("x", "h", {"__reserved"}).ok());
  EXPECT_FALSE(r.AddGauge("x", "h", {"a", "a"}).ok());
  ASSERT_TRUE(r.AddGauge("x", "h").ok());
  absl::StatusOr<GaugeFamily*> dup = r.AddGauge("x", "h");
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(r.AddHistogram("h", "h", {}, {1, 1}).ok());
  EXPECT_FALSE(
      r.AddHistogram("h", "h", {}, {std::numeric_limits<double>::infinity()})
          .ok());
  EXPECT_FALSE(r.AddCallbackGauge("cb", "h", {}, nullptr).ok());
  // Nothing half-registered is rendered.
  EXPECT_THAT(r.Render(), Not(HasSubstr("# TYPE h ")));
}

TEST(MetricsTest, FormatValue) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(123456789012.0), "123456789012");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1.0 / 3), "0.33333333333333331");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(2.5e-7), "2.5e-07");
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  Registry r;
  CounterFamily* c = r.AddCounter("x_total", "h", {"t"}).value();
  HistogramFamily* h = r.AddHistogram("x_h", "h", {}, {1}).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c->With({t % 2 == 0 ? "even" : "odd"}).Increment();
        h->Get().Observe(0.5);
        if (i % 1000 == 0) r.Render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->With({"even"}).value(), 20000);
  EXPECT_EQ(c->With({"odd"}).value(), 20000);
  EXPECT_EQ(h->Get().Get().count, 40000u);
  EXPECT_EQ(h->Get().Get().cumulative[0], 40000u);
}

TEST(MetricsDeathTest, WrongArityNamesTheMetric) {
  Registry r;
  CounterFamily* c = r.AddCounter("x_total", "h", {"a"}).value();
  EXPECT_DEATH(c->With({"1", "2"}), "x_total");
}

}  // namespace
}  // namespace metrics
}  // namespace server

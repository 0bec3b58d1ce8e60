#include "informer/record/event_correlator.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "informer/util/clock.h"

namespace informer {
namespace {

Event MakeEvent(absl::Time now, const std::string& reason,
                const std::string& message,
                const std::string& object = "web-0") {
  Event e;
  e.involved_object.kind = "Pod";
  e.involved_object.namespace_ = "demo";
  e.involved_object.name = object;
  e.involved_object.uid = "uid-" + object;
  e.involved_object.api_version = "v1";
  e.name = UniqueEventName(object, now);
  e.namespace_ = "demo";
  e.reason = reason;
  e.message = message;
  e.type = kEventTypeNormal;
  e.source_component = "ctrl";
  e.source_host = "node-1";
  e.first_timestamp = now;
  e.last_timestamp = now;
  e.count = 1;
  return e;
}

TEST(EventCorrelatorTest, IdenticalEventsBecomeOneWithIncreasingCount) {
  FakeClock clock;
  EventCorrelator c(&clock);
  const absl::Time t0 = clock.Now();
  CorrelationResult first = c.Correlate(MakeEvent(t0, "Pulled", "pulled x"));
  EXPECT_FALSE(first.skip);
  EXPECT_TRUE(first.patch.empty());
  EXPECT_EQ(first.event.count, 1);

  for (int n = 2; n <= 4; ++n) {
    clock.Advance(absl::Seconds(30));
    CorrelationResult r =
        c.Correlate(MakeEvent(clock.Now(), "Pulled", "pulled x"));
    EXPECT_FALSE(r.skip);
    EXPECT_EQ(r.event.count, n);
    EXPECT_EQ(r.event.name, first.event.name);
    EXPECT_EQ(r.event.first_timestamp, t0);
    EXPECT_EQ(r.event.last_timestamp, clock.Now());
    EXPECT_EQ(r.patch, absl::StrCat("{\"count\":", n, ",\"lastTimestamp\":\"",
                                    FormatKubeTime(clock.Now()),
                                    "\",\"message\":\"pulled x\"}"));
  }
}

TEST(EventCorrelatorTest, TenthSimilarEventIsCombined) {
  FakeClock clock;
  EventCorrelator c(&clock);
  for (int i = 0; i < 9; ++i) {
    CorrelationResult r =
        c.Correlate(MakeEvent(clock.Now(), "Failed", absl::StrCat("m", i)));
    EXPECT_EQ(r.event.message, absl::StrCat("m", i));
    EXPECT_TRUE(r.patch.empty());
    clock.Advance(absl::Seconds(10));
  }
  CorrelationResult tenth = c.Correlate(MakeEvent(clock.Now(), "Failed", "m9"));
  EXPECT_EQ(tenth.event.message, "(combined from similar events): m9");
  EXPECT_EQ(tenth.event.count, 1);
  EXPECT_TRUE(tenth.patch.empty());
  EXPECT_TRUE(absl::StartsWith(tenth.event.name, "web-0."));
  EXPECT_EQ(tenth.event.reason, "Failed");
  EXPECT_EQ(tenth.event.involved_object.uid, "uid-web-0");

  clock.Advance(absl::Seconds(10));
  CorrelationResult eleventh =
      c.Correlate(MakeEvent(clock.Now(), "Failed", "m10"));
  EXPECT_EQ(eleventh.event.message, "(combined from similar events): m10");
  EXPECT_EQ(eleventh.event.count, 2);
  EXPECT_EQ(eleventh.event.name, tenth.event.name);
  EXPECT_NE(eleventh.patch.find("\"count\":2"), std::string::npos);
  EXPECT_NE(eleventh.patch.find("combined from similar events"),
            std::string::npos);
}

TEST(EventCorrelatorTest, SimilarEventsMoreThanTenMinutesApartAreNotCombined) {
  FakeClock clock;
  EventCorrelator c(&clock);
  for (int i = 0; i < 9; ++i) {
    c.Correlate(MakeEvent(clock.Now(), "Failed", absl::StrCat("m", i)));
  }
  clock.Advance(absl::Minutes(10) + absl::Seconds(1));
  CorrelationResult r = c.Correlate(MakeEvent(clock.Now(), "Failed", "m9"));
  EXPECT_EQ(r.event.message, "m9");
}

TEST(EventCorrelatorTest, DifferentReasonsAreNotSimilar) {
  FakeClock clock;
  EventCorrelator c(&clock);
  for (int i = 0; i < 12; ++i) {
    CorrelationResult r = c.Correlate(MakeEvent(
        clock.Now(), absl::StrCat("Reason", i), absl::StrCat("m", i)));
    EXPECT_EQ(r.event.message, absl::StrCat("m", i));
  }
}

TEST(EventCorrelatorTest, SpamFilterAllowsBurstThenOneEventPerFiveMinutes) {
  FakeClock clock;
  EventCorrelator c(&clock);
  // Distinct reasons: no aggregation, no deduplication; only the filter.
  int n = 0;
  auto next = [&](const std::string& object) {
    ++n;
    return c.Correlate(MakeEvent(clock.Now(), absl::StrCat("R", n),
                                 absl::StrCat("m", n), object));
  };
  for (int i = 0; i < 25; ++i) EXPECT_FALSE(next("web-0").skip) << i;
  EXPECT_TRUE(next("web-0").skip);
  EXPECT_TRUE(next("web-0").skip);
  // Another object has its own bucket.
  EXPECT_FALSE(next("web-1").skip);

  clock.Advance(absl::Minutes(4));
  EXPECT_TRUE(next("web-0").skip);
  clock.Advance(absl::Minutes(1));
  EXPECT_FALSE(next("web-0").skip);
  EXPECT_TRUE(next("web-0").skip);
  clock.Advance(absl::Minutes(10));
  EXPECT_FALSE(next("web-0").skip);
  EXPECT_FALSE(next("web-0").skip);
  EXPECT_TRUE(next("web-0").skip);
}

TEST(EventCorrelatorTest, LeastRecentlyUsedEntriesAreEvicted) {
  FakeClock clock;
  CorrelatorOptions options;
  options.lru_max_entries = 2;
  EventCorrelator c(&clock, options);
  c.Correlate(MakeEvent(clock.Now(), "A", "a", "o1"));
  EXPECT_EQ(c.Correlate(MakeEvent(clock.Now(), "A", "a", "o1")).event.count, 2);
  c.Correlate(MakeEvent(clock.Now(), "B", "b", "o2"));
  c.Correlate(MakeEvent(clock.Now(), "C", "c", "o3"));
  // o1's record was evicted: it starts over as a new event.
  CorrelationResult again = c.Correlate(MakeEvent(clock.Now(), "A", "a", "o1"));
  EXPECT_EQ(again.event.count, 1);
  EXPECT_TRUE(again.patch.empty());
}

TEST(EventCorrelatorTest, UpdateStateRecordsWhatTheServerStored) {
  FakeClock clock;
  EventCorrelator c(&clock);
  CorrelationResult first = c.Correlate(MakeEvent(clock.Now(), "A", "a"));
  Event stored = first.event;
  stored.resource_version = "42";
  c.UpdateState(stored);
  CorrelationResult second = c.Correlate(MakeEvent(clock.Now(), "A", "a"));
  EXPECT_EQ(second.event.resource_version, "42");
  EXPECT_EQ(second.event.count, 2);
}

TEST(EventJsonTest, RoundTripsEveryField) {
  Event e =
      MakeEvent(absl::FromUnixSeconds(1700000000), "Started", "msg \"q\"");
  e.involved_object.field_path = "spec.containers{app}";
  e.involved_object.resource_version = "7";
  e.resource_version = "9";
  e.annotations = {{"a", "1"}};
  e.reporting_component = "ctrl";
  e.reporting_instance = "node-1";
  e.count = 3;
  e.last_timestamp = e.first_timestamp + absl::Seconds(5);
  const std::string json = EventToJson(e);
  EXPECT_NE(json.find("\"firstTimestamp\":\"2023-11-14T22:13:20Z\""),
            std::string::npos);
  EXPECT_NE(json.find("\"kind\":\"Event\""), std::string::npos);
  absl::StatusOr<Event> back = EventFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, e.name);
  EXPECT_EQ(back->namespace_, "demo");
  EXPECT_EQ(back->resource_version, "9");
  EXPECT_EQ(back->annotations, e.annotations);
  EXPECT_EQ(back->involved_object.field_path, "spec.containers{app}");
  EXPECT_EQ(back->involved_object.resource_version, "7");
  EXPECT_EQ(back->involved_object.uid, "uid-web-0");
  EXPECT_EQ(back->message, "msg \"q\"");
  EXPECT_EQ(back->source_component, "ctrl");
  EXPECT_EQ(back->source_host, "node-1");
  EXPECT_EQ(back->first_timestamp, e.first_timestamp);
  EXPECT_EQ(back->last_timestamp, e.last_timestamp);
  EXPECT_EQ(back->count, 3);
  EXPECT_EQ(back->type, "Normal");
  EXPECT_EQ(back->reporting_instance, "node-1");
  EXPECT_FALSE(EventFromJson("[1]").ok());
}

TEST(UniqueEventNameTest, NamesAreUniqueForOneClockReading) {
  const absl::Time t = absl::FromUnixSeconds(1800000000);
  const std::string a = UniqueEventName("pod", t);
  const std::string b = UniqueEventName("pod", t);
  EXPECT_NE(a, b);
  EXPECT_TRUE(absl::StartsWith(a, "pod."));
}

}  // namespace
}  // namespace informer

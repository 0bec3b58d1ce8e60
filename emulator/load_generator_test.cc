#include "emulator/load_generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emulator {
namespace {

using ::testing::HasSubstr;

class LoadGeneratorTest : public ::testing::Test {
 protected:
  LoadGeneratorTest()
      : registry_holder_(ResourceRegistry::WithBuiltins()),
        registry_(*registry_holder_),
        store_(ObjectStore::Options{}) {}

  int64_t SentOf(const std::string& name) {
    absl::StatusOr<StoredObjectPtr> obj =
        store_.Get(*registry_.FindByName("configmaps"), "bench", name);
    EXPECT_TRUE(obj.ok()) << obj.status();
    if (!obj.ok()) return -1;
    const std::string& json = (*obj)->body;
    const size_t at = json.find("\"sent\":\"");
    if (at == std::string::npos) return -1;
    const size_t begin = at + 8;
    int64_t sent = 0;
    EXPECT_TRUE(absl::SimpleAtoi(
        json.substr(begin, json.find('"', begin) - begin), &sent));
    return sent;
  }

  std::unique_ptr<ResourceRegistry> registry_holder_;
  ResourceRegistry& registry_;
  ObjectStore store_;
};

TEST_F(LoadGeneratorTest, ZeroDurationCreatesObjectsOfTheRequestedSize) {
  LoadSpec spec;
  spec.objects = 3;
  spec.object_bytes = 1024;
  spec.duration = absl::ZeroDuration();
  informer::FakeClock clock;
  absl::StatusOr<LoadReport> report = RunLoad(store_, registry_, spec, &clock);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->updates, 0);
  absl::StatusOr<StoredObjectPtr> obj =
      store_.Get(*registry_.FindByName("configmaps"), "bench", "load-00002");
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_NEAR(static_cast<double>((*obj)->body.size()), 1024, 200);
  EXPECT_THAT((*obj)->body, HasSubstr("\"sent\":\""));
}

TEST_F(LoadGeneratorTest, PacesUpdatesOnTheClockRoundRobin) {
  LoadSpec spec;
  spec.objects = 4;
  spec.rate = 1000;
  spec.duration = absl::Milliseconds(10);
  informer::FakeClock clock;
  absl::StatusOr<LoadReport> report;
  std::thread run([&] { report = RunLoad(store_, registry_, spec, &clock); });
  // Drive time a millisecond per wait until the run ends (it never waits
  // past its end, so 10 advances finish it).
  for (int i = 0; i < 10; ++i) {
    clock.WaitForWaiters(1);
    clock.Advance(absl::Milliseconds(1));
  }
  run.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->updates, 10);
  EXPECT_EQ(report->elapsed, absl::Milliseconds(10));
  // 10 updates over 4 objects: every object was rewritten with a new stamp.
  const int64_t now = MonotonicNanos();
  for (int i = 0; i < 4; ++i) {
    const int64_t sent = SentOf(absl::StrCat("load-0000", i));
    EXPECT_GT(sent, 0);
    EXPECT_LE(sent, now);
  }
}

TEST_F(LoadGeneratorTest, RejectsNonsense) {
  informer::FakeClock clock;
  LoadSpec spec;
  spec.objects = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      RunLoad(store_, registry_, spec, &clock).status()));
  spec.objects = 1;
  spec.rate = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      RunLoad(store_, registry_, spec, &clock).status()));
}

}  // namespace
}  // namespace emulator

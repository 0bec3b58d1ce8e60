#include "server/watch/watch_event.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "informer/object/object.h"

namespace server {
namespace {

informer::ObjectPtr Parse(const std::string& json) {
  absl::StatusOr<informer::ObjectPtr> obj = informer::Object::Parse(json);
  EXPECT_TRUE(obj.ok()) << obj.status();
  return obj.ok() ? *obj : nullptr;
}

TEST(WithResourceVersionTest, StampsOnlyMetadataResourceVersion) {
  // A "resourceVersion" member outside metadata (before it, too) stays.
  const informer::ObjectPtr obj = Parse(
      R"({"apiVersion":"v1","kind":"Pod","spec":{"resourceVersion":"7",)"
      R"("s":"a\"}b"},"metadata":{"name":"a","namespace":"ns",)"
      R"("labels":{"app":"web"},"resourceVersion":"7","uid":"u"}})");
  ASSERT_NE(obj, nullptr);
  const informer::ObjectPtr stamped = WithResourceVersion(obj, "42");
  ASSERT_NE(stamped, nullptr);
  EXPECT_EQ(stamped->resource_version(), "42");
  EXPECT_EQ(stamped->Key(), "ns/a");
  EXPECT_EQ(stamped->uid(), "u");
  ASSERT_NE(stamped->Label("app"), nullptr);
  EXPECT_EQ(*stamped->Label("app"), "web");
  EXPECT_EQ(stamped->json(),
            R"({"apiVersion":"v1","kind":"Pod","spec":{"resourceVersion":"7",)"
            R"("s":"a\"}b"},"metadata":{"name":"a","namespace":"ns",)"
            R"("labels":{"app":"web"},"resourceVersion":"42","uid":"u"}})");
  // The original is untouched (objects are immutable and shared).
  EXPECT_EQ(obj->resource_version(), "7");
}

TEST(WithResourceVersionTest, WithoutAResourceVersionTheObjectIsKept) {
  const informer::ObjectPtr obj = Parse(R"({"metadata":{"name":"a"}})");
  ASSERT_NE(obj, nullptr);
  EXPECT_EQ(WithResourceVersion(obj, "42"), obj);
}

TEST(FanoutEventTest, LeaveObjectIsThePreviousStateAtTheEventsVersion) {
  auto prev = std::make_shared<const SharedObject>(Parse(
      R"({"metadata":{"name":"a","labels":{"app":"web"},)"
      R"("resourceVersion":"5","uid":"u"}})"));
  auto now = std::make_shared<const SharedObject>(Parse(
      R"({"metadata":{"name":"a","labels":{"app":"db"},)"
      R"("resourceVersion":"9","uid":"u"}})"));
  const FanoutEvent ev(3, now, prev, /*deleted=*/false, /*tombstone=*/false,
                       "t");
  const SharedPtr& leave = ev.LeaveObject();
  ASSERT_NE(leave, nullptr);
  EXPECT_EQ(leave->object().resource_version(), "9");
  ASSERT_NE(leave->object().Label("app"), nullptr);
  EXPECT_EQ(*leave->object().Label("app"), "web");
  EXPECT_EQ(&ev.LeaveObject(), &leave);  // built once
}

}  // namespace
}  // namespace server

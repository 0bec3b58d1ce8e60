#include "server/informer_service/watch/watch_event.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "informer/object/object.h"
#include "proto/informer/v1/informer.pb.h"

namespace server {
namespace {

informer::ObjectPtr Parse(const std::string& json) {
  absl::StatusOr<informer::ObjectPtr> obj = informer::Object::Parse(json);
  EXPECT_TRUE(obj.ok()) << obj.status();
  return obj.ok() ? *obj : nullptr;
}

TEST(WithResourceVersionTest, StampsOnlyMetadataResourceVersion) {
  // A "resourceVersion" member outside metadata (before it, too) stays.
  const informer::ObjectPtr obj =
      Parse(R"({"apiVersion":"v1","kind":"Pod","spec":{"resourceVersion":"7",)"
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
  auto prev = std::make_shared<const SharedObject>(
      Parse(R"({"metadata":{"name":"a","labels":{"app":"web"},)"
            R"("resourceVersion":"5","uid":"u"}})"));
  auto now = std::make_shared<const SharedObject>(
      Parse(R"({"metadata":{"name":"a","labels":{"app":"db"},)"
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

namespace v1 = ::informer::v1;

std::string Bytes(const std::vector<grpc::Slice>& slices) {
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

std::string Bytes(const grpc::Slice& s) {
  return std::string(reinterpret_cast<const char*>(s.begin()), s.size());
}

// What a WatchResponse holding exactly `events` serializes to.
std::string Serialized(const std::vector<v1::Event>& events) {
  v1::WatchResponse r;
  for (const v1::Event& e : events) *r.add_events() = e;
  return r.SerializeAsString();
}

v1::Event WantEvent(v1::EventType type, const SharedPtr& obj,
                    const std::string& token, bool tombstone = false) {
  v1::Event e;
  e.set_type(type);
  e.mutable_object()->set_json(obj->object().json().str());
  e.set_resource_version(std::string(obj->object().resource_version()));
  e.set_resume_token(token);
  e.set_tombstone(tombstone);
  return e;
}

SharedPtr Shared(const std::string& json) {
  return std::make_shared<const SharedObject>(Parse(json));
}

TEST(FanoutEventTest, OneEventIsOneSliceThatTheObjectShares) {
  const SharedPtr prev =
      Shared(R"({"metadata":{"name":"a","resourceVersion":"5","uid":"u"}})");
  const SharedPtr now = Shared(
      R"({"metadata":{"name":"a","resourceVersion":"9","uid":"u"},"x":1})");
  const FanoutEvent ev(3, now, prev, false, false, "tok-3");
  absl::StatusOr<const EncodedEvents*> enc =
      ev.Encoded(v1::ENCODING_JSON, /*with_old=*/false);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ((*enc)->events, 1);
  ASSERT_EQ((*enc)->slices.size(), 1u);
  const std::string want =
      Serialized({WantEvent(v1::EVENT_TYPE_MODIFIED, now, "tok-3")});
  EXPECT_EQ(Bytes((*enc)->slices), want);
  EXPECT_EQ((*enc)->bytes, want.size());
  // The object's own encoding is that part of the event's slice: the same
  // bytes in the same memory, not a second copy.
  ASSERT_TRUE(now->HasEncoded(v1::ENCODING_JSON));
  absl::StatusOr<const grpc::Slice*> obj = now->Encoded(v1::ENCODING_JSON);
  ASSERT_TRUE(obj.ok());
  v1::Object want_obj;
  want_obj.set_json(now->object().json().str());
  EXPECT_EQ(Bytes(**obj), want_obj.SerializeAsString());
  const uint8_t* event_begin = (*enc)->slices[0].begin();
  EXPECT_GE((*obj)->begin(), event_begin);
  EXPECT_LE((*obj)->end(), event_begin + (*enc)->slices[0].size());
  // Asked again: the same cached encoding.
  absl::StatusOr<const EncodedEvents*> again =
      ev.Encoded(v1::ENCODING_JSON, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *enc);
}

TEST(FanoutEventTest, AnObjectEncodedBeforeIsReferencedNotCopied) {
  const SharedPtr obj =
      Shared(R"({"metadata":{"name":"a","resourceVersion":"4","uid":"u"}})");
  // A stream's initial state encoded it first.
  absl::StatusOr<const grpc::Slice*> first = obj->Encoded(v1::ENCODING_JSON);
  ASSERT_TRUE(first.ok());
  const FanoutEvent ev(1, obj, nullptr, false, false, "tok-1");
  absl::StatusOr<const EncodedEvents*> enc =
      ev.Encoded(v1::ENCODING_JSON, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(Bytes((*enc)->slices),
            Serialized({WantEvent(v1::EVENT_TYPE_ADDED, obj, "tok-1")}));
  bool shares = false;
  for (const grpc::Slice& s : (*enc)->slices) {
    shares = shares || s.begin() == (*first)->begin();
  }
  EXPECT_TRUE(shares);
  // Adopting bytes for an object that has its own changes nothing.
  EXPECT_FALSE(obj->Adopt(v1::ENCODING_JSON, grpc::Slice("zz", 2)));
  EXPECT_EQ(*obj->Encoded(v1::ENCODING_JSON), *first);
}

TEST(FanoutEventTest, EveryKindEncodesAsTheMessageWould) {
  const SharedPtr old_a =
      Shared(R"({"metadata":{"name":"a","resourceVersion":"2","uid":"u1"}})");
  const SharedPtr new_a =
      Shared(R"({"metadata":{"name":"a","resourceVersion":"3","uid":"u2"}})");
  const SharedPtr gone =
      Shared(R"({"metadata":{"name":"b","resourceVersion":"4","uid":"u3"}})");
  const SharedPtr prev_m =
      Shared(R"({"metadata":{"name":"c","resourceVersion":"5","uid":"u4"}})");
  const SharedPtr now_m =
      Shared(R"({"metadata":{"name":"c","resourceVersion":"6","uid":"u4"}})");
  // Another object took the name: DELETED old + ADDED new.
  const FanoutEvent replaced(1, new_a, old_a, false, false, "t1");
  EXPECT_TRUE(replaced.replaced());
  absl::StatusOr<const EncodedEvents*> enc =
      replaced.Encoded(v1::ENCODING_JSON, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ((*enc)->events, 2);
  EXPECT_EQ(Bytes((*enc)->slices),
            Serialized({WantEvent(v1::EVENT_TYPE_DELETED, old_a, "t1"),
                        WantEvent(v1::EVENT_TYPE_ADDED, new_a, "t1")}));
  // A deletion whose final state is unknown keeps its tombstone flag.
  const FanoutEvent deleted(2, gone, gone, true, true, "t2");
  enc = deleted.Encoded(v1::ENCODING_JSON, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(Bytes((*enc)->slices),
            Serialized({WantEvent(v1::EVENT_TYPE_DELETED, gone, "t2", true)}));
  // MODIFIED with old_object: the general path, both objects referenced.
  const FanoutEvent modified(3, now_m, prev_m, false, false, "t3");
  enc = modified.Encoded(v1::ENCODING_JSON, /*with_old=*/true);
  ASSERT_TRUE(enc.ok());
  v1::Event want = WantEvent(v1::EVENT_TYPE_MODIFIED, now_m, "t3");
  want.mutable_old_object()->set_json(prev_m->object().json().str());
  EXPECT_EQ(Bytes((*enc)->slices), Serialized({want}));
  EventTypeCounts by_type{};
  replaced.CountTypes(&by_type);
  deleted.CountTypes(&by_type);
  modified.CountTypes(&by_type);
  EXPECT_EQ(by_type[v1::EVENT_TYPE_DELETED], 2u);
  EXPECT_EQ(by_type[v1::EVENT_TYPE_ADDED], 1u);
  EXPECT_EQ(by_type[v1::EVENT_TYPE_MODIFIED], 1u);
}

}  // namespace
}  // namespace server

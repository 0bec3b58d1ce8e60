#include "server/informer_service/watch/watch_response_builder.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/informer/v1/informer.pb.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

TEST(WatchResponseBuilderTest, BytesEqualTheMessageSerialization) {
  v1::Object obj;
  obj.set_json(R"({"metadata":{"name":"a"}})");
  v1::Object old;
  old.set_json(R"({"metadata":{"name":"a","x":1}})");
  const grpc::Slice obj_bytes = SerializeToSlice(obj);
  const grpc::Slice old_bytes = SerializeToSlice(old);
  WatchResponseBuilder builder;
  builder.Add({.type = v1::EVENT_TYPE_MODIFIED,
               .object = &obj_bytes,
               .old_object = &old_bytes,
               .resource_version = "7",
               .resume_token = "tok",
               .tombstone = true});
  builder.Add({.type = v1::EVENT_TYPE_ADDED,
               .object = &obj_bytes,
               .resource_version = "8",
               .resume_token = std::string(300, 't'),
               .initial = true});
  builder.Add({.type = v1::EVENT_TYPE_INITIAL_STATE_DONE,
               .resource_version = "9",
               .resume_token = "t3"});
  EXPECT_EQ(builder.events(), 3);
  const size_t size = builder.bytes();
  grpc::ByteBuffer buffer = builder.Finish();
  EXPECT_EQ(builder.bytes(), 0u);
  EXPECT_EQ(builder.events(), 0);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  v1::WatchResponse want;
  v1::Event* e = want.add_events();
  e->set_type(v1::EVENT_TYPE_MODIFIED);
  *e->mutable_object() = obj;
  *e->mutable_old_object() = old;
  e->set_resource_version("7");
  e->set_resume_token("tok");
  e->set_tombstone(true);
  e = want.add_events();
  e->set_type(v1::EVENT_TYPE_ADDED);
  *e->mutable_object() = obj;
  e->set_resource_version("8");
  e->set_resume_token(std::string(300, 't'));
  e->set_initial(true);
  e = want.add_events();
  e->set_type(v1::EVENT_TYPE_INITIAL_STATE_DONE);
  e->set_resource_version("9");
  e->set_resume_token("t3");
  EXPECT_EQ(bytes, want.SerializeAsString());
  EXPECT_EQ(size, bytes.size());
}

TEST(WatchResponseBuilderTest, PreEncodedEventsMixWithPerStreamOnes) {
  v1::Object obj;
  obj.set_json(R"({"metadata":{"name":"a"}})");
  const grpc::Slice obj_bytes = SerializeToSlice(obj);
  // Encoded once (as a fan-out does for an event every stream sends as is).
  WatchResponseBuilder once;
  once.Add({.type = v1::EVENT_TYPE_DELETED,
            .object = &obj_bytes,
            .resource_version = "5",
            .resume_token = "t5"});
  once.Add({.type = v1::EVENT_TYPE_ADDED,
            .object = &obj_bytes,
            .resource_version = "5",
            .resume_token = "t5"});
  EXPECT_EQ(once.events(), 2);
  const std::vector<grpc::Slice> parts = once.TakeSlices();
  EXPECT_EQ(once.events(), 0);
  ASSERT_FALSE(parts.empty());

  WatchResponseBuilder builder;
  builder.Add({.type = v1::EVENT_TYPE_BOOKMARK, .resource_version = "4"});
  builder.AddEncoded(parts, 2);
  builder.Add({.type = v1::EVENT_TYPE_SYNC,
               .object = &obj_bytes,
               .resource_version = "5",
               .resume_token = "t6"});
  builder.AddEncoded(parts, 2);  // the same slices again: shared, not moved
  EXPECT_EQ(builder.events(), 6);
  const size_t size = builder.bytes();
  grpc::ByteBuffer buffer = builder.Finish();
  v1::WatchResponse got;
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& sl : slices) {
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  }
  EXPECT_EQ(size, bytes.size());
  ASSERT_TRUE(got.ParseFromString(bytes));
  ASSERT_EQ(got.events_size(), 6);
  const v1::EventType want_types[] = {
      v1::EVENT_TYPE_BOOKMARK, v1::EVENT_TYPE_DELETED, v1::EVENT_TYPE_ADDED,
      v1::EVENT_TYPE_SYNC,     v1::EVENT_TYPE_DELETED, v1::EVENT_TYPE_ADDED};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got.events(i).type(), want_types[i]) << i;
  }
  EXPECT_EQ(got.events(1).object().json(), obj.json());
  EXPECT_EQ(got.events(2).resume_token(), "t5");
  EXPECT_EQ(got.events(3).resume_token(), "t6");
  EXPECT_EQ(got.events(5).object().json(), obj.json());
}

TEST(WatchResponseBuilderTest, EncodedSizeIsWhatAddAppends) {
  v1::Object obj;
  obj.set_json(std::string(200, 'x'));
  const grpc::Slice obj_bytes = SerializeToSlice(obj);
  const WatchResponseBuilder::Event e{.type = v1::EVENT_TYPE_ADDED,
                                      .object = &obj_bytes,
                                      .resource_version = "12",
                                      .resume_token = "tok",
                                      .initial = true};
  WatchResponseBuilder builder;
  builder.Add(e);
  v1::WatchResponse want;
  v1::Event* w = want.add_events();
  w->set_type(v1::EVENT_TYPE_ADDED);
  *w->mutable_object() = obj;
  w->set_resource_version("12");
  w->set_resume_token("tok");
  w->set_initial(true);
  EXPECT_EQ(WatchResponseBuilder::EncodedSize(e), want.ByteSizeLong());
  EXPECT_EQ(builder.bytes(), want.ByteSizeLong());
}

TEST(WatchResponseBuilderTest, EncodeWithObjectIsOneSliceOfTheSameBytes) {
  v1::Object obj;
  obj.set_json(std::string(300, 'j'));
  const WatchResponseBuilder::Event e{.type = v1::EVENT_TYPE_DELETED,
                                      .resource_version = "77",
                                      .resume_token = "tok",
                                      .tombstone = true};
  size_t begin = 0;
  const grpc::Slice whole =
      WatchResponseBuilder::EncodeWithObject(e, obj, &begin);
  v1::WatchResponse want;
  v1::Event* w = want.add_events();
  w->set_type(v1::EVENT_TYPE_DELETED);
  *w->mutable_object() = obj;
  w->set_resource_version("77");
  w->set_resume_token("tok");
  w->set_tombstone(true);
  const std::string bytes(reinterpret_cast<const char*>(whole.begin()),
                          whole.size());
  EXPECT_EQ(bytes, want.SerializeAsString());
  EXPECT_EQ(bytes.substr(begin, obj.ByteSizeLong()), obj.SerializeAsString());

  // Shared by two responses (borrowed, then referenced by each buffer),
  // and still intact after both builders moved on.
  WatchResponseBuilder a, b;
  const std::vector<grpc::Slice> parts = {whole};
  a.AddEncoded(parts, 1);
  b.Add({.type = v1::EVENT_TYPE_BOOKMARK, .resource_version = "76"});
  b.AddEncoded(parts, 1);
  grpc::ByteBuffer out_a = a.Finish();
  grpc::ByteBuffer out_b = b.Finish();
  for (grpc::ByteBuffer* out : {&out_a, &out_b}) {
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(out->Dump(&slices).ok());
    std::string got;
    for (const grpc::Slice& sl : slices) {
      got.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    v1::WatchResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(got));
    const v1::Event& last = parsed.events(parsed.events_size() - 1);
    EXPECT_EQ(last.object().json(), obj.json());
    EXPECT_TRUE(last.tombstone());
  }
}

}  // namespace
}  // namespace server

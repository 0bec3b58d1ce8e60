#include "server/informer_service/watch/coalesce.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "informer/object/object.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

SharedPtr Obj(const std::string& name, const std::string& uid,
              const std::string& rv) {
  return std::make_shared<const SharedObject>(informer::ObjectBuilder()
                                                  .SetNamespace("ns")
                                                  .SetName(name)
                                                  .SetUid(uid)
                                                  .SetResourceVersion(rv)
                                                  .Build());
}

// A fan-out event as a stream queues it when it sees it as is.
PendingEvent Live(uint64_t seq, SharedPtr obj, SharedPtr prev,
                  bool deleted = false, bool tombstone = false) {
  return PendingEvent::AsIs(std::make_shared<const FanoutEvent>(
      seq, std::move(obj), std::move(prev), deleted, tombstone, "t"));
}

TEST(CoalesceTest, ModificationsCollapseToOneModifiedFromTheHeldState) {
  const SharedPtr s1 = Obj("a", "u", "1"), s2 = Obj("a", "u", "2"),
                  s3 = Obj("a", "u", "3");
  const std::vector<PendingEvent> in = {Live(11, s2, s1), Live(12, s3, s2)};
  const CoalesceResult out = Coalesce(in, 10, 12);
  EXPECT_EQ(out.distinct_keys, 1u);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type, v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(out.events[0].obj, s3);
  EXPECT_EQ(out.events[0].old, s1);
  EXPECT_EQ(out.events[0].seq, 12u);
}

TEST(CoalesceTest, AddedThenDeletedLeavesNothing) {
  const SharedPtr a = Obj("a", "u", "1");
  const std::vector<PendingEvent> in = {Live(1, a, nullptr),
                                        Live(2, a, a, /*deleted=*/true)};
  const CoalesceResult out = Coalesce(in, 0, 2);
  EXPECT_EQ(out.distinct_keys, 1u);
  EXPECT_TRUE(out.events.empty());
}

TEST(CoalesceTest, DeleteKeepsTheDeletedStateAndTombstone) {
  const SharedPtr held = Obj("a", "u", "1"), last = Obj("a", "u", "2");
  const std::vector<PendingEvent> in = {Live(5, last, held),
                                        Live(6, last, last, /*deleted=*/true,
                                             /*tombstone=*/true)};
  const CoalesceResult out = Coalesce(in, 4, 6);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type, v1::EVENT_TYPE_DELETED);
  EXPECT_EQ(out.events[0].obj, last);
  EXPECT_TRUE(out.events[0].tombstone);
  EXPECT_EQ(out.events[0].HeldBefore(), held);
}

TEST(CoalesceTest, NewUidUnderTheSameNameIsDeletedThenAdded) {
  const SharedPtr old_obj = Obj("a", "u1", "1"), new_obj = Obj("a", "u2", "5");
  const std::vector<PendingEvent> in = {Live(7, new_obj, old_obj)};
  const CoalesceResult out = Coalesce(in, 6, 7);
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].type, v1::EVENT_TYPE_DELETED);
  EXPECT_EQ(out.events[0].obj, old_obj);
  EXPECT_EQ(out.events[1].type, v1::EVENT_TYPE_ADDED);
  EXPECT_EQ(out.events[1].obj, new_obj);
  // Only the last event names the position after the run.
  EXPECT_EQ(out.events[0].seq, 6u);
  EXPECT_EQ(out.events[1].seq, 7u);
}

TEST(CoalesceTest, BookmarksAndSyncsOfUnchangedObjectsDisappear) {
  const SharedPtr a = Obj("a", "u", "1");
  const std::vector<PendingEvent> in = {
      PendingEvent::Marker(v1::EVENT_TYPE_BOOKMARK, 3, "9"),
      PendingEvent::Make(v1::EVENT_TYPE_SYNC, a, nullptr, 3)};
  const CoalesceResult out = Coalesce(in, 3, 3);
  EXPECT_EQ(out.distinct_keys, 1u);
  EXPECT_TRUE(out.events.empty());
}

TEST(CoalesceTest, KeysKeepTheOrderOfFirstAppearanceAndTokensNeverSkip) {
  const SharedPtr b1 = Obj("b", "ub", "1"), b2 = Obj("b", "ub", "4");
  const SharedPtr a1 = Obj("a", "ua", "2");
  const SharedPtr c1 = Obj("c", "uc", "3");
  const std::vector<PendingEvent> in = {Live(21, b2, b1), Live(22, a1, nullptr),
                                        Live(23, c1, nullptr),
                                        Live(24, c1, c1, /*deleted=*/true)};
  const CoalesceResult out = Coalesce(in, 20, 24);
  EXPECT_EQ(out.distinct_keys, 3u);
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].Key(), "ns/b");
  EXPECT_EQ(out.events[0].type, v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(out.events[1].Key(), "ns/a");
  EXPECT_EQ(out.events[1].type, v1::EVENT_TYPE_ADDED);
  // Resuming from the first output event (position 20) replays the whole
  // run: a repeat, never a skip.
  EXPECT_EQ(out.events[0].seq, 20u);
  EXPECT_EQ(out.events[1].seq, 24u);
}

TEST(CoalesceTest, LeaveThenReenterBecomesModified) {
  // Stream-made events: the object left the filter (DELETED), then came
  // back (ADDED) at a new version.
  const SharedPtr s1 = Obj("a", "u", "1"), s2 = Obj("a", "u", "2"),
                  s3 = Obj("a", "u", "3");
  const std::vector<PendingEvent> in = {
      PendingEvent::Make(v1::EVENT_TYPE_DELETED, s2, s1, 31),
      PendingEvent::Make(v1::EVENT_TYPE_ADDED, s3, nullptr, 32)};
  const CoalesceResult out = Coalesce(in, 30, 32);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type, v1::EVENT_TYPE_MODIFIED);
  EXPECT_EQ(out.events[0].obj, s3);
  EXPECT_EQ(out.events[0].old, s1);
}

}  // namespace
}  // namespace server

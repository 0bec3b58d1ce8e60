#include "informer/cache/testing/fake_source.h"

#include "gtest/gtest.h"
#include "informer/object/api_error.h"

namespace informer {
namespace {

TEST(FakeSourceTest, MutationsBumpOneResourceVersion) {
  FakeSource s;
  auto a = s.Add("ns", "a");
  auto b = s.Add("ns", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(std::stoll(std::string((*a)->resource_version())),
            std::stoll(std::string((*b)->resource_version())));
  EXPECT_EQ(s.CurrentResourceVersion(), (*b)->resource_version());
  EXPECT_FALSE(s.Add("ns", "a").ok());
  EXPECT_FALSE(s.Modify("ns", "zz").ok());
  EXPECT_FALSE(s.Delete("ns", "zz").ok());
}

TEST(FakeSourceTest, TheWatchCacheKeepsAResourceVersionOfItsOwn) {
  FakeSource s;
  ASSERT_TRUE(s.Add("ns", "a").ok());
  const std::string changed = s.CurrentResourceVersion();
  s.WriteElsewhere();
  ListOptions cached;
  cached.resource_version = "0";
  EXPECT_EQ(s.List(cached)->resource_version, changed);
  // A consistent read answers with etcd's and moves the cache there.
  EXPECT_EQ(s.List(ListOptions())->resource_version,
            s.CurrentResourceVersion());
  EXPECT_EQ(s.List(cached)->resource_version, s.CurrentResourceVersion());
  s.LagWatchCache(1);
  EXPECT_EQ(s.List(cached)->resource_version, "1");
}

TEST(FakeSourceTest, ListPagesWithContinueAndExpiredTokenIs410) {
  FakeSource s(/*history_limit=*/2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Add("ns", std::to_string(i)).ok());
  ListOptions opts;
  opts.limit = 2;
  auto p1 = s.List(opts);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->items.size(), 2u);
  EXPECT_EQ(p1->remaining_item_count, 3);
  opts.continue_token = p1->continue_token;
  auto p2 = s.List(opts);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->items[0]->name(), "2");
  // Compaction past the token's snapshot makes it unusable, as in etcd.
  ASSERT_TRUE(s.Add("ns", "x").ok());
  s.CompactHistory();
  auto expired = s.List(opts);
  ASSERT_FALSE(expired.ok());
  EXPECT_TRUE(IsExpired(expired.status())) << expired.status();
}

TEST(FakeSourceTest, WatchReplaysFromRvAndTooOldRvGetsErrorEvent) {
  FakeSource s(/*history_limit=*/2);
  ASSERT_TRUE(s.Add("ns", "a").ok());
  const std::string rv = s.CurrentResourceVersion();
  ASSERT_TRUE(s.Add("ns", "b").ok());
  WatchOptions w;
  w.resource_version = rv;
  auto stream = s.Watch(w);
  ASSERT_TRUE(stream.ok());
  WatchEvent ev;
  ASSERT_TRUE((*stream)->Next(&ev).ok());
  EXPECT_EQ(ev.type, WatchEventType::kAdded);
  EXPECT_EQ(ev.object->name(), "b");
  ASSERT_TRUE(s.Delete("ns", "a").ok());
  ASSERT_TRUE((*stream)->Next(&ev).ok());
  EXPECT_EQ(ev.type, WatchEventType::kDeleted);
  (*stream)->Stop();
  EXPECT_TRUE(absl::IsCancelled((*stream)->Next(&ev)));

  s.CompactHistory();
  auto old = s.Watch(w);
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE((*old)->Next(&ev).ok());
  EXPECT_EQ(ev.type, WatchEventType::kError);
  EXPECT_EQ(ev.status.code, 410);
  EXPECT_TRUE(absl::IsOutOfRange((*old)->Next(&ev)));
}

TEST(FakeSourceTest, InjectedFaultsReachCallers) {
  FakeSource s;
  s.FailLists(1, absl::InternalError("boom"));
  EXPECT_TRUE(absl::IsInternal(s.List({}).status()));
  EXPECT_TRUE(s.List({}).ok());
  s.FailWatches(1, absl::UnavailableError("refused"));
  EXPECT_TRUE(absl::IsUnavailable(s.Watch({}).status()));
  auto w = s.Watch({});
  ASSERT_TRUE(w.ok());
  s.BreakWatches(absl::UnavailableError("cut"));
  WatchEvent ev;
  EXPECT_TRUE(absl::IsUnavailable((*w)->Next(&ev)));
  WatchOptions wl;
  wl.send_initial_events = true;
  EXPECT_EQ(HttpCode(s.Watch(wl).status()), 422);
  ListOptions sel;
  sel.label_selector = "app=x";
  EXPECT_TRUE(absl::IsInvalidArgument(s.List(sel).status()));
}

}  // namespace
}  // namespace informer

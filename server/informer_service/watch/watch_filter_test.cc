#include "server/informer_service/watch/watch_filter.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/cache/index.h"
#include "informer/labels/label_selector.h"
#include "informer/object/object.h"

namespace server {
namespace {

informer::ObjectPtr Obj(absl::string_view ns, absl::string_view app) {
  informer::ObjectBuilder b;
  b.SetNamespace(ns).SetName("o");
  if (!app.empty()) b.AddLabel("app", app);
  return b.Build();
}

WatchFilter Filter(absl::string_view ns, absl::string_view selector) {
  WatchFilter f;
  f.namespace_ = std::string(ns);
  f.selector = *informer::LabelSelector::Parse(selector);
  return f;
}

// A filter on an index whose function counts its calls: how many times the
// filter was evaluated.
WatchFilter CountingFilter(int* calls) {
  WatchFilter f;
  f.index_name = "by-app";
  f.index_value = "web";
  f.index_fn = [calls](const informer::Object& obj) {
    ++*calls;
    informer::IndexValues values;
    for (const auto& [k, v] : obj.labels()) {
      if (k == "app") values.push_back(v);
    }
    return values;
  };
  return f;
}

TEST(WatchFilterTest, MatchesNamespaceSelectorAndIndex) {
  EXPECT_TRUE(Filter("", "").Matches(*Obj("a", "")));
  EXPECT_TRUE(Filter("a", "app=web").Matches(*Obj("a", "web")));
  EXPECT_FALSE(Filter("a", "app=web").Matches(*Obj("b", "web")));
  EXPECT_FALSE(Filter("a", "app=web").Matches(*Obj("a", "db")));
  int calls = 0;
  const WatchFilter by_app = CountingFilter(&calls);
  EXPECT_TRUE(by_app.Matches(*Obj("a", "web")));
  EXPECT_FALSE(by_app.Matches(*Obj("a", "db")));
  EXPECT_EQ(calls, 2);
}

TEST(FilterInternerTest, TheSameFilterInOneScopeIsOneObject) {
  FilterInterner interner;
  auto a = interner.Intern("1/configmaps", "app=web", Filter("ns", "app=web"));
  auto b = interner.Intern("1/configmaps", "app=web", Filter("ns", "app=web"));
  EXPECT_EQ(a.get(), b.get());
  // Any part different: another object.
  EXPECT_NE(a.get(),
            interner.Intern("2/configmaps", "app=web", Filter("ns", "app=web"))
                .get());
  EXPECT_NE(
      a.get(),
      interner.Intern("1/configmaps", "app=db", Filter("ns", "app=db")).get());
  EXPECT_NE(
      a.get(),
      interner.Intern("1/configmaps", "app=web", Filter("other", "app=web"))
          .get());
  WatchFilter indexed = Filter("ns", "app=web");
  indexed.index_name = "by-app";
  indexed.index_value = "web";
  EXPECT_NE(
      a.get(),
      interner.Intern("1/configmaps", "app=web", std::move(indexed)).get());
  // The parts cannot run into each other: namespace "ab" + selector "" is
  // not namespace "a" + selector "b", whatever characters they hold.
  EXPECT_NE(interner.Intern("s", "", Filter("ab", "")).get(),
            interner.Intern("s", "b", Filter("a", "b")).get());
  const std::string nul_ns("a\0b", 3);
  WatchFilter odd;
  odd.namespace_ = nul_ns;
  EXPECT_NE(interner.Intern("s", "", std::move(odd)).get(),
            interner.Intern("s", "b", Filter("a", "")).get());
}

TEST(FilterInternerTest, AFilterNoStreamHoldsIsForgotten) {
  FilterInterner interner;
  // Hold one; let 200 others go as soon as they are made (streams that
  // ended). The table is swept as it grows, so it stays small.
  auto kept = interner.Intern("s", "", Filter("kept", ""));
  for (int i = 0; i < 200; ++i) {
    interner.Intern("s", "", Filter(absl::StrCat("gone-", i), ""));
  }
  EXPECT_LT(interner.SizeForTest(), 70u);
  // The held one is still the one handed out.
  EXPECT_EQ(interner.Intern("s", "", Filter("kept", "")).get(), kept.get());
  // One let go is made afresh (a new object for a later stream).
  auto again = interner.Intern("s", "", Filter("gone-199", ""));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->namespace_, "gone-199");
}

TEST(FilterVerdictsTest, OneEvaluationPerFilterObject) {
  int calls = 0;
  auto shared = std::make_shared<const WatchFilter>(CountingFilter(&calls));
  auto before = Obj("a", "web");
  auto after = Obj("a", "db");
  FilterVerdicts verdicts(before.get(), after.get());
  // Three streams sharing the filter: the states are judged once each.
  for (int stream = 0; stream < 3; ++stream) {
    const FilterVerdicts::Verdict v = verdicts.For(*shared);
    EXPECT_TRUE(v.before);
    EXPECT_FALSE(v.after);
  }
  EXPECT_EQ(calls, 2);
  // An equal filter that is another object is judged on its own.
  const WatchFilter other = CountingFilter(&calls);
  EXPECT_TRUE(verdicts.For(other).before);
  EXPECT_EQ(calls, 4);
}

TEST(FilterVerdictsTest, AbsentStatesAreNotHeld) {
  const WatchFilter all = Filter("", "");
  auto obj = Obj("a", "");
  // Added: no state before.
  FilterVerdicts added(nullptr, obj.get());
  EXPECT_FALSE(added.For(all).before);
  EXPECT_TRUE(added.For(all).after);
  // Deleted: no state after.
  FilterVerdicts deleted(obj.get(), nullptr);
  EXPECT_TRUE(deleted.For(all).before);
  EXPECT_FALSE(deleted.For(all).after);
}

TEST(FilterVerdictsTest, BeyondTheRememberedFiltersEachIsStillRight) {
  auto in_a = Obj("a", "");
  FilterVerdicts verdicts(nullptr, in_a.get());
  // More distinct filters than are remembered, half of them matching.
  std::vector<WatchFilter> filters;
  for (size_t i = 0; i < 2 * FilterVerdicts::kRemembered + 3; ++i) {
    filters.push_back(Filter(i % 2 == 0 ? "a" : "b", ""));
  }
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < filters.size(); ++i) {
      EXPECT_EQ(verdicts.For(filters[i]).after, i % 2 == 0) << i;
    }
  }
}

}  // namespace
}  // namespace server

#include "informer/labels/label_selector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "informer/object/object.h"

namespace informer {
namespace {

using ::testing::HasSubstr;

informer::ObjectPtr Pod(
    std::vector<std::pair<std::string, std::string>> labels) {
  informer::ObjectBuilder b;
  b.SetNamespace("default").SetName("p");
  for (const auto& [k, v] : labels) b.AddLabel(k, v);
  return b.Build();
}

bool Match(absl::string_view selector, const informer::ObjectPtr& obj) {
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse(selector);
  EXPECT_TRUE(s.ok()) << selector << ": " << s.status();
  return s.ok() && s->Matches(*obj);
}

TEST(LabelSelectorTest, EmptySelectorMatchesEverything) {
  EXPECT_TRUE(Match("", Pod({})));
  EXPECT_TRUE(Match("   ", Pod({{"a", "b"}})));
  EXPECT_TRUE(LabelSelector::Parse("")->Empty());
}

TEST(LabelSelectorTest, EqualityForms) {
  auto web = Pod({{"app", "web"}});
  EXPECT_TRUE(Match("app=web", web));
  EXPECT_TRUE(Match("app==web", web));
  EXPECT_TRUE(Match(" app = web ", web));
  EXPECT_FALSE(Match("app=api", web));
  EXPECT_FALSE(Match("tier=web", web));
}

TEST(LabelSelectorTest, NotEqualsMatchesAbsentLabel) {
  EXPECT_TRUE(Match("app!=web", Pod({{"app", "api"}})));
  EXPECT_TRUE(Match("app!=web", Pod({})));
  EXPECT_FALSE(Match("app!=web", Pod({{"app", "web"}})));
}

TEST(LabelSelectorTest, EmptyValueMatchesLabelWithEmptyValue) {
  EXPECT_TRUE(Match("app=", Pod({{"app", ""}})));
  EXPECT_FALSE(Match("app=", Pod({})));
  EXPECT_FALSE(Match("app=", Pod({{"app", "x"}})));
}

TEST(LabelSelectorTest, SetBasedIn) {
  EXPECT_TRUE(Match("tier in (front, back)", Pod({{"tier", "back"}})));
  EXPECT_TRUE(Match("tier in(front)", Pod({{"tier", "front"}})));
  EXPECT_FALSE(Match("tier in (front,back)", Pod({{"tier", "db"}})));
  EXPECT_FALSE(Match("tier in (front,back)", Pod({})));
}

TEST(LabelSelectorTest, SetBasedNotInMatchesAbsentLabel) {
  EXPECT_TRUE(Match("tier notin (front,back)", Pod({{"tier", "db"}})));
  EXPECT_TRUE(Match("tier notin (front,back)", Pod({})));
  EXPECT_FALSE(Match("tier notin (front,back)", Pod({{"tier", "front"}})));
}

TEST(LabelSelectorTest, ExistsAndDoesNotExist) {
  EXPECT_TRUE(Match("canary", Pod({{"canary", ""}})));
  EXPECT_FALSE(Match("canary", Pod({})));
  EXPECT_TRUE(Match("!canary", Pod({})));
  EXPECT_TRUE(Match("! canary", Pod({{"app", "x"}})));
  EXPECT_FALSE(Match("!canary", Pod({{"canary", "true"}})));
}

TEST(LabelSelectorTest, AllRequirementsMustHold) {
  auto pod = Pod({{"app", "web"}, {"tier", "front"}, {"env", "prod"}});
  EXPECT_TRUE(Match("app=web,tier in (front,back),!canary,env", pod));
  EXPECT_FALSE(Match("app=web,tier notin (front)", pod));
  EXPECT_FALSE(Match("app=web,canary", pod));
}

TEST(LabelSelectorTest, PrefixedKeys) {
  auto pod = Pod({{"app.kubernetes.io/name", "web"}});
  EXPECT_TRUE(Match("app.kubernetes.io/name=web", pod));
  EXPECT_TRUE(Match("app.kubernetes.io/name", pod));
}

TEST(LabelSelectorTest, ParsesRequirementStructure) {
  absl::StatusOr<LabelSelector> s =
      LabelSelector::Parse("a in (z, y, z),b!=c,!d");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->requirements().size(), 3u);
  EXPECT_EQ(s->requirements()[0].op, LabelSelector::Op::kIn);
  EXPECT_EQ(s->requirements()[0].values, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(s->requirements()[1].op, LabelSelector::Op::kNotEquals);
  EXPECT_EQ(s->requirements()[2].op, LabelSelector::Op::kDoesNotExist);
  EXPECT_EQ(s->requirements()[2].key, "d");
}

TEST(LabelSelectorTest, GreaterAndLessThanCompareDecimalIntegers) {
  EXPECT_TRUE(Match("replicas>2", Pod({{"replicas", "3"}})));
  EXPECT_FALSE(Match("replicas>3", Pod({{"replicas", "3"}})));
  EXPECT_TRUE(Match("replicas < 10", Pod({{"replicas", "9"}})));
  EXPECT_FALSE(Match("replicas<10", Pod({{"replicas", "10"}})));
  // Numbers, not strings: "10" > "9" although it sorts before it.
  EXPECT_TRUE(Match("replicas>9", Pod({{"replicas", "10"}})));
  EXPECT_TRUE(Match("replicas>007", Pod({{"replicas", "8"}})));
  // An absent label or one that is not an integer never matches either way.
  EXPECT_FALSE(Match("replicas>1", Pod({})));
  EXPECT_FALSE(Match("replicas<1", Pod({})));
  EXPECT_FALSE(Match("replicas>1", Pod({{"replicas", "many"}})));
  EXPECT_FALSE(Match("replicas<1", Pod({{"replicas", "many"}})));
  EXPECT_FALSE(Match("big>1", Pod({{"big", "99999999999999999999"}})));
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse("a>5,b<7");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->requirements()[0].op, LabelSelector::Op::kGreaterThan);
  EXPECT_EQ(s->requirements()[0].number, 5);
  EXPECT_EQ(s->requirements()[1].op, LabelSelector::Op::kLessThan);
  EXPECT_EQ(s->requirements()[1].values, std::vector<std::string>{"7"});
}

void ExpectError(absl::string_view selector, absl::string_view what) {
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse(selector);
  ASSERT_FALSE(s.ok()) << selector;
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(std::string(what)))
      << selector;
}

TEST(LabelSelectorTest, ParseErrorsSayWhatIsWrong) {
  ExpectError("app=web,", "expected a requirement after ','");
  ExpectError(",app", "expected a label key");
  ExpectError("app in (a,b", "missing ')'");
  ExpectError("app in a", "expected '(' after 'in'");
  ExpectError("app within (a)", "expected an operator");
  ExpectError("app ! web", "expected '=' after '!'");
  ExpectError("!app=web", "takes no operator");
  ExpectError("app=web tier=x", "expected ',' or end");
  ExpectError("app in (a;b)", "expected ',' or ')'");
  ExpectError("-app=x", "invalid key");
  ExpectError("Bad_Prefix/app=x", "invalid key prefix");
  ExpectError("app=-x", "invalid value");
  ExpectError(std::string("app=") + std::string(64, 'a'), "invalid value");
  ExpectError("replicas>many", "the value must be an integer");
  ExpectError("replicas>", "the value must be an integer");
  ExpectError("replicas>99999999999999999999", "the value must be an integer");
  // A sign is not part of a label value, so the API server rejects it too.
  ExpectError("replicas>-1", "invalid value");
  ExpectError("replicas>=1", "the value must be an integer");
  ExpectError("!replicas>1", "takes no operator");
}

}  // namespace
}  // namespace informer

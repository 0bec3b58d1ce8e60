#include "emulator/selector.h"

#include "gtest/gtest.h"

namespace emulator {
namespace {

StringPairs Labels(
    std::initializer_list<std::pair<std::string, std::string>> l) {
  StringPairs out(l);
  std::sort(out.begin(), out.end());
  return out;
}

bool Match(const char* selector, const StringPairs& labels) {
  auto sel = LabelSelector::Parse(selector);
  EXPECT_TRUE(sel.ok()) << selector << ": " << sel.status();
  return sel.ok() && sel->Matches(labels);
}

TEST(LabelSelectorTest, EmptyMatchesEverything) {
  EXPECT_TRUE(Match("", Labels({})));
  EXPECT_TRUE(Match("", Labels({{"a", "b"}})));
}

TEST(LabelSelectorTest, EqualityOperators) {
  StringPairs l = Labels({{"app", "web"}, {"tier", "front"}});
  EXPECT_TRUE(Match("app=web", l));
  EXPECT_TRUE(Match("app==web", l));
  EXPECT_FALSE(Match("app=api", l));
  EXPECT_TRUE(Match("app!=api", l));
  EXPECT_FALSE(Match("app!=web", l));
  EXPECT_TRUE(Match("missing!=x", l)) << "absent label satisfies !=";
  EXPECT_TRUE(Match("app=web,tier=front", l));
  EXPECT_FALSE(Match("app=web,tier=back", l));
}

TEST(LabelSelectorTest, SetOperators) {
  StringPairs l = Labels({{"env", "prod"}});
  EXPECT_TRUE(Match("env in (dev, prod)", l));
  EXPECT_TRUE(Match("env in (prod)", l));
  EXPECT_FALSE(Match("env in (dev,qa)", l));
  EXPECT_TRUE(Match("env notin (dev,qa)", l));
  EXPECT_FALSE(Match("env notin (prod)", l));
  EXPECT_TRUE(Match("other notin (x)", l));
  EXPECT_FALSE(Match("other in (x)", l));
}

TEST(LabelSelectorTest, ExistenceAndNumericComparisons) {
  StringPairs l = Labels({{"canary", ""}, {"replicas", "5"}});
  EXPECT_TRUE(Match("canary", l));
  EXPECT_FALSE(Match("!canary", l));
  EXPECT_TRUE(Match("!stable", l));
  EXPECT_FALSE(Match("stable", l));
  EXPECT_TRUE(Match("replicas>3", l));
  EXPECT_FALSE(Match("replicas<3", l));
  EXPECT_TRUE(Match("canary,!stable,replicas in (5)", l));
}

TEST(LabelSelectorTest, MalformedSelectorsAreRejected) {
  EXPECT_FALSE(LabelSelector::Parse("env in dev").ok());
  EXPECT_FALSE(LabelSelector::Parse("env in (a,b").ok());
  EXPECT_FALSE(LabelSelector::Parse("a=b,,").ok());
  EXPECT_FALSE(LabelSelector::Parse("=x").ok());
}

TEST(LabelSelectorTest, NumericComparisonsNeedAnIntegerInTheServersWords) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse("replicas>many");
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(),
            "unable to parse requirement: values[0]: Invalid value: "
            "\"many\": for 'Gt', 'Lt' operators, the value must be an "
            "integer (in \"replicas>many\")");
  // A value that fails both checks gets both, as an aggregate.
  sel = LabelSelector::Parse("replicas>-x");
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(),
            "unable to parse requirement: [values[0]: Invalid value: \"-x\": "
            "for 'Gt', 'Lt' operators, the value must be an integer, "
            "values[0][replicas]: Invalid value: \"-x\": a valid label must "
            "be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric "
            "character] (in \"replicas>-x\")");
  // A label that is not a number never matches.
  EXPECT_FALSE(Match("replicas>1", Labels({{"replicas", "many"}})));
}

TEST(FieldSelectorTest, MetadataFieldsMatch) {
  StringPairs f =
      Labels({{"metadata.name", "a"}, {"metadata.namespace", "ns"}});
  auto sel = FieldSelector::Parse("metadata.name=a,metadata.namespace==ns", {});
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_TRUE(sel->Matches(f));
  sel = FieldSelector::Parse("metadata.name!=a", {});
  ASSERT_TRUE(sel.ok());
  EXPECT_FALSE(sel->Matches(f));
  sel = FieldSelector::Parse("metadata.namespace=other", {});
  ASSERT_TRUE(sel.ok());
  EXPECT_FALSE(sel->Matches(f));
}

TEST(FieldSelectorTest, ResourceSpecificFieldsMustBeAllowed) {
  EXPECT_FALSE(FieldSelector::Parse("spec.nodeName=n1", {}).ok());
  auto sel = FieldSelector::Parse("spec.nodeName=n1", {"spec.nodeName"});
  ASSERT_TRUE(sel.ok());
  EXPECT_TRUE(sel->Matches(Labels({{"spec.nodeName", "n1"}})));
  EXPECT_FALSE(sel->Matches(Labels({{"spec.nodeName", "n2"}})));
  // An absent field compares as "".
  auto empty = FieldSelector::Parse("spec.nodeName=", {"spec.nodeName"});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->Matches(Labels({})));
}

TEST(FieldSelectorTest, UnsupportedFieldMessageNamesTheField) {
  // A kind with its own selectable fields (its conversion function), and
  // one with metadata only (the default conversion), as v1.37.2 words them.
  auto sel = FieldSelector::Parse("spec.foo=1", {"spec.nodeName"});
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(), "field label not supported: spec.foo");
  auto meta_only = FieldSelector::Parse("data.x=1", {});
  EXPECT_EQ(meta_only.status().message(),
            "\"data.x\" is not a known field selector: only "
            "\"metadata.name\", \"metadata.namespace\"");
  EXPECT_FALSE(FieldSelector::Parse("metadata.name", {}).ok());
}

}  // namespace
}  // namespace emulator

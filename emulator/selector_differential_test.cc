// The emulator parses label selectors on its own (emulator/selector.h)
// instead of sharing the sidecar's parser (informer/labels): it stands for
// the API server, and a shared parser would make every selector bug
// invisible, since both sides of an end-to-end test would agree on it. This
// test keeps the two honest: on every selector of a corpus both accept or
// both reject, and accepted ones match the same label sets.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "emulator/selector.h"
#include "gtest/gtest.h"
#include "informer/labels/label_selector.h"
#include "informer/object/object.h"

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

const std::vector<std::string>& Selectors() {
  static const auto* selectors = new std::vector<std::string>{
      // Accepted by both.
      "",
      "app",
      "!app",
      "app=web",
      "app==web",
      "app!=web",
      "app=web,tier=front",
      "app in (web,db)",
      "app in (web, db)",
      "app notin (web)",
      "app in ()",
      "app notin ()",
      "app,tier",
      "app=web,!canary",
      "app in (web),tier notin (back),env",
      "example.com/app=web",
      "example.com/app",
      "a-b.c_d=x-y.z_1",
      " app = web ",
      "app=",
      "app!=",
      "app in (web,)",
      "tier in (a,b,c)",
      "app=web,app=db",
      "!canary,!app",
      "n>2",
      "n<10",
      "n > 2",
      "n>007",
      "n>2,n<10",
      "app=web,n<3",
      // Rejected by both.
      "app=web,",
      ",app",
      "app=(web)",
      "app in web",
      "app in (web",
      "app notin",
      "app ==",
      "=web",
      "!",
      "!app=web",
      "app==web==db",
      "app in (web db)",
      "-app=web",
      "app=-web",
      "app=web!",
      "a b=c",
      "app=web;tier=front",
      "example.com/=web",
      "/app=web",
      std::string(64, 'k') + "=v",
      "k=" + std::string(64, 'v'),
      "n>x",
      "n>",
      "n<",
      "n>-1",
      "n>=1",
      "!n>1",
      "n>(1)",
      "n>99999999999999999999",
  };
  return *selectors;
}

const std::vector<Labels>& LabelSets() {
  static const auto* sets = new std::vector<Labels>{
      {},
      {{"app", "web"}},
      {{"app", "db"}},
      {{"app", ""}},
      {{"app", "web"}, {"tier", "front"}},
      {{"app", "web"}, {"canary", "true"}},
      {{"app", "web"}, {"env", "prod"}, {"tier", "back"}},
      {{"tier", "a"}},
      {{"example.com/app", "web"}},
      {{"a-b.c_d", "x-y.z_1"}},
      {{"canary", ""}},
      {{"n", "3"}},
      {{"n", "10"}},
      {{"n", "1"}, {"app", "web"}},
      {{"n", "many"}},
  };
  return *sets;
}

informer::ObjectPtr ObjectWith(const Labels& labels) {
  informer::ObjectBuilder b;
  b.SetNamespace("default").SetName("o");
  for (const auto& [k, v] : labels) b.AddLabel(k, v);
  return b.Build();
}

emulator::StringPairs Sorted(Labels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}

TEST(SelectorDifferentialTest, BothParsersAcceptAndMatchAlike) {
  int accepted = 0;
  for (const std::string& text : Selectors()) {
    SCOPED_TRACE(absl::StrCat("selector \"", text, "\""));
    absl::StatusOr<informer::LabelSelector> ours =
        informer::LabelSelector::Parse(text);
    absl::StatusOr<emulator::LabelSelector> theirs =
        emulator::LabelSelector::Parse(text);
    EXPECT_EQ(ours.ok(), theirs.ok())
        << "sidecar: " << ours.status() << "; emulator: " << theirs.status();
    if (!ours.ok() || !theirs.ok()) continue;
    ++accepted;
    for (const Labels& labels : LabelSets()) {
      EXPECT_EQ(ours->Matches(*ObjectWith(labels)),
                theirs->Matches(Sorted(labels)))
          << "on " << labels.size() << " labels"
          << (labels.empty() ? "" : ", first " + labels[0].first);
    }
  }
  // The corpus exercises both sides of the comparison.
  EXPECT_GT(accepted, 10);
  EXPECT_LT(accepted, static_cast<int>(Selectors().size()) - 10);
}

}  // namespace

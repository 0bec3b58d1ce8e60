#include "emulator/list_options.h"

#include <string>
#include <vector>

#include "emulator/api_status.h"
#include "emulator/test_util.h"
#include "gtest/gtest.h"

namespace emulator {
namespace {

std::string Message(const ListOptions& o, ServerVersion v) {
  std::vector<FieldError> errors = ValidateListOptions(o, v);
  return errors.empty() ? "" : InvalidListOptionsStatus(errors).message;
}

constexpr char kPrefix[] = "ListOptions.meta.k8s.io \"\" is invalid: ";

TEST(ListOptionsTest, V124RefusesWatchListLikeTheCapture) {
  ListOptions o;
  o.watch = true;
  o.resource_version_match = "NotOlderThan";
  ApiStatus s =
      InvalidListOptionsStatus(ValidateListOptions(o, ServerVersion::kV1_24));
  EXPECT_EQ(StatusJson(s), CaptureBody("watchlist-unsupported-v1.24.txt"));
  EXPECT_EQ(s.code, CaptureCode("watchlist-unsupported-v1.24.txt"));
  // With a resourceVersion only the watch rule is left: bare, no brackets.
  o.resource_version = "5";
  EXPECT_EQ(Message(o, ServerVersion::kV1_24),
            std::string(kPrefix) +
                "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                "forbidden for watch");
}

TEST(ListOptionsTest, V137ListRulesAsTheRealServerAnswers) {
  ListOptions o;
  o.resource_version = "0";
  o.resource_version_match = "Exact";
  EXPECT_EQ(Message(o, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "resourceVersionMatch: Forbidden: resourceVersionMatch "
                "\"exact\" is forbidden for resourceVersion \"0\"");
  o.resource_version = "1";
  o.resource_version_match = "Bogus";
  EXPECT_EQ(Message(o, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "resourceVersionMatch: Unsupported value: \"Bogus\": "
                "supported values: \"Exact\", \"NotOlderThan\", \"\"");
  o.resource_version_match = "NotOlderThan";
  o.continue_token = "tok";
  EXPECT_EQ(Message(o, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                "forbidden when continue is provided");
  ListOptions sie;
  sie.send_initial_events = false;
  EXPECT_EQ(Message(sie, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "sendInitialEvents: Forbidden: sendInitialEvents is "
                "forbidden for list");
  EXPECT_EQ(Message(ListOptions(), ServerVersion::kV1_37), "");
}

TEST(ListOptionsTest, V137WatchRulesAsTheRealServerAnswers) {
  ListOptions o;
  o.watch = true;
  o.send_initial_events = true;
  EXPECT_EQ(Message(o, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "resourceVersionMatch: Forbidden: sendInitialEvents requires "
                "setting resourceVersionMatch to NotOlderThan");
  o.resource_version_match = "Exact";
  EXPECT_EQ(ValidateListOptions(o, ServerVersion::kV1_37).size(), 2u);
  o.resource_version_match = "NotOlderThan";
  EXPECT_EQ(Message(o, ServerVersion::kV1_37), "");
  o.send_initial_events = false;  // given, even false: allowed
  EXPECT_EQ(Message(o, ServerVersion::kV1_37), "");
  o.send_initial_events.reset();
  o.resource_version = "7";
  EXPECT_EQ(Message(o, ServerVersion::kV1_37),
            std::string(kPrefix) +
                "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                "forbidden for watch unless sendInitialEvents is provided");
}

TEST(ListOptionsTest, QueryIntegersFailWithGoText) {
  EXPECT_EQ(*ParseQueryInt(""), 0);
  EXPECT_EQ(*ParseQueryInt("-1"), -1);
  EXPECT_EQ(ParseQueryInt("abc").status().message(),
            "strconv.ParseInt: parsing \"abc\": invalid syntax");
  EXPECT_FALSE(ParseQueryBool("").has_value());
  EXPECT_TRUE(*ParseQueryBool("true"));
  EXPECT_FALSE(*ParseQueryBool("false"));
}

}  // namespace
}  // namespace emulator

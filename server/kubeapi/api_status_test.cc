#include "server/kubeapi/api_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/kubeapi/test_util.h"

namespace server {
namespace kubeapi {
namespace {

TEST(ApiStatusTest, NotFoundIsTheApiServersBytes) {
  ApiStatus s = NotFoundStatus("configmaps", "", "does-not-exist");
  EXPECT_EQ(s.Render(), CaptureBody("error-404.txt"));
  EXPECT_EQ(s.code, CaptureCode("error-404.txt"));
}

TEST(ApiStatusTest, UnknownResourceIsTheApiServersBytes) {
  EXPECT_EQ(UnknownPathStatus().Render(),
            CaptureBody("error-404-resource.txt"));
}

TEST(ApiStatusTest, UnauthorizedIsTheApiServersBytes) {
  EXPECT_EQ(UnauthorizedStatus().Render(), CaptureBody("error-401.txt"));
  EXPECT_EQ(UnauthorizedStatus().code, CaptureCode("error-401.txt"));
}

TEST(ApiStatusTest, ForbiddenIsTheApiServersBytes) {
  ApiStatus s = ForbiddenStatus("nobody", "list", "configmaps", "", "demo", "");
  EXPECT_EQ(s.Render(), CaptureBody("error-403.txt"));
}

TEST(ApiStatusTest, ForbiddenAtClusterScopeAndWithAName) {
  EXPECT_EQ(
      ForbiddenStatus("u", "get", "deployments", "apps", "", "d1").message,
      "deployments.apps \"d1\" is forbidden: User \"u\" cannot get "
      "resource \"deployments\" in API group \"apps\" at the cluster "
      "scope");
}

TEST(ApiStatusTest, ContinueExpiredIsTheApiServersBytes) {
  std::string body = CaptureBody("list-expired-continue-410.txt");
  const std::string kKey = R"("continue":")";
  size_t at = body.find(kKey) + kKey.size();
  std::string token = body.substr(at, body.find('"', at) - at);
  EXPECT_EQ(ContinueExpiredStatus(token).Render(), body);
  EXPECT_EQ(CaptureCode("list-expired-continue-410.txt"), 410);
}

TEST(ApiStatusTest, WatchTooOldIsTheApiServersErrorEventObject) {
  std::string line = ReadCapture("watch-too-old-rv-410.jsonl");
  while (!line.empty() && line.back() == '\n') line.pop_back();
  EXPECT_EQ(absl::StrCat(R"({"type":"ERROR","object":)",
                         WatchTooOldStatus(5, 145247).Render(), "}"),
            line);
}

TEST(ApiStatusTest, TooLargeResourceVersionCarriesItsCauseAndRetry) {
  EXPECT_EQ(
      TooLargeResourceVersionStatus(20, 10).Render(),
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 20, current: 10","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504})");
}

TEST(ApiStatusTest, ReadOnlySaysSo) {
  ApiStatus s = ReadOnlyStatus("create", "configmaps", "");
  EXPECT_EQ(s.code, 405);
  EXPECT_EQ(s.reason, "MethodNotAllowed");
  EXPECT_NE(s.message.find("read-only"), std::string::npos);
  EXPECT_NE(s.Render().find(R"("details":{"kind":"configmaps"})"),
            std::string::npos);
}

TEST(JsonQuoteTest, EscapesLikeGo) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n"), R"("a\"b\\c\n")");
  EXPECT_EQ(JsonQuote(std::string("k\0", 2)), R"("k\u0000")");
  EXPECT_EQ(JsonQuote("<&>"), R"("\u003c\u0026\u003e")");
  EXPECT_EQ(JsonQuote("\xe2\x80\xa8"), R"("\u2028")");
  EXPECT_EQ(JsonQuote("héllo"), "\"héllo\"");
}

TEST(BodyAfterTypeMetaTest, StripsKindAndApiVersionInEitherOrder) {
  EXPECT_EQ(
      BodyAfterTypeMeta(R"({"kind":"Pod","apiVersion":"v1","metadata":{}})"),
      R"("metadata":{}})");
  EXPECT_EQ(
      BodyAfterTypeMeta(R"({"apiVersion":"v1","kind":"Pod","metadata":{}})"),
      R"("metadata":{}})");
  EXPECT_EQ(BodyAfterTypeMeta(R"({"metadata":{"name":"x"}})"),
            R"("metadata":{"name":"x"}})");
  EXPECT_EQ(BodyAfterTypeMeta(R"({"kind":"Pod"})"), "}");
  // A "kind" that is not a string is data, not TypeMeta.
  EXPECT_EQ(BodyAfterTypeMeta(R"({"kind":{"a":1}})"), R"("kind":{"a":1}})");
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

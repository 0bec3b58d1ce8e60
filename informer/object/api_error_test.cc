#include "informer/object/api_error.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

// Recorded bodies end in "\n\nHTTP <code>\n"; the body is the first line.
std::string RecordedBody(const std::string& name) {
  std::ifstream in("testdata/kube-apiserver-v1.24/" + name);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(StatusCodeForHttpTest, MapsEveryDocumentedCode) {
  EXPECT_EQ(StatusCodeForHttp(400, ""), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(422, "Invalid"),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(401, ""), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeForHttp(403, ""), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForHttp(404, ""), absl::StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForHttp(409, "AlreadyExists"),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(StatusCodeForHttp(409, "Conflict"), absl::StatusCode::kAborted);
  EXPECT_EQ(StatusCodeForHttp(410, "Expired"),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForHttp(429, ""), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttp(500, ""), absl::StatusCode::kInternal);
  EXPECT_EQ(StatusCodeForHttp(503, ""), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(504, ""), absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusFromHttpResponseTest, NotFoundReadsLikeKubectl) {
  const std::string path = "/api/v1/namespaces/demo/configmaps/does-not-exist";
  absl::Status s =
      StatusFromHttpResponse(404, "GET", path, RecordedBody("error-404.txt"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            "404 GET " + path +
                ": Error from server (NotFound): configmaps \"does-not-exist\" "
                "not found");
  EXPECT_EQ(HttpCode(s), 404);
  EXPECT_EQ(Reason(s), "NotFound");
  EXPECT_FALSE(IsExpired(s));
}

TEST(StatusFromHttpResponseTest, ForbiddenAndUnauthorized) {
  absl::Status forbidden =
      StatusFromHttpResponse(403, "GET", "/api/v1/namespaces/demo/configmaps",
                             RecordedBody("error-403.txt"));
  EXPECT_EQ(forbidden.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(forbidden.message(),
                                "(Forbidden): configmaps is forbidden"));
  absl::Status unauthorized =
      StatusFromHttpResponse(401, "GET", "/api", RecordedBody("error-401.txt"));
  EXPECT_EQ(unauthorized.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Reason(unauthorized), "Unauthorized");
}

TEST(StatusFromHttpResponseTest, ExpiredContinueIsFailedPrecondition) {
  absl::Status s =
      StatusFromHttpResponse(410, "GET", "/api/v1/configmaps",
                             RecordedBody("list-expired-continue-410.txt"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsExpired(s));
  EXPECT_TRUE(absl::StartsWith(s.message(), "410"));
  EXPECT_TRUE(absl::StrContains(s.message(), "continue parameter is too old"));
}

TEST(StatusFromHttpResponseTest, UnprocessableWatchListIsInvalidArgument) {
  absl::Status s =
      StatusFromHttpResponse(422, "GET", "/api/v1/configmaps",
                             RecordedBody("watchlist-unsupported-v1.24.txt"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpCode(s), 422);
  EXPECT_EQ(Reason(s), "Invalid");
}

TEST(StatusFromHttpResponseTest, TooManyRequestsCarriesRetryAfter) {
  absl::Status s = StatusFromHttpResponse(
      429, "GET", "/api/v1/pods",
      R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
      R"("message":"too many requests","reason":"TooManyRequests","code":429})",
      "7");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(IsTooManyRequests(s));
  ASSERT_TRUE(RetryAfter(s).has_value());
  EXPECT_EQ(*RetryAfter(s), absl::Seconds(7));
}

TEST(StatusFromHttpResponseTest, NonStatusBodyIsQuotedAndTruncated) {
  std::string html(1000, 'x');
  absl::Status s = StatusFromHttpResponse(503, "GET", "/apis", html);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Reason(s), "ServiceUnavailable");
  EXPECT_LT(s.message().size(), 400u);
  EXPECT_FALSE(RetryAfter(s).has_value());
}

TEST(StatusFromHttpResponseTest, TooLargeResourceVersion) {
  absl::Status s = StatusFromHttpResponse(
      504, "GET", "/api/v1/pods",
      R"({"kind":"Status","status":"Failure","message":"Too large resource )"
      R"(version: 200, current: 100","reason":"Timeout","code":504})");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(IsTooLargeResourceVersion(s));
  EXPECT_FALSE(IsExpired(s));
}

TEST(StatusFromApiStatusTest, WatchErrorEventExpired) {
  ApiStatus api;
  api.code = 410;
  api.reason = "Expired";
  api.message = "too old resource version: 5 (145247)";
  absl::Status s = StatusFromApiStatus(api, "GET", "/api/v1/configmaps");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsExpired(s));
  EXPECT_EQ(s.message(),
            "410 GET /api/v1/configmaps: Error from server (Expired): too old "
            "resource version: 5 (145247)");
}

TEST(StatusFromApiStatusTest, MissingCodeIsInternal) {
  ApiStatus api;
  api.message = "boom";
  absl::Status s = StatusFromApiStatus(api, "GET", "/x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(HttpCode(s), 500);
}

TEST(ConnectionErrorTest, IsUnavailableWithoutHttpCode) {
  absl::Status s = ConnectionError("GET", "/api", "Connection refused");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCode(s), 0);
  EXPECT_FALSE(IsExpired(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "Connection refused"));
}

TEST(StatusFromHttpResponseTest, ForbiddenListReadsLikeKubectl) {
  const std::string path = "/api/v1/namespaces/demo/configmaps?limit=500";
  absl::Status s =
      StatusFromHttpResponse(403, "GET", path, RecordedBody("error-403.txt"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "403 GET " + path +
                ": Error from server (Forbidden): configmaps is forbidden: "
                "User \"nobody\" cannot list resource \"configmaps\" in API "
                "group \"\" in the namespace \"demo\"");
  EXPECT_EQ(Reason(s), "Forbidden");
}

TEST(ConnectionRefusedErrorTest, ReadsLikeKubectl) {
  absl::Status s = ConnectionRefusedError(
      "10.0.0.1:6443", "GET", "/api",
      "Failed to connect to 10.0.0.1 port 6443: Connection refused");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCode(s), 0);
  EXPECT_EQ(s.message(),
            "The connection to the server 10.0.0.1:6443 was refused - did you "
            "specify the right host or port? (GET /api: Failed to connect to "
            "10.0.0.1 port 6443: Connection refused)");
}

TEST(IsExpiredTest, RecognisesPayloadlessStatusFromFakes) {
  EXPECT_TRUE(IsExpired(absl::FailedPreconditionError("410: too old")));
  EXPECT_FALSE(IsExpired(absl::FailedPreconditionError("other")));
  EXPECT_FALSE(IsExpired(absl::OkStatus()));
}

TEST(ParseRetryAfterTest, AcceptsSecondsOnly) {
  EXPECT_EQ(ParseRetryAfter(" 3 "), absl::Seconds(3));
  EXPECT_FALSE(ParseRetryAfter("").has_value());
  EXPECT_FALSE(ParseRetryAfter("-1").has_value());
  EXPECT_FALSE(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT").has_value());
}

}  // namespace
}  // namespace informer

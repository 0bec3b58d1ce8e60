#include "emulator/api_status.h"

#include "emulator/test_util.h"
#include "gtest/gtest.h"

namespace emulator {
namespace {

ResourceInfo ConfigMaps() {
  ResourceInfo r;
  r.version = "v1";
  r.resource = "configmaps";
  r.kind = "ConfigMap";
  return r;
}

TEST(ApiStatusTest, NotFoundIsByteCompatibleWithCapture) {
  ApiStatus s = NotFoundStatus(ConfigMaps(), "does-not-exist");
  EXPECT_EQ(StatusJson(s), CaptureBody("error-404.txt"));
  EXPECT_EQ(s.code, CaptureCode("error-404.txt"));
}

TEST(ApiStatusTest, ResourceNotFoundIsByteCompatibleWithCapture) {
  EXPECT_EQ(StatusJson(ResourceNotFoundStatus()),
            CaptureBody("error-404-resource.txt"));
}

TEST(ApiStatusTest, UnauthorizedIsByteCompatibleWithCapture) {
  ApiStatus s = UnauthorizedStatus();
  EXPECT_EQ(StatusJson(s), CaptureBody("error-401.txt"));
  EXPECT_EQ(s.code, CaptureCode("error-401.txt"));
}

TEST(ApiStatusTest, ForbiddenIsByteCompatibleWithCapture) {
  ApiStatus s = ForbiddenStatus("nobody", "list", ConfigMaps(), "demo", "");
  EXPECT_EQ(StatusJson(s), CaptureBody("error-403.txt"));
  EXPECT_EQ(s.code, 403);
}

TEST(ApiStatusTest, ForbiddenAtClusterScopeAndWithGroup) {
  ResourceInfo deploy = ConfigMaps();
  deploy.group = "apps";
  deploy.resource = "deployments";
  EXPECT_EQ(ForbiddenStatus("u", "get", deploy, "", "d1").message,
            "deployments.apps \"d1\" is forbidden: User \"u\" cannot get "
            "resource \"deployments\" in API group \"apps\" at the cluster "
            "scope");
  EXPECT_EQ(
      StatusJson(NotFoundStatus(deploy, "x")),
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
      "\"Failure\",\"message\":\"deployments.apps \\\"x\\\" not found\","
      "\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"group\":\"apps\","
      "\"kind\":\"deployments\"},\"code\":404}");
}

TEST(ApiStatusTest, ExpiredContinueIsByteCompatibleWithCapture) {
  const std::string token =
      "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiY20tMDAwMDAwXHUwMD"
      "AwIn0";
  EXPECT_EQ(StatusJson(ExpiredContinueStatus(token)),
            CaptureBody("list-expired-continue-410.txt"));
}

TEST(ApiStatusTest, FieldErrorsAggregateAsTheServerWritesThem) {
  FieldError forbidden;
  forbidden.type = FieldError::Type::kForbidden;
  forbidden.field = "resourceVersionMatch";
  forbidden.detail = "resourceVersionMatch is forbidden for watch";
  ApiStatus one = InvalidListOptionsStatus({forbidden});
  EXPECT_EQ(one.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
            "Forbidden: resourceVersionMatch is forbidden for watch");
  FieldError unsupported;
  unsupported.type = FieldError::Type::kNotSupported;
  unsupported.field = "resourceVersionMatch";
  unsupported.value = "Bogus";
  unsupported.supported = {"Exact", "NotOlderThan", ""};
  ApiStatus two = InvalidListOptionsStatus({forbidden, unsupported});
  EXPECT_EQ(two.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: "
            "Forbidden: resourceVersionMatch is forbidden for watch, "
            "resourceVersionMatch: Unsupported value: \"Bogus\": supported "
            "values: \"Exact\", \"NotOlderThan\", \"\"]");
  ASSERT_EQ(two.causes.size(), 2u);
  EXPECT_EQ(two.causes[1].reason, "FieldValueNotSupported");
  EXPECT_EQ(two.code, 422);
}

TEST(ApiStatusTest, InvalidObjectErrorsCarryTheirCauses) {
  FieldError required;
  required.type = FieldError::Type::kRequired;
  required.field = "metadata.name";
  required.detail = "name or generateName is required";
  ApiStatus s =
      FromStoreError(InvalidObjectError("", {required}), ConfigMaps(), "");
  EXPECT_EQ(StatusJson(s),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
            R"("status":"Failure","message":"ConfigMap \"\" is invalid: )"
            R"(metadata.name: Required value: name or generateName is )"
            R"(required","reason":"Invalid","details":{"kind":"ConfigMap",)"
            R"("causes":[{"reason":"FieldValueRequired","message":"Required )"
            R"(value: name or generateName is required","field":)"
            R"("metadata.name"}]},"code":422})");
}

TEST(ApiStatusTest, TooOldWatchMatchesTheCapturedErrorEvent) {
  std::string line =
      "{\"type\":\"ERROR\",\"object\":" +
      StatusJson(ExpiredStatus("too old resource version: 5 (145247)")) + "}";
  EXPECT_EQ(line, CaptureBody("watch-too-old-rv-410.jsonl"));
}

TEST(ApiStatusTest, StoreErrorsMapToKubeReasons) {
  ResourceInfo r = ConfigMaps();
  EXPECT_EQ(FromStoreError(absl::NotFoundError("k"), r, "a").code, 404);
  EXPECT_EQ(FromStoreError(absl::AlreadyExistsError("k"), r, "a").reason,
            "AlreadyExists");
  ApiStatus conflict = FromStoreError(absl::AbortedError("k"), r, "a");
  EXPECT_EQ(conflict.code, 409);
  EXPECT_EQ(conflict.reason, "Conflict");
  EXPECT_EQ(FromStoreError(absl::OutOfRangeError("too old"), r, "").code, 410);
  absl::Status expired = absl::OutOfRangeError("x");
  expired.SetPayload(kContinuePayload, absl::Cord("tok"));
  EXPECT_EQ(FromStoreError(expired, r, "").continue_token, "tok");
  EXPECT_EQ(FromStoreError(absl::InvalidArgumentError("bad"), r, "").code, 400);
  EXPECT_EQ(FromStoreError(absl::FailedPreconditionError("m"), r, "n").code,
            422);
  EXPECT_EQ(FromStoreError(absl::DeadlineExceededError("big"), r, "").code,
            504);
  EXPECT_EQ(FromStoreError(absl::InternalError("boom"), r, "").code, 500);
}

TEST(ApiStatusTest, TooManyRequestsCarriesRetryAfter) {
  EXPECT_EQ(StatusJson(TooManyRequestsStatus(3)),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
            "\"status\":\"Failure\",\"message\":\"Too many requests, please "
            "try again later.\",\"reason\":\"TooManyRequests\",\"details\":{"
            "\"retryAfterSeconds\":3},\"code\":429}");
}

}  // namespace
}  // namespace emulator

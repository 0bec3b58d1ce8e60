// The facade's Status bodies against the emulator's, which stands for the
// API server and is written separately on purpose: for every error both
// serve, the bytes must agree, and where the real server's capture exists,
// both must equal it. A difference is a bug in one of them (or, for the
// facade's read-only 405, a deliberate wording, checked for its form).

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "emulator/api_status.h"
#include "emulator/resource_registry.h"
#include "gtest/gtest.h"
#include "server/kubeapi/api_status.h"
#include "server/kubeapi/list_options.h"
#include "server/kubeapi/test_util.h"

namespace server {
namespace kubeapi {
namespace {

class StatusDifferentialTest : public ::testing::Test {
 protected:
  const emulator::ResourceInfo& Info(const char* name) {
    const emulator::ResourceInfo* r = registry_->FindByName(name);
    EXPECT_NE(r, nullptr) << name;
    return *r;
  }
  // Both bodies and codes agree; when `capture` is set, both are it.
  void Same(const ApiStatus& facade, const emulator::ApiStatus& emulated,
            const std::string& capture = "") {
    EXPECT_EQ(facade.Render(), emulator::StatusJson(emulated));
    EXPECT_EQ(facade.code, emulated.code);
    if (!capture.empty()) {
      EXPECT_EQ(facade.Render(), CaptureBody(capture));
      EXPECT_EQ(facade.code, CaptureCode(capture));
    }
  }

  std::unique_ptr<emulator::ResourceRegistry> registry_ =
      emulator::ResourceRegistry::WithBuiltins();
};

TEST_F(StatusDifferentialTest, NotFound404) {
  Same(NotFoundStatus("configmaps", "", "does-not-exist"),
       emulator::NotFoundStatus(Info("configmaps"), "does-not-exist"),
       "error-404.txt");
  Same(NotFoundStatus("deployments", "apps", "web"),
       emulator::NotFoundStatus(Info("deployments.apps"), "web"));
  Same(UnknownPathStatus(), emulator::ResourceNotFoundStatus(),
       "error-404-resource.txt");
}

TEST_F(StatusDifferentialTest, Expired410) {
  // A watch from a version older than the history: the ERROR event's
  // object.
  Same(WatchTooOldStatus(5, 145247),
       emulator::ExpiredStatus("too old resource version: 5 (145247)"));
  std::string line = ReadCapture("watch-too-old-rv-410.jsonl");
  EXPECT_EQ(line, absl::StrCat(R"({"type":"ERROR","object":)",
                               WatchTooOldStatus(5, 145247).Render(), "}\n"));
  // An exact list older than the history.
  Same(ListTooOldStatus(),
       emulator::ExpiredStatus(
           "The resourceVersion for the provided list is too old."));
  // An expired continue token, with the inconsistent token to go on.
  const std::string token =
      "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiY20tMDAwMDAwXHUwMDAw"
      "In0";
  Same(ContinueExpiredStatus(token), emulator::ExpiredContinueStatus(token),
       "list-expired-continue-410.txt");
}

TEST_F(StatusDifferentialTest, UnsupportedFieldSelector400) {
  // The facade's own parser produces its error.
  RequestOptions opts;
  ApiStatus error;
  ASSERT_FALSE(ParseRequestOptions({{"fieldSelector", "spec.host=x"}}, "Pod",
                                   "", &opts, &error));
  Same(error,
       emulator::BadRequestStatus("field label not supported: spec.host"));
  EXPECT_EQ(
      error.Render(),
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"field label not supported: spec.host","reason":"BadRequest","code":400})");
}

TEST_F(StatusDifferentialTest, Unauthorized401AndForbidden403) {
  Same(UnauthorizedStatus(), emulator::UnauthorizedStatus(), "error-401.txt");
  Same(ForbiddenStatus("nobody", "list", "configmaps", "", "demo", ""),
       emulator::ForbiddenStatus("nobody", "list", Info("configmaps"), "demo",
                                 ""),
       "error-403.txt");
  Same(ForbiddenStatus("app", "get", "deployments", "apps", "", "web"),
       emulator::ForbiddenStatus("app", "get", Info("deployments.apps"), "",
                                 "web"));
}

TEST_F(StatusDifferentialTest, Timeout504) {
  Same(TooLargeResourceVersionStatus(20, 10),
       emulator::TooLargeResourceVersionStatus(20, 10));
  // The store's error for the same case, mapped as the emulator serves it.
  Same(TooLargeResourceVersionStatus(20, 10),
       emulator::FromStoreError(
           absl::DeadlineExceededError("Too large resource version: 20, "
                                       "current: 10"),
           Info("configmaps"), ""));
}

TEST_F(StatusDifferentialTest, MethodNotAllowed405HasTheApiServersForm) {
  // The facade says why (it is read-only); code, reason and field order
  // are the API server's.
  ApiStatus facade = ReadOnlyStatus("create", "configmaps", "");
  emulator::ApiStatus emulated = emulator::MethodNotAllowedStatus();
  EXPECT_EQ(facade.code, emulated.code);
  EXPECT_EQ(facade.reason, emulated.reason);
  const std::string head =
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")";
  EXPECT_EQ(facade.Render().rfind(head, 0), 0u);
  EXPECT_EQ(emulator::StatusJson(emulated).rfind(head, 0), 0u);
  const std::string tail = R"(,"reason":"MethodNotAllowed","details":{)";
  EXPECT_NE(facade.Render().find(tail), std::string::npos);
  EXPECT_NE(emulator::StatusJson(emulated).find(tail), std::string::npos);
  EXPECT_NE(facade.message.find("read-only"), std::string::npos);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

#include "emulator/patch.h"

#include "gtest/gtest.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {
namespace {

std::string Apply(PatchType type, const char* doc, const char* patch,
                  absl::Status* status = nullptr) {
  rapidjson::Document d;
  d.Parse(doc);
  absl::Status s = ApplyPatch(type, patch, d);
  if (status != nullptr) *status = s;
  if (!s.ok()) return "";
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  d.Accept(w);
  return buf.GetString();
}

TEST(PatchTest, ContentTypesMapToPatchTypes) {
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json"),
            PatchType::kMerge);
  EXPECT_EQ(*PatchTypeFromContentType(
                "application/strategic-merge-patch+json; charset=utf-8"),
            PatchType::kStrategicMerge);
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json"),
            PatchType::kJsonPatch);
  EXPECT_FALSE(PatchTypeFromContentType("application/apply-patch+yaml").ok());
}

TEST(PatchTest, MergePatchMergesMapsDeletesNullsReplacesLists) {
  EXPECT_EQ(Apply(PatchType::kMerge, R"({"a":{"b":1,"c":2},"l":[1,2],"x":"y"})",
                  R"({"a":{"b":9,"c":null,"d":{"e":1}},"l":[3],"x":null})"),
            R"({"a":{"b":9,"d":{"e":1}},"l":[3]})");
}

TEST(PatchTest, StrategicMergeHonoursPatchDirectives) {
  EXPECT_EQ(Apply(PatchType::kStrategicMerge,
                  R"({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"x":1}})",
                  R"({"metadata":{"labels":{"$patch":"replace","c":"3"}},)"
                  R"("spec":{"$patch":"delete"},"$setElementOrder/l":[]})"),
            R"({"metadata":{"labels":{"c":"3"}}})");
}

TEST(PatchTest, JsonPatchOperations) {
  EXPECT_EQ(Apply(PatchType::kJsonPatch, R"({"a":{"b":1},"l":[1,3]})",
                  R"([{"op":"add","path":"/a/c","value":2},)"
                  R"({"op":"replace","path":"/a/b","value":5},)"
                  R"({"op":"add","path":"/l/1","value":2},)"
                  R"({"op":"add","path":"/l/-","value":4},)"
                  R"({"op":"test","path":"/a/c","value":2},)"
                  R"({"op":"remove","path":"/a/c"}])"),
            R"({"a":{"b":5},"l":[1,2,3,4]})");
}

TEST(PatchTest, FailedTestOrMalformedPatchIsAnError) {
  absl::Status s;
  Apply(PatchType::kJsonPatch, R"({"a":1})",
        R"([{"op":"test","path":"/a","value":2}])", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  Apply(PatchType::kMerge, R"({"a":1})", "{not json", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  Apply(PatchType::kJsonPatch, R"({"a":1})",
        R"([{"op":"remove","path":"/missing"}])", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace emulator

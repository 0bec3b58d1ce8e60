#include "informer/object/wire.h"

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/object/json_decode.h"
#include "informer/object/json_test_util.h"
#include "simdjson.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

std::string Capture(absl::string_view name) {
  absl::StatusOr<std::string> text = json_testing::ReadCapture(name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

bool IsValidJson(absl::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  return !parser.parse(json.data(), json.size()).get(root);
}

TEST(DecodeListTest, DecodesCapturedPodPage) {
  absl::StatusOr<ObjectList> list =
      DecodeList(Capture("list-pods-limit3.json"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "158251");
  EXPECT_EQ(list->continue_token,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjUxLCJzdGFydCI6InBvZC0wMD"
            "AwMDJcdTAwMDAifQ");
  EXPECT_EQ(list->remaining_item_count, 9997);
  ASSERT_EQ(list->items.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Object& pod = *list->items[i];
    EXPECT_EQ(pod.name(), absl::StrCat("pod-00000", i));
    EXPECT_EQ(pod.namespace_(), "benchpods");
    EXPECT_EQ(*pod.Label("app"), absl::StrCat("app-", i));
    EXPECT_FALSE(absl::StrContains(pod.json().str(), "managedFields"));
    EXPECT_TRUE(IsValidJson(pod.json().str())) << pod.json();
    EXPECT_TRUE(
        absl::StartsWith(pod.json().str(), "{\"metadata\":{\"name\":\"pod-"));
    EXPECT_THAT(pod.FieldValues("spec.nodeName"),
                ElementsAre(absl::StrCat("node-00", i)));
  }
}

TEST(DecodeListTest, ItemsMatchParsingEachItemAlone) {
  TransformOptions keep;
  keep.drop_managed_fields = false;
  absl::StatusOr<ObjectList> list =
      DecodeList(Capture("list-configmaps-limit2.json"), keep);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->remaining_item_count, 998);
  ASSERT_EQ(list->items.size(), 2u);
  for (const ObjectPtr& item : list->items) {
    absl::StatusOr<ObjectPtr> alone = Object::Parse(item->json().str(), keep);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ((*alone)->json(), item->json());
    EXPECT_EQ((*alone)->resource_version(), item->resource_version());
    EXPECT_TRUE(absl::StrContains(item->json().str(), "managedFields"));
  }
  EXPECT_EQ(list->items[0]->name(), "cm-0000");
  EXPECT_EQ(list->items[1]->name(), "cm-0001");
  EXPECT_THAT(list->items[0]->FieldValues("data.k"), ::testing::Not(IsEmpty()));
}

TEST(DecodeListTest, DecodesPartialObjectMetadataList) {
  absl::StatusOr<ObjectList> list =
      DecodeList(Capture("list-configmaps-metadata-only.json"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "158251");
  EXPECT_FALSE(list->continue_token.empty());
  EXPECT_EQ(list->remaining_item_count, -1);
  ASSERT_EQ(list->items.size(), 2u);
  const Object& cm = *list->items[0];
  EXPECT_EQ(cm.kind(), "PartialObjectMetadata");
  EXPECT_EQ(cm.api_version(), "meta.k8s.io/v1");
  EXPECT_EQ(cm.Key(), "demo/cm-0000");
  EXPECT_EQ(cm.uid(), "2a678b90-1119-4a4b-b283-e48970804eef");
  EXPECT_THAT(cm.annotations(),
              ElementsAre(Pair("bench-run", "dn8qgbrdhc9t"),
                          Pair("bench-ts", "1796060903785964286")));
  EXPECT_EQ(
      cm.json(),
      R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cm-0000","namespace":"demo","uid":"2a678b90-1119-4a4b-b283-e48970804eef","resourceVersion":"4243","creationTimestamp":"2026-11-30T17:44:59Z","labels":{"app":"demo"},"annotations":{"bench-run":"dn8qgbrdhc9t","bench-ts":"1796060903785964286"}}})");
}

TEST(DecodeListTest, DecodesThousandPodsWithTransform) {
  const std::string body = Capture("pods-1000.list.json.gz");
  TransformOptions t;
  t.drop_fields = {"status"};
  absl::StatusOr<ObjectList> list = DecodeList(body, t);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "158260");
  EXPECT_EQ(list->continue_token, "");
  EXPECT_EQ(list->remaining_item_count, -1);
  ASSERT_EQ(list->items.size(), 1000u);
  std::set<std::string> keys;
  size_t total = 0;
  for (const ObjectPtr& pod : list->items) {
    keys.insert(pod->Key());
    total += pod->json_size();
    ASSERT_FALSE(absl::StrContains(pod->json().str(), "\"status\":"))
        << pod->Key();
  }
  EXPECT_EQ(keys.size(), 1000u);
  EXPECT_TRUE(IsValidJson(list->items[999]->json().str()));
  // managedFields and status were about half of the bytes.
  EXPECT_LT(total, body.size() * 6 / 10);
}

TEST(DecodeListTest, AcceptsEmptyAndNullItemsAndPrettyBodies) {
  absl::StatusOr<ObjectList> empty = DecodeList(
      R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->resource_version, "7");
  EXPECT_THAT(empty->items, IsEmpty());
  absl::StatusOr<ObjectList> null_items =
      DecodeList(R"({"metadata":{"resourceVersion":"8"},"items":null})");
  ASSERT_TRUE(null_items.ok()) << null_items.status();
  EXPECT_THAT(null_items->items, IsEmpty());
  absl::StatusOr<ObjectList> pretty = DecodeList(R"({
    "metadata": {"resourceVersion": "9", "remainingItemCount": 0},
    "items": [ {"metadata": {"name": "a", "managedFields": [ ]}},
               {"metadata": {"name": "b"}, "data": {"x": "y z"}} ]
  })");
  ASSERT_TRUE(pretty.ok()) << pretty.status();
  EXPECT_EQ(pretty->remaining_item_count, 0);
  ASSERT_EQ(pretty->items.size(), 2u);
  EXPECT_EQ(pretty->items[0]->json(), R"({"metadata":{"name":"a"}})");
  EXPECT_EQ(pretty->items[1]->json(),
            R"({"metadata":{"name":"b"},"data":{"x":"y z"}})");
}

TEST(DecodeListTest, RejectsBadBodiesNamingTheItem) {
  absl::StatusOr<ObjectList> bad_item = DecodeList(
      R"({"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{}}]})");
  ASSERT_FALSE(bad_item.ok());
  EXPECT_EQ(bad_item.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_item.status().message()),
              HasSubstr("items[1]: missing metadata.name"));
  for (absl::string_view bad :
       {"", "[]", R"({"items":{}})", R"({"metadata":[],"items":[]})",
        R"({"metadata":{"remainingItemCount":"x"},"items":[]})",
        R"({"items":[1]})", R"({"items":[{"metadata":{"name":"a"}}])"}) {
    absl::StatusOr<ObjectList> r = DecodeList(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DecodeListTest, TruncatedListIsAnErrorAtEveryByte) {
  // Without its trailing newline, so that every proper prefix is invalid.
  const std::string body(absl::StripTrailingAsciiWhitespace(
      Capture("list-configmaps-limit2.json")));
  for (size_t n = 0; n < body.size(); ++n) {
    std::unique_ptr<char[]> copy(new char[n == 0 ? 1 : n]);
    std::memcpy(copy.get(), body.data(), n);
    absl::StatusOr<ObjectList> r = DecodeList(absl::string_view(copy.get(), n));
    ASSERT_FALSE(r.ok()) << n;
  }
}

TEST(DecodeListTest, FindsTheTopLevelItemsArrayOnly) {
  // "items":[ inside strings and nested objects must not fool the splitter.
  absl::StatusOr<ObjectList> list = DecodeList(
      R"({"metadata":{"continue":"\"items\":[","x":{"items":[1]}},"kind":"L",)"
      R"("items" : [ {"metadata":{"name":"a]\\"}} , {"metadata":{"name":"b"}} ]})");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->continue_token, "\"items\":[");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[0]->name(), "a]\\");
  EXPECT_EQ(list->items[1]->name(), "b");
}

TEST(DecodeListTest, SplitterAgreesWithTheCapture) {
  const std::string body = Capture("list-pods-limit3.json");
  json_internal::ListSplit split;
  ASSERT_TRUE(json_internal::SplitList(body, &split));
  ASSERT_EQ(split.items.size(), 3u);
  EXPECT_EQ(body[split.items_begin], '[');
  EXPECT_EQ(body[split.items_end - 1], ']');
  for (absl::string_view item : split.items) {
    EXPECT_TRUE(IsValidJson(item));
    EXPECT_TRUE(absl::StartsWith(item, "{\"metadata\""));
    EXPECT_TRUE(absl::EndsWith(item, "}"));
  }
}

TEST(DecodeListTest, RejectsBodiesThatOnlyTheEnvelopeOrSeparatorsBreak) {
  for (absl::string_view bad : {
           R"({"metadata":tru,"items":[{"metadata":{"name":"a"}}]})",
           R"({"metadata":{} "items":[{"metadata":{"name":"a"}}]})",
           R"({"items":[{"metadata":{"name":"a"}} {"metadata":{"name":"b"}}]})",
           R"({"items":[{"metadata":{"name":"a"}},]})",
           R"({"items":[{"metadata":{"name":"a"}}]} trailing)",
           R"({"items":[{"metadata":{"name":"a"}}],})",
           R"({"items":[{"metadata":{"name":"a"},"x":tr ue}]})",
       }) {
    absl::StatusOr<ObjectList> r = DecodeList(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

std::vector<std::string> Lines(absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    lines.emplace_back(line);
  }
  return lines;
}

TEST(DecodeWatchEventTest, DecodesCapturedConfigMapWatch) {
  const std::vector<std::string> lines =
      Lines(Capture("watch-configmaps.jsonl"));
  ASSERT_EQ(lines.size(), 5u);
  std::vector<WatchEvent> events;
  for (const std::string& line : lines) {
    // Each line arrives with its newline.
    absl::StatusOr<WatchEvent> e = DecodeWatchEvent(line + "\n");
    ASSERT_TRUE(e.ok()) << e.status();
    events.push_back(*std::move(e));
  }
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[1].type, WatchEventType::kModified);
  EXPECT_EQ(events[2].type, WatchEventType::kModified);
  EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
  EXPECT_EQ(events[4].type, WatchEventType::kBookmark);
  const char* rvs[] = {"158252", "158253", "158254", "158255", "158255"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(events[i].resource_version, rvs[i]) << i;
    EXPECT_FALSE(events[i].initial_events_end) << i;
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(events[i].object, nullptr) << i;
    EXPECT_EQ(events[i].object->Key(), "demo/capture-1");
    EXPECT_EQ(events[i].object->kind(), "ConfigMap");
    EXPECT_EQ(events[i].object->resource_version(), rvs[i]);
    EXPECT_FALSE(
        absl::StrContains(events[i].object->json().str(), "managedFields"));
    EXPECT_TRUE(IsValidJson(events[i].object->json().str()));
  }
  EXPECT_THAT(events[0].object->FieldValues("data.k"), ElementsAre("v"));
  EXPECT_THAT(events[1].object->FieldValues("data.k"), ElementsAre("v2"));
  EXPECT_EQ(events[1].object->Label("tier"), nullptr);
  ASSERT_NE(events[2].object->Label("tier"), nullptr);
  EXPECT_EQ(*events[2].object->Label("tier"), "web");
  EXPECT_EQ(events[4].object, nullptr);
}

TEST(DecodeWatchEventTest, BookmarkMarksEndOfInitialEvents) {
  absl::StatusOr<WatchEvent> e = DecodeWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"99","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEventType::kBookmark);
  EXPECT_EQ(e->resource_version, "99");
  EXPECT_TRUE(e->initial_events_end);
  EXPECT_EQ(e->object, nullptr);

  absl::StatusOr<WatchEvent> other = DecodeWatchEvent(
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"100","annotations":{"k8s.io/initial-events-end":"false"}}}})");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->initial_events_end);
}

TEST(DecodeWatchEventTest, ErrorEventCarriesTheStatus) {
  const std::vector<std::string> lines =
      Lines(Capture("watch-too-old-rv-410.jsonl"));
  ASSERT_EQ(lines.size(), 1u);
  absl::StatusOr<WatchEvent> e = DecodeWatchEvent(lines[0]);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEventType::kError);
  EXPECT_EQ(e->object, nullptr);
  EXPECT_EQ(e->status.code, 410);
  EXPECT_EQ(e->status.reason, "Expired");
  EXPECT_EQ(e->status.message, "too old resource version: 5 (145247)");
}

TEST(DecodeWatchEventTest, AppliesTheTransform) {
  TransformOptions t;
  t.drop_fields = {"data"};
  absl::StatusOr<WatchEvent> e = DecodeWatchEvent(
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5","managedFields":[{}]},"data":{"k":"v"}}})",
      t);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->object->json(),
            R"({"metadata":{"name":"a","resourceVersion":"5"}})");
  EXPECT_EQ(e->resource_version, "5");
}

TEST(DecodeWatchEventTest, FindsTheObjectInAnyMemberLayout) {
  // The API server's layout is read without scanning the object; every
  // other layout (member order, extra members, escapes, whitespace) must
  // give the very same object.
  const std::string obj =
      R"({"metadata":{"name":"a","resourceVersion":"5"},"data":{"k":"}\""}})";
  for (const std::string& line : {
           absl::StrCat(R"({"type":"ADDED","object":)", obj, "}"),
           absl::StrCat(R"({"object":)", obj, R"(,"type":"ADDED"})"),
           absl::StrCat(R"({"type":"ADDED","object":)", obj, R"(,"x":1})"),
           absl::StrCat(R"({"type":"ADD\u0045D","object":)", obj, "}"),
           absl::StrCat(R"({"typ\u0065":"ADDED","object":)", obj, "}"),
           absl::StrCat(R"( { "type" : "ADDED" , "object" : )", obj, " }\n"),
       }) {
    absl::StatusOr<WatchEvent> e = DecodeWatchEvent(line);
    ASSERT_TRUE(e.ok()) << line << ": " << e.status();
    EXPECT_EQ(e->object->json(), obj) << line;
    EXPECT_EQ(e->resource_version, "5") << line;
  }
}

TEST(DecodeWatchEventTest, RejectsMalformedLines) {
  for (absl::string_view bad : {
           "",
           "{",
           "[]",
           R"({"type":"EXPLODED","object":{"metadata":{"name":"a"}}})",
           R"({"object":{"metadata":{"name":"a"}}})",
           R"({"type":"ADDED"})",
           R"({"type":"ADDED","object":null})",
           R"({"type":"ADDED","object":{"metadata":{}}})",
           R"({"type":"ADDED","object":[]})",
           R"({"type":"BOOKMARK","object":{}})",
           R"({"type":"ERROR","object":"boom"})",
           R"({"type":7,"object":{}})",
       }) {
    absl::StatusOr<WatchEvent> e = DecodeWatchEvent(bad);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::StatusOr<WatchEvent> unknown =
      DecodeWatchEvent(R"({"type":"EXPLODED","object":{}})");
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("EXPLODED"));
}

TEST(DecodeWatchEventTest, TruncatedEventIsAnErrorAtEveryByte) {
  const std::string line = Lines(Capture("watch-configmaps.jsonl"))[2];
  for (size_t n = 0; n < line.size(); ++n) {
    std::unique_ptr<char[]> copy(new char[n == 0 ? 1 : n]);
    std::memcpy(copy.get(), line.data(), n);
    ASSERT_FALSE(DecodeWatchEvent(absl::string_view(copy.get(), n)).ok()) << n;
  }
}

TEST(WatchEventTypeNameTest, NamesMatchTheWire) {
  EXPECT_EQ(WatchEventTypeName(WatchEventType::kAdded), "ADDED");
  EXPECT_EQ(WatchEventTypeName(WatchEventType::kModified), "MODIFIED");
  EXPECT_EQ(WatchEventTypeName(WatchEventType::kDeleted), "DELETED");
  EXPECT_EQ(WatchEventTypeName(WatchEventType::kBookmark), "BOOKMARK");
  EXPECT_EQ(WatchEventTypeName(WatchEventType::kError), "ERROR");
}

struct StatusCase {
  const char* file;
  int code;
  const char* reason;
  const char* message_part;
};

TEST(DecodeStatusTest, DecodesCapturedErrorBodies) {
  const StatusCase cases[] = {
      {"error-401.txt", 401, "Unauthorized", "Unauthorized"},
      {"error-403.txt", 403, "Forbidden",
       "User \"nobody\" cannot list resource \"configmaps\""},
      {"error-404.txt", 404, "NotFound", "configmaps \"does-not-exist\""},
      {"error-404-resource.txt", 404, "NotFound", "could not find"},
      {"watchlist-unsupported-v1.24.txt", 422, "Invalid",
       "resourceVersionMatch"},
  };
  for (const StatusCase& c : cases) {
    const std::string text = Capture(c.file);
    EXPECT_EQ(json_testing::HttpCaptureCode(text), c.code) << c.file;
    absl::StatusOr<ApiStatus> s =
        DecodeStatus(json_testing::HttpCaptureBody(text));
    ASSERT_TRUE(s.ok()) << c.file << ": " << s.status();
    EXPECT_EQ(s->code, c.code) << c.file;
    EXPECT_EQ(s->reason, c.reason) << c.file;
    EXPECT_THAT(s->message, HasSubstr(c.message_part)) << c.file;
    EXPECT_EQ(s->continue_token, "") << c.file;
  }
}

TEST(DecodeStatusTest, ExpiredContinueCarriesAFreshToken) {
  const std::string text = Capture("list-expired-continue-410.txt");
  absl::StatusOr<ApiStatus> s =
      DecodeStatus(json_testing::HttpCaptureBody(text));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->code, 410);
  EXPECT_EQ(s->reason, "Expired");
  EXPECT_THAT(s->message, HasSubstr("continue parameter is too old"));
  EXPECT_EQ(s->continue_token,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiY20tMDAwMDAw"
            "XHUwMDAwIn0");
}

TEST(DecodeStatusTest, RejectsNonObjectsAndBadFields) {
  for (absl::string_view bad :
       {"", "nope", "[]", R"({"code":"410"})", R"({"reason":1})",
        R"({"metadata":{"continue":5}})"}) {
    absl::StatusOr<ApiStatus> s = DecodeStatus(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace informer

#include "informer/object/object.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The first Pod of the captured `GET pods?limit=3`, byte-exact (compact, with
// managedFields).
std::string FirstCapturedPod() {
  absl::StatusOr<std::string> list =
      json_testing::ReadCapture("list-pods-limit3.json");
  EXPECT_TRUE(list.ok()) << list.status();
  const char* end = list->data() + list->size();
  absl::string_view items =
      json_internal::FindMemberValue(list->data(), end, "items");
  std::vector<absl::string_view> pods =
      json_internal::ArrayElements(items.data(), items.data() + items.size());
  EXPECT_EQ(pods.size(), 3u);
  return pods.empty() ? "" : std::string(pods[0]);
}

// Parses `json` with simdjson into a DOM that outlives the call (for
// comparing documents structurally).
struct Dom {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::error_code error;
  explicit Dom(absl::string_view json)
      : error(parser.parse(json.data(), json.size()).get(root)) {}
};

std::vector<std::string> Keys(simdjson::dom::element e) {
  std::vector<std::string> keys;
  simdjson::dom::object obj;
  if (e.get_object().get(obj)) return keys;
  for (auto kv : obj) keys.emplace_back(kv.key);
  return keys;
}

std::string Minify(simdjson::dom::element e) { return simdjson::minify(e); }

// True when `json` contains no whitespace outside strings.
bool IsCompact(absl::string_view json) {
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      return false;
    }
  }
  return true;
}

TEST(ObjectParseTest, ExtractsMetadataOfCapturedPod) {
  const std::string pod = FirstCapturedPod();
  absl::StatusOr<ObjectPtr> obj = Object::Parse(pod);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  // List items carry no kind/apiVersion on the wire.
  EXPECT_EQ(o.kind(), "");
  EXPECT_EQ(o.api_version(), "");
  EXPECT_EQ(o.name(), "pod-000000");
  EXPECT_EQ(o.namespace_(), "benchpods");
  EXPECT_EQ(o.uid(), "e34dcd9d-d512-447d-b370-c58cdd1b9aef");
  EXPECT_EQ(o.resource_version(), "145250");
  EXPECT_EQ(o.generation(), 0);
  EXPECT_EQ(o.deletion_timestamp(), "");
  EXPECT_THAT(o.labels(), ElementsAre(Pair("app", "app-0"), Pair("shard", "0"),
                                      Pair("tier", "web")));
  EXPECT_THAT(o.annotations(),
              ElementsAre(Pair("example.com/owner", "team-0")));
  EXPECT_THAT(o.owner_references(), IsEmpty());
  EXPECT_EQ(o.Key(), "benchpods/pod-000000");
}

TEST(ObjectParseTest, DropsManagedFieldsByDefaultAndKeepsEverythingElse) {
  const std::string pod = FirstCapturedPod();
  ASSERT_TRUE(absl::StrContains(pod, "\"managedFields\""));
  absl::StatusOr<ObjectPtr> obj = Object::Parse(pod);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const JsonText out_text = (*obj)->json();
  const absl::string_view out = out_text.view();
  EXPECT_FALSE(absl::StrContains(out, "managedFields"));
  EXPECT_TRUE(IsCompact(out));

  Dom in_dom(pod);
  Dom out_dom(out);
  ASSERT_FALSE(in_dom.error);
  ASSERT_FALSE(out_dom.error) << "output is not valid JSON: " << out;
  EXPECT_EQ(Keys(in_dom.root), Keys(out_dom.root));
  EXPECT_THAT(Keys(out_dom.root["metadata"]),
              ElementsAre("name", "namespace", "uid", "resourceVersion",
                          "creationTimestamp", "labels", "annotations"));
  for (const char* key : {"spec", "status"}) {
    EXPECT_EQ(Minify(in_dom.root[key]), Minify(out_dom.root[key])) << key;
  }
  for (const std::string& key : Keys(out_dom.root["metadata"])) {
    EXPECT_EQ(Minify(in_dom.root["metadata"][key]),
              Minify(out_dom.root["metadata"][key]))
        << key;
  }
  // Nothing but the dropped member is gone.
  simdjson::dom::element managed = in_dom.root["metadata"]["managedFields"];
  EXPECT_EQ(out.size(), pod.size() - Minify(managed).size() -
                            strlen(",\"managedFields\":"));
}

TEST(ObjectParseTest, KeepsCompactInputByteExactWhenNothingIsDropped) {
  const std::string pod = FirstCapturedPod();
  TransformOptions keep;
  keep.drop_managed_fields = false;
  absl::StatusOr<ObjectPtr> obj = Object::Parse(pod, keep);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)->json(), pod);
}

TEST(ObjectParseTest, MemoryUsageShrinksWithoutManagedFields) {
  const std::string pod = FirstCapturedPod();
  TransformOptions keep;
  keep.drop_managed_fields = false;
  absl::StatusOr<ObjectPtr> full = Object::Parse(pod, keep);
  absl::StatusOr<ObjectPtr> slim = Object::Parse(pod);
  ASSERT_TRUE(full.ok() && slim.ok());
  EXPECT_GE((*full)->MemoryUsage(), pod.size());
  EXPECT_GE((*slim)->MemoryUsage(), (*slim)->json_size());
  EXPECT_LT((*slim)->MemoryUsage() + 2000, (*full)->MemoryUsage());
}

TEST(ObjectParseTest, DropFieldsRemovesPathsAndFansOutOverArrays) {
  const std::string pod = FirstCapturedPod();
  TransformOptions t;
  t.drop_fields = {"status", "metadata.annotations", "spec.containers.image",
                   "spec.does.not.exist"};
  absl::StatusOr<ObjectPtr> obj = Object::Parse(pod, t);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const JsonText text = (*obj)->json();
  Dom dom(text.view());
  ASSERT_FALSE(dom.error) << (*obj)->json();
  EXPECT_THAT(Keys(dom.root), ElementsAre("metadata", "spec"));
  EXPECT_THAT(Keys(dom.root["metadata"]),
              ElementsAre("name", "namespace", "uid", "resourceVersion",
                          "creationTimestamp", "labels"));
  EXPECT_THAT((*obj)->FieldValues("spec.containers.image"), IsEmpty());
  EXPECT_THAT((*obj)->FieldValues("spec.containers.name"),
              ElementsAre("main", "sidecar"));
  // Metadata is still extracted from the full object.
  EXPECT_NE((*obj)->Annotation("example.com/owner"), nullptr);
}

// Every subset of {a, b, c} dropped from {"a":1,"b":[2],"c":{"d":3}} must
// leave a valid object with exactly the other members.
TEST(ObjectParseTest, DropFieldsKeepsCommasRightForEverySubset) {
  const std::string json =
      R"({"metadata":{"name":"n"},"x":{"a":1,"b":[2,"]}"],"c":{"d":"\"}"}}})";
  const std::vector<std::string> members = {"a", "b", "c"};
  for (int mask = 0; mask < 8; ++mask) {
    TransformOptions t;
    std::vector<std::string> kept;
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i)) {
        t.drop_fields.push_back("x." + members[i]);
      } else {
        kept.push_back(members[i]);
      }
    }
    absl::StatusOr<ObjectPtr> obj = Object::Parse(json, t);
    ASSERT_TRUE(obj.ok()) << obj.status();
    const JsonText text = (*obj)->json();
    Dom dom(text.view());
    ASSERT_FALSE(dom.error) << "mask " << mask << ": " << (*obj)->json();
    EXPECT_EQ(Keys(dom.root["x"]), kept) << "mask " << mask;
  }
}

TEST(ObjectParseTest, DropsMembersAfterTrickyStrings) {
  const std::string json =
      R"({"metadata":{"name":"a\"b\\","managedFields":[{"f":"}]\\\"{"}],"labels":{"k":"v"}},"kind":"X"})";
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)->json(),
            R"({"metadata":{"name":"a\"b\\","labels":{"k":"v"}},"kind":"X"})");
  EXPECT_EQ((*obj)->name(), "a\"b\\");
  EXPECT_EQ(*(*obj)->Label("k"), "v");
}

TEST(ObjectParseTest, DropsWholeMetadataWhenAskedAndStillKnowsTheName) {
  TransformOptions t;
  t.drop_fields = {"metadata"};
  absl::StatusOr<ObjectPtr> obj =
      Object::Parse(R"({"metadata":{"name":"n","managedFields":[]}})", t);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)->json(), "{}");
  EXPECT_EQ((*obj)->name(), "n");
}

TEST(ObjectParseTest, CompactsPrettyPrintedInput) {
  const std::string json = R"({
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
      "name": "cm",
      "namespace": "ns",
      "managedFields": [ {"manager": "x"} ],
      "labels": { "b": "2", "a": "1" }
    },
    "data": { "k": "a value with  spaces" }
  })";
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(
      (*obj)->json(),
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","labels":{"b":"2","a":"1"}},"data":{"k":"a value with  spaces"}})");
  EXPECT_EQ((*obj)->kind(), "ConfigMap");
  EXPECT_EQ((*obj)->api_version(), "v1");
  EXPECT_THAT((*obj)->labels(), ElementsAre(Pair("a", "1"), Pair("b", "2")));
}

TEST(ObjectParseTest, ReadsOwnerReferencesGenerationAndDeletionTimestamp) {
  const std::string json = R"({"apiVersion":"apps/v1","kind":"ReplicaSet",
    "metadata":{"name":"rs","namespace":"ns","generation":7,
    "deletionTimestamp":"2024-01-02T03:04:05Z",
    "annotations":{"z":"1","a":"2"},
    "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment",
      "name":"d","uid":"u-1","controller":true,"blockOwnerDeletion":true},
      {"apiVersion":"v1","kind":"Foo","name":"f","uid":"u-2"}]}})";
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_EQ(o.generation(), 7);
  EXPECT_EQ(o.deletion_timestamp(), "2024-01-02T03:04:05Z");
  EXPECT_THAT(o.annotations(), ElementsAre(Pair("a", "2"), Pair("z", "1")));
  ASSERT_EQ(o.owner_references().size(), 2u);
  const OwnerReference& r = o.owner_references()[0];
  EXPECT_EQ(r.api_version, "apps/v1");
  EXPECT_EQ(r.kind, "Deployment");
  EXPECT_EQ(r.name, "d");
  EXPECT_EQ(r.uid, "u-1");
  EXPECT_TRUE(r.controller);
  EXPECT_TRUE(r.block_owner_deletion);
  EXPECT_FALSE(o.owner_references()[1].controller);
  EXPECT_FALSE(o.owner_references()[1].block_owner_deletion);
}

TEST(ObjectParseTest, ClusterScopedKeyIsTheName) {
  absl::StatusOr<ObjectPtr> obj =
      Object::Parse(R"({"kind":"Node","metadata":{"name":"node-1"}})");
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)->Key(), "node-1");
}

void ExpectInvalid(absl::string_view json, absl::string_view message_part) {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_FALSE(obj.ok()) << json;
  EXPECT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(obj.status().message()),
              HasSubstr(std::string(message_part)))
      << json;
}

TEST(ObjectParseTest, RejectsBadDocumentsWithUsefulMessages) {
  ExpectInvalid("", "malformed JSON");
  ExpectInvalid("{", "malformed JSON");
  ExpectInvalid(R"({"metadata":{"name":"a"}} x)", "malformed JSON");
  ExpectInvalid(R"({"metadata":{"name":"a"},"x":tru})", "malformed JSON");
  ExpectInvalid(R"({"metadata":{"name":"a"},"x":[}})", "malformed JSON");
  // Whitespace inside an atom is not removed "helpfully" by minification.
  ExpectInvalid(R"({"metadata":{"name":"a"},"x":tr ue})", "malformed JSON");
  ExpectInvalid("{\"metadata\":{\"name\":\"\xff\"}}", "malformed JSON");
  ExpectInvalid("[1,2]", "top-level JSON value is array");
  ExpectInvalid(R"("pod")", "top-level JSON value is string");
  ExpectInvalid(R"({"kind":"Pod"})", "missing metadata");
  ExpectInvalid(R"({"metadata":[]})", "metadata: got array, want object");
  ExpectInvalid(R"({"metadata":{"namespace":"a"}})", "missing metadata.name");
  ExpectInvalid(R"({"metadata":{"name":""}})", "missing metadata.name");
  ExpectInvalid(R"({"metadata":{"name":5}})",
                "metadata.name: got number, want string");
  ExpectInvalid(R"({"metadata":{"name":"a","labels":{"k":1}}})",
                "metadata.labels.k: got number, want string");
  ExpectInvalid(R"({"metadata":{"name":"a","generation":"1"}})",
                "metadata.generation: got string, want integer");
  ExpectInvalid(R"({"metadata":{"name":"a","ownerReferences":[1]}})",
                "metadata.ownerReferences[0]: got number, want object");
}

TEST(ObjectParseTest, TruncatedPodIsAnErrorAtEveryByte) {
  const std::string pod = FirstCapturedPod();
  ASSERT_GT(pod.size(), 1000u);
  for (size_t n = 0; n < pod.size(); ++n) {
    // An exact-size heap copy: ASan flags any read past the input.
    std::unique_ptr<char[]> copy(new char[n == 0 ? 1 : n]);
    std::memcpy(copy.get(), pod.data(), n);
    absl::StatusOr<ObjectPtr> obj =
        Object::Parse(absl::string_view(copy.get(), n));
    ASSERT_FALSE(obj.ok()) << "prefix of " << n << " bytes accepted";
    ASSERT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ObjectParseTest, ParsesUnpaddedInputExactlyAtBufferEnd) {
  const std::string pod = FirstCapturedPod();
  std::unique_ptr<char[]> copy(new char[pod.size()]);
  std::memcpy(copy.get(), pod.data(), pod.size());
  absl::StatusOr<ObjectPtr> obj =
      Object::Parse(absl::string_view(copy.get(), pod.size()));
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)->name(), "pod-000000");
}

TEST(ObjectFieldValuesTest, FollowsDottedPathsAndFansOutOverArrays) {
  TransformOptions keep;
  keep.drop_managed_fields = false;
  absl::StatusOr<ObjectPtr> obj = Object::Parse(FirstCapturedPod(), keep);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_THAT(o.FieldValues("spec.nodeName"), ElementsAre("node-000"));
  EXPECT_THAT(o.FieldValues("metadata.labels.app"), ElementsAre("app-0"));
  EXPECT_THAT(
      o.FieldValues("spec.containers.image"),
      ElementsAre("registry.example/app-0:1.0", "registry.example/proxy:2.1"));
  EXPECT_THAT(o.FieldValues("spec.containers.ports.containerPort"),
              ElementsAre("8080", "8080"));
  EXPECT_THAT(o.FieldValues("spec.enableServiceLinks"), ElementsAre("true"));
  EXPECT_THAT(o.FieldValues("metadata.annotations.example.com/owner"),
              ElementsAre("team-0"));
  EXPECT_THAT(o.FieldValues("status.phase"), ElementsAre("Pending"));
  EXPECT_THAT(o.FieldValues("spec.nope"), IsEmpty());
  EXPECT_THAT(o.FieldValues("metadata.name.deeper"), IsEmpty());
  EXPECT_THAT(o.FieldValues(""), IsEmpty());
}

TEST(ObjectFieldValuesTest, ReturnsNonStringLeavesAsJsonText) {
  absl::StatusOr<ObjectPtr> obj = Object::Parse(
      R"({"metadata":{"name":"n"},"a":{"i":-3,"u":18446744073709551615,"f":1.5,"b":false,"n":null,"o":{"x":[1,"y"]},"s":"q\"\n"}})");
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_THAT(o.FieldValues("a.i"), ElementsAre("-3"));
  EXPECT_THAT(o.FieldValues("a.u"), ElementsAre("18446744073709551615"));
  EXPECT_THAT(o.FieldValues("a.f"), ElementsAre("1.5"));
  EXPECT_THAT(o.FieldValues("a.b"), ElementsAre("false"));
  EXPECT_THAT(o.FieldValues("a.n"), IsEmpty());
  EXPECT_THAT(o.FieldValues("a.o"), ElementsAre(R"({"x":[1,"y"]})"));
  EXPECT_THAT(o.FieldValues("a.s"), ElementsAre("q\"\n"));
}

TEST(ObjectLookupTest, LabelAndAnnotationReturnNullWhenAbsent) {
  ObjectPtr o = ObjectBuilder()
                    .SetName("n")
                    .AddLabel("b", "2")
                    .AddLabel("a", "1")
                    .AddAnnotation("note", "x")
                    .Build();
  ASSERT_NE(o->Label("a"), nullptr);
  EXPECT_EQ(*o->Label("a"), "1");
  EXPECT_EQ(*o->Label("b"), "2");
  EXPECT_EQ(o->Label("c"), nullptr);
  EXPECT_EQ(o->Label("note"), nullptr);
  EXPECT_EQ(*o->Annotation("note"), "x");
  EXPECT_EQ(o->Annotation("a"), nullptr);
}

TEST(ObjectBuilderTest, SynthesisesJsonThatParsesBackToTheSameObject) {
  OwnerReference ref;
  ref.api_version = "apps/v1";
  ref.kind = "ReplicaSet";
  ref.name = "rs";
  ref.uid = "u-9";
  ref.controller = true;
  ObjectPtr built = ObjectBuilder()
                        .SetApiVersion("v1")
                        .SetKind("Pod")
                        .SetNamespace("ns")
                        .SetName("we\"ird\\name\n\x01é")
                        .SetUid("uid-1")
                        .SetResourceVersion("42")
                        .SetGeneration(3)
                        .SetDeletionTimestamp("2024-01-01T00:00:00Z")
                        .AddLabel("z", "last")
                        .AddLabel("a", "first")
                        .AddLabel("a", "overridden")
                        .AddAnnotation("k", "tab\there")
                        .AddOwnerReference(ref)
                        .Build();
  EXPECT_THAT(built->labels(),
              ElementsAre(Pair("a", "overridden"), Pair("z", "last")));
  EXPECT_TRUE(IsCompact(built->json().str()));
  absl::StatusOr<ObjectPtr> parsed = Object::Parse(built->json().str());
  ASSERT_TRUE(parsed.ok()) << parsed.status() << " in " << built->json();
  const Object& p = **parsed;
  EXPECT_EQ(p.json(), built->json());
  EXPECT_EQ(p.api_version(), "v1");
  EXPECT_EQ(p.kind(), "Pod");
  EXPECT_EQ(p.namespace_(), "ns");
  EXPECT_EQ(p.name(), "we\"ird\\name\n\x01é");
  EXPECT_EQ(p.uid(), "uid-1");
  EXPECT_EQ(p.resource_version(), "42");
  EXPECT_EQ(p.generation(), 3);
  EXPECT_EQ(p.deletion_timestamp(), "2024-01-01T00:00:00Z");
  EXPECT_EQ(p.labels(), built->labels());
  EXPECT_EQ(p.annotations(), built->annotations());
  ASSERT_EQ(p.owner_references().size(), 1u);
  EXPECT_EQ(p.owner_references()[0].uid, "u-9");
  EXPECT_TRUE(p.owner_references()[0].controller);
  EXPECT_FALSE(p.owner_references()[0].block_owner_deletion);
  EXPECT_EQ(p.Key(), built->Key());
}

TEST(ObjectBuilderTest, KeepsGivenJsonAndIsReusableAfterBuild) {
  ObjectBuilder b;
  ObjectPtr first =
      b.SetName("a").SetJson(R"({"metadata":{"name":"a"}})").Build();
  EXPECT_EQ(first->json(), R"({"metadata":{"name":"a"}})");
  ObjectPtr second = b.SetName("b").Build();
  EXPECT_EQ(second->name(), "b");
  EXPECT_EQ(second->json(), R"({"metadata":{"name":"b"}})");
  EXPECT_EQ(first->name(), "a");
}

TEST(ObjectBuilderTest, MetadataStringsShareTheJsonsAllocation) {
  // A cache pays every allocation per object: the short metadata strings
  // live right after the JSON text, in its buffer, and json() still ends
  // where the JSON does.
  const std::string json =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c",)"
      R"("namespace":"ns","uid":"0b5a8f3e-3c1e-4c4e-9d1f-2f6c4e0b9a11",)"
      R"("resourceVersion":"123","deletionTimestamp":"2026-12-01T00:00:00Z"},)"
      R"("data":{"k":"v"}})";
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_EQ(o.json(), json);
  EXPECT_EQ(o.uid(), "0b5a8f3e-3c1e-4c4e-9d1f-2f6c4e0b9a11");
  EXPECT_EQ(o.resource_version(), "123");
  EXPECT_EQ(o.deletion_timestamp(), "2026-12-01T00:00:00Z");
  EXPECT_EQ(o.api_version(), "v1");
  EXPECT_EQ(o.kind(), "ConfigMap");
  // Each is a slice of the JSON itself: no copy.
  const JsonText text = o.json();
  ASSERT_TRUE(text.borrowed());
  const char* begin = text.view().data();
  const char* end = begin + text.size();
  for (absl::string_view field :
       {o.uid(), o.resource_version(), o.deletion_timestamp(), o.api_version(),
        o.kind()}) {
    EXPECT_GE(field.data(), begin) << field;
    EXPECT_LE(field.data() + field.size(), end) << field;
  }
  // One allocation for the control block, the Object and the JSON; the
  // key "ns/c" needs no heap; no labels, annotations or owner references.
  EXPECT_EQ(o.MemoryUsage(), 16 + sizeof(Object) + json.size());
  EXPECT_TRUE(o.labels().empty());
  EXPECT_TRUE(o.annotations().empty());
  EXPECT_TRUE(o.owner_references().empty());
  EXPECT_EQ(o.Label("app"), nullptr);
}

TEST(ObjectBuilderTest, MetadataStringsTheJsonLacksAreAppendedToIt) {
  // Builder-made objects may disagree with their JSON (tests), and a JSON
  // string with escapes differs from its value: those strings are copied
  // after the JSON, in the same allocation, and json() ends before them.
  const std::string json = R"({"metadata":{"name":"a","uid":"u\u0031"}})";
  ObjectPtr obj = ObjectBuilder()
                      .SetJson(json)
                      .SetName("a")
                      .SetUid("u1")
                      .SetResourceVersion("42")
                      .SetKind("Pod")
                      .Build();
  EXPECT_EQ(obj->json(), json);
  EXPECT_EQ(obj->uid(), "u1");
  EXPECT_EQ(obj->resource_version(), "42");
  EXPECT_EQ(obj->kind(), "Pod");
  EXPECT_EQ(obj->api_version(), "");
  const JsonText text = obj->json();
  const char* end = text.view().data() + text.size();
  EXPECT_EQ(obj->uid().data(), end);
  EXPECT_EQ(obj->MemoryUsage(), 16 + sizeof(Object) + json.size() + 2 + 2 + 3);
}

TEST(ObjectParseTest, MetadataPastTheJsonsFirst32KiBIsCopied) {
  // Strings are looked up in the first 32 KiB only (their offsets are 15
  // bits); later ones, e.g. metadata after a large data map, are appended.
  const std::string data(40000, 'd');
  const std::string json = absl::StrCat(
      R"({"apiVersion":"v1","data":{"k":")", data,
      R"("},"kind":"ConfigMap","metadata":{"generation":77,"name":"c",)",
      R"("namespace":"ns","resourceVersion":"9876",)",
      R"("uid":"0b5a8f3e-3c1e-4c4e-9d1f-2f6c4e0b9a11"}})");
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_EQ(o.json(), json);
  EXPECT_EQ(o.api_version(), "v1");
  EXPECT_EQ(o.kind(), "ConfigMap");
  EXPECT_EQ(o.uid(), "0b5a8f3e-3c1e-4c4e-9d1f-2f6c4e0b9a11");
  EXPECT_EQ(o.resource_version(), "9876");
  EXPECT_EQ(o.generation(), 77);
  const JsonText text = o.json();
  const char* end = text.view().data() + text.size();
  EXPECT_LT(o.api_version().data(), end);  // found near the start
  EXPECT_GE(o.uid().data(), end);          // appended
  EXPECT_GE(o.resource_version().data(), end);
  EXPECT_EQ(o.MemoryUsage(), 16 + sizeof(Object) + json.size() +
                                 o.uid().size() + o.resource_version().size() +
                                 o.kind().size() + 2);
}

TEST(ObjectParseTest, RefusesMetadataStringsPast4KiB) {
  const std::string big(70000, 'x');
  for (const std::string& json :
       {absl::StrCat(R"({"metadata":{"name":"a","uid":")", big, R"("}})"),
        absl::StrCat(R"({"kind":")", big, R"(","metadata":{"name":"a"}})")}) {
    absl::StatusOr<ObjectPtr> obj = Object::Parse(json);
    ASSERT_FALSE(obj.ok());
    EXPECT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(obj.status().message(), "70000 bytes long"))
        << obj.status();
  }
}

TEST(ObjectBuilderTest, EmptyMetadataStringsAreEmptyNotNull) {
  ObjectPtr obj = ObjectBuilder().SetName("a").Build();
  EXPECT_EQ(obj->uid(), "");
  EXPECT_EQ(obj->resource_version(), "");
  EXPECT_EQ(obj->deletion_timestamp(), "");
  EXPECT_EQ(obj->api_version(), "");
  EXPECT_EQ(obj->kind(), "");
  EXPECT_EQ(obj->json(), R"({"metadata":{"name":"a"}})");
}

TEST(KeyTest, MetaNamespaceKeyJoinsNamespaceAndName) {
  EXPECT_EQ(MetaNamespaceKey("ns", "n"), "ns/n");
  EXPECT_EQ(MetaNamespaceKey("", "n"), "n");
}

TEST(KeyTest, SplitMetaNamespaceKeyInvertsAndRejectsBadKeys) {
  auto ns_name = SplitMetaNamespaceKey("ns/n");
  ASSERT_TRUE(ns_name.ok());
  EXPECT_EQ(*ns_name, std::make_pair(std::string("ns"), std::string("n")));
  auto name_only = SplitMetaNamespaceKey("n");
  ASSERT_TRUE(name_only.ok());
  EXPECT_EQ(*name_only, std::make_pair(std::string(), std::string("n")));
  for (absl::string_view bad : {"a/b/c", "", "ns/", "/"}) {
    auto r = SplitMetaNamespaceKey(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ObjectBuilderTest, KeyNameAndNamespaceComeFromOneKeyBuiltOnce) {
  ObjectBuilder b;
  ObjectPtr namespaced = b.SetNamespace("ns").SetName("web-1").Build();
  EXPECT_EQ(namespaced->Key(), "ns/web-1");
  EXPECT_EQ(namespaced->namespace_(), "ns");
  EXPECT_EQ(namespaced->name(), "web-1");
  // The same reference every time: no string is built per call.
  EXPECT_EQ(&namespaced->Key(), &namespaced->Key());
  // A reused builder starts empty: cluster-scoped, even with a '/' in the
  // name, keeps the whole key as its name.
  ObjectPtr cluster = b.SetName("a/b").Build();
  EXPECT_EQ(cluster->Key(), "a/b");
  EXPECT_EQ(cluster->namespace_(), "");
  EXPECT_EQ(cluster->name(), "a/b");
  EXPECT_EQ(cluster->json(), R"({"metadata":{"name":"a/b"}})");
  // Set twice: the last value wins.
  ObjectPtr twice =
      b.SetName("x").SetNamespace("n1").SetNamespace("n2").Build();
  EXPECT_EQ(twice->Key(), "n2/x");
}

// A stand-in compressor (no zstd here): stores the JSON reversed, so that
// a reader that took the stored bytes for the JSON would see garbage.
class ReversingDictionary : public JsonDictionary {
 public:
  bool Decompress(absl::string_view stored, char* out,
                  size_t json_size) const override {
    if (stored.size() != json_size) return false;
    std::reverse_copy(stored.begin(), stored.end(), out);
    return true;
  }
};

class ReversingCompressor : public JsonCompressor {
 public:
  std::shared_ptr<const JsonDictionary> Compress(absl::string_view json,
                                                 std::string* out) override {
    ++calls;
    if (json.size() < min_size) return nullptr;
    out->assign(json.rbegin(), json.rend());
    return dictionary;
  }
  size_t min_size = 0;
  int calls = 0;
  std::shared_ptr<const JsonDictionary> dictionary =
      std::make_shared<ReversingDictionary>();
};

TEST(ObjectCompressionTest, CompressedObjectReadsBackItsJsonAndMetadata) {
  const std::string json =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1",)"
      R"("namespace":"ns","uid":"u-1","resourceVersion":"42","generation":3,)"
      R"("deletionTimestamp":"2026-12-01T00:00:00Z","labels":{"app":"web"}},)"
      R"("spec":{"nodeName":"node-7"}})";
  auto compressor = std::make_shared<ReversingCompressor>();
  TransformOptions t;
  t.compressor = compressor;
  absl::StatusOr<ObjectPtr> obj = Object::Parse(json, t);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const Object& o = **obj;
  EXPECT_EQ(compressor->calls, 1);
  EXPECT_TRUE(o.compressed());
  EXPECT_EQ(o.json_size(), json.size());
  EXPECT_EQ(o.stored_json_size(), json.size());
  const JsonText text = o.json();
  EXPECT_FALSE(text.borrowed());
  EXPECT_EQ(text, json);
  EXPECT_EQ(o.Key(), "ns/web-1");
  EXPECT_EQ(o.uid(), "u-1");
  EXPECT_EQ(o.resource_version(), "42");
  EXPECT_EQ(o.api_version(), "v1");
  EXPECT_EQ(o.kind(), "Pod");
  EXPECT_EQ(o.generation(), 3);
  EXPECT_EQ(o.deletion_timestamp(), "2026-12-01T00:00:00Z");
  ASSERT_NE(o.Label("app"), nullptr);
  EXPECT_EQ(*o.Label("app"), "web");
  EXPECT_THAT(o.FieldValues("spec.nodeName"), ElementsAre("node-7"));
  // The metadata strings are copies after the stored bytes (which are not
  // the JSON's text): uid, resourceVersion, deletionTimestamp, apiVersion,
  // kind and generation, 31 bytes that the uncompressed object finds in
  // its JSON.
  absl::StatusOr<ObjectPtr> plain = Object::Parse(json);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->compressed());
  EXPECT_EQ(o.MemoryUsage(), (*plain)->MemoryUsage() + 31);
}

TEST(ObjectCompressionTest, CompressorMayKeepAnObjectAsItIs) {
  auto compressor = std::make_shared<ReversingCompressor>();
  compressor->min_size = 1 << 20;
  TransformOptions t;
  t.compressor = compressor;
  absl::StatusOr<ObjectPtr> obj =
      Object::Parse(R"({"metadata":{"name":"a","uid":"u"}})", t);
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(compressor->calls, 1);
  EXPECT_FALSE((*obj)->compressed());
  const JsonText text = (*obj)->json();
  EXPECT_TRUE(text.borrowed());
  EXPECT_EQ(text, R"({"metadata":{"name":"a","uid":"u"}})");
  EXPECT_EQ((*obj)->uid(), "u");
}

TEST(ObjectCompressionTest, ObjectsKeepTheirDictionaryAlive) {
  auto compressor = std::make_shared<ReversingCompressor>();
  ObjectPtr obj = ObjectBuilder()
                      .SetJson(R"({"metadata":{"name":"a"}})")
                      .SetName("a")
                      .SetCompressor(compressor.get())
                      .Build();
  std::weak_ptr<const JsonDictionary> dictionary = compressor->dictionary;
  compressor.reset();
  EXPECT_FALSE(dictionary.expired());
  EXPECT_EQ(obj->json(), R"({"metadata":{"name":"a"}})");
  obj.reset();
  EXPECT_TRUE(dictionary.expired());
}

TEST(JsonTextTest, MovesKeepOwnedTextValid) {
  auto compressor = std::make_shared<ReversingCompressor>();
  // Short enough for std::string's inline buffer, which moves with it.
  ObjectPtr obj = ObjectBuilder()
                      .SetJson(R"({"a":1})")
                      .SetName("a")
                      .SetCompressor(compressor.get())
                      .Build();
  JsonText a = obj->json();
  JsonText b = std::move(a);
  EXPECT_EQ(b, R"({"a":1})");
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): defined
  JsonText c;
  c = std::move(b);
  EXPECT_EQ(c.view(), R"({"a":1})");
  EXPECT_EQ(std::move(c).str(), R"({"a":1})");
  // A borrowed text copies out.
  ObjectPtr plain = ObjectBuilder().SetJson(R"({"b":2})").SetName("b").Build();
  JsonText d = plain->json();
  EXPECT_TRUE(d.borrowed());
  EXPECT_EQ(std::move(d).str(), R"({"b":2})");
  EXPECT_EQ(plain->json(), plain->json());
  EXPECT_NE(plain->json(), obj->json());
}

}  // namespace
}  // namespace informer

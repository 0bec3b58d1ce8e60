#include "server/kubeapi/table_writer.h"

#include <event2/buffer.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "informer/object/object.h"

namespace server {
namespace kubeapi {
namespace {

TEST(HumanDurationTest, IsApimachinerys) {
  const std::vector<std::pair<absl::Duration, std::string>> cases = {
      {absl::Seconds(-2), "<invalid>"},
      {absl::Seconds(-1), "0s"},
      {absl::Seconds(0), "0s"},
      {absl::Seconds(119), "119s"},
      {absl::Seconds(120), "2m"},
      {absl::Seconds(200), "3m20s"},
      {absl::Minutes(10), "10m"},
      {absl::Minutes(179), "179m"},
      {absl::Hours(3), "3h"},
      {absl::Minutes(310), "5h10m"},
      {absl::Hours(8), "8h"},
      {absl::Hours(47), "47h"},
      {absl::Hours(48), "2d"},
      {absl::Hours(76), "3d4h"},
      {absl::Hours(24 * 8), "8d"},
      {absl::Hours(24 * 729), "729d"},
      {absl::Hours(24 * 730), "2y"},
      {absl::Hours(24 * 740), "2y10d"},
      {absl::Hours(24 * 365 * 9), "9y"},
  };
  for (const auto& [d, want] : cases) EXPECT_EQ(HumanDuration(d), want) << d;
}

informer::ObjectPtr Parse(const std::string& json) {
  auto obj = informer::Object::Parse(json);
  EXPECT_TRUE(obj.ok()) << obj.status();
  return *obj;
}

std::string Render(const ObjectForm& form,
                   const std::vector<informer::ObjectPtr>& objects,
                   IncludeObject include, absl::Time now) {
  evbuffer* buf = evbuffer_new();
  AppendTable(form, objects, R"({"resourceVersion":"7"})", include, now, buf);
  std::string out(evbuffer_get_length(buf), '\0');
  evbuffer_remove(buf, out.data(), out.size());
  evbuffer_free(buf);
  return out;
}

const absl::Time kNow = absl::FromUnixSeconds(1700000000);  // 22:13:20 UTC

TEST(TableWriterTest, GenericKindsHaveNameAndAge) {
  ObjectForm form{"ConfigMap", "v1"};
  auto cm = Parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a","resourceVersion":"5","creationTimestamp":"2023-11-14T22:08:20Z"},"data":{"k":"v"}})");
  // The layout of metav1.Table: TypeMeta, ListMeta, columnDefinitions
  // (every field written), rows of cells and object.
  const std::string want = absl::StrCat(
      R"({"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"columnDefinitions":[)",
      R"({"name":"Name","type":"string","format":"name","description":"Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names","priority":0},)",
      R"({"name":"Age","type":"string","format":"","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata","priority":0}],)",
      R"("rows":[{"cells":["cm","5m"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cm","namespace":"a","resourceVersion":"5","creationTimestamp":"2023-11-14T22:08:20Z"}}}]})");
  EXPECT_EQ(Render(form, {cm}, IncludeObject::kMetadata, kNow), want);
  std::string none = Render(form, {cm}, IncludeObject::kNone, kNow);
  EXPECT_NE(none.find(R"({"cells":["cm","5m"],"object":null})"),
            std::string::npos);
  std::string whole = Render(form, {cm}, IncludeObject::kObject, kNow);
  EXPECT_NE(whole.find(R"("object":{"kind":"ConfigMap","apiVersion":"v1",)"),
            std::string::npos);
  EXPECT_NE(
      Render(form, {}, IncludeObject::kMetadata, kNow).find(R"("rows":[]})"),
      std::string::npos);
}

// A row's cells: everything after the row's `"cells":[` up to `]`.
std::string Cells(const std::string& table) {
  size_t at = table.find(R"("cells":[)");
  at += 9;
  return table.substr(at, table.find(']', at) - at);
}

TEST(TableWriterTest, PodsHaveThePodPrintersColumns) {
  ObjectForm form{"Pod", "v1"};
  auto running = Parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"a","creationTimestamp":"2023-11-14T19:13:20Z"},)"
      R"("spec":{"nodeName":"n1","containers":[{"name":"a"},{"name":"b"}]},)"
      R"("status":{"phase":"Running","podIPs":[{"ip":"10.0.0.7"}],"conditions":[{"type":"Ready","status":"True"}],)"
      R"("containerStatuses":[{"name":"a","ready":true,"restartCount":2,"state":{"running":{}},"lastState":{"terminated":{"exitCode":1,"finishedAt":"2023-11-14T22:03:20Z"}}},)"
      R"({"name":"b","ready":false,"restartCount":1,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}})");
  std::string table = Render(form, {running}, IncludeObject::kMetadata, kNow);
  EXPECT_NE(
      table.find(
          R"({"name":"Ready","type":"string","format":"","description":"The aggregate readiness state of this pod for accepting traffic.","priority":0})"),
      std::string::npos);
  EXPECT_NE(table.find(R"({"name":"IP","type":"string","format":"",)"),
            std::string::npos);
  // Go's encoding/json writes '<' and '>' as \u003c and \u003e.
  EXPECT_EQ(
      Cells(table),
      R"x("web","1/2","CrashLoopBackOff","3 (10m ago)","3h","10.0.0.7","n1","\u003cnone\u003e","\u003cnone\u003e")x");
  auto init = Parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"i","namespace":"a","creationTimestamp":"2023-11-14T22:13:10Z"},)"
      R"("spec":{"initContainers":[{"name":"x"},{"name":"y"}],"containers":[{"name":"a"}],"readinessGates":[{"conditionType":"g"}]},)"
      R"("status":{"phase":"Pending","initContainerStatuses":[{"name":"x","restartCount":0,"state":{"terminated":{"exitCode":0}}},{"name":"y","restartCount":0,"state":{"running":{}}}]}})");
  EXPECT_EQ(
      Cells(Render(form, {init}, IncludeObject::kNone, kNow)),
      R"("i","0/1","Init:1/2","0","10s","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e","0/1")");
  auto deleting = Parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"d","namespace":"a","deletionTimestamp":"2023-11-14T22:13:00Z"},)"
      R"("spec":{"containers":[{"name":"a"}]},"status":{"phase":"Succeeded","containerStatuses":[{"name":"a","restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}})");
  EXPECT_EQ(
      Cells(Render(form, {deleting}, IncludeObject::kNone, kNow)),
      R"("d","0/1","Terminating","0","\u003cunknown\u003e","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e")");
  // A metadata-only cache has no status: Name and Age.
  form.cache_metadata_only = true;
  EXPECT_EQ(Cells(Render(form, {init}, IncludeObject::kNone, kNow)),
            R"("i","10s")");
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

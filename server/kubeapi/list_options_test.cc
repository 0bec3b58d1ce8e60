#include "server/kubeapi/list_options.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "informer/object/object.h"
#include "server/kubeapi/test_util.h"

namespace server {
namespace kubeapi {
namespace {

using Query = std::multimap<std::string, std::string>;

informer::ObjectPtr Pod(const std::string& ns, const std::string& name,
                        const std::string& node) {
  return *informer::Object::Parse(
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name +
      R"(","namespace":")" + ns +
      R"(","labels":{"app":"web"}},"spec":{"nodeName":")" + node +
      R"("},"status":{"phase":"Running"}})");
}

// The continue token of a capture's list envelope.
std::string CaptureToken(const std::string& name) {
  std::string body = ReadCapture(name);
  const std::string kKey = R"("continue":")";
  size_t at = body.find(kKey) + kKey.size();
  return body.substr(at, body.find('"', at) - at);
}

TEST(ContinueTokenTest, EncodesExactlyAsTheApiServer) {
  EXPECT_EQ(EncodeContinue({158251, "cm-0001"}),
            CaptureToken("list-configmaps-limit2.json"));
  EXPECT_EQ(EncodeContinue({158251, "pod-000002"}),
            CaptureToken("list-pods-limit3.json"));
  EXPECT_EQ(EncodeContinue({-1, "cm-000000"}),
            CaptureToken("list-expired-continue-410.txt"));
}

TEST(ContinueTokenTest, DecodesTheApiServersTokens) {
  absl::StatusOr<ContinueToken> t =
      DecodeContinue(CaptureToken("list-configmaps-limit2.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rv, 158251);
  EXPECT_EQ(t->start, "cm-0001");
}

TEST(ContinueTokenTest, RejectsGarbage) {
  EXPECT_FALSE(DecodeContinue("!!!").ok());
  EXPECT_FALSE(DecodeContinue("e30").ok());  // {}
  absl::Status st = DecodeContinue("e30").status();
  EXPECT_NE(st.message().find("continue key is not valid"), std::string::npos);
}

TEST(FieldSelectorTest, NameNamespaceAndPodFields) {
  auto p = Pod("demo", "p1", "n1");
  auto sel = FieldSelector::Parse("metadata.name=p1,spec.nodeName==n1", "Pod");
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_TRUE(sel->Matches(*p));
  EXPECT_FALSE(FieldSelector::Parse("spec.nodeName!=n1", "Pod")->Matches(*p));
  EXPECT_TRUE(
      FieldSelector::Parse("metadata.namespace=demo", "Pod")->Matches(*p));
  EXPECT_TRUE(FieldSelector::Parse("status.phase=Running", "Pod")->Matches(*p));
  EXPECT_TRUE(FieldSelector::Parse("", "Pod")->Empty());
}

TEST(FieldSelectorTest, UnsupportedFieldInTheApiServersWords) {
  auto sel = FieldSelector::Parse("spec.nodeName=n1", "ConfigMap");
  EXPECT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(), "field label not supported: spec.nodeName");
  EXPECT_FALSE(FieldSelector::Parse("nonsense", "Pod").ok());
}

TEST(ParseRequestOptionsTest, Defaults) {
  RequestOptions o;
  ApiStatus err;
  ASSERT_TRUE(ParseRequestOptions({}, "ConfigMap", "", &o, &err));
  EXPECT_FALSE(o.watch);
  EXPECT_EQ(o.rv, -1);
  EXPECT_EQ(o.limit, 0);
  EXPECT_FALSE(o.metadata_only);
}

TEST(ParseRequestOptionsTest, WatchQuery) {
  RequestOptions o;
  ApiStatus err;
  Query q{{"watch", "1"},
          {"resourceVersion", "42"},
          {"allowWatchBookmarks", "true"},
          {"timeoutSeconds", "6"},
          {"labelSelector", "app in (web),tier!=db"}};
  ASSERT_TRUE(
      ParseRequestOptions(q, "ConfigMap", "application/json", &o, &err));
  EXPECT_TRUE(o.watch);
  EXPECT_EQ(o.rv, 42);
  EXPECT_TRUE(o.allow_watch_bookmarks);
  EXPECT_EQ(o.timeout, absl::Seconds(6));
  EXPECT_EQ(o.label_selector.requirements().size(), 2u);
}

TEST(ParseRequestOptionsTest,
     ResourceVersionMatchOnAWatchIsTheCapturedInvalid) {
  RequestOptions o;
  ApiStatus err;
  Query q{{"watch", "1"},
          {"sendInitialEvents", "true"},
          {"resourceVersionMatch", "NotOlderThan"}};
  ASSERT_FALSE(ParseRequestOptions(q, "ConfigMap", "", &o, &err));
  EXPECT_EQ(err.Render(), CaptureBody("watchlist-unsupported-v1.24.txt"));
  EXPECT_EQ(err.code, CaptureCode("watchlist-unsupported-v1.24.txt"));
}

TEST(ParseRequestOptionsTest, BadInputIs400) {
  RequestOptions o;
  ApiStatus err;
  EXPECT_FALSE(
      ParseRequestOptions({{"resourceVersion", "abc"}}, "Pod", "", &o, &err));
  EXPECT_EQ(err.code, 400);
  EXPECT_FALSE(
      ParseRequestOptions({{"labelSelector", "a in (("}}, "Pod", "", &o, &err));
  EXPECT_EQ(err.code, 400);
  EXPECT_FALSE(ParseRequestOptions({{"fieldSelector", "spec.x=1"}}, "Pod", "",
                                   &o, &err));
  EXPECT_EQ(err.code, 400);
  EXPECT_EQ(err.message, "field label not supported: spec.x");
  EXPECT_FALSE(ParseRequestOptions({{"continue", "zzz"}}, "Pod", "", &o, &err));
  EXPECT_EQ(err.code, 400);
}

TEST(ParseRequestOptionsTest, AcceptHeader) {
  RequestOptions o;
  ApiStatus err;
  ASSERT_TRUE(ParseRequestOptions(
      {}, "Pod",
      "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", &o,
      &err));
  EXPECT_TRUE(o.metadata_only);
  // kubectl's Table request falls back to plain JSON.
  ASSERT_TRUE(ParseRequestOptions(
      {}, "Pod",
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", &o,
      &err));
  EXPECT_FALSE(o.metadata_only);
  EXPECT_FALSE(ParseRequestOptions(
      {}, "Pod", "application/vnd.kubernetes.protobuf", &o, &err));
  EXPECT_EQ(err.code, 406);
}

}  // namespace
}  // namespace kubeapi
}  // namespace server

#include "informer/object/streaming_list_decoder.h"

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/object/json_test_util.h"
#include "informer/object/wire.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Capture(absl::string_view name) {
  absl::StatusOr<std::string> text = json_testing::ReadCapture(name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// Chunk sizes: 0 = one byte at a time, -1 = random sizes from `rng`, else a
// fixed size.
std::vector<absl::string_view> Chunks(absl::string_view body, int size,
                                      std::mt19937* rng) {
  std::vector<absl::string_view> out;
  size_t i = 0;
  while (i < body.size()) {
    size_t n = 1;
    if (size > 0) n = static_cast<size_t>(size);
    if (size < 0) n = std::uniform_int_distribution<size_t>(1, 97)(*rng);
    n = std::min(n, body.size() - i);
    out.push_back(body.substr(i, n));
    i += n;
  }
  return out;
}

struct Split {
  absl::Status status;
  std::vector<std::string> items;
  std::string envelope;
};

Split RunSplitter(absl::string_view body, int chunk, std::mt19937* rng) {
  Split out;
  ListItemSplitter splitter([&](absl::string_view item) {
    out.items.emplace_back(item);
    return absl::OkStatus();
  });
  for (absl::string_view c : Chunks(body, chunk, rng)) {
    out.status = splitter.Feed(c);
    if (!out.status.ok()) return out;
  }
  out.status = splitter.Finish();
  out.envelope = splitter.envelope();
  return out;
}

absl::StatusOr<ObjectList> Stream(
    absl::string_view body, int chunk, std::mt19937* rng,
    const TransformOptions& t = {},
    StreamingListDecoder::Options options = StreamingListDecoder::Options()) {
  StreamingListDecoder d(t, options);
  for (absl::string_view c : Chunks(body, chunk, rng)) {
    absl::Status st = d.Feed(c);
    if (!st.ok()) {
      EXPECT_EQ(d.Finish().status(), st) << "Finish must repeat the error";
      return st;
    }
  }
  return d.Finish();
}

// Strings full of what a naive splitter trips over: braces, brackets,
// escaped quotes, backslashes before quotes, unicode escapes.
constexpr char kTrickyList[] =
    R"({"kind":"PodList","metadata":{"resourceVersion":"42","continue":"c{]\"x"},)"
    R"("items":[{"metadata":{"name":"a}","annotations":{"k":"{[\"}]\\"}}},)"
    R"({"metadata":{"name":"b\\","labels":{"x":"\\\\\"]"}},"data":{"s":"\u007b"}},)"
    R"({"metadata":{"name":"c"},"spec":[[{}],[],{"a":[1,2.5e3,true,null]}]}]})";

TEST(ListItemSplitterTest, SplitsTrickyItemsWhateverTheChunking) {
  std::mt19937 rng(1);
  for (int chunk : {0, 1, 2, 3, 7, 16, 17, -1, -1, -1, 1 << 20}) {
    Split s = RunSplitter(kTrickyList, chunk, &rng);
    ASSERT_TRUE(s.status.ok()) << chunk << ": " << s.status;
    EXPECT_THAT(
        s.items,
        ElementsAre(
            R"({"metadata":{"name":"a}","annotations":{"k":"{[\"}]\\"}}})",
            R"({"metadata":{"name":"b\\","labels":{"x":"\\\\\"]"}},"data":{"s":"\u007b"}})",
            R"({"metadata":{"name":"c"},"spec":[[{}],[],{"a":[1,2.5e3,true,null]}]})"))
        << chunk;
    EXPECT_EQ(
        s.envelope,
        R"({"kind":"PodList","metadata":{"resourceVersion":"42","continue":"c{]\"x"},"items":[]})")
        << chunk;
  }
}

TEST(ListItemSplitterTest, BackslashRunsAcrossBlockBoundaries) {
  // Runs of escaped backslashes, then an escaped quote and brackets, all
  // inside one string, placed at every offset around the splitter's 64-byte
  // blocks: the item must end at its real closing brace.
  std::mt19937 rng(11);
  for (int offset = 0; offset < 140; ++offset) {
    for (int pairs = 0; pairs < 4; ++pairs) {
      const std::string item =
          absl::StrCat(R"({"s":")", std::string(offset, 'x'),
                       std::string(2 * pairs, '\\'), R"(\"}]{","t":[1]})");
      const std::string body =
          absl::StrCat(R"({"items":[)", item, R"(,{"u":"\\"}]})");
      for (int chunk : {1 << 20, 64, 65, -1}) {
        Split s = RunSplitter(body, chunk, &rng);
        ASSERT_TRUE(s.status.ok()) << s.status << " " << body;
        EXPECT_THAT(s.items, ElementsAre(item, R"({"u":"\\"})"))
            << offset << " " << pairs << " " << chunk;
      }
    }
  }
}

TEST(ListItemSplitterTest, WhitespaceScalarsAndStringsAsItems) {
  std::mt19937 rng(2);
  for (int chunk : {0, 5, -1}) {
    Split s = RunSplitter(" {\n\"items\" : [ 1 , \"x]\" ,{ } ,[\n] ,true\t] } ",
                          chunk, &rng);
    ASSERT_TRUE(s.status.ok()) << s.status;
    EXPECT_THAT(s.items, ElementsAre("1", "\"x]\"", "{ }", "[\n]", "true"));
    EXPECT_EQ(s.envelope, " {\n\"items\" : [] } ");
  }
}

TEST(ListItemSplitterTest, OnlyTheTopLevelItemsArrayIsSplit) {
  std::mt19937 rng(3);
  // "items" nested in metadata, as a string value and as a non-array value
  // at the top level stay in the envelope.
  const std::string body =
      R"({"metadata":{"items":[1]},"x":"items","y":["items",[]],"items":[{"a":1}]})";
  Split s = RunSplitter(body, 0, &rng);
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_THAT(s.items, ElementsAre(R"({"a":1})"));
  EXPECT_EQ(
      s.envelope,
      R"({"metadata":{"items":[1]},"x":"items","y":["items",[]],"items":[]})");
  Split null_items = RunSplitter(R"({"items":null})", 0, &rng);
  ASSERT_TRUE(null_items.status.ok());
  EXPECT_THAT(null_items.items, IsEmpty());
  EXPECT_EQ(null_items.envelope, R"({"items":null})");
}

TEST(ListItemSplitterTest, MalformedSeparatorsAreClearErrors) {
  std::mt19937 rng(4);
  struct Case {
    const char* body;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"items":[{"a":1} {"b":2}]})",
            "list: items[1]: expected ',' or ']' after the item, got '{'"},
           {R"({"items":[{"a":1},]})",
            "list: items[1]: expected an item, got ']'"},
           {R"({"items":[,{"a":1}]})",
            "list: items[0]: expected an item, got ','"},
           {R"({"items":[{"a":1})",
            "items[1]: the body ended inside the items"},
           {R"({"items":[{"a":"}]}")",
            "items[0]: the body ended inside the items"},
           {R"({"items":[],"items":[]})",
            "duplicate top-level \"items\" member"},
       }) {
    for (int chunk : {0, -1, 1000}) {
      Split s = RunSplitter(c.body, chunk, &rng);
      EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument) << c.body;
      EXPECT_THAT(std::string(s.status.message()), HasSubstr(c.error))
          << c.body;
    }
  }
}

TEST(ListItemSplitterTest, ItemCallbackErrorStopsTheSplitter) {
  int calls = 0;
  ListItemSplitter splitter([&](absl::string_view) {
    ++calls;
    return absl::InvalidArgumentError("no thanks");
  });
  EXPECT_EQ(splitter.Feed(R"({"items":[{},{}]})").message(), "no thanks");
  EXPECT_EQ(splitter.Feed("more").message(), "no thanks");
  EXPECT_EQ(splitter.Finish().message(), "no thanks");
  EXPECT_EQ(calls, 1);
}

void ExpectSameAsDecodeList(absl::string_view body,
                            const TransformOptions& t = {});

// A random valid JSON value whose strings are full of brackets, quotes and
// backslashes, long enough to cross the splitter's 64-byte blocks.
std::string RandomValue(std::mt19937* rng, int depth) {
  const int kind = depth >= 4 ? 2 + static_cast<int>((*rng)() % 2)
                              : static_cast<int>((*rng)() % 4);
  std::string out;
  switch (kind) {
    case 0: {
      out = "{";
      const int n = static_cast<int>((*rng)() % 5);
      for (int i = 0; i < n; ++i) {
        if (i > 0) out += ",";
        absl::StrAppend(&out, "\"k", i, "\":", RandomValue(rng, depth + 1));
      }
      return out + "}";
    }
    case 1: {
      out = "[";
      const int n = static_cast<int>((*rng)() % 5);
      for (int i = 0; i < n; ++i) {
        if (i > 0) out += ",";
        out += RandomValue(rng, depth + 1);
      }
      return out + "]";
    }
    case 2: {
      static const char* const kPieces[] = {"a",    "{",    "}",   "[", "]",
                                            "\\\"", "\\\\", "x y", ":", ","};
      out = "\"";
      const int n = static_cast<int>((*rng)() % 40);
      for (int i = 0; i < n; ++i) out += kPieces[(*rng)() % 10];
      return out + "\"";
    }
    default:
      return (*rng)() % 2 ? "12.5" : "true";
  }
}

TEST(ListItemSplitterTest, RandomItemsRoundTripWhateverTheChunking) {
  std::mt19937 rng(9);
  for (int round = 0; round < 30; ++round) {
    std::vector<std::string> items;
    std::string body = R"({"kind":"List","items":[)";
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      std::string item = absl::StrCat(R"({"metadata":{"name":"n)", i,
                                      R"("},"v":)", RandomValue(&rng, 0), "}");
      if (i > 0) body += rng() % 2 ? "," : " ,\n";
      body += item;
      items.push_back(item);
    }
    body += R"(],"metadata":{}})";
    for (int chunk : {0, -1, 64, 1 << 20}) {
      Split s = RunSplitter(body, chunk, &rng);
      ASSERT_TRUE(s.status.ok()) << s.status << " in " << body;
      EXPECT_EQ(s.items, items) << "chunk " << chunk << " body " << body;
      EXPECT_EQ(s.envelope, R"({"kind":"List","items":[],"metadata":{}})");
    }
    ExpectSameAsDecodeList(body);
  }
}

void ExpectSameAsDecodeList(absl::string_view body, const TransformOptions& t) {
  std::mt19937 rng(static_cast<unsigned>(body.size()));
  absl::StatusOr<ObjectList> want = DecodeList(body, t);
  // Inline, and parallel with batches small enough to need several.
  std::vector<StreamingListDecoder::Options> modes(3);
  modes[1].decode_threads = 1;
  modes[1].batch_bytes = 1000;
  modes[2].decode_threads = 2;
  modes[2].batch_bytes = 1;
  for (int chunk : {-1, 0, 4096, 1 << 22})
    for (const StreamingListDecoder::Options& mode : modes) {
      if (chunk == 0 && body.size() > 200000) continue;  // too slow byte-wise
      SCOPED_TRACE(absl::StrCat("threads ", mode.decode_threads));
      absl::StatusOr<ObjectList> got = Stream(body, chunk, &rng, t, mode);
      ASSERT_EQ(got.ok(), want.ok())
          << "chunk " << chunk << ": got " << got.status() << " want "
          << want.status() << " for " << body.substr(0, 300);
      if (!want.ok()) {
        EXPECT_EQ(got.status().code(), want.status().code());
        continue;
      }
      EXPECT_EQ(got->resource_version, want->resource_version);
      EXPECT_EQ(got->continue_token, want->continue_token);
      EXPECT_EQ(got->remaining_item_count, want->remaining_item_count);
      ASSERT_EQ(got->items.size(), want->items.size());
      for (size_t i = 0; i < want->items.size(); ++i) {
        EXPECT_EQ(got->items[i]->json(), want->items[i]->json()) << i;
        EXPECT_EQ(got->items[i]->Key(), want->items[i]->Key()) << i;
        EXPECT_EQ(got->items[i]->resource_version(),
                  want->items[i]->resource_version());
        EXPECT_EQ(got->items[i]->labels(), want->items[i]->labels());
      }
    }
}

TEST(StreamingListDecoderTest, DecodesCapturedListsLikeDecodeList) {
  for (const char* name :
       {"list-pods-limit3.json", "list-configmaps-limit2.json",
        "list-configmaps-metadata-only.json", "pods-1000.list.json.gz"}) {
    SCOPED_TRACE(name);
    const std::string body = Capture(name);
    ASSERT_FALSE(body.empty());
    ExpectSameAsDecodeList(body);
    TransformOptions keep;
    keep.drop_managed_fields = false;
    keep.drop_fields = {"status"};
    ExpectSameAsDecodeList(body, keep);
  }
  std::mt19937 rng(5);
  absl::StatusOr<ObjectList> page =
      Stream(Capture("list-configmaps-limit2.json"), -1, &rng);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->items.size(), 2u);
  EXPECT_FALSE(page->continue_token.empty());
  EXPECT_EQ(page->remaining_item_count, 998);
}

TEST(StreamingListDecoderTest, EdgeBodiesLikeDecodeList) {
  for (absl::string_view body : {
           absl::string_view(kTrickyList),
           absl::string_view(
               R"({"metadata":{"resourceVersion":"7"},"items":[]})"),
           absl::string_view(
               R"({"metadata":{"resourceVersion":"8"},"items":null})"),
           absl::string_view(R"({"metadata":{"resourceVersion":"9"}})"),
           absl::string_view(
               " {\n \"items\" : [ {\"metadata\": {\"name\": \"a\"}} ],"
               "\"metadata\": {\"resourceVersion\": \"9\"} }\n"),
           // An escaped spelling of "items" is a different key to both.
           absl::string_view(
               R"({"items":[{"metadata":{"name":"a"}}],"it\u0065ms":[1]})"),
       }) {
    ExpectSameAsDecodeList(body);
  }
}

TEST(StreamingListDecoderTest, BadBodiesFailLikeDecodeListNamingTheItem) {
  std::mt19937 rng(6);
  absl::StatusOr<ObjectList> bad_item = Stream(
      R"({"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{}}]})",
      -1, &rng);
  ASSERT_FALSE(bad_item.ok());
  EXPECT_THAT(std::string(bad_item.status().message()),
              HasSubstr("list: items[1]: missing metadata.name"));
  absl::StatusOr<ObjectList> bad_json = Stream(
      R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":tru}}]})", 0,
      &rng);
  ASSERT_FALSE(bad_json.ok());
  EXPECT_THAT(std::string(bad_json.status().message()),
              HasSubstr("list: items[1]: malformed JSON"));
  for (absl::string_view bad :
       {"", "[]", R"({"items":{}})", R"({"metadata":[],"items":[]})",
        R"({"metadata":{"remainingItemCount":"x"},"items":[]})",
        R"({"items":[1]})", R"({"items":[{"metadata":{"name":"a"}}])",
        R"({"items":[{"metadata":{"name":"a"}}]}})",
        R"({"items":[{"metadata":{"name":"a"}}]} x)"}) {
    ExpectSameAsDecodeList(bad);
    absl::StatusOr<ObjectList> r = Stream(bad, -1, &rng);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(StreamingListDecoderTest, ParallelDecodeReportsTheFirstBadItem) {
  std::string body = R"({"metadata":{"resourceVersion":"5"},"items":[)";
  for (int i = 0; i < 200; ++i) {
    if (i > 0) body += ",";
    // Items 57 and 150 lack a name; 57 must be the one reported.
    body += (i == 57 || i == 150)
                ? std::string(R"({"metadata":{}})")
                : absl::StrCat(R"({"metadata":{"name":"p)", i, R"("}})");
  }
  body += "]}";
  std::mt19937 rng(10);
  for (int threads : {1, 2, 3}) {
    StreamingListDecoder::Options options;
    options.decode_threads = threads;
    options.batch_bytes = 64;
    absl::StatusOr<ObjectList> r = Stream(body, -1, &rng, {}, options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("list: items[57]: missing metadata.name"));
  }
  // Valid items, many batches, several workers: order is kept.
  std::string good = R"({"metadata":{"resourceVersion":"6"},"items":[)";
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&good, i > 0 ? "," : "", R"({"metadata":{"name":"p)", i,
                    R"(","namespace":"ns"}})");
  }
  good += "]}";
  StreamingListDecoder::Options options;
  options.decode_threads = 2;
  options.batch_bytes = 100;
  absl::StatusOr<ObjectList> list = Stream(good, -1, &rng, {}, options);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(list->items[i]->Key(), absl::StrCat("ns/p", i));
  }
  EXPECT_EQ(list->resource_version, "6");
}

std::string NumberedList(int n) {
  std::string body = R"({"metadata":{"resourceVersion":"6"},"items":[)";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&body, i > 0 ? "," : "", R"({"metadata":{"name":"p)", i,
                    R"(","namespace":"ns"}})");
  }
  return body + "]}";
}

TEST(StreamingListDecoderTest,
     InlineDecodingHandsOverEachItemAsItsLastByteArrives) {
  const std::string body = NumberedList(5);
  std::vector<std::string> seen;
  StreamingListDecoder::Options options;
  options.on_item = [&seen](const ObjectPtr& obj) {
    seen.push_back(obj->Key());
    return absl::OkStatus();
  };
  StreamingListDecoder d({}, options);
  // Up to and including the third item's closing brace.
  const size_t third_end = body.find(R"("p2","namespace":"ns"}})") + 23;
  ASSERT_TRUE(d.Feed(absl::string_view(body).substr(0, third_end)).ok());
  EXPECT_THAT(seen, ElementsAre("ns/p0", "ns/p1", "ns/p2"));
  ASSERT_TRUE(d.Feed(absl::string_view(body).substr(third_end)).ok());
  absl::StatusOr<ObjectList> list = d.Finish();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(seen, ElementsAre("ns/p0", "ns/p1", "ns/p2", "ns/p3", "ns/p4"));
  EXPECT_EQ(list->items.size(), 5u) << "the result holds the items too";
}

TEST(StreamingListDecoderTest, ParallelDecodingHandsOverItemsInListOrder) {
  const std::string body = NumberedList(400);
  std::mt19937 rng(21);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("threads ", threads));
    std::vector<ObjectPtr> seen;
    bool other_thread = false;
    const std::thread::id feeder = std::this_thread::get_id();
    StreamingListDecoder::Options options;
    options.decode_threads = threads;
    options.batch_bytes = 200;
    options.on_item = [&](const ObjectPtr& obj) {
      if (std::this_thread::get_id() != feeder) other_thread = true;
      seen.push_back(obj);
      return absl::OkStatus();
    };
    absl::StatusOr<ObjectList> list = Stream(body, -1, &rng, {}, options);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_FALSE(other_thread) << "on_item runs on the feeding thread";
    ASSERT_EQ(seen.size(), 400u);
    for (int i = 0; i < 400; ++i) {
      EXPECT_EQ(seen[i], list->items[i]) << "the same objects, in order";
    }
  }
}

TEST(StreamingListDecoderTest, WithoutKeepItemsEachItemIsLetGoOnceHandedOver) {
  const std::string body = NumberedList(400);
  std::mt19937 rng(23);
  for (int threads : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("threads ", threads));
    std::vector<std::weak_ptr<const Object>> seen;
    StreamingListDecoder::Options options;
    options.decode_threads = threads;
    options.batch_bytes = 200;
    options.keep_items = false;
    options.on_item = [&seen](const ObjectPtr& obj) {
      seen.push_back(obj);
      return absl::OkStatus();
    };
    absl::StatusOr<ObjectList> list = Stream(body, -1, &rng, {}, options);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_TRUE(list->items.empty()) << "the items went to on_item only";
    ASSERT_EQ(seen.size(), 400u);
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_TRUE(seen[i].expired()) << "item " << i << " is still held";
    }
  }
}

TEST(StreamingListDecoderTest, AnItemCallbackErrorFailsTheBody) {
  const std::string body = NumberedList(300);
  std::mt19937 rng(22);
  for (int threads : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("threads ", threads));
    int calls = 0;
    StreamingListDecoder::Options options;
    options.decode_threads = threads;
    options.batch_bytes = 100;
    options.on_item = [&calls](const ObjectPtr& obj) {
      ++calls;
      if (obj->name() == "p120") {
        return absl::FailedPreconditionError("transform refused p120");
      }
      return absl::OkStatus();
    };
    absl::StatusOr<ObjectList> r = Stream(body, 512, &rng, {}, options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("p120"));
    EXPECT_EQ(calls, 121) << "nothing after the refused item is handed over";
  }
}

TEST(StreamingListDecoderTest, HeadReportsMetadataBeforeTheItems) {
  const std::string body = Capture("list-configmaps-limit2.json");
  std::mt19937 rng(12);
  for (int chunk : {0, -1, 1 << 20}) {
    int calls = 0;
    ObjectList head;
    StreamingListDecoder::Options options;
    options.on_head = [&](const ObjectList& h) {
      ++calls;
      head = h;
    };
    StreamingListDecoder d({}, options);
    for (absl::string_view c : Chunks(body, chunk, &rng)) {
      ASSERT_TRUE(d.Feed(c).ok());
    }
    absl::StatusOr<ObjectList> list = d.Finish();
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_EQ(calls, 1) << chunk;
    EXPECT_EQ(head.continue_token, list->continue_token);
    EXPECT_FALSE(head.continue_token.empty());
    EXPECT_EQ(head.resource_version, list->resource_version);
    EXPECT_TRUE(head.items.empty());
  }
  // Metadata after the items: the head has none of it (no continue token
  // to act on early), and the list decodes as usual.
  int calls = 0;
  std::string head_continue = "unset";
  StreamingListDecoder::Options options;
  options.on_head = [&](const ObjectList& h) {
    ++calls;
    head_continue = h.continue_token;
  };
  StreamingListDecoder d({}, options);
  ASSERT_TRUE(
      d.Feed(
           R"({"items":[{"metadata":{"name":"a"}}],"metadata":{"continue":"x"}})")
          .ok());
  absl::StatusOr<ObjectList> list = d.Finish();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->continue_token, "x");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(head_continue, "");
}

TEST(StreamingListDecoderTest, AbandonedDecoderStopsItsWorkers) {
  // Destroyed mid-body (the transfer broke): no Finish, workers joined.
  StreamingListDecoder::Options options;
  options.decode_threads = 2;
  options.batch_bytes = 10;
  StreamingListDecoder d({}, options);
  std::string body = R"({"items":[)";
  for (int i = 0; i < 100; ++i) {
    absl::StrAppend(&body, R"({"metadata":{"name":"p)", i, R"("}},)");
  }
  ASSERT_TRUE(d.Feed(body).ok());
  EXPECT_FALSE(d.failed());
}

TEST(StreamingListDecoderTest, TruncatedBodyIsAnErrorAtEveryByte) {
  const std::string body(absl::StripTrailingAsciiWhitespace(
      Capture("list-configmaps-limit2.json")));
  std::mt19937 rng(7);
  for (size_t n = 0; n < body.size(); ++n) {
    absl::StatusOr<ObjectList> r =
        Stream(absl::string_view(body.data(), n), -1, &rng);
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  EXPECT_TRUE(Stream(body, -1, &rng).ok());
}

// Differential test: random corruptions of a real page are accepted or
// rejected exactly as DecodeList does, and accepted ones decode identically.
TEST(StreamingListDecoderTest, CorruptedBodiesAgreeWithDecodeList) {
  const std::string body = Capture("list-pods-limit3.json");
  ASSERT_FALSE(body.empty());
  std::mt19937 rng(8);
  const std::string alphabet = "{}[]\",:\\ a0";
  int rejected = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bad = body;
    const int edits = 1 + i % 3;
    for (int e = 0; e < edits; ++e) {
      const size_t at =
          std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
      switch (e % 3) {
        case 0:
          bad[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          bad.erase(at, 1);
          break;
        default:
          bad.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    if (!DecodeList(bad).ok()) ++rejected;
    ExpectSameAsDecodeList(bad);
  }
  EXPECT_GT(rejected, 200);  // the corruptions did corrupt
}

}  // namespace
}  // namespace informer

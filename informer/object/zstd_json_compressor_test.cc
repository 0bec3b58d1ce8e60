#include "informer/object/zstd_json_compressor.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "informer/object/json_test_util.h"
#include "informer/object/object.h"
#include "informer/object/streaming_list_decoder.h"
#include "informer/object/wire.h"

namespace informer {
namespace {

// The JSON of the 1,000 Pods a real v1.24 API server listed, as cached
// (managedFields dropped).
const std::vector<std::string>& CapturedPods() {
  static const auto* pods = [] {
    auto* out = new std::vector<std::string>();
    absl::StatusOr<std::string> body =
        json_testing::ReadCapture("pods-1000.list.json.gz");
    if (!body.ok()) return out;
    absl::StatusOr<ObjectList> list = DecodeList(*body);
    if (!list.ok()) return out;
    for (const ObjectPtr& o : list->items) out->push_back(o->json().str());
    return out;
  }();
  return *pods;
}

std::vector<std::string> First(size_t n) {
  const std::vector<std::string>& all = CapturedPods();
  return std::vector<std::string>(all.begin(), all.begin() + n);
}

std::string ConfigMapJson(int i) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-)", i,
      R"(","namespace":"ns","uid":"u-)", i, R"(","resourceVersion":")", i,
      R"("},"data":{"k":")", std::string(200, 'a' + i % 26), R"("}})");
}

TEST(ZstdJsonDictionaryTest, TrainedDictionaryRoundTripsUnseenObjects) {
  ASSERT_EQ(CapturedPods().size(), 1000u);
  absl::StatusOr<std::shared_ptr<const ZstdJsonDictionary>> dict =
      ZstdJsonDictionary::Train(First(500), 64 << 10, 3, 1);
  ASSERT_TRUE(dict.ok()) << dict.status();
  EXPECT_EQ((*dict)->version(), 1u);
  EXPECT_GT((*dict)->bytes().size(), 1000u);
  EXPECT_LE((*dict)->bytes().size(), 64u << 10);
  size_t json_bytes = 0;
  size_t stored_bytes = 0;
  for (size_t i = 500; i < 1000; ++i) {
    const std::string& json = CapturedPods()[i];
    std::string stored;
    ASSERT_TRUE((*dict)->Compress(json, &stored));
    std::string back(json.size(), '\0');
    ASSERT_TRUE((*dict)->Decompress(stored, back.data(), back.size()));
    ASSERT_EQ(back, json);
    json_bytes += json.size();
    stored_bytes += stored.size();
  }
  // Pods of one cluster share most of their text.
  EXPECT_LT(stored_bytes * 4, json_bytes)
      << stored_bytes << " of " << json_bytes;
}

TEST(ZstdJsonDictionaryTest, FromBytesReadsWhatTheTrainedOneWrote) {
  auto trained = ZstdJsonDictionary::Train(First(300), 32 << 10, 3, 7);
  ASSERT_TRUE(trained.ok());
  auto reloaded =
      ZstdJsonDictionary::FromBytes(std::string((*trained)->bytes()), 3, 7);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->version(), 7u);
  const std::string& json = CapturedPods()[900];
  std::string stored;
  ASSERT_TRUE((*trained)->Compress(json, &stored));
  std::string back(json.size(), '\0');
  ASSERT_TRUE((*reloaded)->Decompress(stored, back.data(), back.size()));
  EXPECT_EQ(back, json);
}

TEST(ZstdJsonDictionaryTest, TooFewSamplesFallBackToRawContent) {
  // Three short objects are too little for zstd's trainer; their own text
  // serves as the dictionary.
  std::vector<std::string> samples = {ConfigMapJson(1), ConfigMapJson(2),
                                      ConfigMapJson(3)};
  auto dict = ZstdJsonDictionary::Train(samples, 64 << 10, 3, 1);
  ASSERT_TRUE(dict.ok()) << dict.status();
  const std::string json = ConfigMapJson(4);
  std::string stored;
  ASSERT_TRUE((*dict)->Compress(json, &stored));
  EXPECT_LT(stored.size(), json.size() / 2);
  std::string back(json.size(), '\0');
  ASSERT_TRUE((*dict)->Decompress(stored, back.data(), back.size()));
  EXPECT_EQ(back, json);
}

TEST(ZstdJsonDictionaryTest, NoSamplesIsAnError) {
  EXPECT_FALSE(ZstdJsonDictionary::Train({}, 1024, 3, 1).ok());
}

TEST(ZstdJsonDictionaryTest, DecompressRejectsBytesItDidNotWrite) {
  auto dict = ZstdJsonDictionary::Train(First(100), 16 << 10, 3, 1);
  ASSERT_TRUE(dict.ok());
  std::string out(100, '\0');
  EXPECT_FALSE((*dict)->Decompress("not a zstd frame", out.data(), 100));
  // A valid frame, told the wrong size.
  std::string stored;
  ASSERT_TRUE((*dict)->Compress(CapturedPods()[0], &stored));
  EXPECT_FALSE((*dict)->Decompress(stored, out.data(), out.size()));
}

ZstdJsonCompressor::Options SmallOptions() {
  ZstdJsonCompressor::Options o;
  o.train_objects = 100;
  return o;
}

TEST(ZstdJsonCompressorTest, KeepsTheSampleThenCompressesWithTheDictionary) {
  auto compressor = std::make_shared<ZstdJsonCompressor>(SmallOptions());
  TransformOptions transform;
  transform.compressor = compressor;
  std::vector<ObjectPtr> objects;
  for (const std::string& json : CapturedPods()) {
    absl::StatusOr<ObjectPtr> obj = Object::Parse(json, transform);
    ASSERT_TRUE(obj.ok()) << obj.status();
    objects.push_back(*std::move(obj));
  }
  // The 99 objects before the sample was complete are kept as they are;
  // the 100th completed it and was compressed with the new dictionary.
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ(objects[i]->compressed(), i >= 99) << i;
    const JsonText json = objects[i]->json();
    EXPECT_EQ(json, CapturedPods()[i]);
    EXPECT_EQ(json.borrowed(), i < 99);
    EXPECT_EQ(objects[i]->json_size(), CapturedPods()[i].size());
  }
  const ZstdJsonCompressor::Stats stats = compressor->stats();
  EXPECT_EQ(stats.version, 1u);
  EXPECT_EQ(stats.dictionaries_trained, 1u);
  EXPECT_EQ(stats.objects_compressed, 901u);
  EXPECT_EQ(stats.objects_kept, 99u);
  EXPECT_LT(stats.stored_bytes_compressed * 4, stats.json_bytes_compressed);
}

TEST(ZstdJsonCompressorTest, CompressedObjectsKeepTheirMetadata) {
  auto compressor = std::make_shared<ZstdJsonCompressor>(SmallOptions());
  TransformOptions plain;
  TransformOptions transform;
  transform.compressor = compressor;
  for (const std::string& json : CapturedPods()) {
    absl::StatusOr<ObjectPtr> want = Object::Parse(json, plain);
    absl::StatusOr<ObjectPtr> got = Object::Parse(json, transform);
    ASSERT_TRUE(want.ok() && got.ok());
    const Object& w = **want;
    const Object& g = **got;
    EXPECT_EQ(g.Key(), w.Key());
    EXPECT_EQ(g.uid(), w.uid());
    EXPECT_EQ(g.resource_version(), w.resource_version());
    EXPECT_EQ(g.api_version(), w.api_version());
    EXPECT_EQ(g.kind(), w.kind());
    EXPECT_EQ(g.generation(), w.generation());
    EXPECT_EQ(g.deletion_timestamp(), w.deletion_timestamp());
    EXPECT_EQ(g.labels(), w.labels());
    EXPECT_EQ(g.FieldValues("spec.nodeName"), w.FieldValues("spec.nodeName"));
    if (g.compressed()) {
      EXPECT_LT(g.MemoryUsage(), w.MemoryUsage());
    }
  }
}

TEST(ZstdJsonCompressorTest, SmallObjectsAreKeptAsTheyAre) {
  ZstdJsonCompressor::Options o = SmallOptions();
  o.min_json_bytes = 1 << 20;
  auto compressor = std::make_shared<ZstdJsonCompressor>(o);
  TransformOptions transform;
  transform.compressor = compressor;
  for (int i = 0; i < 300; ++i) {
    auto obj = Object::Parse(CapturedPods()[i], transform);
    ASSERT_TRUE(obj.ok());
    EXPECT_FALSE((*obj)->compressed());
  }
  EXPECT_EQ(compressor->stats().version, 0u);  // nothing sampled
  EXPECT_EQ(compressor->stats().objects_kept, 300u);
}

TEST(ZstdJsonCompressorTest, RetrainMakesANewVersionAndOldObjectsStayRead) {
  auto compressor = std::make_shared<ZstdJsonCompressor>(SmallOptions());
  TransformOptions transform;
  transform.compressor = compressor;
  std::vector<ObjectPtr> v1;
  for (int i = 0; i < 300; ++i) {
    v1.push_back(*Object::Parse(CapturedPods()[i], transform));
  }
  auto first = compressor->dictionary();
  ASSERT_NE(first, nullptr);
  compressor->Retrain();
  std::vector<ObjectPtr> v2;
  for (int i = 300; i < 1000; ++i) {
    v2.push_back(*Object::Parse(CapturedPods()[i], transform));
  }
  auto second = compressor->dictionary();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first, second);
  EXPECT_EQ(first->version(), 1u);
  EXPECT_EQ(second->version(), 2u);
  EXPECT_EQ(compressor->stats().dictionaries_trained, 2u);
  // The first version is still referenced by the objects it compressed.
  EXPECT_GT(first.use_count(), 1);
  first.reset();
  for (int i = 0; i < 300; ++i) EXPECT_EQ(v1[i]->json(), CapturedPods()[i]);
  for (int i = 0; i < 700; ++i) {
    EXPECT_EQ(v2[i]->json(), CapturedPods()[300 + i]);
  }
}

TEST(ZstdJsonCompressorTest, ObjectsThatDriftTriggerANewVersion) {
  ZstdJsonCompressor::Options o = SmallOptions();
  o.window_objects = 50;
  auto compressor = std::make_shared<ZstdJsonCompressor>(o);
  TransformOptions transform;
  transform.compressor = compressor;
  // Trained on ConfigMaps; then Pods, which the dictionary knows nothing
  // of, compress far worse: a new version is trained on Pods.
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(Object::Parse(ConfigMapJson(i), transform).ok());
  }
  EXPECT_EQ(compressor->stats().version, 1u);
  for (const std::string& json : CapturedPods()) {
    ASSERT_TRUE(Object::Parse(json, transform).ok());
  }
  EXPECT_GE(compressor->stats().version, 2u);
}

TEST(ZstdJsonCompressorTest, ManyThreadsBuildReadAndRetrain) {
  auto compressor = std::make_shared<ZstdJsonCompressor>(SmallOptions());
  TransformOptions transform;
  transform.compressor = compressor;
  constexpr int kThreads = 4;
  std::vector<std::vector<ObjectPtr>> built(kThreads);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < CapturedPods().size(); i += kThreads) {
        auto obj = Object::Parse(CapturedPods()[i], transform);
        if (!obj.ok() || (*obj)->json() != CapturedPods()[i]) ++mismatches;
        built[t].push_back(*std::move(obj));
        if (i % 250 == 0) compressor->Retrain();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  // Read everything again from other threads than those that built it.
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<ObjectPtr>& mine = built[(t + 1) % kThreads];
      for (size_t j = 0; j < mine.size(); ++j) {
        const size_t i = ((t + 1) % kThreads) + j * kThreads;
        if (mine[j]->json() != CapturedPods()[i]) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  // Whether a retrain asked for by the threads above finished its sample
  // depends on how they were scheduled (one asked late has too few objects
  // left). Ask once more and feed one thread until a sample completes, so
  // that a second dictionary is trained whatever the schedule was.
  compressor->Retrain();
  for (size_t i = 0; i < CapturedPods().size() &&
                     compressor->stats().dictionaries_trained < 2;
       ++i) {
    auto obj = Object::Parse(CapturedPods()[i], transform);
    ASSERT_TRUE(obj.ok()) << obj.status();
    EXPECT_EQ((*obj)->json(), CapturedPods()[i]);
  }
  EXPECT_GE(compressor->stats().dictionaries_trained, 2u);
}

// The list and watch decoders hand the compressor to every object they
// build, the list decoder from its worker threads too.
TEST(ZstdJsonCompressorTest, DecodersCompressWithTheTransformsCompressor) {
  absl::StatusOr<std::string> body =
      json_testing::ReadCapture("pods-1000.list.json.gz");
  ASSERT_TRUE(body.ok());
  auto compressor = std::make_shared<ZstdJsonCompressor>(SmallOptions());
  TransformOptions transform;
  transform.compressor = compressor;
  // Trained first, on this thread: objects a worker decodes while another
  // trains the dictionary stay as they are, and how many those are depends
  // on the schedule. With the dictionary ready, every object is compressed.
  for (const std::string& json : CapturedPods()) {
    if (compressor->stats().dictionaries_trained >= 1) break;
    ASSERT_TRUE(Object::Parse(json, transform).ok());
  }
  ASSERT_GE(compressor->stats().dictionaries_trained, 1u);
  StreamingListDecoder::Options options;
  options.decode_threads = 2;
  StreamingListDecoder decoder(transform, options);
  for (size_t at = 0; at < body->size(); at += 64 << 10) {
    ASSERT_TRUE(
        decoder.Feed(absl::string_view(*body).substr(at, 64 << 10)).ok());
  }
  absl::StatusOr<ObjectList> list = decoder.Finish();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1000u);
  size_t compressed = 0;
  for (size_t i = 0; i < list->items.size(); ++i) {
    EXPECT_EQ(list->items[i]->json(), CapturedPods()[i]);
    compressed += list->items[i]->compressed() ? 1 : 0;
  }
  EXPECT_EQ(compressed, list->items.size());

  const std::string line =
      absl::StrCat(R"({"type":"MODIFIED","object":)", CapturedPods()[5], "}");
  absl::StatusOr<WatchEvent> event = DecodeWatchEvent(line, transform);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(event->object->compressed());
  EXPECT_EQ(event->object->json(), CapturedPods()[5]);
}

}  // namespace
}  // namespace informer

#include "server/registry/snapshot_keeper.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/zstd_json_compressor.h"
#include "informer/persist/snapshot_reader.h"
#include "informer/persist/snapshot_section.h"
#include "informer/persist/snapshot_test_util.h"
#include "informer/persist/snapshot_writer.h"

namespace server {
namespace {

namespace st = informer::snapshot_testing;

// More objects than the compressor samples, so that it trains its
// dictionary during the load and compresses the objects after the sample;
// and more than the reader decodes on its own thread before its decode
// threads take over (about 3,000 of these).
constexpr int kObjects = 8000;

class SnapshotKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = st::MakeTempDir();
    objects_ = st::ConfigMaps(kObjects, /*data_bytes=*/1024);
    ASSERT_TRUE(informer::WriteSnapshot(dir_, st::ConfigMapsIdentity(), "4242",
                                        objects_)
                    .ok());
    informer::SharedIndexInformer::Options o;
    o.name = "configmaps";
    informer_ = std::make_unique<informer::SharedIndexInformer>(&source_, o);
  }

  std::unique_ptr<SnapshotKeeper> NewKeeper(int decode_threads) {
    SnapshotKeeper::Options o;
    o.dir = dir_;
    o.interval = absl::ZeroDuration();
    o.decode_threads = decode_threads;
    absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
        SnapshotKeeper::Create(std::move(o));
    EXPECT_TRUE(keeper.ok()) << keeper.status();
    return keeper.ok() ? *std::move(keeper) : nullptr;
  }

  // Loads with `compressor` as the target's (the resource client's)
  // compressor, and checks that every loaded object went through it.
  void LoadThrough(int decode_threads) {
    auto compressor = std::make_shared<informer::ZstdJsonCompressor>();
    std::unique_ptr<SnapshotKeeper> keeper = NewKeeper(decode_threads);
    ASSERT_NE(keeper, nullptr);
    SnapshotKeeper::Target t;
    t.informer = informer_.get();
    t.identity = st::ConfigMapsIdentity();
    t.transform.compressor = compressor;
    absl::Time loaded_written = absl::InfinitePast();
    t.on_loaded = [&](absl::Time written) { loaded_written = written; };
    keeper->Add(std::move(t));
    keeper->Load();

    EXPECT_EQ(keeper->GetStats().loaded, 1);
    EXPECT_EQ(keeper->GetStats().rejected, 0);
    EXPECT_NE(loaded_written, absl::InfinitePast());
    // Every loaded object went through the resource's compressor, which
    // trained its one dictionary on the snapshot's first objects.
    const informer::ZstdJsonCompressor::Stats cs = compressor->stats();
    EXPECT_EQ(cs.dictionaries_trained, 1u);
    EXPECT_EQ(cs.version, 1u);
    EXPECT_EQ(cs.objects_compressed + cs.objects_kept,
              static_cast<uint64_t>(kObjects));
    // Only the sample it trained on is kept as it is (as in a list): no
    // decode thread compressed objects while the dictionary was trained.
    const size_t sampled =
        informer::ZstdJsonCompressor::Options().train_objects;
    EXPECT_EQ(cs.objects_kept, sampled - 1);
    EXPECT_EQ(cs.objects_compressed, kObjects - sampled + 1);

    // Start hands every handler an add per loaded object (from the
    // indexer) before its reflector runs.
    const std::vector<informer::ObjectPtr> loaded = StartAndCollect();
    ASSERT_EQ(loaded.size(), objects_.size());
    size_t compressed = 0;
    for (const informer::ObjectPtr& o : loaded) {
      if (o->compressed()) {
        ++compressed;
        EXPECT_LT(o->stored_json_size(), o->json_size());
      }
    }
    EXPECT_EQ(compressed, cs.objects_compressed);
    // The JSON reads back as written, whatever order the cache lists.
    std::vector<std::string> want = st::JsonsOf(objects_);
    std::vector<std::string> got = st::JsonsOf(loaded);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
  }

  // Starts the informer; its handler's initial adds.
  std::vector<informer::ObjectPtr> StartAndCollect() {
    absl::Mutex mu;
    std::vector<informer::ObjectPtr> adds;
    informer::ResourceEventHandlerFuncs handler;
    handler.add = [&](const informer::ObjectPtr& o, bool initial) {
      absl::MutexLock lock(&mu);
      if (initial) adds.push_back(o);
    };
    EXPECT_TRUE(informer_->AddEventHandler(&handler).ok());
    EXPECT_TRUE(informer_->Start().ok());
    {
      absl::MutexLock lock(&mu);
      auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return adds.size() >= objects_.size();
      };
      mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(30));
    }
    informer_->Stop();
    absl::MutexLock lock(&mu);
    return adds;
  }

  informer::FakeSource source_;
  std::string dir_;
  std::vector<informer::ObjectPtr> objects_;
  std::unique_ptr<informer::SharedIndexInformer> informer_;
};

TEST_F(SnapshotKeeperTest, PeriodicWritesRunAtALowerPriority) {
  errno = 0;
  const int process_nice = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  SnapshotKeeper::Options o;
  o.dir = dir_;
  o.interval = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
      SnapshotKeeper::Create(std::move(o));
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  (*keeper)->Start();
  EXPECT_EQ((*keeper)->GetStats().writer_nice, std::min(19, process_nice + 10));
  // The calling thread keeps its own.
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), process_nice);
  (*keeper)->Stop();
}

TEST_F(SnapshotKeeperTest, LoadCompressesWithTheTargetsCompressor) {
  LoadThrough(/*decode_threads=*/0);
}

TEST_F(SnapshotKeeperTest, LoadWithDecodeThreadsUsesTheSameCompressor) {
  LoadThrough(/*decode_threads=*/2);
}

TEST_F(SnapshotKeeperTest, AnotherIdentityIsRejectedAndNothingLoaded) {
  auto compressor = std::make_shared<informer::ZstdJsonCompressor>();
  std::unique_ptr<SnapshotKeeper> keeper = NewKeeper(0);
  ASSERT_NE(keeper, nullptr);
  SnapshotKeeper::Target t;
  t.informer = informer_.get();
  t.identity = st::ConfigMapsIdentity();
  t.identity.namespace_ = "elsewhere";
  t.transform.compressor = compressor;
  keeper->Add(std::move(t));
  keeper->Load();
  EXPECT_EQ(keeper->GetStats().loaded, 0);
  EXPECT_EQ(keeper->GetStats().rejected, 1);
  // No initial state: the informer would list (a cold start).
  EXPECT_TRUE(informer_->CopyState().objects.empty());
  EXPECT_TRUE(informer_->CopyState().resource_version.empty());
}

// A target's capture supplies what is written (the Watch history's seam):
// its objects, resourceVersion and sections; an unchanged resourceVersion
// and change tag write nothing; the sections asked for come back to
// on_read with the loaded snapshot.
TEST(SnapshotKeeperCaptureTest, CapturesAreWrittenAndTheirSectionsReadBack) {
  const std::string dir = st::MakeTempDir();
  informer::FakeSource source;
  ASSERT_TRUE(source.Add("default", "x").ok());
  informer::SharedIndexInformer::Options io;
  io.name = "configmaps";
  informer::SharedIndexInformer writer_informer(&source, io);
  ASSERT_TRUE(writer_informer.Start().ok());
  ASSERT_TRUE(writer_informer.WaitForSync(absl::Seconds(30)));
  SnapshotKeeper::Options ko;
  ko.dir = dir;
  ko.interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
      SnapshotKeeper::Create(ko);
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  std::string tag = "one";
  SnapshotKeeper::Target t;
  t.informer = &writer_informer;
  t.identity = st::ConfigMapsIdentity();
  t.capture = [&tag]() -> std::optional<SnapshotKeeper::Captured> {
    SnapshotKeeper::Captured c;
    c.objects = st::ConfigMaps(3);
    c.resource_version = "77";
    c.sections.push_back({"extra", 1, false, {"r1", "r2"}});
    c.change_tag = tag;
    return c;
  };
  (*keeper)->Add(std::move(t));
  ASSERT_TRUE((*keeper)->WriteAll().ok());
  EXPECT_EQ((*keeper)->GetStats().writes, 1);
  ASSERT_TRUE((*keeper)->WriteAll().ok());
  EXPECT_EQ((*keeper)->GetStats().writes, 1) << "nothing changed";
  tag = "two";
  ASSERT_TRUE((*keeper)->WriteAll().ok());
  EXPECT_EQ((*keeper)->GetStats().writes, 2) << "the sections changed";
  writer_informer.Stop();
  keeper->reset();  // the directory's lock

  informer::SharedIndexInformer reader_informer(&source, io);
  keeper = SnapshotKeeper::Create(ko);
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  SnapshotKeeper::Target r;
  r.informer = &reader_informer;
  r.identity = st::ConfigMapsIdentity();
  r.keep_sections = {"extra"};
  std::string rv;
  size_t objects = 0;
  std::vector<std::string> records;
  r.on_read = [&](const informer::LoadedSnapshot& loaded) {
    rv = loaded.resource_version;
    objects = loaded.objects.size();
    for (const informer::SnapshotSection& s : loaded.sections) {
      if (s.name == "extra") records = s.records;
    }
  };
  (*keeper)->Add(std::move(r));
  (*keeper)->Load();
  EXPECT_EQ((*keeper)->GetStats().loaded, 1);
  EXPECT_EQ(rv, "77");
  EXPECT_EQ(objects, 3u);
  EXPECT_EQ(records, (std::vector<std::string>{"r1", "r2"}));
}

// The resume begins from each snapshot's header while its objects load
// (SharedIndexInformer::BeginResume): the watch is open before the
// informer starts; a file whose body then fails abandons it (a cold list).
class SnapshotKeeperResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = st::MakeTempDir();
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(source_.Add("default", absl::StrCat("cm-", i)).ok());
    }
    informer::SharedIndexInformer first(&source_, Options());
    ASSERT_TRUE(first.Start().ok());
    ASSERT_TRUE(first.WaitForSync(absl::Seconds(30)));
    const informer::SharedIndexInformer::StateCopy state = first.CopyState();
    absl::StatusOr<informer::SnapshotWriteStats> w = informer::WriteSnapshot(
        dir_, st::ConfigMapsIdentity(), state.resource_version, state.objects);
    ASSERT_TRUE(w.ok()) << w.status();
    path_ = w->path;
  }

  static informer::SharedIndexInformer::Options Options() {
    informer::SharedIndexInformer::Options o;
    o.name = "configmaps";
    o.reflector.backoff_initial = absl::Milliseconds(1);
    o.reflector.backoff_jitter = 0;
    return o;
  }

  // Loads into `informer`; the keeper's stats.
  SnapshotKeeper::Stats Load(informer::SharedIndexInformer* informer) {
    SnapshotKeeper::Options ko;
    ko.dir = dir_;
    ko.interval = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<SnapshotKeeper>> keeper =
        SnapshotKeeper::Create(ko);
    EXPECT_TRUE(keeper.ok()) << keeper.status();
    if (!keeper.ok()) return {};
    SnapshotKeeper::Target t;
    t.informer = informer;
    t.identity = st::ConfigMapsIdentity();
    (*keeper)->Add(std::move(t));
    (*keeper)->Load();
    return (*keeper)->GetStats();
  }

  std::set<std::string> Keys(const informer::SharedIndexInformer& informer) {
    std::set<std::string> keys;
    for (const auto& o : informer.GetIndexer().List()) keys.insert(o->Key());
    return keys;
  }
  std::set<std::string> SourceKeys() {
    std::set<std::string> keys;
    for (const auto& [key, o] : source_.Snapshot()) keys.insert(key);
    return keys;
  }

  informer::FakeSource source_;
  std::string dir_;
  std::string path_;
};

TEST_F(SnapshotKeeperResumeTest, TheWatchOpensWhileLoadingAndResumesAtStart) {
  informer::SharedIndexInformer informer(&source_, Options());
  const int64_t watches = source_.watch_calls();
  EXPECT_EQ(Load(&informer).loaded, 1);
  // Opened from the header's resourceVersion before the informer starts;
  // a change made now comes on it.
  source_.WaitForWatches(1);
  EXPECT_EQ(source_.watch_calls() - watches, 1);
  ASSERT_TRUE(source_.Delete("default", "cm-3").ok());
  absl::Mutex mu;
  bool deleted = false;
  informer::ResourceEventHandlerFuncs handler;
  handler.del = [&](const informer::ObjectPtr&, bool) {
    absl::MutexLock lock(&mu);
    deleted = true;
  };
  ASSERT_TRUE(informer.AddEventHandler(&handler).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(30)));
  {
    // Made after the probe: it may come after synced.
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&deleted));
  }
  EXPECT_TRUE(informer.Resumed());
  EXPECT_EQ(informer.GetReflectorCounters().lists, 0);
  EXPECT_EQ(Keys(informer), SourceKeys());
  EXPECT_EQ(Keys(informer).size(), 19u);
}

TEST_F(SnapshotKeeperResumeTest, AGarbledBodyAbandonsTheResumeForAColdList) {
  // The header checks out, a later frame does not: the resume began from
  // the header and its watch is open when the load fails.
  std::string file = st::ReadAll(path_);
  file[file.size() - 40] ^= 0x01;
  st::WriteAll(path_, file);
  informer::SharedIndexInformer informer(&source_, Options());
  const SnapshotKeeper::Stats stats = Load(&informer);
  EXPECT_EQ(stats.loaded, 0);
  EXPECT_EQ(stats.rejected, 1);
  source_.WaitForWatches(1);
  ASSERT_TRUE(source_.Add("default", "cm-new").ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(30)));
  EXPECT_FALSE(informer.Resumed());
  // A cold start's list (no relist), the server's state exactly.
  EXPECT_EQ(informer.GetReflectorCounters().lists, 1);
  EXPECT_EQ(informer.GetReflectorCounters().relists, 0);
  EXPECT_EQ(Keys(informer), SourceKeys());
  EXPECT_EQ(Keys(informer).size(), 21u);
}

}  // namespace
}  // namespace server

#include "server/registry/snapshot_keeper.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/object/zstd_json_compressor.h"
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

}  // namespace
}  // namespace server

#include "server/informer_service/watch/watch_history.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "informer/object/object.h"
#include "informer/object/zstd_json_compressor.h"

namespace server {
namespace {

// Feeds a history as a fan-out does: the state per key, consecutive
// sequence numbers, each event with the state before it.
class Feeder {
 public:
  explicit Feeder(WatchHistory* history) : history_(history) {}

  // Adds or updates `name` with a payload of `payload_bytes`.
  EventPtr Put(const std::string& name, size_t payload_bytes) {
    const std::string uid = uids_.count(name) > 0
                                ? uids_[name]
                                : (uids_[name] = absl::StrCat("uid-", ++n_));
    informer::ObjectPtr obj =
        informer::ObjectBuilder()
            .SetNamespace("ns")
            .SetName(name)
            .SetUid(uid)
            .SetResourceVersion(absl::StrCat(++rv_))
            .AddAnnotation("payload", std::string(payload_bytes, 'x'))
            .Build();
    auto shared = std::make_shared<const SharedObject>(std::move(obj));
    SharedPtr prev =
        state_.count(shared->key()) > 0 ? state_[shared->key()] : nullptr;
    state_[shared->key()] = shared;
    return Push(shared, prev, /*deleted=*/false);
  }

  EventPtr Delete(const std::string& name) {
    const std::string key = absl::StrCat("ns/", name);
    SharedPtr prev = state_.at(key);
    state_.erase(key);
    uids_.erase(name);
    // The informer hands the final state over as a new SharedObject (of
    // the same parsed object).
    return Push(std::make_shared<const SharedObject>(prev->ptr()), prev,
                /*deleted=*/true);
  }

  uint64_t seq() const { return seq_; }

 private:
  EventPtr Push(SharedPtr obj, SharedPtr prev, bool deleted) {
    ++seq_;
    auto ev = std::make_shared<const FanoutEvent>(
        seq_, std::move(obj), std::move(prev), deleted, false,
        absl::StrCat("token-", seq_));
    history_->Push(ev);
    return ev;
  }

  WatchHistory* history_;
  std::map<std::string, SharedPtr> state_;
  std::map<std::string, std::string> uids_;
  uint64_t seq_ = 0;
  int64_t rv_ = 100;
  int n_ = 0;
};

std::vector<EventPtr> Kept(const WatchHistory& h) {
  std::vector<EventPtr> out;
  h.ForEachAfter(0, [&out](const EventPtr& ev) { out.push_back(ev); });
  return out;
}

// What the kept events alone hold, computed from scratch: every distinct
// object state they reference once, except each key's current state (the
// new state of its newest kept event unless that is a deletion, which the
// fan-out's state holds anyway), a tombstone's parsed object (its state
// before's) once, each event's overhead, each distinct key's overhead.
size_t ReferenceBytes(const WatchHistory& h) {
  const std::vector<EventPtr> kept = Kept(h);
  std::map<std::string, const FanoutEvent*> newest;
  for (const EventPtr& ev : kept) newest[ev->key()] = ev.get();
  absl::flat_hash_set<const SharedObject*> states;
  absl::flat_hash_set<std::string> keys;
  size_t bytes = 0;
  for (const EventPtr& ev : kept) {
    bytes += WatchHistory::EventOverhead(*ev);
    if (keys.insert(ev->key()).second) {
      bytes += WatchHistory::KeyOverhead(ev->key());
    }
    const bool current = newest[ev->key()] == ev.get() && !ev->deleted();
    if (!current && states.insert(ev->obj().get()).second) {
      bytes += StateBytes(ev->obj());
      if (ev->deleted() && ev->prev() != nullptr &&
          ev->prev()->ptr() == ev->obj()->ptr()) {
        bytes -= ev->obj()->object().MemoryUsage();
      }
    }
    if (ev->prev() != nullptr && states.insert(ev->prev().get()).second) {
      bytes += StateBytes(ev->prev());
    }
  }
  return bytes;
}

TEST(StateBytesTest, GrowsWithTheObjectAndCountsTheWireCopiesMade) {
  auto small = std::make_shared<const SharedObject>(
      informer::ObjectBuilder().SetName("a").SetUid("u").Build());
  auto big = std::make_shared<const SharedObject>(
      informer::ObjectBuilder()
          .SetName("a")
          .SetUid("u")
          .AddAnnotation("payload", std::string(10000, 'x'))
          .Build());
  EXPECT_EQ(StateBytes(nullptr), 0u);
  EXPECT_GE(StateBytes(big), StateBytes(small) + 10000);
  // No stream has been sent it: no wire copy yet.
  EXPECT_EQ(WireBytes(*big), 0u);
  const size_t parsed = StateBytes(big);
  ASSERT_TRUE(big->Encoded(informer::v1::ENCODING_JSON).ok());
  EXPECT_GE(WireBytes(*big), big->object().json_size());
  EXPECT_EQ(StateBytes(big), parsed + WireBytes(*big));
  ASSERT_TRUE(big->Encoded(informer::v1::ENCODING_STRUCT).ok());
  EXPECT_GE(WireBytes(*big), 2 * big->object().json_size());
}

TEST(WatchHistoryTest, DropsTheOldestEventsOnceOverTheByteBound) {
  // What one more update of a key costs.
  WatchHistory probe(1000, size_t{1} << 30);
  Feeder sizing(&probe);
  sizing.Put("a", 2000);
  const size_t one = probe.bytes();
  sizing.Put("a", 2000);
  const size_t per_update = probe.bytes() - one;
  ASSERT_GT(per_update, 2000u);

  // Room for about ten updates, far fewer than the event bound.
  const size_t bound = 10 * per_update;
  WatchHistory h(1000, bound);
  Feeder f(&h);
  for (int i = 0; i < 100; ++i) {
    f.Put(absl::StrCat("obj-", i % 2), 2000);
    EXPECT_LE(h.bytes(), bound);
    EXPECT_EQ(h.bytes(), ReferenceBytes(h)) << "after event " << f.seq();
  }
  // Two keys: each key's oldest event also keeps the state before it.
  EXPECT_LE(h.events(), 10u);
  EXPECT_GE(h.events(), 6u);
  EXPECT_EQ(h.dropped_for_bytes(), 100 - h.events());
  // The kept events are the newest, consecutive, ending at the last.
  const std::vector<EventPtr> kept = Kept(h);
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i]->seq(), f.seq() - kept.size() + 1 + i);
  }
  const uint64_t first = kept.front()->seq();
  EXPECT_TRUE(h.Covers(first - 1, f.seq()));
  EXPECT_FALSE(h.Covers(first - 2, f.seq()));
  EXPECT_TRUE(h.Covers(f.seq(), f.seq()));
  EXPECT_FALSE(h.Covers(f.seq() + 1, f.seq()));
}

TEST(WatchHistoryTest, DroppedEventsAreReleased) {
  WatchHistory h(1000, 64 << 10);
  Feeder f(&h);
  std::vector<std::weak_ptr<const FanoutEvent>> events;
  std::vector<std::weak_ptr<const SharedObject>> states;
  for (int i = 0; i < 200; ++i) {
    EventPtr ev = f.Put(absl::StrCat("obj-", i % 3), 4000);
    events.push_back(ev);
    states.push_back(ev->obj());
  }
  size_t alive_events = 0, alive_states = 0;
  for (const auto& w : events) alive_events += !w.expired();
  for (const auto& w : states) alive_states += !w.expired();
  EXPECT_EQ(alive_events, h.events());
  // The kept events' new states, and the current state of each key (held
  // by the feeder as the fan-out's state is).
  EXPECT_LE(alive_states, h.events() + 3);
  EXPECT_LE(alive_states * 4000, size_t{64} << 10);
}

TEST(WatchHistoryTest, ChargesMatchWhatIsKeptThroughDeletesAndRecreates) {
  WatchHistory h(50, 200 << 10);
  Feeder f(&h);
  std::mt19937 rng(7);
  std::map<std::string, bool> exists;
  for (int i = 0; i < 3000; ++i) {
    const std::string name = absl::StrCat("o", rng() % 12);
    if (exists[name] && rng() % 4 == 0) {
      f.Delete(name);
      exists[name] = false;
    } else {
      f.Put(name, rng() % 6000);
      exists[name] = true;
    }
    ASSERT_EQ(h.bytes(), ReferenceBytes(h)) << "after event " << f.seq();
    ASSERT_LE(h.bytes(), size_t{200} << 10);
    ASSERT_LE(h.events(), 50u);
  }
  EXPECT_GT(h.dropped_for_bytes(), 0u);
}

TEST(WatchHistoryTest, TheEventBoundStillApplies) {
  WatchHistory h(3, size_t{1} << 30);
  Feeder f(&h);
  for (int i = 0; i < 10; ++i) f.Put("a", 10);
  EXPECT_EQ(h.events(), 3u);
  EXPECT_EQ(h.dropped_for_bytes(), 0u);
  EXPECT_TRUE(h.Covers(7, 10));
  EXPECT_FALSE(h.Covers(6, 10));
}

TEST(WatchHistoryTest, AStateLargerThanTheBoundLeavesNothingToResumeFrom) {
  WatchHistory h(100, 8 << 10);
  Feeder f(&h);
  f.Put("a", 10);
  f.Put("a", 10);
  // A large current state costs the history nothing yet: the fan-out's
  // state holds it.
  f.Put("b", 20000);
  ASSERT_EQ(h.events(), 3u);
  ASSERT_LT(h.bytes(), size_t{8} << 10);
  // Superseded, only the history keeps it, and it alone is over the bound.
  f.Put("b", 10);
  EXPECT_EQ(h.events(), 0u);
  EXPECT_EQ(h.bytes(), 0u);
  EXPECT_FALSE(h.Covers(3, 4));
  EXPECT_TRUE(h.Covers(4, 4));
  // Smaller events are kept again afterwards.
  f.Put("a", 10);
  EXPECT_EQ(h.events(), 1u);
  EXPECT_TRUE(h.Covers(4, 5));
}

TEST(WatchHistoryTest, ChargesAStateOnlyOnceSupersededOrDeleted) {
  WatchHistory h(100, size_t{1} << 30);
  Feeder f(&h);
  EventPtr add = f.Put("a", 10000);
  // The current state: held by the fan-out's state whatever the history
  // does.
  EXPECT_LT(h.bytes(), 10000u);
  const size_t before = h.bytes();
  f.Put("a", 10);
  // Now the history alone keeps the first state (the update's state
  // before).
  EXPECT_GE(h.bytes(), before + StateBytes(add->obj()));
  EXPECT_EQ(h.bytes(), ReferenceBytes(h));
  const size_t updated = h.bytes();
  // A deletion's final state is the history's alone.
  f.Delete("a");
  EXPECT_GE(h.bytes(), updated + sizeof(SharedObject));
  EXPECT_EQ(h.bytes(), ReferenceBytes(h));
}

TEST(WatchHistoryTest, EitherBoundAtZeroKeepsNothing) {
  for (auto [events, bytes] : {std::pair<size_t, size_t>{0, 1 << 20},
                               std::pair<size_t, size_t>{100, 0}}) {
    WatchHistory h(events, bytes);
    Feeder f(&h);
    f.Put("a", 10);
    f.Put("a", 10);
    EXPECT_EQ(h.events(), 0u);
    EXPECT_EQ(h.bytes(), 0u);
    EXPECT_FALSE(h.Covers(1, 2));
    EXPECT_TRUE(h.Covers(2, 2));
  }
}

TEST(WatchHistoryTest, ForEachAfterYieldsTheEventsAfterTheSequence) {
  WatchHistory h(4, size_t{1} << 30);
  Feeder f(&h);
  for (int i = 0; i < 6; ++i) f.Put(absl::StrCat("k", i), 10);  // keeps 3..6
  std::vector<uint64_t> seqs;
  h.ForEachAfter(4, [&seqs](const EventPtr& ev) { seqs.push_back(ev->seq()); });
  EXPECT_EQ(seqs, (std::vector<uint64_t>{5, 6}));
  seqs.clear();
  h.ForEachAfter(1, [&seqs](const EventPtr& ev) { seqs.push_back(ev->seq()); });
  EXPECT_EQ(seqs, (std::vector<uint64_t>{3, 4, 5, 6}));
  seqs.clear();
  h.ForEachAfter(6, [&seqs](const EventPtr& ev) { seqs.push_back(ev->seq()); });
  EXPECT_TRUE(seqs.empty());
}

// The heap glibc has handed out and not taken back (small chunks and
// mmapped ones).
size_t HeapInUse() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// The soak's churn as the sidecar's fan-out sees it: ConfigMaps compressed
// at rest (one zstd dictionary for the resource), every event encoded once
// for the streams (or never: no stream), one change in ten a deletion and a
// re-creation (a new uid, a watch's final state: a parsed object of its
// own).
class ChurnFeeder {
 public:
  ChurnFeeder(WatchHistory* history, bool streamed)
      : history_(history), streamed_(streamed) {
    transform_.compressor = std::make_shared<informer::ZstdJsonCompressor>();
  }

  void Run(int objects, int changes) {
    for (int i = 0; i < objects; ++i) Put(i);
    std::mt19937 rng(7);
    for (int n = 0; n < changes; ++n) {
      const int i = static_cast<int>(rng() % objects);
      if (rng() % 10 == 0) {
        const std::string key = absl::StrCat("soak/cm-", i);
        SharedPtr prev = state_.at(key);
        state_.erase(key);
        uids_.erase(i);
        Push(std::make_shared<const SharedObject>(Parse(i)), prev, true);
      }
      Put(i);
    }
  }

 private:
  informer::ObjectPtr Parse(int i) {
    if (uids_.count(i) == 0) {
      uids_[i] = absl::StrCat("5b2f7c3e-0d1a-4c8e-9f6b-", ++uid_);
    }
    const std::string json = absl::StrCat(
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-)", i,
        R"(","namespace":"soak","uid":")", uids_[i], R"(","resourceVersion":")",
        ++rv_,
        R"(","creationTimestamp":"2026-12-03T10:00:00Z"},"data":{"gen":")", rv_,
        R"(","payload":")", std::string(512, 'x'), R"("}})");
    absl::StatusOr<informer::ObjectPtr> obj =
        informer::Object::Parse(json, transform_);
    EXPECT_TRUE(obj.ok()) << obj.status();
    return *obj;
  }

  void Put(int i) {
    auto shared = std::make_shared<const SharedObject>(Parse(i));
    SharedPtr& slot = state_[shared->key()];
    SharedPtr prev = std::move(slot);
    slot = shared;
    Push(std::move(shared), std::move(prev), false);
  }

  void Push(SharedPtr obj, SharedPtr prev, bool deleted) {
    ++seq_;
    auto ev = std::make_shared<const FanoutEvent>(
        seq_, std::move(obj), std::move(prev), deleted, false,
        absl::StrCat("AAAAAAAAAAAA", seq_));
    // What the first stream to send it makes (the object adopts its part).
    if (streamed_) {
      ASSERT_TRUE(ev->Encoded(informer::v1::ENCODING_JSON, false).ok());
    }
    history_->Push(std::move(ev));
  }

  WatchHistory* history_;
  const bool streamed_;
  informer::TransformOptions transform_;
  std::map<std::string, SharedPtr> state_;
  std::map<int, std::string> uids_;
  uint64_t seq_ = 0;
  int64_t rv_ = 100;
  int uid_ = 0;
};

TEST(WatchHistoryTest, BytesAreWhatFreeingTheHistoryFrees) {
  for (bool streamed : {true, false}) {
    SCOPED_TRACE(streamed ? "streamed" : "no stream");
    auto h = std::make_unique<WatchHistory>(10000, size_t{4} << 20);
    ChurnFeeder feeder(h.get(), streamed);
    feeder.Run(/*objects=*/500, /*changes=*/8000);
    ASSERT_GT(h->dropped_for_bytes(), 0u) << "the byte bound must bind";
    const size_t charged = h->bytes();
    const size_t with = HeapInUse();
    h.reset();
    const size_t freed = with - HeapInUse();
#if defined(__SANITIZE_ADDRESS__)
    // ASan's allocator replaces glibc's heap: mallinfo2 knows nothing of
    // it. What was charged must still have been within the bound.
    (void)freed;
    EXPECT_LE(charged, size_t{4} << 20);
#else
    // Within 10% of what the history alone held (the charges estimate
    // the allocator's rounding and a few headers).
    EXPECT_LE(charged, freed + freed / 10) << "freed " << freed;
    EXPECT_GE(charged, freed - freed / 10) << "freed " << freed;
#endif
  }
}

}  // namespace
}  // namespace server

#include "server/informer_service/watch/watch_history.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "informer/object/object.h"

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

// What the kept events hold, computed from scratch: every distinct object
// state they reference (new states and states before) once, each event's
// overhead, each distinct key's overhead.
size_t ReferenceBytes(const WatchHistory& h) {
  absl::flat_hash_set<const SharedObject*> states;
  absl::flat_hash_set<std::string> keys;
  size_t bytes = 0;
  for (const EventPtr& ev : Kept(h)) {
    bytes += WatchHistory::EventOverhead(*ev);
    if (keys.insert(ev->key()).second) {
      bytes += WatchHistory::KeyOverhead(ev->key());
    }
    for (const SharedPtr& s : {ev->obj(), ev->prev()}) {
      if (s != nullptr && states.insert(s.get()).second) {
        bytes += StateBytes(s);
      }
    }
  }
  return bytes;
}

TEST(StateBytesTest, GrowsWithTheObjectAndCountsItsWireCopy) {
  auto small = std::make_shared<const SharedObject>(
      informer::ObjectBuilder().SetName("a").SetUid("u").Build());
  auto big = std::make_shared<const SharedObject>(
      informer::ObjectBuilder()
          .SetName("a")
          .SetUid("u")
          .AddAnnotation("payload", std::string(10000, 'x'))
          .Build());
  EXPECT_EQ(StateBytes(nullptr), 0u);
  // The parsed object and the serialized copy each hold the payload.
  EXPECT_GE(StateBytes(big), StateBytes(small) + 2 * 10000);
  EXPECT_GE(StateBytes(big),
            big->object().MemoryUsage() + big->object().json_size());
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

TEST(WatchHistoryTest, AnEventLargerThanTheBoundLeavesNothingToResumeFrom) {
  WatchHistory h(100, 8 << 10);
  Feeder f(&h);
  f.Put("a", 10);
  f.Put("a", 10);
  ASSERT_EQ(h.events(), 2u);
  f.Put("b", 20000);
  EXPECT_EQ(h.events(), 0u);
  EXPECT_EQ(h.bytes(), 0u);
  EXPECT_FALSE(h.Covers(2, 3));
  EXPECT_TRUE(h.Covers(3, 3));
  // Smaller events are kept again afterwards.
  f.Put("a", 10);
  EXPECT_EQ(h.events(), 1u);
  EXPECT_TRUE(h.Covers(3, 4));
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

}  // namespace
}  // namespace server

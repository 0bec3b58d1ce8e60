#ifndef INFORMER_RECORD_BROADCASTER_H_
#define INFORMER_RECORD_BROADCASTER_H_

// Broadcaster<T> fans values out to any number of watchers, like client-go's
// watch.Broadcaster.
//
// Contract:
//  * Values enter a bounded incoming queue (default 25). One distribution
//    thread takes them in order and appends each to every registered
//    watcher's bounded queue.
//  * When a watcher's queue is full, the behaviour chosen at construction
//    applies: kDropIfFull drops the value for that watcher only (the others
//    still receive it: one slow watcher cannot hold back the rest);
//    kWaitIfFull makes distribution wait until that watcher has room or is
//    stopped.
//  * Watch() registers a watcher by sending a registration through the
//    incoming queue, so the watcher sees exactly the values sent after the
//    registration (none queued before it), and Watch() returns only once the
//    registration is in effect.
//  * Watcher::Stop() removes the watcher; its Next() then drains what was
//    already queued for it and returns nullopt.
//  * Shutdown() refuses new values, delivers everything already queued,
//    closes every watcher and returns once distribution has ended. The
//    destructor calls Shutdown().
//
// Thread-safety: every method may be called from any thread, except that
// Watch() and Action() must not be called from the distribution thread
// (nothing here calls user code on that thread).
// Ownership: a Watcher may outlive its Broadcaster (it shares the state).

#include <cstddef>
#include <deque>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/types/optional.h"

namespace informer {

enum class FullQueueBehavior {
  kDropIfFull,  // drop for the full watcher only
  kWaitIfFull,  // distribution waits for room
};

inline constexpr size_t kDefaultBroadcasterIncomingQueueLength = 25;

struct BroadcasterOptions {
  size_t incoming_queue_length = kDefaultBroadcasterIncomingQueueLength;
  size_t watcher_queue_length = 1000;
  FullQueueBehavior full_queue_behavior = FullQueueBehavior::kDropIfFull;
};

template <typename T>
class Broadcaster {
 private:
  struct WatcherState;
  struct Core;

 public:
  // One registration with the broadcaster. Next() from one consumer thread;
  // Stop() from any thread, any number of times.
  class Watcher {
   public:
    Watcher(const Watcher&) = delete;
    Watcher& operator=(const Watcher&) = delete;
    ~Watcher() { Stop(); }

    // Blocks for the next value; nullopt once the watcher is closed (stopped
    // or the broadcaster shut down) and its queue is drained.
    absl::optional<T> Next() {
      absl::MutexLock lock(&core_->mu);
      core_->mu.Await(absl::Condition(
          +[](WatcherState* w) { return !w->queue.empty() || w->closed; },
          state_.get()));
      if (state_->queue.empty()) return absl::nullopt;
      T value = std::move(state_->queue.front());
      state_->queue.pop_front();
      return value;
    }

    // Removes this watcher from the broadcaster and closes it.
    void Stop() {
      absl::MutexLock lock(&core_->mu);
      state_->closed = true;
      core_->watchers.erase(state_->id);
    }

   private:
    friend class Broadcaster;
    Watcher(std::shared_ptr<Core> core, std::shared_ptr<WatcherState> state)
        : core_(std::move(core)), state_(std::move(state)) {}

    const std::shared_ptr<Core> core_;
    const std::shared_ptr<WatcherState> state_;
  };

  explicit Broadcaster(BroadcasterOptions options = {})
      : core_(std::make_shared<Core>(options)) {
    thread_ = std::thread([core = core_] { core->Loop(); });
  }
  Broadcaster(const Broadcaster&) = delete;
  Broadcaster& operator=(const Broadcaster&) = delete;
  ~Broadcaster() { Shutdown(); }

  // Registers a watcher; returns once it is in effect. After Shutdown() the
  // returned watcher is already closed.
  std::unique_ptr<Watcher> Watch() {
    auto state = std::make_shared<WatcherState>();
    absl::Notification registered;
    bool enqueued;
    {
      absl::MutexLock lock(&core_->mu);
      enqueued = core_->EnqueueLocked(Item{absl::nullopt, state, &registered},
                                      /*wait=*/true);
      if (!enqueued) state->closed = true;
    }
    if (enqueued) registered.WaitForNotification();
    return std::unique_ptr<Watcher>(new Watcher(core_, std::move(state)));
  }

  // Queues `value` for distribution, waiting while the incoming queue is
  // full. False after Shutdown() (the value is not delivered).
  bool Action(T value) {
    absl::MutexLock lock(&core_->mu);
    return core_->EnqueueLocked(Item{std::move(value), nullptr, nullptr},
                                /*wait=*/true);
  }

  // Like Action() but never waits: false when the incoming queue is full or
  // after Shutdown() (the value is dropped).
  bool ActionOrDrop(T value) {
    absl::MutexLock lock(&core_->mu);
    return core_->EnqueueLocked(Item{std::move(value), nullptr, nullptr},
                                /*wait=*/false);
  }

  // Delivers what is queued, closes every watcher and waits for the
  // distribution thread to end. Idempotent.
  void Shutdown() {
    {
      absl::MutexLock lock(&core_->mu);
      core_->shutting_down = true;
    }
    absl::MutexLock lock(&join_mu_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  // A value to distribute, or (value empty) a watcher to register, in order
  // with the values, on the distribution thread.
  struct Item {
    absl::optional<T> value;
    std::shared_ptr<WatcherState> register_watcher;
    absl::Notification* registered;  // notified once registration is done
  };

  // Guarded by the owning Core's mu (not annotatable across objects).
  struct WatcherState {
    std::deque<T> queue;
    bool closed = false;
    int64_t id = -1;
  };

  struct Core {
    explicit Core(BroadcasterOptions o) : options(o) {}

    // Returns false (nothing queued) after shutdown began, or when the
    // queue is full and !wait.
    bool EnqueueLocked(Item item, bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      if (wait) {
        mu.Await(absl::Condition(this, &Core::CanEnqueueLocked));
      }
      if (shutting_down || incoming.size() >= options.incoming_queue_length) {
        return false;
      }
      incoming.push_back(std::move(item));
      return true;
    }

    bool CanEnqueueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return shutting_down || incoming.size() < options.incoming_queue_length;
    }
    bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return !incoming.empty() || shutting_down;
    }

    void RegisterLocked(std::shared_ptr<WatcherState> state)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      state->id = next_watcher_id++;
      watchers[state->id] = std::move(state);
    }

    void Loop() ABSL_LOCKS_EXCLUDED(mu) {
      absl::MutexLock lock(&mu);
      while (true) {
        mu.Await(absl::Condition(this, &Core::HasWorkLocked));
        if (incoming.empty()) break;  // shutting down and drained
        Item item = std::move(incoming.front());
        incoming.pop_front();
        if (item.register_watcher != nullptr) {
          RegisterLocked(std::move(item.register_watcher));
          item.registered->Notify();
          continue;
        }
        DistributeLocked(*item.value);
      }
      for (auto& entry : watchers) entry.second->closed = true;
      watchers.clear();
    }

    void DistributeLocked(const T& value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      // A snapshot: in wait mode the lock is released while waiting, and a
      // watcher may stop (leaving the map) meanwhile.
      std::vector<std::shared_ptr<WatcherState>> targets;
      targets.reserve(watchers.size());
      for (auto& entry : watchers) targets.push_back(entry.second);
      const size_t cap = options.watcher_queue_length;
      for (const std::shared_ptr<WatcherState>& w : targets) {
        if (options.full_queue_behavior == FullQueueBehavior::kWaitIfFull) {
          struct Args {
            WatcherState* w;
            size_t cap;
          } args{w.get(), cap};
          mu.Await(absl::Condition(
              +[](Args* a) {
                return a->w->closed || a->w->queue.size() < a->cap;
              },
              &args));
        }
        if (w->closed || w->queue.size() >= cap) continue;  // dropped
        w->queue.push_back(value);
      }
    }

    const BroadcasterOptions options;
    absl::Mutex mu;
    std::deque<Item> incoming ABSL_GUARDED_BY(mu);
    bool shutting_down ABSL_GUARDED_BY(mu) = false;
    absl::flat_hash_map<int64_t, std::shared_ptr<WatcherState>> watchers
        ABSL_GUARDED_BY(mu);
    int64_t next_watcher_id ABSL_GUARDED_BY(mu) = 0;
  };

  const std::shared_ptr<Core> core_;
  absl::Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace informer

#endif  // INFORMER_RECORD_BROADCASTER_H_

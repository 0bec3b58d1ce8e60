#ifndef INFORMER_CACHE_REFLECTOR_TEST_UTIL_H_
#define INFORMER_CACHE_REFLECTOR_TEST_UTIL_H_

// The reflector tests' fixture and a ListStage that records what it saw.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "informer/cache/delta_fifo.h"
#include "informer/cache/list_stage.h"
#include "informer/cache/reflector.h"
#include "informer/cache/testing/fake_source.h"
#include "informer/util/clock.h"

namespace informer {

// Runs a reflector on its own thread over a FakeSource and a FIFO with no
// known objects; the test pops deltas itself.
class ReflectorTest : public ::testing::Test {
 protected:
  // Over `lw` when given, else over source_.
  void StartReflector(Reflector::Options opts = {},
                      ListerWatcher* lw = nullptr) {
    opts.random_seed = 7;
    opts.on_replaced = [this] {
      absl::MutexLock lock(&mu_);
      ++replaces_;
    };
    reflector_ = std::make_unique<Reflector>(lw != nullptr ? lw : &source_,
                                             &fifo_, &clock_, std::move(opts));
    thread_ = std::thread([this] { reflector_->Run(); });
  }
  void TearDown() override {
    if (reflector_) reflector_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  // Pops one key's deltas and returns "<type> <name>" of the newest.
  std::string PopOne() {
    std::string out;
    absl::Status st = fifo_.Pop([&](const Deltas& d, bool) {
      out = absl::StrCat(DeltaTypeName(d.back().type), " ",
                         d.back().object->name());
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  void WaitForReplaces(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return replaces_ >= n;
    };
    mu_.Await(absl::Condition(&enough));
  }

  FakeClock clock_;
  FakeSource source_{/*history_limit=*/100};
  DeltaFIFO fifo_{DeltaFIFO::Options{}};
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
  absl::Mutex mu_;
  int replaces_ ABSL_GUARDED_BY(mu_) = 0;
};

// What the stages a reflector began saw: per stage, the names added and
// the commit's item count and RV (-1 while not committed).
struct StageLog {
  struct Stage {
    std::vector<std::string> added;
    int committed_items = -1;
    std::string committed_rv;
  };
  absl::Mutex mu;
  std::vector<Stage> stages ABSL_GUARDED_BY(mu);
  bool accept = true;  // what Commit answers
  bool keeps = false;  // what KeepsItems answers
};

class RecordingStage final : public ListStage {
 public:
  RecordingStage(StageLog* log, size_t index) : log_(log), index_(index) {}
  absl::Status Add(const ObjectPtr& obj) override {
    absl::MutexLock lock(&log_->mu);
    log_->stages[index_].added.emplace_back(obj->name());
    return absl::OkStatus();
  }
  bool Commit(const std::vector<ObjectPtr>& items,
              absl::string_view resource_version) override {
    absl::MutexLock lock(&log_->mu);
    if (!log_->accept) return false;
    log_->stages[index_].committed_items = static_cast<int>(items.size());
    log_->stages[index_].committed_rv = std::string(resource_version);
    return true;
  }
  bool KeepsItems() const override { return log_->keeps; }
  size_t size() const override {
    absl::MutexLock lock(&log_->mu);
    return log_->stages[index_].added.size();
  }

 private:
  StageLog* const log_;
  const size_t index_;
};

inline std::function<std::unique_ptr<ListStage>()> Stages(StageLog* log) {
  return [log]() -> std::unique_ptr<ListStage> {
    absl::MutexLock lock(&log->mu);
    log->stages.emplace_back();
    return std::make_unique<RecordingStage>(log, log->stages.size() - 1);
  };
}

}  // namespace informer

#endif  // INFORMER_CACHE_REFLECTOR_TEST_UTIL_H_

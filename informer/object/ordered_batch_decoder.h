#ifndef INFORMER_OBJECT_ORDERED_BATCH_DECODER_H_
#define INFORMER_OBJECT_ORDERED_BATCH_DECODER_H_

// OrderedBatchDecoder<T>: decodes a sequence of texts (the items of a list
// body, the lines of a watch stream's initial events) on worker threads,
// and hands the results back in sequence order.
//
// Why: decoding a Kubernetes object and building it (simdjson, zstd
// compression of its JSON, faulting in fresh memory) is most of a client's
// CPU during an initial sync, while the thread that receives the bytes is
// mostly idle waiting for them. Texts are copied into batches (about
// `batch_bytes` of text each); a batch is the unit of work.
//
// Contract:
//   - Add/Flush/TakeNext/failed/StopWorkers are called from one thread, the
//     feeding thread. The workers are internal; `decode` runs on them and
//     on the feeding thread, concurrently: it must be thread-safe.
//   - Results keep the order the texts were added in: TakeNext returns the
//     batches in submission order, each with its items in order.
//   - A text that fails to decode ends its batch: the batch's `status` is
//     that error and `out` holds the items before it. Later batches are
//     still decoded (their results are the caller's to ignore).
//   - Workers start only once a second batch is submitted, so a sequence
//     of one batch never starts a thread. When more than max(1, threads)
//     batches wait, the feeding thread decodes one itself (the network
//     waits in the socket buffer meanwhile), which bounds the queue.
//   - The destructor (or StopWorkers) stops and joins the workers; batches
//     not decoded by then are dropped.

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace informer {

template <typename T>
class OrderedBatchDecoder {
 public:
  // Decodes the text of item `index` (0-based over the whole sequence).
  using DecodeFn =
      std::function<absl::StatusOr<T>(absl::string_view text, size_t index)>;

  struct Options {
    // Worker threads besides the feeding one (at least 1 is used).
    int threads = 1;
    // A batch is submitted once it holds this many bytes of text. Small
    // enough that its buffer comes from malloc's heap (below the mmap
    // threshold), where a freed buffer is reused warm instead of being
    // mapped and faulted in afresh.
    size_t batch_bytes = 64 << 10;
  };

  // A decoded batch: out[i] is item first_index + i. When status is not
  // OK, it is the error of item first_index + out.size().
  struct Batch {
    size_t first_index = 0;
    std::vector<T> out;
    absl::Status status;
  };

  OrderedBatchDecoder(Options options, DecodeFn decode)
      : options_(options), decode_(std::move(decode)) {}
  ~OrderedBatchDecoder() { StopWorkers(); }

  OrderedBatchDecoder(const OrderedBatchDecoder&) = delete;
  OrderedBatchDecoder& operator=(const OrderedBatchDecoder&) = delete;

  // Copies `text` as the next item; submits the batch once it is full.
  void Add(absl::string_view text) {
    if (current_ == nullptr) StartBatch();
    current_->text.append(text.data(), text.size());
    current_->ends.push_back(current_->text.size());
    ++next_index_;
    if (current_->text.size() >= options_.batch_bytes) Flush();
  }

  // Submits the batch being filled, if any (e.g. at the end of the input,
  // or before the caller needs every result so far).
  void Flush() ABSL_LOCKS_EXCLUDED(mu_) {
    if (current_ == nullptr) return;
    Slot* taken = nullptr;
    {
      absl::MutexLock lock(&mu_);
      order_.push_back(std::move(current_));
      pending_.push_back(order_.back().get());
      ++submitted_;
      if (workers_.empty() && submitted_ >= 2 && !stop_) {
        for (int i = 0; i < std::max(1, options_.threads); ++i) {
          workers_.emplace_back([this] { WorkerLoop(); });
        }
      }
      if (pending_.size() >
          static_cast<size_t>(std::max(1, options_.threads))) {
        taken = TakeLocked();
      }
    }
    if (taken != nullptr) DecodeTaken(taken);
  }

  // The oldest submitted batch not yet taken, once decoded. wait = false:
  // null when it is not decoded yet. wait = true: decodes queued batches
  // here too (oldest first) until it is. Null when none is submitted (a
  // batch being filled is not: Flush it first).
  std::unique_ptr<Batch> TakeNext(bool wait) ABSL_LOCKS_EXCLUDED(mu_) {
    std::unique_ptr<Batch> result;
    mu_.Lock();
    while (!order_.empty()) {
      Slot* const head = order_.front().get();
      if (head->done) {
        result = std::make_unique<Batch>(std::move(head->result));
        order_.pop_front();
        break;
      }
      if (!wait) break;
      Slot* const s = TakeLocked();
      if (s == nullptr) {
        // A worker is decoding it.
        mu_.Await(absl::Condition(&head->done));
        continue;
      }
      mu_.Unlock();
      DecodeTaken(s);
      mu_.Lock();
    }
    mu_.Unlock();
    return result;
  }

  // True once a decoded batch holds a bad item (it may not be the first
  // bad one in sequence order: TakeNext finds that).
  bool failed() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

  // Items added so far.
  size_t added() const { return next_index_; }

  // Batches submitted and not yet taken (decoded or not).
  size_t outstanding() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return order_.size();
  }

  void StopWorkers() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::thread> workers;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      workers = std::move(workers_);
    }
    for (std::thread& t : workers) t.join();
  }

 private:
  // A batch from Add until TakeNext: its texts, then its result. Between
  // being queued and done, only the thread decoding it touches it.
  struct Slot {
    std::string text;          // the items' texts, back to back
    std::vector<size_t> ends;  // end offset of each item in `text`
    Batch result;
    bool done = false;  // mu_
  };

  void StartBatch() ABSL_LOCKS_EXCLUDED(mu_) {
    current_ = std::make_unique<Slot>();
    current_->result.first_index = next_index_;
    {
      absl::MutexLock lock(&mu_);
      if (!spare_.empty()) {
        current_->text = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    // Room for a full batch plus the item that overflows it, without the
    // copies of geometric growth.
    current_->text.reserve(options_.batch_bytes + (16 << 10));
  }

  Slot* TakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pending_.empty()) return nullptr;
    Slot* s = pending_.front();
    pending_.pop_front();
    return s;
  }

  // Decodes a slot taken with TakeLocked (mu_ not held while decoding).
  void DecodeTaken(Slot* s) ABSL_LOCKS_EXCLUDED(mu_) {
    Batch& b = s->result;
    b.out.reserve(s->ends.size());
    size_t begin = 0;
    for (size_t i = 0; i < s->ends.size(); ++i) {
      absl::StatusOr<T> item =
          decode_(absl::string_view(s->text.data() + begin, s->ends[i] - begin),
                  b.first_index + i);
      if (!item.ok()) {
        b.status = item.status();
        break;
      }
      b.out.push_back(*std::move(item));
      begin = s->ends[i];
    }
    std::string text = std::move(s->text);
    text.clear();
    absl::MutexLock lock(&mu_);
    s->done = true;
    if (!b.status.ok()) failed_ = true;
    spare_.push_back(std::move(text));
  }

  bool WorkOrStop() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stop_ || !pending_.empty();
  }

  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      Slot* s = nullptr;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &OrderedBatchDecoder::WorkOrStop));
        if (stop_) return;
        s = TakeLocked();
      }
      DecodeTaken(s);
    }
  }

  const Options options_;
  const DecodeFn decode_;
  std::unique_ptr<Slot> current_;  // being filled by the feeding thread
  size_t next_index_ = 0;          // the feeding thread's

  absl::Mutex mu_;
  // Submitted and not yet taken, in order; pending_ are those of them no
  // thread has started decoding.
  std::deque<std::unique_ptr<Slot>> order_ ABSL_GUARDED_BY(mu_);
  std::deque<Slot*> pending_ ABSL_GUARDED_BY(mu_);
  size_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Text buffers of decoded batches, reused (already faulted in).
  std::vector<std::string> spare_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace informer

#endif  // INFORMER_OBJECT_ORDERED_BATCH_DECODER_H_

#ifndef INFORMER_CACHE_LIST_STAGE_H_
#define INFORMER_CACHE_LIST_STAGE_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "informer/cache/indexer.h"
#include "informer/object/object.h"

namespace informer {

// A list's items, staged while the list downloads and committed in one step
// once it is complete.
//
// Why: client-go's order puts nothing of a list into the DeltaFIFO, the
// indexer or a handler before the whole list is in, so that a list that
// fails half way leaves the cache as it was; and then Replace queues every
// item and the consumer pops them one by one into the indexer. For an
// initial list of tens of thousands of objects that serial tail (hashing
// every key into the FIFO, then every pop's insert and index update) is a
// fifth of the time to sync at the API server's serving rate. A stage does
// the indexer's work as the items arrive, into a cache nobody can see yet,
// and the commit publishes it at once: the same end state and the same
// notifications, in the same order, with nothing observable before the
// list is complete. A list that fails drops its stage.
//
// Thread-safety: one list's stage is used by one thread (the reflector's).
class ListStage {
 public:
  virtual ~ListStage() = default;
  // The list's next item, in list order, as it arrives. An error fails the
  // list with it.
  virtual absl::Status Add(const ObjectPtr& obj) = 0;
  // The list is complete, at `resource_version`; `items` are the ones
  // handed to Add, in order. Makes them the consumer's state in one step
  // and returns true, or returns false having changed nothing (the caller
  // then hands the list to the DeltaFIFO's Replace as usual).
  virtual bool Commit(const std::vector<ObjectPtr>& items,
                      absl::string_view resource_version) = 0;
  // True: the stage keeps what it needs of each item itself. The list's
  // items are then not collected (Commit's `items` is empty) and the
  // list's source lets each go once handed over; and a refused Commit
  // fails the list (there is nothing to Replace with).
  virtual bool KeepsItems() const { return false; }
  // Items handed to Add so far.
  virtual size_t size() const = 0;
};

// A ListStage that builds an Indexer with a target's index functions; its
// commit function publishes that Indexer (e.g. by Indexer::AdoptIfEmpty
// into an informer's empty cache, under the locks a pop would hold).
// A list that holds two objects with the same key is not committed (false):
// the FIFO's per-key Deltas then give handlers the add and the update that
// client-go would.
class IndexerListStage final : public ListStage {
 public:
  using CommitFn =
      std::function<bool(Indexer* staged, const std::vector<ObjectPtr>& items,
                         absl::string_view resource_version)>;

  IndexerListStage(const Indexers& indexers, CommitFn commit);

  absl::Status Add(const ObjectPtr& obj) override;
  bool Commit(const std::vector<ObjectPtr>& items,
              absl::string_view resource_version) override;

  size_t size() const override { return added_; }

  const Indexer& staged() const { return staged_; }

 private:
  Indexer staged_;
  CommitFn commit_;
  size_t added_ = 0;
  bool duplicate_key_ = false;
};

}  // namespace informer

#endif  // INFORMER_CACHE_LIST_STAGE_H_

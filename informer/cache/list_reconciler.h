#ifndef INFORMER_CACHE_LIST_RECONCILER_H_
#define INFORMER_CACHE_LIST_RECONCILER_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "informer/cache/list_stage.h"
#include "informer/cache/store.h"
#include "informer/object/object.h"

namespace informer {

// The one place where a list of the server's state now meets the cache.
// Every list into a populated cache goes through it, a LIST or the initial
// events of a WatchList alike: a relist (after a 410, an expired watch, an
// undecodable event), and the relist that brings a cache loaded from
// elsewhere (a snapshot) up to date.
//
// Why: client-go's Replace queues every listed object and its informer
// stores each one again, so a relist of N unchanged objects holds a second
// copy of the cache until the list is popped, replaces every cached object
// with an equal copy (re-indexing it), and leaves the process with the
// pages of both. Here an object the cache already holds as it is costs a
// hash lookup and nothing else.
//
// Contract:
//  - Add(obj), called with each item as it is decoded, in list order,
//    compares it with the cache's object under its key. Same uid and
//    resourceVersion (SameVersion): `obj` is dropped at once and the
//    cache's own object takes its place in the list, so the list never
//    holds a second copy of it, and the cache's object (and its index
//    entries) stays as it is. Otherwise (changed, new, another uid) `obj`
//    is kept. The cache is only read: nothing is visible before Commit.
//  - Commit hands the reconciled list (every listed object in list order,
//    each either the cache's own object or a new one) to the commit
//    function, which must apply it in one step or not at all (the
//    informer: DeltaFIFO::ReplaceReconciled, which turns only new,
//    changed and vanished objects into deltas: kReplaced for a changed or
//    new one, a tombstone with its last state for a vanished one, a
//    tombstone then kReplaced for a name that now has another uid, and
//    hands the unchanged ones to the informer, which by default tells its
//    handlers as client-go would: an update with the kept object as old
//    and new, delivered as a sync).
//  - All or nothing: a list that fails drops its reconciler and the cache
//    is as it was; a commit function that refuses fails the list (see
//    ListStage::KeepsItems), which is then retried.
//  - The cache may change while the list downloads (the informer still
//    pops a backlog queued before it): the commit function must not trust
//    the comparison alone. ReplaceReconciled does not: it treats an item as
//    unchanged only if it is still the store's object for its key with
//    nothing queued for the key, and otherwise queues it as Replace would
//    (a kept object is the listed state: same uid and resourceVersion).
//
// Thread-safety: one list's reconciler is used by one thread (the
// reflector's). Ownership: `cache` is not owned and must outlive it.
class ListReconciler final : public ListStage {
 public:
  // Applies the reconciled list at the list's resourceVersion; true if it
  // did, false having changed nothing.
  using CommitFn = std::function<bool(const std::vector<ObjectPtr>& reconciled,
                                      absl::string_view resource_version)>;

  // `expected_items`: about how many items the list will have (the
  // cache's size), to size the list once.
  ListReconciler(const KeyListerGetter* cache, size_t expected_items,
                 CommitFn commit);

  // The same version of one object: the same uid and the same non-empty
  // resourceVersion. The API server gives a changed object a new
  // resourceVersion, and a recreated one a new uid.
  static bool SameVersion(const Object& a, const Object& b);

  absl::Status Add(const ObjectPtr& obj) override;
  // `items` is ignored (empty: the reconciler keeps the list itself).
  bool Commit(const std::vector<ObjectPtr>& items,
              absl::string_view resource_version) override;
  bool KeepsItems() const override { return true; }
  size_t size() const override { return reconciled_.size(); }

  // Items dropped for the cache's own object so far.
  size_t kept() const { return kept_; }
  const std::vector<ObjectPtr>& reconciled() const { return reconciled_; }

 private:
  const KeyListerGetter* const cache_;
  CommitFn commit_;
  std::vector<ObjectPtr> reconciled_;
  size_t kept_ = 0;
};

}  // namespace informer

#endif  // INFORMER_CACHE_LIST_RECONCILER_H_

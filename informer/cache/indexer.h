#ifndef INFORMER_CACHE_INDEXER_H_
#define INFORMER_CACHE_INDEXER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/cache/index.h"
#include "informer/cache/store.h"
#include "informer/cache/thread_safe_store.h"
#include "informer/object/object.h"

namespace informer {

// Indexer is the informer's local cache: a ThreadSafeStore keyed by each
// object's own key (Object::Key(): "namespace/name", or "name" for
// cluster-scoped objects), with named secondary indexes (client-go's
// cache.Indexer as returned by NewIndexer(MetaNamespaceKeyFunc, indexers)).
//
// The informer's delta handler is its only writer in practice (Add/Update on
// Added/Updated/Sync/Replaced deltas, Delete on Deleted); any number of
// readers (listers, the gRPC service, DeltaFIFO through KeyListerGetter) may
// query it concurrently.
//
// Thread-safety: every method may be called from any thread; readers never
// block each other. Objects are shared (ObjectPtr), never copied.
class Indexer final : public KeyListerGetter {
 public:
  Indexer() = default;
  // Registers `indexers` up front (more can be added later with AddIndexers).
  // Null index functions are a programming error (CHECK).
  explicit Indexer(const Indexers& indexers);

  Indexer(const Indexer&) = delete;
  Indexer& operator=(const Indexer&) = delete;

  // Inserts or replaces `obj` under its key. `obj` must be non-null.
  void Add(ObjectPtr obj);
  void Update(ObjectPtr obj);
  // Removes the object with `obj`'s key (the stored version need not equal
  // `obj`). Absent keys are ignored.
  void Delete(const Object& obj);
  // Removes by key, for callers that only know the key (e.g. a tombstone for
  // an object whose final state was never observed).
  void DeleteByKey(absl::string_view key);

  std::vector<ObjectPtr> List() const;
  std::vector<std::string> ListKeys() const override;
  void Reserve(size_t n) override;
  // The stored object with `obj`'s key; null when absent.
  ObjectPtr Get(const Object& obj) const;
  ObjectPtr GetByKey(absl::string_view key) const override;
  size_t Size() const;

  // Atomically replaces the whole contents with `objects` (a relist) and
  // rebuilds every index. If two objects share a key the later one wins.
  // `resource_version` is accepted for parity with client-go and ignored.
  void Replace(std::vector<ObjectPtr> objects,
               absl::string_view resource_version);

  // Takes `staged`'s contents and indexes if this indexer is empty (see
  // ThreadSafeStore::AdoptIfEmpty); false, nothing changed, otherwise.
  bool AdoptIfEmpty(Indexer* staged) {
    return store_.AdoptIfEmpty(&staged->store_);
  }

  // Index queries; see ThreadSafeStore. Unknown index names -> NotFound.
  absl::StatusOr<std::vector<ObjectPtr>> Index(absl::string_view index_name,
                                               const Object& obj) const;
  absl::StatusOr<std::vector<ObjectPtr>> ByIndex(absl::string_view index_name,
                                                 absl::string_view value) const;
  absl::StatusOr<std::vector<std::string>> IndexKeys(
      absl::string_view index_name, absl::string_view value) const;
  absl::StatusOr<std::vector<std::string>> ListIndexFuncValues(
      absl::string_view index_name) const;
  Indexers GetIndexers() const;
  // Adds indexes, indexing existing objects; AlreadyExists on a name clash.
  absl::Status AddIndexers(const Indexers& new_indexers);

 private:
  ThreadSafeStore store_;
};

}  // namespace informer

#endif  // INFORMER_CACHE_INDEXER_H_

#ifndef INFORMER_CACHE_THREAD_SAFE_STORE_H_
#define INFORMER_CACHE_THREAD_SAFE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "informer/cache/index.h"
#include "informer/object/object.h"

namespace informer {

// A key of ThreadSafeStore's map. Its text is normally the stored object's
// own Object::Key() (the Indexer stores every object so), and then it is a
// view of that string rather than a copy: a cache of N objects would
// otherwise hold every key twice. A key that differs from its object's
// Key() (any string is allowed) is a copy owned here.
//
// The view is re-pointed (Bind) whenever the object stored under the key
// changes, while the previous object is still alive. Not thread-safe on its
// own: the store's lock covers it.
//
// One word: a pointer to the string (the object's key, or the owned copy),
// its lowest bit set when the copy is owned. Move-only.
class StoreKey {
 public:
  // An owned copy of `key` (bound to an object by the store later).
  // Explicit, so that lookups by string never convert to a StoreKey.
  explicit StoreKey(absl::string_view key)
      : bits_(OwnedBits(new std::string(key))) {}
  explicit StoreKey(const char* key) : StoreKey(absl::string_view(key)) {}
  explicit StoreKey(const std::string& key)
      : StoreKey(absl::string_view(key)) {}
  // `obj`'s own key, shared.
  explicit StoreKey(const Object& obj) : bits_(SharedBits(&obj.Key())) {}

  StoreKey(StoreKey&& other) noexcept : bits_(other.bits_) { other.bits_ = 0; }
  StoreKey& operator=(StoreKey&& other) noexcept {
    if (this != &other) {
      Release();
      bits_ = other.bits_;
      other.bits_ = 0;
    }
    return *this;
  }
  StoreKey(const StoreKey&) = delete;
  StoreKey& operator=(const StoreKey&) = delete;
  ~StoreKey() { Release(); }

  absl::string_view view() const {
    return bits_ == 0 ? absl::string_view() : absl::string_view(*str());
  }
  // Makes the key refer to `obj`'s Key() if it has the same text (freeing
  // an owned copy), else to an owned copy. The object the view referred to
  // must still be alive during the call.
  void Bind(const Object& obj) const;

 private:
  static uintptr_t SharedBits(const std::string* s) {
    return reinterpret_cast<uintptr_t>(s);
  }
  static uintptr_t OwnedBits(const std::string* s) {
    return reinterpret_cast<uintptr_t>(s) | 1;
  }
  const std::string* str() const {
    return reinterpret_cast<const std::string*>(bits_ & ~uintptr_t{1});
  }
  bool owned() const { return (bits_ & 1) != 0; }
  void Release() const {
    if (owned()) delete str();
    bits_ = 0;
  }

  mutable uintptr_t bits_;
};

struct StoreKeyHash {
  using is_transparent = void;
  size_t operator()(absl::string_view key) const {
    return absl::Hash<absl::string_view>()(key);
  }
  size_t operator()(const StoreKey& key) const { return (*this)(key.view()); }
};

struct StoreKeyEq {
  using is_transparent = void;
  static absl::string_view View(absl::string_view key) { return key; }
  static absl::string_view View(const StoreKey& key) { return key.view(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return View(a) == View(b);
  }
};

// Key -> object, the currency of ThreadSafeStore::Replace. A node map because
// the store keeps pointers to its entries (see ThreadSafeStore); Replace
// adopts the map as is (binding each key to its object), so build the new
// contents in one of these.
using ItemMap =
    absl::node_hash_map<StoreKey, ObjectPtr, StoreKeyHash, StoreKeyEq>;

// ThreadSafeStore is a string-keyed map of objects with any number of named
// secondary indexes (client-go's ThreadSafeStore / threadSafeMap).
//
// Each index has an IndexFunc mapping an object to zero or more values; the
// index maps each value to the set of keys whose object yields it. Writes keep
// every index exact: an update un-indexes the old object's values and indexes
// the new one's, and a value whose key set becomes empty is erased (no leaked
// empty buckets for short-lived values such as pod IPs).
//
// Thread-safety: every method may be called from any thread. Reads take a
// shared lock and never block each other; writes take an exclusive lock and
// run the index functions under it (so index functions must not call back
// into the store).
//
// Ownership: objects are shared, never copied: the store holds one ObjectPtr
// per key and hands out further references. A key equal to its object's
// Key() is not stored at all (see StoreKey); index buckets point at the map
// entries rather than copying keys.
//
// Unknown index names are reported as NotFound by every index query.
class ThreadSafeStore {
 public:
  ThreadSafeStore() = default;
  explicit ThreadSafeStore(const Indexers& indexers);

  ThreadSafeStore(const ThreadSafeStore&) = delete;
  ThreadSafeStore& operator=(const ThreadSafeStore&) = delete;

  // Inserts or replaces the object under `key`. Add and Update are the same
  // operation (as in client-go); both exist for readability at call sites.
  void Add(absl::string_view key, ObjectPtr obj) ABSL_LOCKS_EXCLUDED(mu_);
  void Update(absl::string_view key, ObjectPtr obj) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes `key` and its index entries. Absent keys are ignored.
  void Delete(absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_);

  // Null when absent.
  ObjectPtr Get(absl::string_view key) const ABSL_LOCKS_EXCLUDED(mu_);
  // All objects / keys, in no particular order.
  std::vector<ObjectPtr> List() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> ListKeys() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t Size() const ABSL_LOCKS_EXCLUDED(mu_);
  // Sizes the key map for `n` keys in all (growing it once rather than
  // doubling it through every size on the way; never shrinks it).
  void Reserve(size_t n) ABSL_LOCKS_EXCLUDED(mu_);

  // Atomically swaps in `items` as the whole contents and rebuilds every
  // index from scratch. `resource_version` is accepted for parity with
  // client-go and ignored.
  void Replace(ItemMap items, absl::string_view resource_version)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Takes `staged`'s whole contents, indexes included, if this store is
  // empty, and returns true; `staged` is left empty. Returns false and
  // changes nothing when this store holds anything. An index this store has
  // and `staged` lacks (added while `staged` was being filled) is built from
  // the adopted items; one only `staged` has is dropped. Entry addresses
  // survive (node_hash_map nodes do not move), so this is O(indexes), not
  // O(items), for a `staged` built with the same index functions: the way
  // to fill a cache out of sight and publish it in one step. `staged` must
  // not be this store and must not be used concurrently.
  bool AdoptIfEmpty(ThreadSafeStore* staged) ABSL_LOCKS_EXCLUDED(mu_);

  // Objects that share at least one value of index `index_name` with `obj`
  // (which need not be in the store). Each object appears once.
  absl::StatusOr<std::vector<ObjectPtr>> Index(absl::string_view index_name,
                                               const Object& obj) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Objects / keys indexed under `value` by index `index_name`; empty when
  // no object has that value.
  absl::StatusOr<std::vector<ObjectPtr>> ByIndex(absl::string_view index_name,
                                                 absl::string_view value) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> IndexKeys(
      absl::string_view index_name, absl::string_view value) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every value index `index_name` currently holds at least one key under.
  // (client-go returns an empty list for an unknown index; we report
  // NotFound like the other queries so that a typo is not silent.)
  absl::StatusOr<std::vector<std::string>> ListIndexFuncValues(
      absl::string_view index_name) const ABSL_LOCKS_EXCLUDED(mu_);

  // A copy of the registered index functions.
  Indexers GetIndexers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Registers more indexes and indexes the existing items under them, all
  // under the writer lock so no reader sees a half-built index. Fails with
  // AlreadyExists, adding nothing, if any name is already registered.
  absl::Status AddIndexers(const Indexers& new_indexers)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Index buckets hold pointers to ItemMap entries: 8 bytes each, hashed and
  // compared without touching the key text, and they lead straight to the
  // object. node_hash_map keeps the entries' addresses stable for as long as
  // the key is present.
  using Entry = ItemMap::value_type;
  using KeySet = absl::flat_hash_set<const Entry*>;
  // Index value -> entries indexed under it. Never holds an empty set.
  using ValueIndex = absl::flat_hash_map<std::string, KeySet>;
  struct NamedIndex {
    IndexFunc func;
    ValueIndex index;
  };

  // Moves `entry`'s index entries from the values of `old_obj` to those of
  // `new_obj` in one index; either object may be null (add / delete).
  static void UpdateIndex(NamedIndex& named, const Entry* entry,
                          const Object* old_obj, const Object* new_obj);
  void UpdateIndicesLocked(const Entry* entry, const Object* old_obj,
                           const Object* new_obj)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const NamedIndex*> FindIndexLocked(
      absl::string_view index_name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  using IndexMap = absl::flat_hash_map<std::string, NamedIndex>;

  // Indexes every entry of `items` into the (empty) indexes of `indices`.
  static void IndexAll(const ItemMap& items, IndexMap& indices);

  mutable absl::Mutex mu_;
  ItemMap items_ ABSL_GUARDED_BY(mu_);
  IndexMap indices_ ABSL_GUARDED_BY(mu_);
  // Bumped whenever the set of index functions changes, so that Replace can
  // tell whether indexes it built outside the lock are still complete.
  uint64_t indexers_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace informer

#endif  // INFORMER_CACHE_THREAD_SAFE_STORE_H_

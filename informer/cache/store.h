#ifndef INFORMER_CACHE_STORE_H_
#define INFORMER_CACHE_STORE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "informer/object/object.h"

namespace informer {

// What a DeltaFIFO needs of the cache it feeds (client-go's
// KeyListerGetter): the keys it holds and the object under a key, so that
// Replace can emit tombstones for vanished keys and Resync can re-deliver.
// Implementations are thread-safe.
class KeyListerGetter {
 public:
  virtual ~KeyListerGetter() = default;
  virtual std::vector<std::string> ListKeys() const = 0;
  // Null when absent.
  virtual ObjectPtr GetByKey(absl::string_view key) const = 0;
  // A hint: about `n` keys are coming (an initial list was queued), so the
  // cache may size its tables once instead of growing them key by key.
  virtual void Reserve(size_t /*n*/) {}
};

}  // namespace informer

#endif  // INFORMER_CACHE_STORE_H_

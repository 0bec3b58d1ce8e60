#ifndef INFORMER_CACHE_INDEX_H_
#define INFORMER_CACHE_INDEX_H_

#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"

namespace informer {

// The values an object is indexed under by one index function (client-go's
// IndexFunc result). Most index functions yield exactly one value, so one is
// kept inline to spare an allocation per call. Duplicates are allowed and
// count once; an empty result means "indexed under nothing".
using IndexValues = absl::InlinedVector<std::string, 1>;

// Computes the values an object is indexed under (client-go's IndexFunc).
//
// Contract: deterministic (the same object always yields the same values,
// because the store recomputes an object's old values to un-index it),
// infallible, thread-safe, and must not call back into the store: stores call
// it while holding their writer lock.
using IndexFunc = std::function<IndexValues(const Object&)>;

// Index name -> index function (client-go's Indexers).
using Indexers = absl::flat_hash_map<std::string, IndexFunc>;

// The conventional name of the namespace index (client-go's NamespaceIndex).
inline constexpr absl::string_view kNamespaceIndex = "namespace";

// Indexes an object under its namespace (client-go's MetaNamespaceIndexFunc).
// As in client-go, a cluster-scoped object (empty namespace) is indexed under
// "", so ByIndex(kNamespaceIndex, "") lists the cluster-scoped objects and
// ListIndexFuncValues(kNamespaceIndex) includes "" when there are any.
IndexValues MetaNamespaceIndexFunc(const Object& obj);

// Indexes an object under the value of its label `key`. Objects without the
// label are indexed under nothing; a label present with an empty value is
// indexed under "" (the selector `key=` matches it).
IndexFunc LabelIndexFunc(absl::string_view key);

// Indexes an object under the values found at a dotted field path into its
// JSON (see Object::FieldValues), e.g. "spec.nodeName". Paths through arrays
// yield one value per element. A missing path indexes under nothing.
IndexFunc FieldIndexFunc(absl::string_view path);

// Indexes an object under the UID of each of its owner references, so that a
// controller can find the objects it owns ("which pods does ReplicaSet X own").
IndexValues OwnerUidIndexFunc(const Object& obj);

// The conventional index name for the owner-UID index.
inline constexpr absl::string_view kOwnerUidIndex = "ownerUid";

// Conventional index names for label and field indexes, so that independent
// callers (e.g. two gRPC clients) asking for the same index agree on its name:
// "label:<key>" and "field:<path>".
std::string LabelIndexName(absl::string_view key);
std::string FieldIndexName(absl::string_view path);

}  // namespace informer

#endif  // INFORMER_CACHE_INDEX_H_

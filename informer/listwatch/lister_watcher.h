#ifndef INFORMER_LISTWATCH_LISTER_WATCHER_H_
#define INFORMER_LISTWATCH_LISTER_WATCHER_H_

// The seam between a reflector and whatever serves a resource: the real API
// client (informer/client), the API server emulator, or an in-process fake in
// tests (client-go's cache.ListerWatcher).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/object/wire.h"

namespace informer {

struct ListOptions {
  std::string resource_version;        // "" = most recent (quorum read)
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
  int64_t limit = 0;                   // 0 = no paging
  std::string continue_token;
  std::string label_selector;
  std::string field_selector;
  // Not a query parameter: what ListWithItems keeps. false = its result
  // holds none of the items (only the list's metadata): each went to
  // on_item only and is let go once handed over, so that a caller that
  // keeps few of them (a relist compared with a cache) never holds the
  // whole list.
  bool keep_items = true;
};

struct WatchOptions {
  std::string resource_version;
  std::string resource_version_match;
  bool allow_watch_bookmarks = true;
  bool send_initial_events = false;
  absl::Duration timeout = absl::ZeroDuration();  // 0 = server default
  std::string label_selector;
  std::string field_selector;
};

// The payload that marks a watch error as "an event arrived but could not
// be decoded" (see UndecodableEventError).
inline constexpr char kUndecodableEventPayload[] =
    "type.googleapis.com/informer.UndecodableWatchEvent";

// The status a WatchStream returns for an event it received but cannot
// decode. Re-watching from the same resourceVersion would replay the same
// event, so a reflector relists instead. Code DATA_LOSS.
inline absl::Status UndecodableEventError(absl::string_view message) {
  absl::Status s = absl::DataLossError(message);
  s.SetPayload(kUndecodableEventPayload, absl::Cord("1"));
  return s;
}
inline bool IsUndecodableEvent(const absl::Status& s) {
  return s.GetPayload(kUndecodableEventPayload).has_value();
}

// A live watch. Next() is called from one thread; Stop() from any thread,
// any number of times, and makes a blocked Next() return Cancelled.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // OK: *event holds the next event. OutOfRange: the server ended the
  // stream normally (e.g. timeoutSeconds). Cancelled: Stop() was called.
  // IsUndecodableEvent: an event could not be decoded. Anything else: the
  // stream broke (its message says how).
  virtual absl::Status Next(WatchEvent* event) = 0;
  virtual void Stop() = 0;
};

// Thread-safe: List and Watch may be called concurrently.
class ListerWatcher {
 public:
  virtual ~ListerWatcher() = default;
  // Errors carry the API server's meaning in their code: e.g. a 410 Expired
  // is FAILED_PRECONDITION whose message starts with "410" (see
  // informer/object/api_error.h).
  virtual absl::StatusOr<ObjectList> List(const ListOptions& options) = 0;
  // List, also handing every item to `on_item`, in list order, as soon as
  // it is decoded: with a source that decodes while the response arrives,
  // during the download, so that a caller can build from the items while
  // the rest is on its way. The result holds the items too. An error from
  // on_item fails the list with that error (the transfer is abandoned).
  // on_item runs on the calling thread. Without options.keep_items the
  // result holds no items. This default calls List and then hands over its
  // items; sources that stream override it.
  using ItemFn = std::function<absl::Status(const ObjectPtr& item)>;
  virtual absl::StatusOr<ObjectList> ListWithItems(const ListOptions& options,
                                                   const ItemFn& on_item) {
    absl::StatusOr<ObjectList> list = List(options);
    if (!list.ok()) return list;
    for (const ObjectPtr& item : list->items) {
      absl::Status st = on_item(item);
      if (!st.ok()) return st;
    }
    if (!options.keep_items) list->items.clear();
    return list;
  }
  virtual absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const WatchOptions& options) = 0;
  // Response body bytes received so far by List and Watch (for metrics);
  // 0 for sources that do not count, e.g. in-process fakes.
  virtual uint64_t BytesReceived() const { return 0; }
};

}  // namespace informer

#endif  // INFORMER_LISTWATCH_LISTER_WATCHER_H_

#include "informer/cache/testing/fake_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "informer/object/api_error.h"

namespace informer {

// One open watch: a queue of events the source pushes and a terminal status.
class FakeSource::Stream final : public WatchStream {
 public:
  explicit Stream(FakeSource* source) : source_(source) {}
  ~Stream() override { Stop(); }

  absl::Status Next(WatchEvent* event) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Stream::ReadyLocked));
    if (!events_.empty()) {
      *event = std::move(events_.front());
      events_.pop_front();
      return absl::OkStatus();
    }
    return end_;
  }

  void Stop() override {
    bool unregister = false;
    {
      absl::MutexLock lock(&mu_);
      if (!stopped_) {
        stopped_ = true;
        unregister = true;
        events_.clear();
        if (end_.ok()) end_ = absl::CancelledError("watch stopped");
      }
    }
    if (unregister) source_->Unregister(this);
  }

  // Called by the source with its mutex held.
  void Push(WatchEvent event) {
    absl::MutexLock lock(&mu_);
    if (!end_.ok()) return;
    events_.push_back(std::move(event));
  }
  void End(absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (end_.ok()) end_ = std::move(status);
  }

 private:
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !events_.empty() || !end_.ok();
  }

  FakeSource* const source_;
  absl::Mutex mu_;
  std::deque<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);  // OK while open
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

FakeSource::FakeSource(size_t history_limit)
    : history_limit_(std::max<size_t>(history_limit, 1)) {}

FakeSource::~FakeSource() {
  absl::MutexLock lock(&mu_);
  for (Stream* s : streams_) s->End(absl::CancelledError("source destroyed"));
}

absl::StatusOr<ObjectPtr> FakeSource::Add(absl::string_view ns,
                                          absl::string_view name, Labels labels,
                                          absl::string_view node_name) {
  absl::MutexLock lock(&mu_);
  return MutateLocked(WatchEventType::kAdded, ns, name, labels, node_name);
}

absl::StatusOr<ObjectPtr> FakeSource::Modify(absl::string_view ns,
                                             absl::string_view name,
                                             Labels labels,
                                             absl::string_view node_name) {
  absl::MutexLock lock(&mu_);
  return MutateLocked(WatchEventType::kModified, ns, name, labels, node_name);
}

absl::StatusOr<ObjectPtr> FakeSource::Delete(absl::string_view ns,
                                             absl::string_view name) {
  absl::MutexLock lock(&mu_);
  return MutateLocked(WatchEventType::kDeleted, ns, name, {}, "");
}

absl::StatusOr<ObjectPtr> FakeSource::MutateLocked(
    WatchEventType type, absl::string_view ns, absl::string_view name,
    const Labels& labels, absl::string_view node_name) {
  const std::string key = MetaNamespaceKey(ns, name);
  auto it = objects_.find(key);
  if (type == WatchEventType::kAdded && it != objects_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(key, " already exists"));
  }
  if (type != WatchEventType::kAdded && it == objects_.end()) {
    return absl::NotFoundError(absl::StrCat(key, " not found"));
  }
  const int64_t rv = ++rv_;
  cache_rv_ = rv;
  ObjectPtr obj;
  if (type == WatchEventType::kDeleted) {
    // The API server reports a delete with the object's final state at a new
    // resourceVersion.
    const Object& last = *it->second;
    ObjectBuilder b;
    b.SetApiVersion("v1")
        .SetKind("Pod")
        .SetNamespace(last.namespace_())
        .SetName(last.name())
        .SetUid(last.uid())
        .SetResourceVersion(absl::StrCat(rv));
    for (const auto& [k, v] : last.labels()) b.AddLabel(k, v);
    obj = b.Build();
    objects_.erase(it);
  } else {
    const std::string uid = type == WatchEventType::kAdded
                                ? absl::StrCat("uid-", ++uid_seq_)
                                : std::string(it->second->uid());
    ObjectBuilder b;
    b.SetApiVersion("v1")
        .SetKind("Pod")
        .SetNamespace(ns)
        .SetName(name)
        .SetUid(uid)
        .SetResourceVersion(absl::StrCat(rv));
    for (const auto& [k, v] : labels) b.AddLabel(k, v);
    if (!node_name.empty()) {
      b.SetJson(absl::StrCat(
          R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
          R"(","namespace":")", ns, R"(","uid":")", uid,
          R"(","resourceVersion":")", rv, R"(","labels":{)",
          absl::StrJoin(labels, ",",
                        [](std::string* out, const auto& kv) {
                          absl::StrAppend(out, "\"", kv.first, "\":\"",
                                          kv.second, "\"");
                        }),
          R"(}},"spec":{"nodeName":")", node_name, R"("}})"));
    }
    obj = b.Build();
    objects_[key] = obj;
  }
  WatchEvent event;
  event.type = type;
  event.object = obj;
  event.resource_version = absl::StrCat(rv);
  history_.push_back(HistoryEntry{rv, event});
  while (history_.size() > history_limit_) {
    history_floor_ = history_.front().rv;
    history_.pop_front();
  }
  BroadcastLocked(event);
  return obj;
}

void FakeSource::BroadcastLocked(const WatchEvent& event) {
  for (Stream* s : streams_) s->Push(event);
}

std::map<std::string, ObjectPtr> FakeSource::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return objects_;
}

std::string FakeSource::CurrentResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat(rv_);
}

void FakeSource::CloseWatches() {
  absl::MutexLock lock(&mu_);
  for (Stream* s : streams_) s->End(absl::OutOfRangeError("watch closed"));
}

void FakeSource::BreakWatches(absl::Status error) {
  absl::MutexLock lock(&mu_);
  for (Stream* s : streams_) s->End(error);
}

void FakeSource::CompactHistory() {
  absl::MutexLock lock(&mu_);
  history_.clear();
  history_floor_ = rv_;
}

void FakeSource::FailLists(int n, absl::Status error) {
  absl::MutexLock lock(&mu_);
  fail_lists_ = n;
  list_error_ = std::move(error);
}

void FakeSource::FailWatches(int n, absl::Status error) {
  absl::MutexLock lock(&mu_);
  fail_watches_ = n;
  watch_error_ = std::move(error);
}

void FakeSource::SetWatchListSupported(bool supported) {
  absl::MutexLock lock(&mu_);
  watch_list_supported_ = supported;
}

void FakeSource::SendBookmark() {
  absl::MutexLock lock(&mu_);
  WatchEvent event;
  event.type = WatchEventType::kBookmark;
  event.resource_version = absl::StrCat(cache_rv_);
  BroadcastLocked(event);
}

void FakeSource::WriteElsewhere() {
  absl::MutexLock lock(&mu_);
  ++rv_;
}

void FakeSource::LagWatchCache(int64_t rv) {
  absl::MutexLock lock(&mu_);
  cache_rv_ = rv;
}

int64_t FakeSource::list_calls() const {
  absl::MutexLock lock(&mu_);
  return list_calls_;
}

int64_t FakeSource::watch_calls() const {
  absl::MutexLock lock(&mu_);
  return watch_calls_;
}

int64_t FakeSource::watch_list_calls() const {
  absl::MutexLock lock(&mu_);
  return watch_list_calls_;
}

int FakeSource::open_watches() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

void FakeSource::WaitForWatches(int n) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(streams_.size()) >= n;
  };
  mu_.Await(absl::Condition(&enough));
}

namespace {
absl::Status Expired(absl::string_view what) {
  ApiStatus st;
  st.code = 410;
  st.reason = "Expired";
  st.message = std::string(what);
  return StatusFromApiStatus(st, "GET", "/fake");
}
}  // namespace

absl::StatusOr<ObjectList> FakeSource::List(const ListOptions& options) {
  absl::MutexLock lock(&mu_);
  ++list_calls_;
  if (fail_lists_ > 0) {
    --fail_lists_;
    return list_error_;
  }
  // One field selector is served, as every API server does for every
  // resource: metadata.name=NAME (an informer's probe of the current RV).
  absl::string_view only_name = options.field_selector;
  if (!options.label_selector.empty() ||
      (!only_name.empty() &&
       !absl::ConsumePrefix(&only_name, "metadata.name="))) {
    return absl::InvalidArgumentError(
        "FakeSource does not support label or field selectors");
  }
  ObjectList out;
  out.resource_version = absl::StrCat(rv_);
  if (options.continue_token.empty() && options.resource_version == "0") {
    out.resource_version = absl::StrCat(cache_rv_);
  } else if (options.continue_token.empty()) {
    // A consistent read, or one not older than an RV: the cache catches up
    // first (no client is ever told an RV its cache has not reached).
    cache_rv_ = rv_;
  }
  auto it = objects_.begin();
  if (!options.continue_token.empty()) {
    // "<rv>/<last key>": pages continue from the current state after that
    // key; a token older than the history is expired like etcd's.
    std::pair<std::string, std::string> parts =
        absl::StrSplit(options.continue_token, absl::MaxSplits('|', 1));
    int64_t token_rv = 0;
    if (!absl::SimpleAtoi(parts.first, &token_rv)) {
      return absl::InvalidArgumentError("malformed continue token");
    }
    if (token_rv < history_floor_) {
      return Expired(
          "The provided continue parameter is too old to display a "
          "consistent list result.");
    }
    it = objects_.upper_bound(parts.second);
  }
  for (; it != objects_.end(); ++it) {
    if (options.limit > 0 &&
        static_cast<int64_t>(out.items.size()) >= options.limit) {
      out.continue_token = absl::StrCat(rv_, "|", std::prev(it)->first);
      out.remaining_item_count =
          static_cast<int64_t>(std::distance(it, objects_.end()));
      break;
    }
    if (!options.field_selector.empty() && it->second->name() != only_name) {
      continue;
    }
    out.items.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<WatchStream>> FakeSource::Watch(
    const WatchOptions& options) {
  absl::MutexLock lock(&mu_);
  ++watch_calls_;
  if (options.send_initial_events) ++watch_list_calls_;
  if (fail_watches_ > 0) {
    --fail_watches_;
    return watch_error_;
  }
  if (options.send_initial_events && watch_list_supported_) {
    auto stream = std::make_unique<Stream>(this);
    for (const auto& [key, obj] : objects_) {
      WatchEvent ev;
      ev.type = WatchEventType::kAdded;
      ev.object = obj;
      ev.resource_version = std::string(obj->resource_version());
      stream->Push(std::move(ev));
    }
    WatchEvent end;
    end.type = WatchEventType::kBookmark;
    end.resource_version = absl::StrCat(rv_);
    end.initial_events_end = true;
    stream->Push(std::move(end));
    streams_.push_back(stream.get());
    return std::unique_ptr<WatchStream>(std::move(stream));
  }
  if (options.send_initial_events) {
    // What a v1.24 API server answers (422): callers fall back to list+watch.
    ApiStatus st;
    st.code = 422;
    st.reason = "Invalid";
    st.message =
        "sendInitialEvents is forbidden for watch unless the "
        "WatchList feature gate is enabled";
    return StatusFromApiStatus(st, "GET", "/fake");
  }
  auto stream = std::make_unique<Stream>(this);
  const std::string& from = options.resource_version;
  int64_t start = 0;
  if (from.empty() || from == "0") {
    // Like the API server: the current state as ADDED events, then live.
    for (const auto& [key, obj] : objects_) {
      WatchEvent ev;
      ev.type = WatchEventType::kAdded;
      ev.object = obj;
      ev.resource_version = std::string(obj->resource_version());
      stream->Push(std::move(ev));
    }
  } else if (!absl::SimpleAtoi(from, &start)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed resourceVersion \"", from, "\""));
  } else if (start < history_floor_) {
    WatchEvent ev;
    ev.type = WatchEventType::kError;
    ev.status.code = 410;
    ev.status.reason = "Expired";
    ev.status.message = absl::StrCat("too old resource version: ", start, " (",
                                     history_floor_, ")");
    stream->Push(std::move(ev));
    stream->End(absl::OutOfRangeError("watch closed"));
    return std::unique_ptr<WatchStream>(std::move(stream));
  } else {
    for (const HistoryEntry& h : history_) {
      if (h.rv > start) stream->Push(h.event);
    }
  }
  streams_.push_back(stream.get());
  return std::unique_ptr<WatchStream>(std::move(stream));
}

void FakeSource::Unregister(Stream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream),
                 streams_.end());
}

}  // namespace informer

#include "informer/record/event_correlator.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace informer {
namespace {

constexpr char kCombinedPrefix[] = "(combined from similar events): ";

// A fixed-capacity map that evicts the least recently used key.
template <typename V>
class LruCache {
 public:
  explicit LruCache(size_t capacity)
      : capacity_(std::max<size_t>(1, capacity)) {}

  // Returns the value for `key` (marking it recently used), or null.
  V* Get(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  void Put(const std::string& key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  size_t size() const { return order_.size(); }

 private:
  using Entry = std::pair<std::string, V>;
  const size_t capacity_;
  std::list<Entry> order_;  // most recent first
  absl::flat_hash_map<std::string, typename std::list<Entry>::iterator> index_;
};

struct AggregateRecord {
  absl::flat_hash_set<std::string> messages;
  absl::Time last_timestamp;
};

struct ObservedEvent {
  int32_t count = 0;
  absl::Time first_timestamp;
  std::string name;
  std::string resource_version;
};

struct TokenBucket {
  double tokens = 0;
  absl::Time last;
};

// Keys are joined with a byte that cannot appear in Kubernetes names,
// reasons or types, so distinct field tuples never share a key.
constexpr char kSep[] = "\x1f";

std::string SpamKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return absl::StrJoin({e.source_component, e.source_host, o.kind, o.namespace_,
                        o.name, o.uid, o.api_version},
                       kSep);
}

std::string AggregateKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return absl::StrJoin({e.source_component, e.source_host, o.kind, o.namespace_,
                        o.name, o.uid, o.api_version, e.type, e.reason,
                        e.reporting_component, e.reporting_instance},
                       kSep);
}

std::string EventKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return absl::StrJoin(
      {e.source_component, e.source_host, o.kind, o.namespace_, o.name,
       o.field_path, o.uid, o.api_version, e.type, e.reason,
       e.reporting_component, e.reporting_instance, e.message},
      kSep);
}

std::string PatchJson(const Event& e) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("count");
  w.Int(e.count);
  w.Key("lastTimestamp");
  std::string ts = FormatKubeTime(e.last_timestamp);
  w.String(ts.c_str(), ts.size());
  w.Key("message");
  w.String(e.message.c_str(), e.message.size());
  w.EndObject();
  return buf.GetString();
}

void WriteField(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key,
                const std::string& value, bool omit_empty = true) {
  if (omit_empty && value.empty()) return;
  w.Key(key);
  w.String(value.c_str(), value.size());
}

std::string Str(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

const rapidjson::Value* Obj(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

absl::Time ParseKubeTime(const std::string& s) {
  absl::Time t;
  std::string err;
  if (s.empty() || !absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
    return absl::UnixEpoch();
  }
  return t;
}

}  // namespace

std::string FormatKubeTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string UniqueEventName(absl::string_view object_name, absl::Time now) {
  static std::atomic<int64_t> last{0};
  int64_t want = absl::ToUnixNanos(now);
  int64_t prev = last.load();
  int64_t next;
  do {
    next = std::max(want, prev + 1);
  } while (!last.compare_exchange_weak(prev, next));
  return absl::StrFormat("%s.%x", object_name, static_cast<uint64_t>(next));
}

std::string EventToJson(const Event& e) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  WriteField(w, "kind", "Event");
  WriteField(w, "apiVersion", "v1");
  w.Key("metadata");
  w.StartObject();
  WriteField(w, "name", e.name);
  WriteField(w, "namespace", e.namespace_);
  WriteField(w, "resourceVersion", e.resource_version);
  if (!e.annotations.empty()) {
    w.Key("annotations");
    w.StartObject();
    for (const auto& kv : e.annotations)
      WriteField(w, kv.first.c_str(), kv.second, false);
    w.EndObject();
  }
  w.EndObject();
  const ObjectReference& o = e.involved_object;
  w.Key("involvedObject");
  w.StartObject();
  WriteField(w, "kind", o.kind);
  WriteField(w, "namespace", o.namespace_);
  WriteField(w, "name", o.name);
  WriteField(w, "uid", o.uid);
  WriteField(w, "apiVersion", o.api_version);
  WriteField(w, "resourceVersion", o.resource_version);
  WriteField(w, "fieldPath", o.field_path);
  w.EndObject();
  WriteField(w, "reason", e.reason);
  WriteField(w, "message", e.message);
  w.Key("source");
  w.StartObject();
  WriteField(w, "component", e.source_component);
  WriteField(w, "host", e.source_host);
  w.EndObject();
  WriteField(w, "firstTimestamp", FormatKubeTime(e.first_timestamp));
  WriteField(w, "lastTimestamp", FormatKubeTime(e.last_timestamp));
  w.Key("count");
  w.Int(e.count);
  WriteField(w, "type", e.type);
  w.Key("eventTime");
  w.Null();
  WriteField(w, "reportingComponent", e.reporting_component, false);
  WriteField(w, "reportingInstance", e.reporting_instance, false);
  w.EndObject();
  return buf.GetString();
}

absl::StatusOr<Event> EventFromJson(absl::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError("event: not a JSON object");
  }
  Event e;
  if (const rapidjson::Value* md = Obj(doc, "metadata")) {
    e.name = Str(*md, "name");
    e.namespace_ = Str(*md, "namespace");
    e.resource_version = Str(*md, "resourceVersion");
    if (const rapidjson::Value* ann = Obj(*md, "annotations")) {
      for (auto it = ann->MemberBegin(); it != ann->MemberEnd(); ++it) {
        if (!it->value.IsString()) continue;
        e.annotations.emplace_back(it->name.GetString(), it->value.GetString());
      }
    }
  }
  if (const rapidjson::Value* o = Obj(doc, "involvedObject")) {
    e.involved_object.kind = Str(*o, "kind");
    e.involved_object.namespace_ = Str(*o, "namespace");
    e.involved_object.name = Str(*o, "name");
    e.involved_object.uid = Str(*o, "uid");
    e.involved_object.api_version = Str(*o, "apiVersion");
    e.involved_object.resource_version = Str(*o, "resourceVersion");
    e.involved_object.field_path = Str(*o, "fieldPath");
  }
  e.reason = Str(doc, "reason");
  e.message = Str(doc, "message");
  if (const rapidjson::Value* src = Obj(doc, "source")) {
    e.source_component = Str(*src, "component");
    e.source_host = Str(*src, "host");
  }
  e.first_timestamp = ParseKubeTime(Str(doc, "firstTimestamp"));
  e.last_timestamp = ParseKubeTime(Str(doc, "lastTimestamp"));
  auto count = doc.FindMember("count");
  if (count != doc.MemberEnd() && count->value.IsInt()) {
    e.count = count->value.GetInt();
  }
  e.type = Str(doc, "type");
  e.reporting_component = Str(doc, "reportingComponent");
  e.reporting_instance = Str(doc, "reportingInstance");
  return e;
}

struct EventCorrelator::Caches {
  explicit Caches(size_t n) : aggregates(n), observed(n), spam(n) {}
  LruCache<AggregateRecord> aggregates;
  LruCache<ObservedEvent> observed;
  LruCache<TokenBucket> spam;
};

EventCorrelator::EventCorrelator(Clock* clock, CorrelatorOptions options)
    : clock_(clock),
      options_(options),
      caches_(std::make_unique<Caches>(options.lru_max_entries)) {}

EventCorrelator::~EventCorrelator() = default;

CorrelationResult EventCorrelator::Correlate(Event event) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  CorrelationResult result;

  // 1. Aggregation of similar events.
  std::string cache_key = EventKey(event);
  {
    const std::string aggregate_key = AggregateKey(event);
    AggregateRecord fresh;
    AggregateRecord* record = caches_->aggregates.Get(aggregate_key);
    if (record == nullptr ||
        now - record->last_timestamp > options_.max_interval) {
      caches_->aggregates.Put(aggregate_key, AggregateRecord{});
      record = caches_->aggregates.Get(aggregate_key);
    }
    record->messages.insert(event.message);
    record->last_timestamp = now;
    if (static_cast<int>(record->messages.size()) >= options_.max_events) {
      // Keep the set bounded, as client-go does, while staying at the
      // threshold so every further similar event is combined.
      record->messages.erase(record->messages.begin());
      Event combined;
      combined.name = UniqueEventName(event.involved_object.name, now);
      combined.namespace_ = event.namespace_;
      combined.involved_object = event.involved_object;
      combined.reason = event.reason;
      combined.message = absl::StrCat(kCombinedPrefix, event.message);
      combined.source_component = event.source_component;
      combined.source_host = event.source_host;
      combined.first_timestamp = now;
      combined.last_timestamp = now;
      combined.count = 1;
      combined.type = event.type;
      combined.reporting_component = event.reporting_component;
      combined.reporting_instance = event.reporting_instance;
      event = std::move(combined);
      cache_key = aggregate_key;
    }
  }

  // 2. Deduplication against what was already recorded under this key.
  if (ObservedEvent* last = caches_->observed.Get(cache_key);
      last != nullptr && last->count > 0) {
    event.count = last->count + 1;
    event.first_timestamp = last->first_timestamp;
    event.name = last->name;
    event.resource_version = last->resource_version;
    result.patch = PatchJson(event);
  }
  caches_->observed.Put(
      cache_key, ObservedEvent{event.count, event.first_timestamp, event.name,
                               event.resource_version});

  // 3. Spam filter: a token bucket per source + object.
  {
    const std::string spam_key = SpamKey(event);
    TokenBucket* bucket = caches_->spam.Get(spam_key);
    if (bucket == nullptr) {
      caches_->spam.Put(spam_key,
                        TokenBucket{static_cast<double>(options_.burst), now});
      bucket = caches_->spam.Get(spam_key);
    }
    if (options_.refill_period > absl::ZeroDuration() && now > bucket->last) {
      bucket->tokens = std::min<double>(
          options_.burst,
          bucket->tokens +
              absl::FDivDuration(now - bucket->last, options_.refill_period));
    }
    bucket->last = std::max(bucket->last, now);
    if (bucket->tokens >= 1.0) {
      bucket->tokens -= 1.0;
    } else {
      result.skip = true;
    }
  }

  result.event = std::move(event);
  return result;
}

void EventCorrelator::UpdateState(const Event& stored) {
  absl::MutexLock lock(&mu_);
  caches_->observed.Put(EventKey(stored),
                        ObservedEvent{stored.count, stored.first_timestamp,
                                      stored.name, stored.resource_version});
}

}  // namespace informer

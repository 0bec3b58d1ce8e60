#include "server/informer_service/informer_service.h"

#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "informer/cache/index.h"
#include "informer/labels/label_selector.h"
#include "server/rpc/grpc_conversions.h"

namespace server {
namespace {

namespace v1 = ::informer::v1;

// Room left in a page for everything but the objects (continue token,
// resourceVersion, count).
constexpr int64_t kPageOverheadBytes = 1024;

std::string NewRunId() {
  absl::BitGen gen;
  return absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(gen)));
}

absl::Status EncodeAll(const std::vector<informer::ObjectPtr>& objects,
                       v1::Encoding encoding,
                       google::protobuf::RepeatedPtrField<v1::Object>* out) {
  out->Reserve(static_cast<int>(objects.size()));
  for (const informer::ObjectPtr& obj : objects) {
    if (absl::Status st = EncodeObject(*obj, encoding, out->Add()); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

void SortByKey(std::vector<informer::ObjectPtr>* objects) {
  std::vector<std::pair<std::string, informer::ObjectPtr>> keyed;
  keyed.reserve(objects->size());
  for (informer::ObjectPtr& obj : *objects) {
    keyed.emplace_back(obj->Key(), std::move(obj));
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  objects->clear();
  for (auto& [key, obj] : keyed) objects->push_back(std::move(obj));
}

std::string IndexNames(const InformerEntry& entry) {
  std::vector<std::string> names;
  for (const auto& [name, fn] : entry.informer->GetIndexer().GetIndexers()) {
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

absl::Status UnknownIndex(const InformerEntry& entry,
                          absl::string_view index_name) {
  return absl::InvalidArgumentError(
      absl::StrCat("resource \"", entry.config.resource, "\" has no index \"",
                   index_name, "\"; available: ", IndexNames(entry)));
}

struct ContinueToken {
  std::string run_id;
  uint64_t snapshot_id = 0;
  uint64_t offset = 0;
};

std::string EncodeToken(const ContinueToken& token) {
  return absl::WebSafeBase64Escape(absl::StrCat(
      "v1/", token.run_id, "/", token.snapshot_id, "/", token.offset));
}

absl::StatusOr<ContinueToken> DecodeToken(absl::string_view text) {
  std::string raw;
  const absl::Status bad =
      absl::InvalidArgumentError("malformed continue_token");
  if (!absl::WebSafeBase64Unescape(text, &raw)) return bad;
  std::vector<absl::string_view> parts = absl::StrSplit(raw, '/');
  ContinueToken token;
  if (parts.size() != 4 || parts[0] != "v1" ||
      !absl::SimpleAtoi(parts[2], &token.snapshot_id) ||
      !absl::SimpleAtoi(parts[3], &token.offset)) {
    return bad;
  }
  token.run_id = std::string(parts[1]);
  return token;
}

}  // namespace

InformerService::InformerService(InformerRegistry* registry, Options options,
                                 informer::Clock* clock)
    : registry_(registry),
      options_(options),
      clock_(clock),
      run_id_(NewRunId()),
      watch_hub_(std::make_unique<WatchHub>(registry, options.watch, clock,
                                            run_id_)) {}

absl::StatusOr<InformerRef> InformerService::Lookup(const std::string& resource,
                                                    bool allow_stale) const {
  if (resource.empty()) {
    return absl::InvalidArgumentError("resource is required");
  }
  absl::StatusOr<InformerRef> entry = registry_->Find(resource);
  if (!entry.ok()) return entry.status();
  // An informer serving its snapshot stale answers as if synced: that is
  // what --serve_stale_on_start asks for (ListResources says it is stale).
  if (!allow_stale && !(*entry)->informer->HasSynced() &&
      !ObserveStale(**entry).stale) {
    // The API server's last answer, when there was an error, says whether
    // waiting helps (a 503) or someone must act (a 403: RBAC).
    const absl::Status last = (*entry)->informer->LastError();
    return absl::UnavailableError(absl::StrCat(
        "the informer of \"", resource, "\" has not synced yet",
        last.ok() ? "" : absl::StrCat(" (last error: ", last.message(), ")"),
        "; retry, or set allow_stale to read the partial cache"));
  }
  return entry;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* InformerService::Watch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw) {
  std::function<void(const grpc::Status&)> on_done;
  if (options_.count_watch_call) on_done = options_.count_watch_call(*context);
  // A refusal ends the call at once with its status.
  auto refuse = [&on_done](grpc::Status status) {
    if (on_done) on_done(status);
    return RefuseStream<grpc::ByteBuffer>(std::move(status));
  };
  v1::WatchRequest request;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (raw->Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  if (!request.ParseFromString(bytes)) {
    return refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "malformed WatchRequest"));
  }
  grpc::Status access = AuthorizeRead(options_.authorizer, *context,
                                      request.resource(), request.namespace_());
  if (!access.ok()) return refuse(std::move(access));
  // Lifecycle log: who watches what (filters only, never objects); the
  // close is logged with the status when the call is counted
  // (count_watch_call, or the gRPC metrics interceptor).
  LOG(INFO) << "watch stream open: peer=" << context->peer()
            << " resource=" << request.resource() << " namespace=\""
            << request.namespace_() << "\" selector=\""
            << request.label_selector() << "\""
            << (request.index_name().empty()
                    ? std::string()
                    : absl::StrCat(" index=", request.index_name(), "=",
                                   request.index_value()))
            << (request.resume_token().empty() ? "" : " resuming");
  return watch_hub_->Open(context, request, std::move(on_done));
}

grpc::Status InformerService::Get(grpc::ServerContext* context,
                                  const v1::GetRequest* request,
                                  v1::GetResponse* response) {
  const grpc::Status access =
      AuthorizeRead(options_.authorizer, *context, request->resource(),
                    request->namespace_());
  if (!access.ok()) return access;
  absl::StatusOr<InformerRef> entry =
      Lookup(request->resource(), request->allow_stale());
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  if (request->name().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("name is required"));
  }
  const std::string key =
      informer::MetaNamespaceKey(request->namespace_(), request->name());
  informer::ObjectPtr obj = (*entry)->informer->GetIndexer().GetByKey(key);
  if (obj == nullptr) {
    return ToGrpcStatus(absl::NotFoundError(
        absl::StrCat(request->resource(), " \"", key, "\" not found")));
  }
  return ToGrpcStatus(
      EncodeObject(*obj, request->encoding(), response->mutable_object()));
}

grpc::Status InformerService::ByIndex(grpc::ServerContext* context,
                                      const v1::ByIndexRequest* request,
                                      v1::ByIndexResponse* response) {
  const grpc::Status access =
      AuthorizeResource(options_.authorizer, *context, request->resource());
  if (!access.ok()) return access;
  absl::StatusOr<InformerRef> entry =
      Lookup(request->resource(), request->allow_stale());
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  absl::StatusOr<std::vector<informer::ObjectPtr>> objects =
      (*entry)->informer->GetIndexer().ByIndex(request->index_name(),
                                               request->index_value());
  if (!objects.ok()) {
    return ToGrpcStatus(UnknownIndex(**entry, request->index_name()));
  }
  FilterReadable(options_.authorizer, *context, &*objects);
  SortByKey(&*objects);
  return ToGrpcStatus(
      EncodeAll(*objects, request->encoding(), response->mutable_objects()));
}

grpc::Status InformerService::ListIndexValues(
    grpc::ServerContext* context, const v1::ListIndexValuesRequest* request,
    v1::ListIndexValuesResponse* response) {
  // Index values span namespaces: a namespace-limited token may not see them.
  const grpc::Status access =
      AuthorizeRead(options_.authorizer, *context, request->resource(), "");
  if (!access.ok()) return access;
  absl::StatusOr<InformerRef> entry =
      Lookup(request->resource(), request->allow_stale());
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  absl::StatusOr<std::vector<std::string>> values =
      (*entry)->informer->GetIndexer().ListIndexFuncValues(
          request->index_name());
  if (!values.ok()) {
    return ToGrpcStatus(UnknownIndex(**entry, request->index_name()));
  }
  std::sort(values->begin(), values->end());
  for (std::string& v : *values) response->add_values(std::move(v));
  return grpc::Status::OK;
}

grpc::Status InformerService::ListResources(
    grpc::ServerContext* context, const v1::ListResourcesRequest*,
    v1::ListResourcesResponse* response) {
  const grpc::Status access = AuthorizeCall(options_.authorizer, *context);
  if (!access.ok()) return access;
  for (const auto& entry : registry_->entries()) {
    if (!MayReadResource(options_.authorizer, *context,
                         entry->config.resource)) {
      continue;
    }
    v1::ResourceStatus* status = response->add_resources();
    status->set_resource(entry->config.resource);
    status->set_namespace_(entry->config.namespace_);
    status->set_synced(entry->informer->HasSynced());
    status->set_object_count(
        static_cast<int64_t>(entry->informer->GetIndexer().Size()));
    status->set_last_resource_version(
        entry->informer->LastSyncResourceVersion());
    absl::Status last_error = entry->informer->LastError();
    if (!last_error.ok()) status->set_last_error(last_error.ToString());
    status->set_streams(entry->streams.load());
    const StaleState::View stale = ObserveStale(*entry);
    if (stale.stale) {
      status->set_stale(true);
      const absl::Duration age = clock_->Now() - stale.snapshot_written;
      const absl::Duration trunc = absl::Trunc(age, absl::Seconds(1));
      status->mutable_stale_age()->set_seconds(absl::ToInt64Seconds(trunc));
      status->mutable_stale_age()->set_nanos(
          static_cast<int32_t>(absl::ToInt64Nanoseconds(age - trunc)));
    }
    std::vector<std::string> indexes;
    for (const auto& [name, fn] : entry->informer->GetIndexer().GetIndexers()) {
      indexes.push_back(name);
    }
    std::sort(indexes.begin(), indexes.end());
    for (std::string& name : indexes) status->add_indexes(std::move(name));
  }
  return grpc::Status::OK;
}

grpc::Status InformerService::List(grpc::ServerContext* context,
                                   const v1::ListRequest* request,
                                   v1::ListResponse* response) {
  const grpc::Status access =
      AuthorizeRead(options_.authorizer, *context, request->resource(),
                    request->namespace_());
  if (!access.ok()) return access;
  return ToGrpcStatus(DoList(*request, response));
}

absl::Status InformerService::DoList(const v1::ListRequest& request,
                                     v1::ListResponse* response) {
  absl::StatusOr<InformerRef> entry =
      Lookup(request.resource(), request.allow_stale());
  if (!entry.ok()) return entry.status();
  if (request.limit() < 0) {
    return absl::InvalidArgumentError("limit must not be negative");
  }
  if (request.max_page_bytes() < 0) {
    return absl::InvalidArgumentError("max_page_bytes must not be negative");
  }
  const int64_t limit = request.limit() == 0
                            ? kDefaultListLimit
                            : std::min<int64_t>(request.limit(), kMaxListLimit);
  int64_t max_bytes = request.max_page_bytes() == 0 ? kDefaultMaxPageBytes
                                                    : request.max_page_bytes();
  if (options_.max_page_bytes > 0) {
    max_bytes = std::min(max_bytes, options_.max_page_bytes);
  }

  // Set only for a first page: the snapshot to keep if more pages follow.
  std::shared_ptr<Snapshot> fresh;
  std::shared_ptr<const Snapshot> snapshot;
  uint64_t snapshot_id = 0;
  uint64_t offset = 0;
  if (request.continue_token().empty()) {
    absl::StatusOr<std::shared_ptr<Snapshot>> taken =
        TakeSnapshot(request, *entry);
    if (!taken.ok()) return taken.status();
    fresh = *std::move(taken);
    snapshot = fresh;
  } else {
    absl::StatusOr<ContinueToken> token = DecodeToken(request.continue_token());
    if (!token.ok()) return token.status();
    if (token->run_id != run_id_) {
      return absl::FailedPreconditionError(
          "continue_token comes from an earlier run of the sidecar; start "
          "the list again without it");
    }
    absl::StatusOr<std::shared_ptr<const Snapshot>> found =
        FindSnapshot(token->snapshot_id);
    if (!found.ok()) return found.status();
    snapshot = *std::move(found);
    if (snapshot->resource != request.resource() ||
        snapshot->namespace_ != request.namespace_() ||
        snapshot->label_selector != request.label_selector()) {
      return absl::InvalidArgumentError(
          "continue_token was issued for a list with another resource, "
          "namespace or label_selector; repeat the first request's filters");
    }
    if (token->offset > snapshot->objects.size()) {
      return absl::InvalidArgumentError("malformed continue_token");
    }
    snapshot_id = token->snapshot_id;
    offset = token->offset;
  }

  const std::vector<informer::ObjectPtr>& objects = snapshot->objects;
  int64_t bytes = kPageOverheadBytes;
  size_t end = offset;
  while (end < objects.size() && static_cast<int64_t>(end - offset) < limit) {
    v1::Object encoded;
    if (absl::Status st =
            EncodeObject(*objects[end], request.encoding(), &encoded);
        !st.ok()) {
      return st;
    }
    const size_t size = encoded.ByteSizeLong();
    const int64_t cost =
        1 + google::protobuf::io::CodedOutputStream::VarintSize64(size) + size;
    // A page always holds one object, or a huge object would stop the list.
    if (end > offset && bytes + cost > max_bytes) break;
    bytes += cost;
    *response->add_objects() = std::move(encoded);
    ++end;
  }
  response->set_resource_version(snapshot->resource_version);
  response->set_remaining_item_count(
      static_cast<int64_t>(objects.size() - end));
  if (end < objects.size()) {
    if (snapshot_id == 0) {
      // First page of a multi-page list: keep the snapshot for the rest.
      absl::MutexLock lock(&mu_);
      ExpireSnapshotsLocked(/*make_room=*/true);
      snapshot_id = next_snapshot_id_++;
      fresh->last_used = clock_->Now();
      snapshots_[snapshot_id] = std::move(fresh);
    }
    response->set_continue_token(EncodeToken(
        {.run_id = run_id_, .snapshot_id = snapshot_id, .offset = end}));
  } else if (snapshot_id != 0) {
    // The last page: the snapshot is no longer needed.
    absl::MutexLock lock(&mu_);
    snapshots_.erase(snapshot_id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<InformerService::Snapshot>>
InformerService::TakeSnapshot(const v1::ListRequest& request,
                              InformerEntry* entry) {
  absl::StatusOr<informer::LabelSelector> selector =
      informer::LabelSelector::Parse(request.label_selector());
  if (!selector.ok()) return selector.status();
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->resource = request.resource();
  snapshot->namespace_ = request.namespace_();
  snapshot->label_selector = request.label_selector();
  // Read the resourceVersion first: the cache is at least that fresh.
  snapshot->resource_version = entry->informer->LastAppliedResourceVersion();
  const informer::Indexer& indexer = entry->informer->GetIndexer();
  std::vector<informer::ObjectPtr> candidates;
  if (request.namespace_().empty()) {
    candidates = indexer.List();
  } else {
    absl::StatusOr<std::vector<informer::ObjectPtr>> in_ns =
        indexer.ByIndex(informer::kNamespaceIndex, request.namespace_());
    if (!in_ns.ok()) return in_ns.status();
    candidates = *std::move(in_ns);
  }
  for (informer::ObjectPtr& obj : candidates) {
    if (selector->Matches(*obj)) snapshot->objects.push_back(std::move(obj));
  }
  SortByKey(&snapshot->objects);
  return snapshot;
}

absl::StatusOr<std::shared_ptr<const InformerService::Snapshot>>
InformerService::FindSnapshot(uint64_t id) {
  absl::MutexLock lock(&mu_);
  ExpireSnapshotsLocked(/*make_room=*/false);
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) {
    return absl::FailedPreconditionError(
        "continue_token expired (its snapshot is gone); start the list "
        "again without it");
  }
  it->second->last_used = clock_->Now();
  return std::shared_ptr<const Snapshot>(it->second);
}

void InformerService::ExpireSnapshotsLocked(bool make_room) {
  const absl::Time now = clock_->Now();
  for (auto it = snapshots_.begin(); it != snapshots_.end();) {
    if (now - it->second->last_used >= options_.snapshot_ttl) {
      it = snapshots_.erase(it);
    } else {
      ++it;
    }
  }
  // Room for one more: drop the least recently used.
  while (make_room && !snapshots_.empty() &&
         snapshots_.size() >= options_.max_snapshots) {
    auto oldest = snapshots_.begin();
    for (auto it = snapshots_.begin(); it != snapshots_.end(); ++it) {
      if (it->second->last_used < oldest->second->last_used) oldest = it;
    }
    snapshots_.erase(oldest);
  }
}

}  // namespace server
